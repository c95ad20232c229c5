"""The pytest plugin (entry point ``pytest11: ddtree_compat``).

It adds the ``--ddtree-*`` options, registers tier and arch markers, parametrizes any test that asks
for ``ddtree_target``/``ddtree_backend``/``ddtree_case``, judges cells through
:func:`ddtree_compat.harness.run_verify` (fixture ``ddtree_check_verify``), appends each cell's result
to the results file, and prints a summary. A test inside another repo needs only::

    def test_verify(ddtree_target, ddtree_backend, ddtree_case, ddtree_check_verify):
        ddtree_check_verify(ddtree_target, ddtree_backend, ddtree_case)

Static cells (tier ``static``, :mod:`ddtree_compat.static`): a test asking for ``ddtree_static_cell``
is parametrized over arch x backend x the backend's ``static_kernels`` x their specializations over
the cases, marked ``static`` plus the arch and family markers, and judged by ``ddtree_check_static``.
"""

from __future__ import annotations

import os
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from . import backends as backend_registry
from .arch import ARCHES, FAMILIES, Gpu, detect_gpus, family
from .cases import PROFILE_GRIDS, VerifyCase, check_profile, grid
from .errors import DDTreeInputError
from .harness import OUTCOMES, Verdict, run_verify
from .results import ResultRecord, ResultsWriter, environment
from .static.runner import DEFAULT_CACHE, StaticCell, run_static, static_cells
from .tiers import STATIC, TIER_CHOICES, TIERS, Target, enable_interpreter, resolve_tier, targets_for

DEFAULT_RESULTS = ".ddtree/results.jsonl"
DEFAULT_CASES_DIR = ".ddtree/cases"


@dataclass
class Suite:
    """Per-session configuration, kept in ``config.stash`` (the plugin's only state)."""

    tier: str
    profile: str
    gpus: list[Gpu]
    targets: list[Target]
    backends: list
    case_files: list[str]
    cases_dir: Path
    writer: ResultsWriter | None
    static: bool = True
    static_cache: str = str(DEFAULT_CACHE)
    counts: Counter = field(default_factory=Counter)

    def cases(self) -> tuple[VerifyCase, ...]:
        if self.case_files:
            return tuple(VerifyCase.load(p) for p in self.case_files)
        return grid(self.profile)

    def static_cells(self) -> list[StaticCell]:
        return static_cells(self.backends, self.cases()) if self.static else []


SUITE = pytest.StashKey[Suite]()
VERDICT = pytest.StashKey[Verdict]()
CASE_PATH = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("ddtree", "DDTree kernel compatibility (ddtree-compat)")
    g.addoption("--ddtree-backend", action="append", default=None, metavar="NAME|module:object",
                help="backend to run (repeatable); default: every registered backend")
    g.addoption("--ddtree-tier", default=os.environ.get("DDTREE_TIER", "auto"), metavar="TIER",
                help=f"one of {', '.join(TIER_CHOICES)} (env DDTREE_TIER); auto = device if a GPU is visible")
    g.addoption("--ddtree-profile", default=os.environ.get("DDTREE_PROFILE", "default"), metavar="PROFILE",
                help=f"case grid: {', '.join(PROFILE_GRIDS)} (env DDTREE_PROFILE)")
    g.addoption("--ddtree-results", default=os.environ.get("DDTREE_RESULTS", DEFAULT_RESULTS), metavar="PATH",
                help=f"JSONL results file to append to (env DDTREE_RESULTS; default {DEFAULT_RESULTS}; '' = none)")
    g.addoption("--ddtree-require-backend", action="append",
                default=[b for b in os.environ.get("DDTREE_REQUIRE_BACKENDS", "").split(",") if b], metavar="NAME",
                help="fail at start (usage error) if this backend cannot run on every target "
                     "(repeatable; env DDTREE_REQUIRE_BACKENDS=a,b); for CI that must exercise a real kernel")
    g.addoption("--ddtree-case", action="append", default=[], metavar="CASE.json",
                help="run these case files instead of the grid (repeatable)")
    g.addoption("--ddtree-cases-dir", default=DEFAULT_CASES_DIR, metavar="DIR",
                help=f"where failing cases are written as JSON (default {DEFAULT_CASES_DIR})")
    g.addoption("--ddtree-static", default=os.environ.get("DDTREE_STATIC", "on"), choices=("on", "off"),
                help="static tier cells (AOT compile for every arch, on the CPU): on (default) or off (env DDTREE_STATIC)")
    g.addoption("--ddtree-static-cache", default=os.environ.get("DDTREE_STATIC_CACHE", str(DEFAULT_CACHE)),
                metavar="DIR", help=f"static tier build cache, Triton's included (env DDTREE_STATIC_CACHE; "
                                    f"default {DEFAULT_CACHE})")


