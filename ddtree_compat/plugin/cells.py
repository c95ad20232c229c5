"""One cell: its record (:class:`Cell`, in ``item.stash``), and how a kernel cell is checked.

:func:`check_cell` is the one path every kernel cell takes (verify, commit, attention, DDTree kernels,
graph replays): availability from the backend's declaration (a skip with the reason), the cell's
``start`` line, the run, and on a failure the saved case, the replay line and the environment line;
after a sticky CUDA fault the cell is recorded and, in an xdist worker, the worker exits
(:mod:`ddtree_compat.isolation`). The fixtures here hand it to tests.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from ..outcomes import Verdict
from ..tiers import Target
from .session import GRAPH_NEEDS_DEVICE, suite

if TYPE_CHECKING:
    from ..known_issues import KnownIssue


@dataclass
class Cell:
    """Everything recorded about one test cell.

    Attributes:
        coords: the fixed fields of its ``start`` and ``result`` lines (kernel, tier, backend, arch,
            case_id, budget, topology, plant, batch, block_size, mode, layout, nodeid, shape).
        verdict: set once judged (``None``: the test never reached the check).
        case_path: the case JSON written on failure (e2e: the capture folder).
        sanitizer: a compute-sanitizer report path (``--sanitize``).
        log_excerpt: e2e: the server log lines around the first fault line.
        known_issue: the manifest entry covering the cell (run as strict xfail).
        replay: the ``replay: ...`` line of a cell that did not pass (its failure message's; a known issue's XFAIL
            line ends with it), ``""`` otherwise.
    """

    coords: dict
    verdict: Verdict | None = None
    case_path: str = ""
    sanitizer: str = ""
    log_excerpt: str = ""
    known_issue: KnownIssue | None = None
    replay: str = ""

    @property
    def tier(self) -> str:
        return self.coords["tier"]


CELL = pytest.StashKey[Cell]()


def coordinates(target: Target, backend, case, nodeid: str, kernel: str) -> dict:
    """A kernel cell's fixed fields (``case``: any case type with ``id`` and ``coordinates()``)."""
    return dict(kernel=kernel, tier=target.tier, backend=backend.name, arch=target.column, case_id=case.id,
                **case.coordinates(), nodeid=nodeid)


def known_issue(sess, target: Target, backend, kernel: str, case) -> KnownIssue | None:
    """The manifest entry covering a cell: a cell of a record the manifest keys (the verify grid's and the
    DDTree kernels'), or any other cell (a graph replay) that an entry names by its kernel label."""
    from .. import records

    record = records.get(kernel)
    keyed = record is not None and record.known_issues and kernel == record.label_of(case)
    if not keyed and not hasattr(case, "coordinates"):
        return None
    c = case.coordinates()
    issue = sess.known.match(target.column, backend.name, c["budget"], c["topology"], kernel, c["layout"], c["batch"])
    return issue if issue is not None and (keyed or issue.kernel) else None


def record_of(cell: Cell):
    from ..results import ResultRecord

    v = cell.verdict
    return ResultRecord(**cell.coords, outcome=v.outcome, duration_s=v.duration_s, message=v.message[:2000],
                        fault_class=v.fault_class, case_path=cell.case_path, sanitizer=cell.sanitizer,
                        known_issue=cell.known_issue.id if cell.known_issue else "",
                        log_excerpt=cell.log_excerpt[:4000], measured=v.measured)


def replay_line(path, backend, target: Target, nodeid: str, kernel: str) -> str:
    """The one line that replays a failing cell: in-process via the CLI (:func:`ddtree_compat.records.replay_cli`)
    and as the same pytest cell, or only the pytest cell where no record replays its kernel label."""
    from .. import records
    from ..backends.registry import replay_spec
    from ..families.verify.records import VERIFY

    spec = replay_spec(backend)
    # the verify tests take the case file and the backend spec; the other kernels' cells find their case by id
    given = f"--ddtree-case {shlex.quote(str(path))} --ddtree-backend {spec} " if kernel == VERIFY else ""
    again = f"pytest {shlex.quote(nodeid)} {given}--ddtree-tier {target.tier}"
    cli = records.replay_cli(str(path), spec, kernel, target.tier)
    if cli is None:  # a test's own round (a CUDA-graph chain, ...): only its pytest cell replays it
        return f"replay: {again}"
    return f"replay: {cli}   |   {again}"


def env_line(env: dict) -> str:
    """One-line environment header for failure messages."""
    gpus = ", ".join(f"{g['name']} ({g['arch']})" for g in env.get("gpus", [])) or "no GPU"
    return (f"env: {gpus}; driver {env.get('driver')}; CUDA {env.get('cuda')}; torch {env.get('torch')}; "
            f"triton {env.get('triton')}; sglang {env.get('sglang')}; tier {env.get('tier')}")


