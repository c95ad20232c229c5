"""A kernel under test, declared once: :class:`KernelRecord` (and :class:`CaseContext`, what its case generator
draws on). Torch-free: the report, the gate and ``cases`` read records without torch.

A family declares its records in its ``records.py`` (``ddtree_compat/families/<family>/``); a third party in any
module, registered with an entry point in the group ``ddtree_compat.kernels`` (``module:RECORDS``). The registry
that loops over them all is :mod:`ddtree_compat.records`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence


def base_name(label: str) -> str:
    """``verify_attention@emulated-sm120`` -> ``verify_attention`` (results labels add ``@<variant>`` to a kernel's name)."""
    return label.partition("@")[0]


@dataclass(frozen=True)
class CaseContext:
    """What a record's case generator may draw on.

    Attributes:
        profile: the verify grid's profile (``default``, ``full``).
        verify: the verify cases of the run: the profile's grid, or the ``--ddtree-case`` files.
        attention_profile: the verify-attention profile (``interpret``, ``device``).
        from_files: ``verify`` came from ``--ddtree-case`` files.
        vocabs: the deployment-shape cells' vocabularies (``--ddtree-vocab``; ``()``: every one of
            :data:`ddtree_compat.families.scale.boundaries.VOCABS`).
    """

    profile: str
    verify: tuple
    attention_profile: str = "interpret"
    from_files: bool = False
    vocabs: tuple = ()


@dataclass(frozen=True)
class KernelRecord:
    """One kernel under test.

    Attributes:
        name: the kernel's name: the results' ``kernel`` field, the backend method it calls, and what
            ``--kernel`` / ``ddtree_kernel`` select.
        summary: one line for reports and docs.
        case_param: the test argument its cases are passed in (``ddtree_case``, ``ddtree_commit_case``,
            ``ddtree_attention_case``, ...); a test asking for it is parametrized over the backends that
            implement the kernel x its cases (and x the kernels sharing the argument, when the test also
            asks for ``ddtree_kernel``).
        case_type: the case class (with ``SCHEMA``, ``from_json``, ``id``, ``coordinates()``, ``save()``).
        cases: ``(CaseContext) -> cases``: the cases of a run, in a stable order.
        run: ``"module:function"`` of ``(case, backend, target) -> Verdict``: lay the case out, call the
            backend once, judge exactly against the oracle (never raises for a kernel failure; the family's
            ``checks.py``, on :func:`ddtree_compat.harness.calls.check`).
        label: ``(case) -> str``: the results' kernel label of a case when it is not ``name``
            (``verify_attention@emulated-sm120``).
        known_issues: the known-issues manifest keys this kernel's cells (by arch, backend, kernel, budget,
            topology, layout, batch; :mod:`ddtree_compat.known_issues`).
        for_backend: ``(backend, cases) -> cases``: the cases a backend runs (default: all).
        emulates: ``(case) -> arch | None``: the arch whose code path a case runs on any target (its
            cell gets that arch's markers too: ``pytest -m sm120`` selects it), or ``None``.
        table: the report table its cells join: ``matrix`` (budget x topology) or ``attention``.
        needless: ``(failing result lines so far, cell coordinates) -> reason | None``: why a cell need not run,
            read from the run's results so far (a deployment-shape cell past its shape's first failing batch); a
            counted skip. The lines are the results file's that neither passed nor skipped
            (:class:`~ddtree_compat.results.FailureLog`), read incrementally by the plugin.
    """

    name: str
    summary: str
    case_param: str
    case_type: type
    cases: Callable[[CaseContext], Sequence[Any]]
    run: str
    label: Callable[[Any], str] | None = None
    known_issues: bool = False
    for_backend: Callable[[Any, tuple], tuple] | None = None
    emulates: Callable[[Any], "str | None"] | None = None
    table: str = "matrix"
    needless: Callable[[list, dict], "str | None"] | None = None

    def label_of(self, case) -> str:
        """The results' kernel label of ``case``."""
        return self.label(case) if self.label else self.name

    def runner(self) -> Callable:
        """The ``run`` function (imports its module: the torch side)."""
        module, _, attr = self.run.partition(":")
        return getattr(importlib.import_module(module), attr)

    def backend_cases(self, backend, cases: tuple) -> tuple:
        return self.for_backend(backend, cases) if self.for_backend else cases
