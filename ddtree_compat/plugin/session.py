"""The suite's per-session state (:class:`Suite`, in ``config.stash``: the plugin's only state) and
when it comes to exist.

Inert until asked: a session that passes no ``--ddtree-*`` option (a ``DDTREE_*`` variable only sets the
defaults), selects none of the suite's markers with ``-m``, and runs no test asking for a ddtree
fixture never gets a :class:`Suite`: no environment change, no ``.ddtree/`` folder, no hypothesis
profile, no thread cap (a project that merely has this package installed keeps its sessions as they
were). Once asked, :func:`suite` creates it: GPUs detected, tier resolved, backends and the
known-issues manifest loaded, ``TRITON_INTERPRET=1`` set on the interpret tier (before any SGLang
kernel is imported: adapters import lazily), torch's threads capped in an xdist worker, and the
suite's hypothesis profiles loaded.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from functools import cached_property
from pathlib import Path

import pytest

from ..arch import ARCHES, Gpu, detect_gpus
from ..errors import DDTreeInputError
from ..tiers import Target, resolve_tier, targets_for
from . import markers, options

if TYPE_CHECKING:
    from .. import known_issues
    from ..contract import CaseContext, KernelRecord

NO_IMPLEMENTATION = ("no DDTree implementation found (--ddtree-impl PATH or DDTREE_IMPLS=PATH: a DDTree build of "
                     "SGLang; the installed sglang has no DDTree modules)")
"""What the start lines and a DDTree test's skip say when the session has no DDTree implementation."""
NOT_SELECTED = ("no DDTree implementation among the selected backends (--ddtree-backend; one is found by "
                "--ddtree-impl PATH or DDTREE_IMPLS=PATH)")
"""What the reports say of the DDTree kernels when ``--ddtree-backend`` chose backends and no implementation."""
GRAPH_NEEDS_DEVICE = "CUDA graphs need the device tier"
"""Why a ``*@graph`` cell skips off the device tier (its skip; the start lines say it once per session)."""


@dataclass
class Suite:
    """Per-session configuration and counters.

    Attributes:
        tier: ``interpret`` or ``device``.
        profile: the verify grid's profile.
        gpus, targets: what was detected and what cells run on.
        backends: the selected backends.
        case_files: ``--ddtree-case`` files (replacing the grid).
        cases_dir: where failing cases are saved.
        results: the results file (``None``: none); its writer is made on first use.
        not_tested: ``{what: why}`` the session cannot test before any cell exists (the ``env`` line carries it
            to the reports: ``{"ddtree": NO_IMPLEMENTATION}``).
        cut: the ``repair`` line of a torn last line cut from the results file at the start, or ``None``.
        resumed: cells ``--ddtree-resume`` left out (their result lines are in the file already).
    """

    tier: str
    profile: str
    gpus: list[Gpu]
    targets: list[Target]
    backends: list
    case_files: list[str]
    cases_dir: Path
    results: str | None
    fsync: bool = False
    resume: bool = False
    resume_limit: int = 0
    sanitize: str = ""
    poisoned_by: str = ""
    known: known_issues.Manifest | None = None  # the known-issues manifest (an empty one where none is read)
    static: bool = True
    static_cache: str = ""
    attention_profile: str = "interpret"
    vocabs: tuple = ()  # --ddtree-vocab, checked
    e2e_dir: str = options.DEFAULT_E2E_DIR
    e2e_attention: tuple[str, ...] = ()  # the attention backends of --ddtree-e2e-attention, parsed once
    e2e_selected: list = field(default_factory=list)
    e2e_session: object = None  # the e2e tier's E2ESession, once created (plugin/e2e.py)
    progress_s: float = 30.0
    not_tested: dict = field(default_factory=dict)
    cut: dict | None = None
    resumed: int = 0

    @property
    def implementations(self) -> list:
        """The session's backends that are DDTree implementations (they carry ``impl``)."""
        return [b for b in self.backends if getattr(b, "impl", None) is not None]

    @cached_property
    def writer(self):
        """The :class:`~ddtree_compat.results.ResultsWriter` (``None`` without a results file)."""
        from ..results import ResultsWriter, environment

        if not self.results:
            return None
        impls = {b.name: b.impl.identity for b in self.implementations}
        return ResultsWriter(self.results, environment(self.tier, self.profile, self.known.as_env(), impls,
                                                       self.not_tested), fsync=self.fsync)

    @cached_property
    def failures(self):
        """The run's failing result lines so far (:class:`~ddtree_compat.results.FailureLog`; ``None`` without a
        results file): what a record's ``needless`` reads."""
        from ..results import FailureLog

        return FailureLog(self.results) if self.results else None

    def cases(self) -> tuple:
        """The verify cases: the ``--ddtree-case`` files, else the profile's grid."""
        from ..families.verify.records import VerifyCase, grid

        if self.case_files:
            return tuple(VerifyCase.load(p) for p in self.case_files)
        return grid(self.profile)

    @cached_property
    def context(self) -> CaseContext:
        from ..contract import CaseContext

        return CaseContext(self.profile, self.cases(), self.attention_profile, bool(self.case_files), self.vocabs)

    def cases_of(self, record: KernelRecord) -> tuple:
        """A record's cases for this session (cached per record)."""
        cache = self.__dict__.setdefault("_record_cases", {})
        if record.name not in cache:
            only_scale = self.profile == "scale" and record.table != "scale"  # the profile of those cells alone
            cache[record.name] = () if only_scale else tuple(record.cases(self.context))
        return cache[record.name]

    def static_cells(self) -> list:
        from ..static.runner import static_cells

        return static_cells(self.backends, self.cases(), profile=self.profile) if self.static and self.profile != "scale" else []

    @cached_property
    def e2e_configs(self) -> list:
        """The e2e tier's server configurations (:func:`ddtree_compat.e2e.configs.plan` of the profile, on each
        backend of :attr:`e2e_attention`), planned once per process: collection parametrizes them and the session
        launches them."""
        from ..e2e.configs import e2e_profile, plan, shape_for

        profile = e2e_profile(self.profile)
        return plan(profile, shape_for(profile), attention=self.e2e_attention)

    def e2e_arch(self) -> str:
        """The arch the e2e servers run on (the first visible GPU), ``nogpu`` without one."""
        return self.gpus[0].arch if self.gpus else "nogpu"