def unavailable_reason(backend, target: Target, kernel: str, case, needs: tuple[str, ...] = ()) -> str | None:
    """Why this cell cannot run here (``None``: it can). ``needs``: the backend kernels a custom cell
    launches (a label that is no record's, like ``verify_commit@graph``, needs them all)."""
    from ..contract import implementation, kernels_of, unavailable

    from ..contract import base_name

    launched = needs or (base_name(kernel),)
    missing = [k for k in launched if k not in kernels_of(backend)]
    if missing:
        return f"{backend.name} has no {', '.join(missing)} kernel"
    reason = next(filter(None, (unavailable(backend, k, target, case if judged_by(k, kernel, case) else None)
                                for k in launched)), None)
    if not reason and kernel.endswith("@graph"):
        if target.tier != "device":
            reason = GRAPH_NEEDS_DEVICE
        elif not all(implementation(backend, k).graph_capturable for k in launched):
            reason = f"{backend.name} runs on the host: not capturable in a CUDA graph"
    return reason


def judged_by(kernel: str, label: str, case) -> bool:
    """Whether a backend's refusal rule for ``kernel`` is asked about ``case``: the cell's own kernel, with a case of
    that kernel's family (a deployment-shape cell of ``move_kv`` is no commit case: its checks refuse for it)."""
    from .. import records
    from ..contract import base_name

    record = records.get(kernel)
    return kernel == base_name(label) and (record is None or isinstance(case, record.case_type))


def check_cell(request: pytest.FixtureRequest, target: Target, backend, kernel: str, case, run,
               needs: tuple[str, ...] = ()) -> Verdict:
    """Run one cell (``run() -> Verdict``), record it, and fail or skip with a replayable message.

    Writes the cell's ``start`` line first. After a sticky CUDA fault it records the cell and, in an
    xdist worker, exits the worker (see :mod:`ddtree_compat.isolation`).
    """
    from ..isolation import exit_worker, is_sticky
    from ..tiers import in_xdist_worker
    from .sanitizer import sanitize

    sess = suite(request.config)
    node = request.node
    cell = Cell(coordinates(target, backend, case, node.nodeid, kernel),
                known_issue=known_issue(sess, target, backend, kernel, case))
    node.stash[CELL] = cell
    if cell.known_issue is not None and node.get_closest_marker("xfail") is None:  # a cell the test parametrized
        request.applymarker(pytest.mark.xfail(strict=cell.known_issue.strict,
                                              reason=cell.known_issue.describe(backend.name)))
    from ..contract import AdapterError

    try:
        reason = unavailable_reason(backend, target, kernel, case, needs)
    except AdapterError as e:  # our adapter failed to look the kernel up: an error, never a kernel fault
        cell.verdict = Verdict("error", f"the suite's adapter failed: {e}")
        pytest.fail(f"error: {backend.name} {kernel} on {target.id}, case {case.id}: {cell.verdict.message}",
                    pytrace=False)
    from .. import records

    record = records.get(kernel)
    if not reason and record is not None and record.needless is not None:
        reason = record.needless(sess.failures.read() if sess.failures else [], cell.coords)
    if not reason and sess.poisoned_by and target.tier == "device":
        reason = f"CUDA context poisoned by {sess.poisoned_by}; run under xdist (-n 1) to isolate faults"
    if reason:
        cell.verdict = Verdict("skip", reason)
        pytest.skip(f"{backend.name} {kernel} on {target.id}: {reason}")
    if sess.writer is not None:
        sess.writer.start(cell.coords)
    verdict = cell.verdict = run()
    if verdict.outcome == "pass":
        return verdict
    if verdict.outcome == "skip":  # decided by the run itself (e.g. an emulated config too big for this device)
        pytest.skip(f"{backend.name} {kernel} on {target.id}: {verdict.message}")
    path = case.save(sess.cases_dir)
    cell.case_path = str(path)
    note = ""
    if sess.sanitize and target.tier == "device":
        cell.sanitizer, note = sanitize(sess.sanitize, path, backend, target, kernel)
    kind = verdict.outcome + (f" ({verdict.fault_class})" if verdict.fault_class else "")
    cell.replay = replay_line(path, backend, target, node.nodeid, kernel)
    message = (f"{kind}: {backend.name} {kernel} on {target.id}, case {case.id}: {verdict.message}\n"
               f"{cell.replay}\n"
               + (f"{note}\n" if note else "") + env_line(sess.writer.env if sess.writer else {}))
    if verdict.outcome == "fault" and is_sticky(verdict.fault_class, verdict.context_poisoned):
        if in_xdist_worker(request.config):
            if sess.writer is not None:
                sess.writer.write(record_of(cell))
            sys.stderr.write(message + "\nsticky CUDA fault: exiting this xdist worker for a fresh one\n")
            exit_worker()
        if target.tier == "device":
            sess.poisoned_by = node.nodeid
    pytest.fail(message, pytrace=False)


