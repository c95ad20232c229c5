"""The pytest plugin (entry point ``pytest11: ddtree_compat``).

It adds the ``--ddtree-*`` options, registers tier and arch markers, parametrizes any test that asks
for ``ddtree_target``/``ddtree_backend``/``ddtree_case``, judges cells through
:func:`ddtree_compat.harness.run_verify` (fixture ``ddtree_check_verify``), appends each cell's result
to the results file, and prints a summary. Cells covered by the known-issues manifest
(:mod:`ddtree_compat.known_issues`, ``--ddtree-known-issues``) are marked ``xfail(strict=True)`` as they
are parametrized and recorded with ``known_issue``. A test inside another repo needs only::

    def test_verify(ddtree_target, ddtree_backend, ddtree_case, ddtree_check_verify):
        ddtree_check_verify(ddtree_target, ddtree_backend, ddtree_case)

Static cells (tier ``static``, :mod:`ddtree_compat.static`): a test asking for ``ddtree_static_cell``
is parametrized over arch x backend x the backend's ``static_kernels`` x their specializations over
the cases, marked ``static`` plus the arch and family markers, and judged by ``ddtree_check_static``.

Verify-attention cells (:mod:`ddtree_compat.attention`): a test asking for ``ddtree_attention_case`` is
parametrized over target x backend (those with ``verify_attention``) x the attention profile's cases
(``--ddtree-attention-profile``; by default the tier's own), every tile configuration for a backend
that can emulate one (``attention_tiles``), ``native`` only for the others; judged by
``ddtree_check_attention``. An emulated cell is also marked ``emulated`` and with the emulated arch's
markers (``pytest -m sm120`` selects the cells running sm120's tile choice, on any target).
End-to-end cells (tier ``e2e``, :mod:`ddtree_compat.e2e`): a test asking for ``ddtree_e2e_cell`` is
parametrized over the profile's server configurations x request phases, marked ``e2e`` (plus the arch
markers of the GPU the servers run on), and judged by ``ddtree_check_e2e`` against one session's servers
(``ddtree_e2e_session``: started together, stopped after their last cell and at session end).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pytest

from . import backends as backend_registry
from . import known_issues
from .arch import ARCHES, FAMILIES, Gpu, detect_gpus, family
from .cases import PROFILE_GRIDS, VerifyCase, check_profile, grid
from .errors import DDTreeInputError
from .harness import OUTCOMES, Verdict, run_verify
from .isolation import exit_worker, in_xdist_worker, is_sticky, results_size, scan
from .results import ResultRecord, ResultsWriter, environment
from .static.runner import DEFAULT_CACHE, StaticCell, run_static, shutdown_pools, static_cells
from .tiers import (E2E, STATIC, TIER_CHOICES, TIERS, Target, cap_worker_threads, enable_interpreter, resolve_tier,
                    targets_for)

ATTENTION_PROFILE_CHOICES = ("auto", "interpret", "device")
EMULATED = "emulated"

DEFAULT_RESULTS = ".ddtree/results.jsonl"
DEFAULT_CASES_DIR = ".ddtree/cases"
DEFAULT_E2E_DIR = ".ddtree/e2e"


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
    resume: bool = False
    resume_limit: int = 0
    sanitize: str = ""
    poisoned_by: str = ""
    known: known_issues.Manifest = field(default_factory=known_issues.Manifest)
    static: bool = True
    static_cache: str = str(DEFAULT_CACHE)
    attention_profile: str = "interpret"
    e2e_dir: str = DEFAULT_E2E_DIR
    e2e_selected: list = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def cases(self) -> tuple[VerifyCase, ...]:
        if self.case_files:
            return tuple(VerifyCase.load(p) for p in self.case_files)
        return grid(self.profile)

    def static_cells(self) -> list[StaticCell]:
        return static_cells(self.backends, self.cases()) if self.static else []

    def attention_cases(self) -> tuple:
        """The verify-attention cases (``--ddtree-case`` trees at the profile's first shape, else the profile)."""
        from .attention import attention_cases

        return attention_cases(self.attention_profile, self.cases() if self.case_files else None)
    def e2e_arch(self) -> str:
        """The arch the e2e servers run on (the first visible GPU), ``nogpu`` without one."""
        return self.gpus[0].arch if self.gpus else "nogpu"


SUITE = pytest.StashKey[Suite]()
VERDICT = pytest.StashKey[Verdict]()
CASE_PATH = pytest.StashKey[str]()
SANITIZER = pytest.StashKey[str]()
CELL_CASE = pytest.StashKey[object]()
CELL_KERNEL = pytest.StashKey[str]()
E2E_CELL = pytest.StashKey[object]()
E2E_EXCERPT = pytest.StashKey[str]()
E2E_COORDS = pytest.StashKey[dict]()


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
    g.addoption("--ddtree-fsync", action="store_true", default=os.environ.get("DDTREE_FSYNC", "").lower() in ("1", "true", "yes", "on"),
                help="fsync the results file after every line (env DDTREE_FSYNC=1): for a host that may hang or "
                     "reboot on a GPU fault; a killed process loses nothing without it")
    g.addoption("--ddtree-require-backend", action="append",
                default=[b for b in os.environ.get("DDTREE_REQUIRE_BACKENDS", "").split(",") if b], metavar="NAME",
                help="fail at start (usage error) if this backend cannot run on every target "
                     "(repeatable; env DDTREE_REQUIRE_BACKENDS=a,b); for CI that must exercise a real kernel")
    g.addoption("--ddtree-case", action="append", default=[], metavar="CASE.json",
                help="run these case files instead of the grid (repeatable)")
    g.addoption("--ddtree-resume", action="store_true",
                help="skip cells that already have a result line in --ddtree-results (after a killed run)")
    g.addoption("--sanitize", default="", choices=["", "memcheck", "racecheck", "initcheck", "synccheck"],
                help="re-run each failing device cell under compute-sanitizer with this tool; attach its report")
    g.addoption("--ddtree-cases-dir", default=DEFAULT_CASES_DIR, metavar="DIR",
                help=f"where failing cases are written as JSON (default {DEFAULT_CASES_DIR})")
    g.addoption("--ddtree-known-issues", default=os.environ.get("DDTREE_KNOWN_ISSUES", str(known_issues.SHIPPED)),
                metavar="PATH", help="TOML manifest of expected failures, run as strict xfail (env DDTREE_KNOWN_ISSUES; "
                                     "default the shipped ddtree_compat/known_issues.toml; '' = none)")
    g.addoption("--ddtree-static", default=os.environ.get("DDTREE_STATIC", "on"), choices=("on", "off"),
                help="static tier cells (AOT compile for every arch, on the CPU): on (default) or off (env DDTREE_STATIC)")
    g.addoption("--ddtree-e2e-dir", default=os.environ.get("DDTREE_E2E_DIR", DEFAULT_E2E_DIR), metavar="DIR",
                help=f"e2e tier: generated checkpoints, server logs and captures (env DDTREE_E2E_DIR; default "
                     f"{DEFAULT_E2E_DIR})")
    g.addoption("--ddtree-static-cache", default=os.environ.get("DDTREE_STATIC_CACHE", str(DEFAULT_CACHE)),
                metavar="DIR", help=f"static tier build cache, Triton's included (env DDTREE_STATIC_CACHE; "
                                    f"default {DEFAULT_CACHE})")
    g.addoption("--ddtree-attention-profile", default=os.environ.get("DDTREE_ATTENTION_PROFILE", "auto"),
                choices=ATTENTION_PROFILE_CHOICES,
                help="verify-attention cases: interpret (small shapes), device (the shape sweep) or auto = the "
                     "tier's own (env DDTREE_ATTENTION_PROFILE)")


def _register_markers(config: pytest.Config, gpus: list[Gpu]) -> None:
    for tier in (*TIERS, STATIC, E2E):
        config.addinivalue_line("markers", f"{tier}: DDTree {tier} tier")
    for arch, (fam, products) in ARCHES.items():
        config.addinivalue_line("markers", f"{arch}: runs on a compute capability {arch} GPU ({products})")
    for fam in FAMILIES:
        config.addinivalue_line("markers", f"{fam.replace('-', '_')}: runs on a {fam} GPU")
    config.addinivalue_line("markers", f"{EMULATED}: runs another arch's tile choice on this target (verify attention)")
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
        known = known_issues.load(config.getoption("ddtree_known_issues"))
    except DDTreeInputError as e:
        raise pytest.UsageError(str(e)) from None
    _register_markers(config, gpus)
    cap_worker_threads(getattr(config, "workerinput", None))
    if tier == "interpret":
        enable_interpreter()
    results_path = config.getoption("ddtree_results")
    writer = (ResultsWriter(results_path, environment(tier, profile, known.as_env()), fsync=config.getoption("ddtree_fsync"))
              if results_path else None)
    targets = targets_for(tier, gpus)
    _check_required(config.getoption("ddtree_require_backend"), chosen, targets)
    suite = Suite(tier, profile, gpus, targets, chosen, case_files,
                  Path(config.getoption("ddtree_cases_dir")), writer, resume=config.getoption("ddtree_resume"),
                  sanitize=config.getoption("sanitize"), known=known,
                  static=config.getoption("ddtree_static") == "on", static_cache=config.getoption("ddtree_static_cache"),
                  attention_profile=_attention_profile(config.getoption("ddtree_attention_profile"), tier),
                  e2e_dir=config.getoption("ddtree_e2e_dir"))
    if suite.resume and writer is not None:
        worker = getattr(config, "workerinput", None)
        suite.resume_limit = worker["ddtree_resume_limit"] if worker else results_size(writer.path)
    config.stash[SUITE] = suite
    config.pluginmanager.register(_Summary(suite), "ddtree-summary")
    _hypothesis_profiles(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Kill the static tier's compile workers, also after Ctrl-C (else they outlive pytest)."""
    shutdown_pools()


def _attention_profile(choice: str, tier: str) -> str:
    """``auto``: the tier's own profile (``interpret`` or ``device``)."""
    return tier if choice == "auto" else choice


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


def _known_issue(suite: Suite, target: Target, backend, case: VerifyCase | None) -> known_issues.KnownIssue | None:
    """The manifest entry covering a verify grid cell (commit, graph and property cells are not keyed)."""
    if not isinstance(case, VerifyCase):
        return None
    return suite.known.match(target.column, backend.name, case.budget, case.topology)


def _param(suite: Suite, ident, target: Target, *combo):
    marks = _marks(target)
    tiles = getattr(combo[-1], "tiles", None)
    if tiles and tiles != "native":  # verify attention under an emulated arch's tile choice
        marks += [getattr(pytest.mark, EMULATED), *arch_marks(tiles)]
    issue = _known_issue(suite, target, combo[0], combo[-1]) if len(combo) == 2 else None
    if issue is not None:
        marks.append(pytest.mark.xfail(strict=True, reason=issue.describe()))
    return pytest.param(target, *combo, id=ident(target, *combo), marks=marks)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``ddtree_target`` x ``ddtree_backend`` [x ``ddtree_case`` | x ``ddtree_kernel`` x
    ``ddtree_commit_case``], generating only backends that have the kernel."""
    names = set(metafunc.fixturenames)
    suite = metafunc.config.stash[SUITE]
    if "ddtree_static_cell" in names:
        metafunc.parametrize("ddtree_static_cell", [
            pytest.param(cell, id=cell.id, marks=[getattr(pytest.mark, STATIC), *arch_marks(cell.arch)])
            for cell in suite.static_cells()])
    if "ddtree_e2e_cell" in names:
        metafunc.parametrize("ddtree_e2e_cell", _e2e_params(suite))
    if not {"ddtree_target", "ddtree_backend"} <= names:
        return
    if "ddtree_attention_case" in names:
        argnames = ("ddtree_target", "ddtree_backend", "ddtree_attention_case")
        cases = suite.attention_cases()
        combos = []
        for b in suite.backends:
            if backend_registry.ATTENTION_KERNEL not in backend_registry.kernels_of(b):
                continue
            emulates = getattr(b, "attention_tiles", False)
            own = {c.id: c for c in (c if emulates else replace(c, tiles="native") for c in cases)}
            combos += [(b, c) for c in own.values()]
        ident = lambda t, b, c: f"{t.id}-{b.name}-{c.id}"  # noqa: E731
    elif "ddtree_commit_case" in names:
        from .commit import commit_cases

        argnames = ("ddtree_target", "ddtree_backend", "ddtree_kernel", "ddtree_commit_case")
        cases = commit_cases(suite.cases())
        combos = [(b, k, c) for b in suite.backends for k in backend_registry.kernels_of(b)
                  if k in backend_registry.COMMIT_KERNELS for c in cases]
        ident = lambda t, b, k, c: f"{t.id}-{b.name}-{k}-{c.id}"  # noqa: E731
    elif "ddtree_case" in names:
        argnames = ("ddtree_target", "ddtree_backend", "ddtree_case")
        combos = [(b, c) for b in suite.backends if backend_registry.VERIFY_KERNEL in backend_registry.kernels_of(b)
                  for c in suite.cases()]
        ident = lambda t, b, c: f"{t.id}-{b.name}-{c.id}"  # noqa: E731
    else:
        argnames = ("ddtree_target", "ddtree_backend")
        combos = [(b,) for b in suite.backends if backend_registry.VERIFY_KERNEL in backend_registry.kernels_of(b)]
        ident = lambda t, b: f"{t.id}-{b.name}"  # noqa: E731
    params = [_param(suite, ident, t, *combo) for t in suite.targets for combo in combos]
    metafunc.parametrize(argnames, params)


def _e2e_params(suite: Suite) -> list:
    """One param per (server configuration, phase) of the profile: marked ``e2e``, with the arch markers of
    the GPU the servers run on, an ``xdist_group`` per server (``--dist loadgroup`` keeps a server's cells in
    one worker) and a timeout covering the server's start."""
    from .e2e.session import READY_S, REQUEST_S, cells

    arch = suite.e2e_arch()
    marks = [getattr(pytest.mark, E2E), pytest.mark.timeout(READY_S + 2 * REQUEST_S)]
    if suite.gpus and not any(g.fake for g in suite.gpus):
        marks += arch_marks(arch)
    return [pytest.param(c, id=f"{arch}-{c.id}", marks=[*marks, pytest.mark.xdist_group(c.config.id)])
            for c in cells(suite.profile)]


@pytest.fixture(scope="session")
def ddtree_e2e_session(request: pytest.FixtureRequest):
    """The session's :class:`ddtree_compat.e2e.session.E2ESession` (servers stopped at session end)."""
    from .e2e.session import E2ESession

    suite = request.config.stash[SUITE]
    session = E2ESession(suite.e2e_dir, suite.profile, suite.gpus)
    session.select(suite.e2e_selected, planned=not in_xdist_worker(request.config))
    request.addfinalizer(session.close)
    return session


def e2e_coordinates(cell, arch: str, nodeid: str, implementation: str = "") -> dict:
    """A cell's fixed fields (tier ``e2e``): backend ``sglang-<algorithm>`` (``sglang-target`` without
    speculation; ``@<implementation>`` appended when the SGLang under test is named by repository and
    commit, :mod:`ddtree_compat.e2e.implementation`), budget = draft tokens - 1 (DDTREE: the tree budget),
    topology ``chain`` / ``tree-k<topk>`` / ``block`` / ``ddtree-spine`` / ``ddtree-tree`` (``-prune``,
    ``-cpu`` when set), plant = the draft's agreement, batch = concurrency, mode ``graph`` / ``eager``."""
    c, p = cell.config, cell.phase
    if c.algorithm in ("EAGLE", "STANDALONE"):
        topology = "chain" if c.topk == 1 else f"tree-k{c.topk}"
    else:
        topology = {"DFLASH": "block-ddtree" if c.dflash_ddtree else "block",
                    "DDTREE": f"ddtree-{c.mode}"}.get(c.algorithm, "")
        topology += "".join(t for f, t in (("--is-ddtree-prune", "-prune"), ("--speculative-ddtree-cpu-build", "-cpu"))
                            if f in c.flags)
    budget = c.budget if c.budget is not None else (c.draft_tokens - 1 if c.draft_tokens else None)
    backend = f"sglang-{c.algorithm.lower()}" if c.speculative else "sglang-target"
    backend += f"@{implementation}" if implementation else ""
    return dict(kernel="generate", tier=E2E, backend=backend, arch=arch, case_id=cell.id,
                budget=budget, topology=topology, plant=c.draft.agree.name if c.draft else "",
                batch=p.concurrency, block_size=c.draft.block_size if c.algorithm in ("DFLASH", "DDTREE") else None,
                mode="graph" if c.cuda_graph else "eager", layout="", nodeid=nodeid)


@pytest.fixture
def ddtree_check_e2e(request: pytest.FixtureRequest, ddtree_e2e_session):
    """``check(cell) -> Judgement``: run one e2e cell on its server, record it (tier ``e2e``), and skip
    (no GPU, no SGLang server, unsupported configuration: with the reason) or fail with the verdict's
    message, the log excerpt and the server's launch command."""

    def check(cell):
        suite = request.config.stash[SUITE]
        node = request.node
        node.stash[E2E_CELL] = cell
        reason = ddtree_e2e_session.reason(cell.config)
        node.stash[E2E_COORDS] = e2e_coordinates(cell, suite.e2e_arch(), node.nodeid,
                                                 ddtree_e2e_session.implementation_name())
        if reason:
            node.stash[VERDICT] = Verdict("skip", reason)
            pytest.skip(f"{cell.id}: {reason}")
        if suite.writer is not None:
            suite.writer.start(node.stash[E2E_COORDS])
        try:
            run = ddtree_e2e_session.run(cell)
        finally:
            ddtree_e2e_session.done(cell.config)
        verdict = run.judgement.verdict
        node.stash[VERDICT] = verdict
        node.stash[E2E_EXCERPT] = run.judgement.log_excerpt
        if run.capture is not None:
            node.stash[CASE_PATH] = str(run.capture)
        if verdict.outcome == "pass":
            return run.judgement
        launch = Path(suite.e2e_dir) / "servers" / cell.config.id / "launch.json"
        kind = verdict.outcome + (f" ({verdict.fault_class})" if verdict.fault_class else "")
        excerpt = f"\nserver log excerpt:\n{run.judgement.log_excerpt}" if run.judgement.log_excerpt else ""
        pytest.fail(f"{kind}: {cell.id} on {suite.e2e_arch()}: {verdict.message}{excerpt}\n"
                    f"server: {launch} (argv, env), log {launch.with_name('server.log')}\n"
                    f"replay: pytest {shlex.quote(node.nodeid)}", pytrace=False)

    return check


def replay_line(path: Path, backend, target: Target, nodeid: str, kernel: str = "verify_tree_greedy") -> str:
    """The one line that replays a failing cell: in-process via the CLI, or as the same pytest cell."""
    spec = backend_registry.replay_spec(backend)
    case = shlex.quote(str(path))
    if kernel != "verify_tree_greedy":  # commit cells replay through the CLI (the grid is derived, not a file)
        return (f"replay: python -m ddtree_compat replay {case} --backend {spec} --kernel {kernel} "
                f"--tier {target.tier}   |   pytest {shlex.quote(nodeid)} --ddtree-tier {target.tier}")
    return (f"replay: python -m ddtree_compat replay {case} --backend {spec} --tier {target.tier}   |   "
            f"pytest {shlex.quote(nodeid)} --ddtree-case {case} --ddtree-backend {spec} --ddtree-tier {target.tier}")


def env_line(env: dict) -> str:
    """One-line environment header for failure messages."""
    gpus = ", ".join(f"{g['name']} ({g['arch']})" for g in env.get("gpus", [])) or "no GPU"
    return (f"env: {gpus}; driver {env.get('driver')}; CUDA {env.get('cuda')}; torch {env.get('torch')}; "
            f"triton {env.get('triton')}; sglang {env.get('sglang')}; tier {env.get('tier')}")


def coordinates(target: Target, backend, case, nodeid: str, kernel: str = "verify_tree_greedy") -> dict:
    """A cell's fixed fields, shared by its ``start`` and ``result`` lines (``case``: a verify or commit case)."""
    verify = getattr(case, "verify", case)
    if case is verify:
        layout = verify.layout
    else:  # an attention case names its own layout; a commit case adds its page size
        layout = getattr(case, "layout", None) or f"{verify.layout}-p{case.page_size}"
    return dict(kernel=kernel, tier=target.tier, backend=backend.name, arch=target.column, case_id=case.id,
                budget=verify.budget, topology=verify.topology, plant=verify.plant, batch=verify.batch,
                block_size=verify.block_size, mode=verify.mode, layout=layout, nodeid=nodeid,
                shape=getattr(case, "shape", ""))


def record_of(coords: dict, verdict: Verdict, case_path: str = "", sanitizer: str = "") -> ResultRecord:
    return ResultRecord(**coords, outcome=verdict.outcome, duration_s=verdict.duration_s,
                        message=verdict.message[:2000], fault_class=verdict.fault_class, case_path=case_path,
                        sanitizer=sanitizer)


def _sanitize(tool: str, path: Path, backend, target: Target, kernel: str) -> tuple[str, str]:
    """Re-run a failing device cell under ``compute-sanitizer --tool TOOL``; return (report path, summary)."""
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        return "", f"{tool}: compute-sanitizer not found on PATH"
    report = path.with_name(f"{path.stem}.{backend.name}.{tool}.txt")
    cmd = [exe, "--tool", tool, "--error-exitcode", "99", sys.executable, "-m", "ddtree_compat", "replay", str(path),
           "--backend", backend_registry.replay_spec(backend), "--tier", target.tier, "--kernel", kernel]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": target.device.split(":")[-1]} if target.tier == "device" else None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        text = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        text = f"timed out after {e.timeout}s\n{e.stdout or ''}"
    report.write_text(" ".join(cmd) + "\n\n" + text)
    summary = next((ln.strip() for ln in text.splitlines() if "ERROR SUMMARY" in ln), "no ERROR SUMMARY line")
    return str(report), f"{tool}: {summary} (report {report})"


def _check_cell(request: pytest.FixtureRequest, target: Target, backend, kernel: str, case, run,
                needs: tuple[str, ...] = ()) -> Verdict:
    """Run one cell (``run() -> Verdict``), record it, and fail or skip with a replayable message.

    Writes the cell's ``start`` line first. After a sticky CUDA fault it records the cell and, in an
    xdist worker, exits the worker (see :mod:`ddtree_compat.isolation`). ``needs``: kernel methods the
    backend must have (and be able to run here), else the cell is a skip naming them.
    """
    suite = request.config.stash[SUITE]
    node = request.node
    node.stash[CELL_CASE], node.stash[CELL_KERNEL] = case, kernel
    reason = backend_registry.kernel_unavailable_reason(backend, target, kernel)
    missing = [k for k in needs if k not in backend_registry.kernels_of(backend)]
    if not reason and missing:
        reason = f"{backend.name} has no {', '.join(missing)} kernel"
    if not reason:
        reason = next(filter(None, (backend_registry.kernel_unavailable_reason(backend, target, k) for k in needs)),
                      None)
    if not reason and kernel.endswith("@graph"):
        if target.tier != "device":
            reason = "CUDA graphs need the device tier"
        elif not getattr(backend, "graph_capturable", True):
            reason = f"{backend.name} runs on the host: not capturable in a CUDA graph"
    if not reason and suite.poisoned_by and target.tier == "device":
        reason = f"CUDA context poisoned by {suite.poisoned_by}; run under xdist (-n 1) to isolate faults"
    if reason:
        node.stash[VERDICT] = Verdict("skip", reason)
        pytest.skip(f"{backend.name} {kernel} on {target.id}: {reason}")
    coords = coordinates(target, backend, case, node.nodeid, kernel)
    if suite.writer is not None:
        suite.writer.start(coords)
    verdict = run()
    node.stash[VERDICT] = verdict
    if verdict.outcome == "pass":
        return verdict
    if verdict.outcome == "skip":  # decided by the run itself (e.g. an emulated config too big for this device)
        pytest.skip(f"{backend.name} {kernel} on {target.id}: {verdict.message}")
    path = case.save(suite.cases_dir)
    node.stash[CASE_PATH] = str(path)
    sanitizer, note = "", ""
    if suite.sanitize and target.tier == "device":
        sanitizer, note = _sanitize(suite.sanitize, path, backend, target, kernel)
        node.stash[SANITIZER] = sanitizer
    kind = verdict.outcome + (f" ({verdict.fault_class})" if verdict.fault_class else "")
    message = (f"{kind}: {backend.name} {kernel} on {target.id}, case {case.id}: {verdict.message}\n"
               f"{replay_line(path, backend, target, node.nodeid, kernel)}\n"
               + (f"{note}\n" if note else "") + env_line(suite.writer.env if suite.writer else {}))
    if verdict.outcome == "fault" and is_sticky(verdict.fault_class, verdict.context_poisoned):
        if in_xdist_worker(request.config):
            if suite.writer is not None:
                suite.writer.write(record_of(coords, verdict, str(path), sanitizer))
            sys.stderr.write(message + "\nsticky CUDA fault: exiting this xdist worker for a fresh one\n")
            exit_worker()
        if target.tier == "device":
            suite.poisoned_by = node.nodeid
    pytest.fail(message, pytrace=False)


@pytest.fixture
def ddtree_check_verify(request: pytest.FixtureRequest):
    """``check(target, backend, case)``: run one ``verify_tree_greedy`` cell (see :func:`_check_cell`)."""

    def check(target: Target, backend, case: VerifyCase) -> Verdict:
        return _check_cell(request, target, backend, "verify_tree_greedy", case,
                           lambda: run_verify(case, backend, target))

    return check


@pytest.fixture
def ddtree_check_run(request: pytest.FixtureRequest):
    """``check(target, backend, kernel, case, run, needs=())``: any cell whose ``run() -> Verdict`` is the
    test's own (e.g. CUDA-graph replays); recorded, skipped and failed like the others (see
    :func:`_check_cell`; ``needs``: the backend kernels the cell launches)."""

    def check(target: Target, backend, kernel: str, case, run, needs: tuple[str, ...] = ()) -> Verdict:
        return _check_cell(request, target, backend, kernel, case, run, needs)

    return check


@pytest.fixture
def ddtree_check_commit(request: pytest.FixtureRequest):
    """``check(target, backend, kernel, commit_case)``: run one commit-kernel cell (see :func:`_check_cell`)."""
    from .commit import run_commit

    def check(target: Target, backend, kernel: str, case) -> Verdict:
        return _check_cell(request, target, backend, kernel, case, lambda: run_commit(case, kernel, backend, target))

    return check


@pytest.fixture
def ddtree_check_attention(request: pytest.FixtureRequest):
    """``check(target, backend, attention_case)``: run one verify-attention cell (see :func:`_check_cell`);
    its kernel field is ``verify_attention`` or ``verify_attention@emulated-<arch>``."""
    from .attention import run_attention

    def check(target: Target, backend, case) -> Verdict:
        return _check_cell(request, target, backend, case.kernel, case, lambda: run_attention(case, backend, target))

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


def _static_record(item: pytest.Item, cell: StaticCell, verdict: Verdict) -> ResultRecord:
    return ResultRecord(kernel=cell.entry.kernel, tier=STATIC, backend=cell.backend, arch=cell.arch,
                        case_id=cell.spec.id, layout="", outcome=verdict.outcome, duration_s=verdict.duration_s,
                        message=verdict.message[:2000], fault_class=verdict.fault_class, nodeid=item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = (yield).get_result()
    suite = item.config.stash.get(SUITE, None)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if suite is not None and "ddtree_e2e_cell" in params:
        _record_e2e(item, report, suite, params["ddtree_e2e_cell"])
        return
    case = (params.get("ddtree_case") or params.get("ddtree_commit_case") or params.get("ddtree_attention_case")
            or item.stash.get(CELL_CASE, None))
    cell = params.get("ddtree_static_cell")
    if suite is None or (case is None and not isinstance(cell, StaticCell)):
        return
    if not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    verdict = item.stash.get(VERDICT, None)
    if verdict is None:  # the test never reached the harness: a suite error, not a kernel result
        skipped = report.skipped and not hasattr(report, "wasxfail")  # an xfailed error is still a fault
        verdict = Verdict("skip" if skipped else "fault", str(report.longrepr)[:500],
                          fault_class=None if skipped else "other")
    if isinstance(cell, StaticCell):
        report.user_properties += [("ddtree_outcome", verdict.outcome), ("ddtree_tier", STATIC)]
        if suite.writer is not None:
            suite.writer.write(_static_record(item, cell, verdict))
        return
    issue = _known_issue(suite, params["ddtree_target"], params["ddtree_backend"], case)
    report.user_properties.append(("ddtree_outcome", verdict.outcome))
    if issue is not None and verdict.outcome != "skip":
        report.user_properties.append(("ddtree_known_issue", known_issues.status(verdict.outcome, issue.id)))
    if suite.writer is not None:
        kernel = params.get("ddtree_kernel") or item.stash.get(CELL_KERNEL, None) or getattr(case, "kernel", None)
        coords = coordinates(params["ddtree_target"], params["ddtree_backend"], case, item.nodeid,
                             kernel if isinstance(kernel, str) else "verify_tree_greedy")
        record = record_of(coords, verdict, item.stash.get(CASE_PATH, ""), item.stash.get(SANITIZER, ""))
        record.known_issue = issue.id if issue else ""
        suite.writer.write(record)


def _record_e2e(item: pytest.Item, report: pytest.TestReport, suite: Suite, cell) -> None:
    """Write an e2e cell's result line (its verdict, or the setup error / skip that stopped it)."""
    if not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    verdict = item.stash.get(VERDICT, None)
    if verdict is None:  # never reached the check: a suite error (or a skip before it)
        skipped = report.skipped and not hasattr(report, "wasxfail")
        verdict = Verdict("skip" if skipped else "fault", str(report.longrepr)[:500],
                          fault_class=None if skipped else "other")
    report.user_properties += [("ddtree_outcome", verdict.outcome), ("ddtree_tier", E2E)]
    if suite.writer is not None:
        coords = item.stash.get(E2E_COORDS, None) or e2e_coordinates(cell, suite.e2e_arch(), item.nodeid)
        record = record_of(coords, verdict, item.stash.get(CASE_PATH, ""))
        record.log_excerpt = item.stash.get(E2E_EXCERPT, "")[:4000]
        suite.writer.write(record)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist controller: hand every worker the same resume snapshot (bytes of the results file)."""
    suite = node.config.stash.get(SUITE, None)
    if suite is not None:
        node.workerinput["ddtree_resume_limit"] = suite.resume_limit


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched) -> None:
    """xdist controller: a worker died inside ``crashitem``. Attach the verdict it recorded before exiting
    (sticky fault), or record one from its ``start`` line: ``hang`` past the timeout, else a crash."""
    suite = report.node.config.stash.get(SUITE, None) if hasattr(report, "node") else None
    if suite is None or suite.writer is None:
        return
    results, starts = scan(suite.writer.path)
    line = results.get(crashitem)
    if line is None:
        start = starts.get(crashitem)
        if start is None:
            return
        timeout = float(report.node.config.getoption("timeout", None) or 0)
        elapsed = time.time() - start["time"]
        if timeout and elapsed >= 0.9 * timeout:
            verdict = Verdict("fault", f"hang: no result after {elapsed:.0f}s (timeout {timeout:.0f}s); worker killed",
                              fault_class="hang")
        else:
            verdict = Verdict("fault", f"worker process died after {elapsed:.1f}s with no result (crash)",
                              fault_class="other")
        coords = {k: start[k] for k in ("kernel", "tier", "backend", "arch", "case_id", "budget", "topology", "plant",
                                        "batch", "block_size", "mode", "layout", "nodeid")}
        coords["shape"] = start.get("shape", "")
        record = record_of(coords, verdict)
        record.env_id = start.get("env_id", "")
        suite.writer.write(record)
        line = asdict(record)
    report.longrepr = (f"{line['outcome']} ({line.get('fault_class')}): {line['backend']}, case {line['case_id']}: "
                       f"{line['message']}\n{report.longrepr}; xdist replaces the worker and the run goes on")
    report.user_properties.append(("ddtree_outcome", line["outcome"]))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """The e2e cells this process will run, in order (after every deselection), for the server plan."""
    suite = session.config.stash.get(SUITE, None)
    if suite is not None:
        suite.e2e_selected = [i.callspec.params["ddtree_e2e_cell"] for i in session.items
                              if "ddtree_e2e_cell" in getattr(getattr(i, "callspec", None), "params", {})]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    suite = config.stash.get(SUITE, None)
    if suite is None or not suite.resume or suite.writer is None:
        return
    finished, _ = scan(suite.writer.path, suite.resume_limit)
    keep = [i for i in items if i.nodeid not in finished]
    done = [i for i in items if i.nodeid in finished]
    if done:
        config.hook.pytest_deselected(items=done)
        items[:] = keep


class _Summary:
    """Counts cells from reports (``user_properties`` travel from xdist workers to the controller)."""

    def __init__(self, suite: Suite):
        self.suite = suite

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "ddtree_outcome" in props:
            tier = props.get("ddtree_tier")
            self.suite.counts[(E2E if tier == E2E else tier == STATIC, props["ddtree_outcome"])] += 1
        if "ddtree_known_issue" in props:
            self.suite.counts[("known", props["ddtree_known_issue"])] += 1

    def _line(self, kind) -> str:
        return ", ".join(f"{self.suite.counts[(kind, o)]} {o}" for o in OUTCOMES)

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        wanted = set(re.findall(r"\bsm\d+\b", config.getoption("markexpr", "") or ""))
        missing = sorted(wanted - {g.arch for g in self.suite.gpus})
        if missing and not any(self.suite.counts[(False, o)] for o in OUTCOMES):
            have = ", ".join(sorted({g.arch for g in self.suite.gpus})) or "none"
            terminalreporter.write_sep("-", "ddtree-compat")
            terminalreporter.write_line(f"no {', '.join(missing)} GPU on this host (detected: {have}): "
                                        f"no device cells selected for -m {config.getoption('markexpr')!r}")
        if not self.suite.counts:
            return
        counts = self.suite.counts
        terminalreporter.write_sep("-", "ddtree-compat")
        if any(counts[(False, o)] for o in OUTCOMES):
            terminalreporter.write_line(f"grid cells: {self._line(False)}  (tier {self.suite.tier}, profile "
                                        f"{self.suite.profile}; property tests are counted by pytest only)")
        if any(counts[(True, o)] for o in OUTCOMES):
            terminalreporter.write_line(f"static cells: {self._line(True)}  (tier static, build cache "
                                        f"{self.suite.static_cache})")
        if any(counts[(E2E, o)] for o in OUTCOMES):
            terminalreporter.write_line(f"e2e cells: {self._line(E2E)}  (real SGLang servers on "
                                        f"{self.suite.e2e_arch()}; logs and captures in {self.suite.e2e_dir})")
        if counts[("known", "xfail")] or counts[("known", "xpass")]:
            terminalreporter.write_line(f"known issues: {counts[('known', 'xfail')]} failed as expected (xfail), "
                                        f"{counts[('known', 'xpass')]} passed (XPASS(strict): fixed? update "
                                        f"{self.suite.known.path})")
        if self.suite.writer is not None:
            terminalreporter.write_line(f"results: {self.suite.writer.path}  ->  python -m ddtree_compat report "
                                        f"{self.suite.writer.path}")