SUITE = pytest.StashKey[Suite]()


def active(config: pytest.Config) -> Suite | None:
    """The session's suite if it exists (never creates one)."""
    return config.stash.get(SUITE, None)


def suite(config: pytest.Config) -> Suite:
    """The session's suite, created (and its side effects applied) on first use.

    Raises:
        pytest.UsageError: a bad option, environment value, case file or manifest (one line).
    """
    existing = active(config)
    if existing is not None:
        return existing
    try:
        created = _create(config)
    except DDTreeInputError as e:
        raise pytest.UsageError(str(as_given(config, e))) from None
    config.stash[SUITE] = created
    _apply(config, created)
    return created


def as_given(config: pytest.Config, error: DDTreeInputError) -> DDTreeInputError:
    """``error``, naming the environment variable instead of the option when the bad value came from it (the
    option's value is the one its variable sets: ``field 'DDTREE_IMPLS' = '/nowhere'``, not ``--ddtree-impl``)."""
    option = next((o for o in options.OPTIONS if o.flag == error.field), None)
    if option is None or not option.env or option.env not in os.environ:
        return error
    if config.getoption(option.dest) != option.env_default():
        return error  # given on the command line
    return type(error)(option.env, error.value, error.allowed, error.problem, error.where)


def _create(config: pytest.Config) -> Suite:
    from ..backends import registry as backend_registry
    from ..families.scale.records import check_vocabs
    from ..families.verify.records import VerifyCase, check_profile

    gpus = detect_gpus()
    _register_detected(config, gpus)
    tier = resolve_tier(config.getoption("ddtree_tier"), gpus)
    if tier == "device" and not gpus:
        raise DDTreeInputError("--ddtree-tier", "device", "interpret (or auto) on a host without a GPU", "no GPU visible")
    profile = check_profile(config.getoption("ddtree_profile"))
    chosen = backend_registry.resolve(config.getoption("ddtree_backend"), config.getoption("ddtree_impl"))
    case_files = config.getoption("ddtree_case")
    for p in case_files:
        VerifyCase.load(p)  # validate now: a bad case is a usage error, never a skipped cell
    from .. import known_issues

    known = known_issues.load(config.getoption("ddtree_known_issues"))
    targets = targets_for(tier, gpus)
    if tier == "interpret":  # before the required backends' modules are imported below (and any kernel)
        from ..tiers import enable_interpreter

        enable_interpreter()
    _check_required(config.getoption("ddtree_require_backend"), chosen, targets)
    attention = config.getoption("ddtree_attention_profile")
    e2e_attention = e2e_attention_of(config.getoption("ddtree_e2e_attention"))
    created = Suite(tier, profile, gpus, targets, chosen, case_files, Path(config.getoption("ddtree_cases_dir")),
                    config.getoption("ddtree_results") or None, fsync=config.getoption("ddtree_fsync"),
                    resume=config.getoption("ddtree_resume"), sanitize=config.getoption("sanitize"), known=known,
                    static=config.getoption("ddtree_static") == "on",
                    static_cache=config.getoption("ddtree_static_cache"),
                    attention_profile=tier if attention == "auto" else attention,
                    e2e_dir=config.getoption("ddtree_e2e_dir"), e2e_attention=e2e_attention,
                    progress_s=progress_seconds(config.getoption("ddtree_progress")),
                    vocabs=check_vocabs(config.getoption("ddtree_vocab")))
    if not created.implementations:  # the DDTree kernels' tests skip before any cell exists: say why in the file
        created.not_tested["ddtree"] = NOT_SELECTED if config.getoption("ddtree_backend") else NO_IMPLEMENTATION
    worker = getattr(config, "workerinput", None)
    if created.results and worker is None:
        from ..results import check_appendable, check_writable, cut_torn_tail

        check_appendable(created.results)  # never append to (or resume from) a file that is not ours
        check_writable(created.results, "--ddtree-results")  # before any worker starts
        created.cut = cut_torn_tail(created.results)  # before the resume snapshot below: whole lines only
    if created.resume and created.results:
        from ..isolation import results_size

        # every xdist worker reads the controller's snapshot
        created.resume_limit = worker.get("ddtree_resume_limit", 0) if worker else results_size(created.results)
    return created


