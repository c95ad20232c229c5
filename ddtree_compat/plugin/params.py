"""Parametrization: which cells a test gets, their ids and marks, all read from the kernel records.

A test that asks for ``ddtree_target`` and ``ddtree_backend`` plus a record's case argument
(``ddtree_case``, ``ddtree_commit_case``, ...; :attr:`ddtree_compat.contract.KernelRecord.case_param`)
is parametrized over target x backend (those implementing the kernel) x the record's cases; with
``ddtree_kernel`` too, over every record sharing that argument, the kernel in the id. Ids read like
the matrix: ``sm90-sglang-cuda-b8-spine-deep-bs3``, ``interpret-oracle-move_kv-b8-...``. Marks: the
tier, the arch and its family, the emulated arch's for a case that runs another arch's choice, ``serial``
for a deployment-shape cell outside the ``scale`` profile (:mod:`.schedule`), and ``xfail(strict=True)``
for a cell the known-issues manifest covers. A test asking only for target and backend brings its own
cases and gets the backends with the kernels its ``ddtree_needs`` marker names. ``ddtree_static_cell``
and ``ddtree_e2e_cell`` are the static and e2e tiers' (:mod:`.static`, :mod:`.e2e`).
"""

from __future__ import annotations

import pytest

from .cells import known_issue
from .markers import EMULATED, SERIAL, arch_marks, target_marks
from .session import NO_IMPLEMENTATION, active, suite

TARGET, BACKEND, KERNEL = "ddtree_target", "ddtree_backend", "ddtree_kernel"
NEEDS = "ddtree_needs"
"""``@pytest.mark.ddtree_needs(kernel, ...)``: a test that asks only for target x backend gets the backends
implementing all of these kernels (default: ``verify_tree_greedy``)."""


def _param(sess, target, backend, record, case, with_kernel: bool):
    marks = target_marks(target)
    emulated = record.emulates(case) if record.emulates else None
    if emulated:
        marks += [getattr(pytest.mark, EMULATED), *arch_marks(emulated)]
    if (record.table == "scale" and sess.profile != "scale") or getattr(case, "serial", False):
        marks.append(getattr(pytest.mark, SERIAL))  # deployment shapes (GBs of GPU memory): one at a time
    issue = known_issue(sess, target, backend, record.label_of(case), case)
    if issue is not None:
        marks.append(pytest.mark.xfail(strict=issue.strict, reason=issue.describe(backend.name)))
    values = (target, backend, *((record.name,) if with_kernel else ()), case)
    ident = f"{target.id}-{backend.name}-{record.name + '-' if with_kernel else ''}{case.id}"
    return pytest.param(*values, id=ident, marks=marks)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = set(metafunc.fixturenames)
    if active(metafunc.config) is None and not any(n.startswith("ddtree_") for n in names):
        return  # a test of another project: the kernel records (NumPy, the families) are never loaded for it
    from .. import records
    from ..contract import base_name, kernels_of

    params = sorted(records.case_params() & names)
    wanted = {TARGET, BACKEND, "ddtree_static_cell", "ddtree_e2e_cell", *params}
    if not names & wanted:
        return
    sess = suite(metafunc.config)
    if "ddtree_static_cell" in names:
        from .static import static_params

        metafunc.parametrize("ddtree_static_cell", static_params(sess))
    if "ddtree_e2e_cell" in names:
        from .e2e import e2e_params

        metafunc.parametrize("ddtree_e2e_cell", e2e_params(sess))
    if not {TARGET, BACKEND} <= names:
        return
    if len(params) > 1:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: asks for {', '.join(params)}; a test takes one "
                                "kernel case argument")
    if not params:  # target x backend only (the test brings its own cases): backends with the kernels it names
        from ..families.verify.records import VERIFY

        marker = metafunc.definition.get_closest_marker(NEEDS)
        needs = tuple(marker.args) if marker and marker.args else (VERIFY,)
        combos = [b for b in sess.backends if all(k in kernels_of(b) for k in needs)]
        metafunc.parametrize((TARGET, BACKEND), [pytest.param(t, b, id=f"{t.id}-{b.name}", marks=target_marks(t))
                                                 for t in sess.targets for b in combos]
                             or [_no_backend(sess, (TARGET, BACKEND), needs)])
        return
    fed = records.for_param(params[0])
    with_kernel = KERNEL in names
    if len(fed) > 1 and not with_kernel:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: {params[0]} feeds {len(fed)} kernels "
                                f"({', '.join(r.name for r in fed)}): ask for ddtree_kernel too")
    argnames = (TARGET, BACKEND, *((KERNEL,) if with_kernel else ()), params[0])
    cells = [(b, r, c) for b in sess.backends for r in fed if base_name(r.name) in kernels_of(b)
             for c in r.backend_cases(b, sess.cases_of(r))]
    metafunc.parametrize(argnames, [_param(sess, t, b, r, c, with_kernel) for t in sess.targets for b, r, c in cells]
                         or [_no_backend(sess, argnames, tuple(r.name for r in fed))])


def _no_backend(sess, argnames, needs: tuple[str, ...]):
    """The one parameter of a test no backend of this session can run: a skip that says why (pytest's own
    empty parameter set only says it is empty). Its values are ``None``: no cell, nothing recorded."""
    from .. import records

    names = ", ".join(needs[:3]) + (f" +{len(needs) - 3} more" if len(needs) > 3 else "")
    reason = f"no backend in this session has {names}"
    if any(getattr(records.get(n), "table", "") == "ddtree" for n in needs) and not sess.implementations:
        reason += f": these are a DDTree implementation's kernels; {NO_IMPLEMENTATION}"
    return pytest.param(*(None,) * len(argnames), id="no-backend", marks=pytest.mark.skip(reason=reason))


SCALE_PARAM = "ddtree_scale_case"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``scale`` profile runs the deployment-shape cells alone: the cells of tests that bring their own cases (a
    CUDA-graph replay, a property test) and the static tier's tests are deselected, said as pytest's ``deselected``."""
    sess = active(config)
    if sess is None or sess.profile != "scale":
        return
    from .cells import is_cell_item, item_params

    dropped = [i for i in items if (is_cell_item(i) and SCALE_PARAM not in item_params(i)
                                    and "ddtree_e2e_cell" not in item_params(i))
               or i.get_closest_marker("static") is not None]  # the static tier's cells and self-tests: none here
    if dropped:
        gone = set(map(id, dropped))
        items[:] = [i for i in items if id(i) not in gone]
        config.hook.pytest_deselected(items=dropped)