def _register_markers(config: pytest.Config, gpus: list[Gpu]) -> None:
    for tier in (*TIERS, STATIC):
        config.addinivalue_line("markers", f"{tier}: DDTree {tier} tier")
    for arch, (fam, products) in ARCHES.items():
        config.addinivalue_line("markers", f"{arch}: runs on a compute capability {arch} GPU ({products})")
    for fam in FAMILIES:
        config.addinivalue_line("markers", f"{fam.replace('-', '_')}: runs on a {fam} GPU")
    for g in gpus:  # an arch this table does not know yet still gets its marker
        if g.arch not in ARCHES:
            config.addinivalue_line("markers", f"{g.arch}: detected compute capability {g.major}.{g.minor}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    try:
        gpus = detect_gpus()
        tier = resolve_tier(config.getoption("ddtree_tier"), gpus)
        if tier == "device" and not gpus:
            raise DDTreeInputError("--ddtree-tier", "device", "interpret (or auto) on a host without a GPU",
                                   "no GPU visible")
        profile = check_profile(config.getoption("ddtree_profile"))
        chosen = backend_registry.resolve(config.getoption("ddtree_backend"))
        case_files = config.getoption("ddtree_case")
        for p in case_files:
            VerifyCase.load(p)  # validate now: a bad case is a usage error, never a skipped cell
    except DDTreeInputError as e:
        raise pytest.UsageError(str(e)) from None
    _register_markers(config, gpus)
    if tier == "interpret":
        enable_interpreter()
    results_path = config.getoption("ddtree_results")
    writer = ResultsWriter(results_path, environment(tier, profile)) if results_path else None
    targets = targets_for(tier, gpus)
    _check_required(config.getoption("ddtree_require_backend"), chosen, targets)
    suite = Suite(tier, profile, gpus, targets, chosen, case_files, Path(config.getoption("ddtree_cases_dir")),
                  writer, static=config.getoption("ddtree_static") == "on",
                  static_cache=config.getoption("ddtree_static_cache"))
    config.stash[SUITE] = suite
    config.pluginmanager.register(_Summary(suite), "ddtree-summary")
    _hypothesis_profiles(config)


def _check_required(required: list[str], chosen: list, targets: list[Target]) -> None:
    by_name = {b.name: b for b in chosen}
    for name in required:
        if name not in by_name:
            raise pytest.UsageError(str(DDTreeInputError("--ddtree-require-backend", name, ", ".join(by_name),
                                                         "not among the selected backends")))
        for target in targets:
            reason = by_name[name].unavailable_reason(target)
            if reason:
                raise pytest.UsageError(str(DDTreeInputError("--ddtree-require-backend", name,
                                                             "a backend that can run here", f"unavailable on {target.id}: {reason}")))


def _hypothesis_profiles(config: pytest.Config) -> None:
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:
        return
    # ddtree_check_verify is function-scoped but keeps no per-example state (each example overwrites the
    # node's verdict, so the recorded one is the final, shrunk example's).
    _SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
    settings.register_profile("ci", derandomize=True, max_examples=40, deadline=None, print_blob=True,
                              suppress_health_check=_SUPPRESSED)
    settings.register_profile("nightly", max_examples=2000, deadline=None, print_blob=True,
                              suppress_health_check=_SUPPRESSED)
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile(os.environ.get("DDTREE_HYPOTHESIS_PROFILE", "ci"))


def arch_marks(arch: str) -> list:
    """The exact arch marker and its family marker (``sm120`` -> ``sm120``, ``blackwell_rtx``)."""
    return [getattr(pytest.mark, arch), getattr(pytest.mark, family(arch).replace("-", "_"))]


def _marks(target: Target) -> list:
    return [getattr(pytest.mark, target.tier), *(arch_marks(target.arch) if target.arch else [])]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = set(metafunc.fixturenames)
    suite = metafunc.config.stash[SUITE]
    if "ddtree_static_cell" in names:
        metafunc.parametrize("ddtree_static_cell", [
            pytest.param(cell, id=cell.id, marks=[getattr(pytest.mark, STATIC), *arch_marks(cell.arch)])
            for cell in suite.static_cells()])
    if not {"ddtree_target", "ddtree_backend"} <= names:
        return
    with_cases = "ddtree_case" in names
    cases = suite.cases() if with_cases else (None,)
    params = []
    for target in suite.targets:
        for backend in suite.backends:
            for case in cases:
                values = (target, backend, case) if with_cases else (target, backend)
                ident = "-".join([target.id, backend.name] + ([case.id] if with_cases else []))
                params.append(pytest.param(*values, id=ident, marks=_marks(target)))
    argnames = ("ddtree_target", "ddtree_backend", "ddtree_case") if with_cases else ("ddtree_target", "ddtree_backend")
    metafunc.parametrize(argnames, params)


def replay_line(path: Path, backend_name: str, target: Target, nodeid: str) -> str:
    """The one line that replays a failing cell."""
    tier = f" --tier {target.tier}" if target.tier == "interpret" else ""
    return (f"replay: python -m ddtree_compat replay {shlex.quote(str(path))} --backend {backend_name}{tier}"
            f"   |   pytest {shlex.quote(nodeid)}")


@pytest.fixture
def ddtree_check_verify(request: pytest.FixtureRequest):
    """``check(target, backend, case)``: run one verify cell and fail/skip with a replayable message."""

    def check(target: Target, backend, case: VerifyCase) -> Verdict:
        suite = request.config.stash[SUITE]
        reason = backend.unavailable_reason(target)
        if reason:
            request.node.stash[VERDICT] = Verdict("skip", reason)
            pytest.skip(f"{backend.name} on {target.id}: {reason}")
        verdict = run_verify(case, backend, target)
        request.node.stash[VERDICT] = verdict
        if verdict.outcome != "pass":
            path = case.save(suite.cases_dir)
            request.node.stash[CASE_PATH] = str(path)
            kind = verdict.outcome + (f" ({verdict.fault_class})" if verdict.fault_class else "")
            pytest.fail(f"{kind}: {backend.name} on {target.id}, case {case.id}: {verdict.message}\n"
                        f"{replay_line(path, backend.name, target, request.node.nodeid)}", pytrace=False)
        return verdict

    return check


@pytest.fixture
def ddtree_static_cache(request: pytest.FixtureRequest) -> str:
    """The static tier's build cache directory (``--ddtree-static-cache``)."""
    return request.config.stash[SUITE].static_cache


@pytest.fixture
def ddtree_check_static(request: pytest.FixtureRequest, ddtree_static_cache: str):
    """``check(cell)``: compile one static cell for its arch and judge it; fail or skip with the reason.

    ``out of resources`` / ``illegal instruction`` / compile errors fail, naming kernel, config and arch.
    """

    def check(cell: StaticCell) -> Verdict:
        verdict = run_static(cell, ddtree_static_cache)
        request.node.stash[VERDICT] = verdict
        if verdict.outcome == "skip":
            pytest.skip(f"{cell.id}: {verdict.message}")
        if verdict.outcome != "pass":
            pytest.fail(f"{verdict.message}\nreplay: pytest {shlex.quote(request.node.nodeid)}", pytrace=False)
        return verdict

    return check


def _record(item: pytest.Item, params: dict, verdict: Verdict) -> ResultRecord | None:
    """The results-file line of a verify or static cell, or ``None`` for any other test."""
    common = dict(outcome=verdict.outcome, duration_s=verdict.duration_s, message=verdict.message[:2000],
                  fault_class=verdict.fault_class, nodeid=item.nodeid)
    cell = params.get("ddtree_static_cell")
    if isinstance(cell, StaticCell):  # not the empty set's placeholder (--ddtree-static=off)
        return ResultRecord(kernel=cell.entry.kernel, tier=STATIC, backend=cell.backend, arch=cell.arch,
                            case_id=cell.spec.id, layout="", **common)
    if isinstance(params.get("ddtree_case"), VerifyCase):
        target, backend, case = params["ddtree_target"], params["ddtree_backend"], params["ddtree_case"]
        return ResultRecord(
            kernel="verify_tree_greedy", tier=target.tier, backend=backend.name, arch=target.column,
            case_id=case.id, budget=case.budget, topology=case.topology, plant=case.plant, batch=case.batch,
            block_size=case.block_size, mode=case.mode, layout=case.layout, case_path=item.stash.get(CASE_PATH, ""),
            **common)
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = (yield).get_result()
    suite = item.config.stash.get(SUITE, None)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if suite is None or not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    verdict = item.stash.get(VERDICT, None)
    if verdict is None:  # the test never reached the harness: a suite error, not a kernel result
        verdict = Verdict("skip" if report.skipped else "fault", str(report.longrepr)[:500],
                          fault_class=None if report.skipped else "other")
    record = _record(item, params, verdict)
    if record is None:
        return
    report.user_properties += [("ddtree_outcome", verdict.outcome), ("ddtree_tier", record.tier)]
    if suite.writer is not None:
        suite.writer.write(record)


class _Summary:
    """Counts cells by (static?, outcome) from reports (``user_properties`` travel from xdist workers)."""

    def __init__(self, suite: Suite):
        self.suite = suite

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "ddtree_outcome" in props:
            self.suite.counts[(props.get("ddtree_tier") == STATIC, props["ddtree_outcome"])] += 1

    def _line(self, static: bool) -> str:
        return ", ".join(f"{self.suite.counts[(static, o)]} {o}" for o in OUTCOMES)

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        if not self.suite.counts:
            return
        terminalreporter.write_sep("-", "ddtree-compat")
        if any(static is False for static, _ in self.suite.counts):
            terminalreporter.write_line(f"cells: {self._line(False)}  (tier {self.suite.tier}, profile {self.suite.profile})")
        if any(static is True for static, _ in self.suite.counts):
            terminalreporter.write_line(f"static cells: {self._line(True)}  (tier static, build cache "
                                        f"{self.suite.static_cache})")
        if self.suite.writer is not None:
            terminalreporter.write_line(f"results: {self.suite.writer.path}  ->  python -m ddtree_compat report "
                                        f"{self.suite.writer.path}")