def e2e_attention_of(given: list[str] | None) -> tuple[str, ...]:
    """``--ddtree-e2e-attention`` as the tuple of backend names the e2e tier serves on (every one when not given).

    Raises:
        DDTreeInputError: an unknown name (one line, naming the allowed ones).
    """
    from ..e2e.attention import ATTENTION_BACKENDS, parse_attention

    try:
        return parse_attention(given)
    except ValueError as e:
        raise DDTreeInputError("--ddtree-e2e-attention", ",".join(given or ()), ", ".join(ATTENTION_BACKENDS),
                               str(e).partition(";")[0]) from None


def progress_seconds(value) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0:  # also NaN
        raise DDTreeInputError("--ddtree-progress", value, "seconds >= 0 (0: no progress lines)", "not a number of seconds")
    return seconds


def _check_required(required: list[str], chosen: list, targets: list[Target]) -> None:
    from ..contract import backend_unavailable

    by_name = {b.name: b for b in chosen}
    for name in required:
        if name not in by_name:
            raise DDTreeInputError("--ddtree-require-backend", name, ", ".join(by_name), "not among the selected backends")
        for target in targets:
            reason = backend_unavailable(by_name[name], target)
            if reason:
                raise DDTreeInputError("--ddtree-require-backend", name, "a backend that can run here",
                                       f"unavailable on {target.id}: {reason}")


def _apply(config: pytest.Config, created: Suite) -> None:
    """The side effects of a suite: the interpreter switch, the worker thread cap, hypothesis profiles."""
    from ..tiers import cap_worker_threads, enable_interpreter

    if created.tier == "interpret":
        enable_interpreter()
    cap_worker_threads(getattr(config, "workerinput", None))
    _hypothesis_profiles(config)


def _hypothesis_profiles(config: pytest.Config) -> None:
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:
        return
    # ddtree_check_verify is function-scoped but keeps no per-example state (each example overwrites the
    # node's verdict, so the recorded one is the final, shrunk example's).
    suppressed = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
    settings.register_profile("ci", derandomize=True, max_examples=40, deadline=None, print_blob=True,
                              suppress_health_check=suppressed)
    settings.register_profile("nightly", max_examples=2000, deadline=None, print_blob=True,
                              suppress_health_check=suppressed)
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile(os.environ.get("DDTREE_HYPOTHESIS_PROFILE", "ci"))


def _register_detected(config: pytest.Config, gpus: list[Gpu]) -> None:
    """Markers for detected GPUs whose arch the table lacks (their cells carry the arch's marker)."""
    markers.register_archs(config, tuple((g.arch, f"detected compute capability {g.major}.{g.minor}")
                                         for g in gpus if g.arch not in ARCHES))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the markers; create the suite now only if the session asked for it by option or ``-m``.

    A session that did not ask costs nothing: no GPU detection (which imports torch where NVML is missing),
    no torch import. A detected GPU's arch that the table lacks gets its marker when the suite is created
    (here when asked; else at the first ddtree fixture or kernel test)."""
    markers.register(config)
    markexpr = config.getoption("markexpr", "")
    asked = options.asked(config) or markers.selected(markexpr)
    detected = []
    if asked:
        try:
            detected = [g.arch for g in detect_gpus()]
        except DDTreeInputError:
            pass  # a bad DDTREE_FAKE_GPUS: reported as a usage error by suite() below
    try:
        if asked:  # a session of ours: under xdist pytest would find a malformed expression in each worker
            markers.check_expression("-m", markexpr)
            markers.check_expression("-k", config.getoption("keyword", "") or "")
        markers.check_markexpr(markexpr, detected=detected, registered=markers.registered_names(config))
    except DDTreeInputError as e:  # before xdist starts a worker: one line, pytest's usage-error exit
        raise pytest.UsageError(str(e)) from None
    if asked:
        suite(config)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Kill the static tier's compile workers, also after Ctrl-C (else they outlive pytest); then collect the
    session's garbage once and freeze what is left (:func:`gc.freeze`).

    A session of ours holds ~half a million objects (the grid, SGLang's and torch's modules). After the
    unconfigure hooks pytest collects five times over to surface exceptions raised in ``__del__``
    (``_pytest.unraisableexception``), and the interpreter collects again at exit: seconds more of every pytest
    process and xdist worker (sessions the test command starts by the dozen; each worker's exit at the end of a
    sweep). One collection here still finalizes every unreachable object while pytest's hook reports what it
    raises; the frozen rest are live objects, which the later collections skip (those in reference cycles are
    left to the process's exit, like much else at exit)."""
    if active(config) is not None:
        from ..static.runner import shutdown_pools

        shutdown_pools()
        gc.collect()
        gc.freeze()