def run_record(kernel: str, case, backend, target: Target):
    """``run() -> Verdict`` for a cell of a registered kernel (its record's ``run``)."""
    from .. import records

    record = records.get(kernel)
    return lambda: record.runner()(case, backend, target)


@pytest.fixture
def ddtree_check(request: pytest.FixtureRequest):
    """``check(target, backend, kernel, case) -> Verdict``: run one cell of a registered kernel (a record
    name, :mod:`ddtree_compat.records`) through its record's check; see :func:`check_cell`."""

    def check(target: Target, backend, kernel: str, case) -> Verdict:
        from .. import records

        record = records.get(kernel)
        if record is None:
            raise pytest.UsageError(f"ddtree_check: no kernel record named {kernel!r} "
                                    f"(known: {', '.join(records.registry())})")
        label = record.label_of(case)
        return check_cell(request, target, backend, label, case, run_record(label, case, backend, target))

    return check


@pytest.fixture
def ddtree_check_verify(ddtree_check):
    """``check(target, backend, case)``: one ``verify_tree_greedy`` cell (``ddtree_check`` with that kernel)."""
    from ..families.verify.records import VERIFY

    return lambda target, backend, case: ddtree_check(target, backend, VERIFY, case)


@pytest.fixture
def ddtree_check_commit(ddtree_check):
    """``check(target, backend, kernel, commit_case)``: one commit-kernel cell."""
    return ddtree_check


@pytest.fixture
def ddtree_check_attention(ddtree_check):
    """``check(target, backend, attention_case)``: one verify-attention cell (kernel ``verify_attention``
    or ``verify_attention@emulated-<arch>``, from the case)."""
    from ..families.attention.records import KERNEL

    return lambda target, backend, case: ddtree_check(target, backend, KERNEL, case)


@pytest.fixture
def ddtree_check_run(request: pytest.FixtureRequest):
    """``check(target, backend, kernel, case, run, needs=())``: a cell whose ``run() -> Verdict`` is the
    test's own (e.g. CUDA-graph replays); recorded, skipped and failed like the others (``needs``: the
    backend kernels the cell launches)."""

    def check(target: Target, backend, kernel: str, case, run, needs: tuple[str, ...] = ()) -> Verdict:
        return check_cell(request, target, backend, kernel, case, run, needs)

    return check


OUTCOME_PROPERTY = "ddtree_outcome"
TIER_PROPERTY = "ddtree_tier"
"""The user properties on every cell's test report (:mod:`.recording` adds them, :mod:`.containment` for a cell
whose worker died): its outcome (:data:`ddtree_compat.outcomes.OUTCOMES`) and its tier. Under xdist they travel to
the controller with the report; the summary, the progress lines and the start lines read them there."""


def report_property(report: pytest.TestReport, name: str):
    """The value of a test report's user property ``name``, or ``None`` where the report has none."""
    return next((value for key, value in report.user_properties if key == name), None)


CELL_PARAMS = frozenset({"ddtree_target", "ddtree_static_cell", "ddtree_e2e_cell"})
"""The parameters that make a collected test a cell of ours (:mod:`.params` gives them): a grid cell's target, a
static cell, an e2e cell."""


def item_params(item: pytest.Item) -> dict:
    """A collected test's parameters by name (``{}`` for a test that is not parametrized)."""
    return getattr(getattr(item, "callspec", None), "params", {})


def kernel_parts(item: pytest.Item) -> tuple | None:
    """``(target, backend, record, case)`` of a collected kernel cell (a test given a kernel record's case argument:
    :mod:`.params`), or ``None``: a static or e2e cell, a test of the suite's own, or a parameter that is no case (a
    skip saying no backend has the kernel, pytest's NOTSET of an empty parametrization)."""
    from .. import records

    params = item_params(item)
    target, backend = params.get("ddtree_target"), params.get("ddtree_backend")
    case_param = next((p for p in records.case_params() if p in params), None)
    if not isinstance(target, Target) or backend is None or case_param is None:
        return None
    case = params[case_param]
    if not isinstance(params.get("ddtree_kernel", ""), str) or not hasattr(case, "coordinates"):
        return None
    record = records.get(params["ddtree_kernel"]) if "ddtree_kernel" in params else records.for_param(case_param)[0]
    return target, backend, record, case


def is_cell_item(item: pytest.Item) -> bool:
    """Whether a collected test is a cell of ours (any tier), not a test of the suite's own. A test no backend of
    the session can run has one parameter whose values are ``None`` (:func:`.params._no_backend`): no cell."""
    params = item_params(item)
    given = CELL_PARAMS.intersection(params)
    return bool(given) and any(params[name] is not None for name in given)


def is_e2e_item(item: pytest.Item) -> bool:
    """Whether a collected test is an e2e cell (parametrized by ``ddtree_e2e_cell``)."""
    return "ddtree_e2e_cell" in item_params(item)
