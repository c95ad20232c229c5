"""Command line: ``python -m ddtree_compat {sweep,report,diff,replay,cases}``.

* ``sweep``: the main job. Runs the kernel tests (:mod:`ddtree_compat.kernel_tests`: the checkout's ``tests/kernels``, shipped
  in the wheel, so an installed package runs them from any folder) on the tier(s) this host has (device when a GPU is
  visible; else the CPU interpreter), each tier in its own pytest process, appending to a dated results
  file, then writes the reports beside it (``.md``, ``.html``, ``.png``). The static tier (AOT compiles for
  every arch) runs once, in the first tier's process. Each pytest process starts by saying which backends
  run and which skip, and why, one line each.
* ``report RESULTS...``: render results files (merged: several runners or GPUs, one matrix; a re-run cell
  once, its latest verdict) as Markdown, and with ``--html PAGE`` a self-contained HTML page plus the
  summary picture PNG beside it.
* ``diff BASELINE CANDIDATE``: the upgrade gate; lists regressed and fixed cells, exits 1 on a regression, 3
  when something could not be compared.
* ``replay CASE --backend NAME``: run one case (a JSON file, or any record's case by its id: found without
  building the whole grid, :mod:`ddtree_compat.case_lookup`) in this process and print the verdict.
* ``cases``: list (or write as JSON) the grid of a profile, or ``--attention PROFILE``'s attention cases.

Exit statuses: one table for every subcommand (:mod:`ddtree_compat.exitcodes`). Bad input (unknown
backend, kernel, arch marker, tier or profile; a malformed case or results file; an unwritable output)
prints one line on stderr and exits 2, having run, written and removed nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from .errors import DDTreeInputError
from .exitcodes import TABLE, Exit, combine, from_pytest
from .results import COMMAND_ENV, REPORT_BY_SWEEP

EXIT_USAGE = int(Exit.USAGE)
PROG = "python -m ddtree_compat"
"""How the CLI is run; every line it writes to stderr starts with it and the subcommand (argparse's too)."""


def _kernel_tests() -> Path:
    """A checkout's own ``tests/kernels`` beside the package (whatever else is installed), else the installed
    wheel's ``ddtree_compat.kernel_tests`` (``pyproject.toml`` maps the folder into the wheel)."""
    checkout = Path(__file__).resolve().parent.parent / "tests" / "kernels"
    if (checkout / "__init__.py").is_file():
        return checkout
    spec = importlib.util.find_spec("ddtree_compat.kernel_tests")
    return Path(spec.origin).resolve().parent


KERNEL_TESTS = _kernel_tests()
"""The kernel tests the sweep runs: the checkout's ``tests/kernels``, shipped in the wheel as the subpackage
``ddtree_compat.kernel_tests``."""
SWEEP_INI = KERNEL_TESTS / "sweep.ini"
"""The sweep's pytest configuration (``-c``): a foreign ``pytest.ini`` or ``pyproject.toml`` above the
installed package (a virtual environment inside a project) never applies to the sweep."""


class OneLineParser(argparse.ArgumentParser):
    """argparse with usage errors in one line (``prog: error: ...; see --help``), exit status 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _expression(pytest_args: list[str], flag: str) -> str:
    """The ``-m`` or ``-k`` expression (``flag``) among pytest arguments (``-m EXPR``, ``-mEXPR``; the last one
    given, as pytest takes it), or ``""``."""
    found = ""
    for i, a in enumerate(pytest_args):
        if a == flag and i + 1 < len(pytest_args):
            found = pytest_args[i + 1]
        elif a.startswith(flag) and not a.startswith("--") and len(a) > 2:
            found = a[2:].lstrip("=")
    return found


PROFILE_ENV = "DDTREE_PROFILE"
CELL_TIMEOUT_S = 300
"""``sweep --timeout``'s default: seconds a cell may run before it is a hang."""


def _as_given(error: DDTreeInputError, profile_given: bool = True) -> DDTreeInputError:
    """``error`` naming what the user typed or set: ``--backend`` (the plugin's ``--ddtree-backend``), the
    environment variable a bad value came from (``DDTREE_IMPLS``; ``DDTREE_PROFILE`` unless ``--profile`` was
    given)."""
    from . import impls

    field = {"--ddtree-backend": "--backend", "--ddtree-impl": impls.ENV}.get(error.field, error.field)
    if error.field == "profile":
        field = PROFILE_ENV if not profile_given and os.environ.get(PROFILE_ENV) else "--profile"
    return type(error)(field, error.value, error.allowed, error.problem, error.where)


def _sweep_inputs(args: argparse.Namespace) -> tuple[list, list[str], Path]:
    """Check everything a sweep is given before anything runs: profile, tests, backends, the output folder (it
    can be written), the ``-m`` and ``-k`` expressions (they parse), then (GPUs detected: without NVML that
    imports torch, seconds) the tiers and the ``-m`` expression's arch markers.

    Returns:
        ``(gpus, tiers, tests)``.
    Raises:
        DDTreeInputError: the first bad input (one line, naming the option or environment variable it came from).
    """
    from . import impls
    from .arch import detect_gpus
    from .backends.registry import resolve
    from .families.verify.records import check_profile
    from .plugin.markers import check_expression, check_markexpr
    from .results import check_writable
    from .tiers import TIERS, resolve_tier

    args.profile_given = args.profile is not None
    args.profile = args.profile or os.environ.get(PROFILE_ENV) or "default"
    try:
        check_profile(args.profile)
    except DDTreeInputError as e:
        raise _as_given(e, args.profile_given) from None
    from .families.scale.records import check_vocabs

    try:
        args.vocabs = check_vocabs(v for given in args.vocab or () for v in given.split(","))
    except DDTreeInputError as e:
        raise DDTreeInputError("--vocab", e.value, e.allowed, e.problem) from None
    tests = Path(args.tests)
    if not tests.exists():
        raise DDTreeInputError("--tests", str(tests), f"a kernel tests folder or file (default {KERNEL_TESTS})",
                               "not found")
    if args.resume_passes < 0 or args.timeout < 1:
        raise DDTreeInputError("--resume-passes" if args.resume_passes < 0 else "--timeout",
                               args.resume_passes if args.resume_passes < 0 else args.timeout,
                               "--resume-passes >= 0, --timeout >= 1 (seconds)", "out of range")
    if args.workers is not None and not re.fullmatch(r"auto|logical|\d+", args.workers):
        raise DDTreeInputError("-n", args.workers, "auto, logical or a number of xdist workers (0: none, no fault "
                               "containment)", "not a worker count")
    try:
        resolve(args.backend or None, impls.paths_from_env())
    except DDTreeInputError as e:  # name the option as typed here, or the variable the bad value came from
        raise _as_given(e) from None
    out_dir = Path(args.out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise DDTreeInputError("--out-dir", str(out_dir), "a folder (created if missing)", "is a file")
    check_writable(out_dir, "--out-dir", folder=True)
    for flag in ("-m", "-k"):
        check_expression(flag, _expression(args.pytest_args, flag))
    gpus = detect_gpus()
    tiers = list(TIERS) if args.tier == "all" else [resolve_tier(args.tier, gpus)]
    if "device" in tiers and not gpus:
        if args.tier != "all":
            raise DDTreeInputError("--tier", "device", "interpret, auto or all on a host without a GPU", "no GPU")
        tiers.remove("device")
        print("no GPU visible: --tier all runs the interpret tier only", flush=True)
    check_markexpr(_expression(args.pytest_args, "-m"), [g.arch for g in gpus])
    return gpus, tiers, tests


def _sweep_stem(args: argparse.Namespace, out_dir: Path, arch: str) -> str:
    """The stem of this sweep's files (:mod:`ddtree_compat.sweep_files`): ``--name``; else, for ``--resume`` and
    ``--append``, the newest run of this arch and profile; else a name of its own (``<date>-<arch>-<profile>``,
    then ``-2``, ``-3`` ...; ``--replace``: the first).

    Raises:
        DDTreeInputError: ``--name`` holds an earlier run's files and neither ``--replace``, ``--resume`` nor
            ``--append`` says what to do with them; ``--resume`` finds nothing to resume.
    """
    from .sweep_files import default_stem, fresh_stem, newest_stem, taken

    base = default_stem(time.strftime("%Y-%m-%d"), arch, args.profile)
    if args.name:
        stem = args.name.removesuffix(".jsonl")
        results = out_dir / f"{stem}.jsonl"
        if args.resume and not results.exists():
            raise DDTreeInputError("--resume", str(results), "the results file of an earlier sweep (its --out-dir "
                                   "and --name; without --resume a new sweep starts)", "nothing to resume: no such file")
        earlier = taken(out_dir, stem)
        if earlier and not (args.replace or args.resume or args.append):
            raise DDTreeInputError("--name", str(earlier[0]), "a new name, or --replace (start it over), --resume "
                                   "(run the cells it lacks), --append (add to it)", "an earlier sweep's file: not "
                                   "replaced")
        return stem
    if args.resume or args.append:
        newest = newest_stem(out_dir, arch, args.profile)
        if newest is None and args.resume:
            raise DDTreeInputError("--resume", str(out_dir / f"{base}.jsonl"), "an earlier sweep's results in "
                                   "--out-dir (of this arch and profile), or --name NAME", "nothing to resume: no "
                                   "such sweep")
        return newest or base
    return base if args.replace else fresh_stem(out_dir, base)


def _resume_command(args: argparse.Namespace, stem: str) -> str:
    """The command that runs what this sweep left: the same sweep, ``--resume`` of its file by name."""
    import shlex

    words = [*PROG.split(), "sweep", "--resume", "--out-dir", args.out_dir, "--name", stem]
    if args.tier != "auto":
        words += ["--tier", args.tier]
    if args.profile_given:
        words += ["--profile", args.profile]
    if args.tests != str(KERNEL_TESTS):
        words += ["--tests", args.tests]
    words += [w for b in args.backend or [] for w in ("--backend", b)]
    words += ["--vocab", ",".join(map(str, args.vocabs))] if getattr(args, "vocabs", ()) else []
    words += ["--fsync"] * args.fsync + (["--sanitize", args.sanitize] if args.sanitize else [])
    words += (["-n", args.workers] if args.workers else []) + (
        ["--timeout", str(args.timeout)] if args.timeout != CELL_TIMEOUT_S else [])
    return shlex.join(words + (["--", *args.pytest_args] if args.pytest_args else []))


def cmd_sweep(args: argparse.Namespace) -> int:
    from . import sweep_files
    from .results import check_appendable
    from .tiers import device_worker_args

    gpus, tiers, tests = _sweep_inputs(args)
    out_dir = Path(args.out_dir)
    arch = "-".join(sorted({g.arch for g in gpus})) or "cpu"
    stem = _sweep_stem(args, out_dir, arch)
    results = out_dir / f"{stem}.jsonl"
    if args.append or args.resume:
        check_appendable(results, "--resume" if args.resume else "--append")
    out_dir.mkdir(parents=True, exist_ok=True)
    aside = sweep_files.set_aside(out_dir, stem) if args.replace else None  # put back if this sweep writes nothing
    if tests.resolve() == KERNEL_TESTS:  # the verify grid every worker collects, built once meanwhile
        from .families.verify.records import warm_grid

        warm_grid(args.profile)
    statuses = []
    for n, tier in enumerate(tiers):
        if tier == "device" and not args.workers:
            dist = device_worker_args(gpus)
        else:
            dist = ["-n", args.workers or "auto"]
        # Fault containment: cells run in xdist workers, replaced after a sticky CUDA fault or a hang.
        cmd = [sys.executable, "-m", "pytest", *_sweep_targets(tests, args.pytest_args), *_sweep_config(tests),
               "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
               f"--ddtree-tier={tier}", f"--ddtree-profile={args.profile}", f"--ddtree-results={results}",
               f"--ddtree-cases-dir={out_dir / (stem + sweep_files.CASES)}", *dist, "--max-worker-restart=100000",
               f"--timeout={args.timeout}", "--timeout-method=thread",
               "--continue-on-collection-errors",  # a file that cannot be collected is recorded; the rest runs
               *args.pytest_args]
        if args.resume:
            cmd.append("--ddtree-resume")
        if args.sanitize:
            cmd.append(f"--sanitize={args.sanitize}")
        if args.fsync:
            cmd.append("--ddtree-fsync")
        if n:  # static cells do not depend on the tier: the first tier's process runs them once
            cmd.append("--ddtree-static=off")
        for b in args.backend or []:
            cmd.append(f"--ddtree-backend={b}")
        if args.vocabs:
            cmd.append(f"--ddtree-vocab={','.join(map(str, args.vocabs))}")
        print("+", " ".join(cmd), flush=True)
        start = time.time()
        try:
            status = from_pytest(_run_with_resume_passes(cmd, tier, args.resume_passes))
        except KeyboardInterrupt:
            print("\ninterrupted: the report covers what finished", flush=True)
            statuses.append(Exit.INTERRUPTED)
            break
        print(f"tier {tier}: {status.name.lower().replace('_', ' ')} (exit {int(status)}) in "
              f"{time.time() - start:.1f}s", flush=True)
        statuses.append(status)
        if status == Exit.USAGE:
            break
    if not results.exists():
        sweep_files.restore(aside)  # nothing ran (a usage error pytest found): the earlier run stays
        return combine(statuses)
    sweep_files.discard(aside)
    _sweep_report(args, results, arch, stem, interrupted=Exit.INTERRUPTED in statuses)
    return combine(statuses)


def _sweep_report(args: argparse.Namespace, results: Path, arch: str, stem: str, interrupted: bool) -> None:
    """Write the sweep's report, point the ``latest-*`` links at it (default names), and say in a few lines what
    it holds: partial or whole (with the command for the rest), what was not tested."""
    from . import sweep_files
    from .errors import ResultsFileError
    from .report.coverage import not_tested
    from .report.summary import summarize

    report = results.with_suffix(".md")
    try:
        loaded, picture = _write_report([str(results)], str(report), str(results.with_suffix(".html")))
    except ResultsFileError as e:
        if e.field != "result":
            raise
        print(f"report:  none: no cell of {results} finished")  # interrupted between collection and a cell's end
        print(f"continue: {_resume_command(args, stem)}")
        return
    whole = not loaded.partial and not interrupted
    state = "nothing left to run" if whole else (
        f"partial, {loaded.done:,} of {loaded.planned:,} cells" if loaded.partial else "partial (interrupted)")
    print(f"report:  {report} (and .html{', .png' if picture else ''}) of {results}: {state}")
    if not args.name:
        try:
            links = sweep_files.point_latest(results.parent, stem, arch, args.profile)
            print(f"latest:  {links[0].with_suffix('')}.* -> {stem}.*")
        except OSError as e:
            print(f"latest:  not linked ({e.strerror or e})")
    for line in not_tested(summarize(loaded)):
        print(f"  {line}")
    if not whole:
        print(f"continue: {_resume_command(args, stem)}")


def _sweep_config(tests: Path) -> list[str]:
    """``-c`` and ``--rootdir`` for the package's own kernel tests (node ids read ``tests/kernels/test_verify.py::...``
    from a checkout, ``ddtree_compat/kernel_tests/test_verify.py::...`` from an installed wheel: paths ``pytest``
    takes from the checkout's root or the wheel's site-packages); nothing for tests of the user's own
    (``--tests``), which bring their configuration."""
    inside = tests.resolve() == KERNEL_TESTS or KERNEL_TESTS in tests.resolve().parents
    return ["-c", str(SWEEP_INI), f"--rootdir={KERNEL_TESTS.parent.parent}"] if inside else []


def _run_with_resume_passes(cmd: list[str], tier: str, passes: int) -> int:
    """Run ``cmd``; after a pass with failures (pytest exit 1), resume up to ``passes`` times.

    A worker replaced after a sticky fault can leave cells unrun (pytest-xdist's ``--dist each``, used to
    pin one worker per GPU, drops a crashed worker's pending cells); a resumed pass runs only cells with no
    result line and exits 5 when none is left. Other exits are final: 2 (interrupted), 3 (internal
    error), 4 (usage error). Returns the first pass's pytest exit status.
    """
    import shlex

    env = {**os.environ, REPORT_BY_SWEEP: "1",  # the sweep writes the report: the summary does not offer it
           COMMAND_ENV: os.environ.get(COMMAND_ENV) or "python -m ddtree_compat " + shlex.join(sys.argv[1:])}
    rc = last = subprocess.call(cmd, env=env)
    resume = cmd if "--ddtree-resume" in cmd else [*cmd, "--ddtree-resume"]
    for extra in range(1, passes + 1):
        if last != 1:
            break
        print(f"tier {tier}: resume pass {extra}: running the cells without a result line", flush=True)
        last = subprocess.call(resume, env=env)
        print(f"tier {tier}: resume pass {extra}: pytest exit {last}", flush=True)
    return rc


def _sweep_targets(tests: Path, pytest_args: list[str] = ()) -> list[str]:
    """The test paths for pytest: a directory's test files with the verify grid first (the field
    failure's check; pytest would otherwise run files alphabetically, commit first), less those named
    by ``--ignore`` in ``pytest_args`` (pytest applies ``--ignore`` only while it walks a directory,
    never to a file named on its command line)."""
    if not tests.is_dir():
        return [str(tests)]
    ignored = {Path(a.split("=", 1)[1]).resolve() for a in pytest_args if a.startswith("--ignore=")}
    ignored |= {Path(b).resolve() for a, b in zip(pytest_args, pytest_args[1:]) if a == "--ignore"}
    files = sorted((f for f in tests.glob("test_*.py") if f.resolve() not in ignored),
                   key=lambda p: (p.name != "test_verify.py", p.name))
    return [str(f) for f in files] or [str(tests)]


def _write_report(paths: list[str], out: str | None, html: str | None = None):
    """Render the Markdown (to ``out`` or stdout) and the HTML with its summary picture PNG, all of the same
    results, each naming the file(s) they come from; a torn line is said on stderr, one line each. Everything is
    rendered before anything is written; a PNG left beside the page by an earlier report is removed when this one
    draws none (static- or e2e-only results), so the three never come from different results.

    Returns:
        ``(the loaded results, whether a picture was drawn)``.
    Raises:
        ResultsFileError: a results file is not ours. OSError: an output cannot be written.
    """
    from .report import render_html, render_markdown, render_summary

    results = _load(paths, "report")
    png, picture = b"", None
    if html:
        try:
            png = render_summary(results)
        except ValueError as e:  # only static / e2e cells: nothing to draw
            print(f"no summary picture: {e}", file=sys.stderr)
        page = render_html(results, png)
        if png and out:  # the Markdown shows the picture by its path from the Markdown's folder
            picture = os.path.relpath(Path(html).with_suffix(".png"), Path(out).resolve().parent)
    envelope_png = b""
    if html:
        from .report.picture import render_envelope

        try:
            envelope_png = render_envelope(results)
        except ValueError:  # no deployment-shape cell
            pass
    envelope_path = Path(html).with_name(Path(html).stem + "-envelope.png") if html else None
    text = render_markdown(results, picture=picture, envelope_picture=os.path.relpath(
        envelope_path, Path(out).resolve().parent) if envelope_png and out else None)
    for path in (out, html):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    if out:
        Path(out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if html:
        if png:
            Path(html).with_suffix(".png").write_bytes(png)
        else:
            Path(html).with_suffix(".png").unlink(missing_ok=True)  # an earlier report's picture
        if envelope_png:
            envelope_path.write_bytes(envelope_png)
        else:
            envelope_path.unlink(missing_ok=True)
        Path(html).write_text(page, encoding="utf-8")
    return results, bool(png)


def _load(paths: list[str], command: str):
    """:func:`ddtree_compat.results.load`, saying on stderr, one line each, which torn lines it left out."""
    from .results import load

    results = load(paths)
    for torn in results.torn:
        print(f"{PROG} {command}: warning: {torn}", file=sys.stderr)
    return results


def cmd_report(args: argparse.Namespace) -> int:
    _write_report(args.results, args.output, args.html)
    return Exit.OK


def _check_named(flag: str, names: list[str] | None, field: str, sides) -> None:
    """Refuse a ``--backend`` or ``--kernel`` name (``field`` of a cell: ``backend``, ``kernel``; a kernel also by its
    base name, ``verify_tree_greedy`` for ``verify_tree_greedy@graph``) that no cell on either side has.

    Raises:
        DDTreeInputError: the first such name, with the names the sides have.
    """
    from .records import base_name

    known = {getattr(r, field) for side in sides for r in side.records}
    known |= {base_name(k) for k in known} if field == "kernel" else set()
    for name in names or ():
        if name not in known:
            raise DDTreeInputError(flag, name, ", ".join(sorted(known)), f"no cell of that {field} on either side")


def cmd_diff(args: argparse.Namespace) -> int:
    from .gate import compare, render_markdown, warnings
    from .records import base_name

    baseline, candidate = _load([args.baseline], "diff"), _load([args.candidate], "diff")
    _check_named("--backend", args.backend, "backend", (baseline, candidate))
    _check_named("--kernel", args.kernel, "kernel", (baseline, candidate))
    if args.kernel:
        for side in (baseline, candidate):
            side.records = [r for r in side.records if r.kernel in args.kernel or base_name(r.kernel) in args.kernel]
    gate = compare(baseline, candidate, tuple(args.backend or ()))
    for warning in warnings(gate):  # also on stderr: the Markdown can run to thousands of lines
        print(f"{PROG} diff: warning: {warning}", file=sys.stderr)
    text = render_markdown(gate, args.baseline, args.candidate, limit=args.limit)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text, encoding="utf-8")
    for why in gate.not_compared:
        print(f"{PROG} diff: not compared: {why}", file=sys.stderr)
    sys.stdout.write(text)
    return gate.exit_status


def cmd_replay(args: argparse.Namespace) -> int:
    from .arch import detect_gpus
    from .tiers import enable_interpreter, resolve_tier, targets_for

    gpus = detect_gpus()
    tier = resolve_tier(args.tier, gpus)
    targets = targets_for(tier, gpus)
    if not targets:
        raise DDTreeInputError("--tier", tier, "interpret on a host without a GPU", "no GPU")
    if tier == "device" and not 0 <= args.gpu < len(targets):
        raise DDTreeInputError("--gpu", args.gpu, f"0..{len(targets) - 1} (the visible GPUs)", "no such GPU")
    case = _replay_case(args.case, args.profile)
    if tier == "interpret":
        enable_interpreter()
    from . import contract, impls
    from .backends.registry import resolve

    try:
        (backend,) = resolve([args.backend], impls.paths_from_env())
    except DDTreeInputError as e:  # name the option as typed here, or the variable the bad value came from
        if e.field == "--ddtree-impl":
            raise _as_given(e) from None
        raise DDTreeInputError("--backend", args.backend, e.allowed, e.problem) from None
    record = _replay_record(case, args.kernel, backend)
    cases = record.backend_cases(backend, (case,))  # e.g. a backend without tile choices runs it natively
    if not cases:
        raise DDTreeInputError("--backend", args.backend, "a backend that runs this case's kernel on the device",
                               f"{backend.name} runs no {record.name} cell (its {record.name.partition('@')[0]} is a "
                               "host reference)")
    (case,) = cases
    label = record.label_of(case)
    target = targets[args.gpu] if tier == "device" else targets[0]
    from .plugin.cells import judged_by

    reason = contract.unavailable(backend, label, target, case if judged_by(contract.base_name(label), label, case) else None)
    if reason:
        print(f"skip: {backend.name} on {target.id}: {reason}")
        return Exit.OK if args.allow_skip else Exit.NOTHING_RAN
    verdict = record.runner()(case, backend, target)
    accepted = (f", accepted expected {verdict.accepted_expected} got {verdict.accepted_got}"
                if verdict.accepted_expected or verdict.accepted_got is not None else "")
    print(f"{verdict.outcome}: {backend.name} {label} on {target.id}, case {case.id}{accepted}"
          + (f"\n{verdict.message}" if verdict.message else ""))
    if verdict.outcome == "skip":
        return Exit.OK if args.allow_skip else Exit.NOTHING_RAN
    return Exit.OK if verdict.outcome == "pass" else Exit.FAILED


def cmd_envelope(args: argparse.Namespace) -> int:
    """Bisect each deployment-shape group of a results file between its largest passing and its first failing batch:
    each probe a ``replay`` in a fresh process (a fault poisons only that process's CUDA context), its verdict appended
    to the file as a ``bisect`` cell; then the envelope table."""
    import subprocess
    import tempfile

    from .arch import detect_gpus
    from .families.scale.envelope import envelopes, probe
    from .faults import classify
    from .outcomes import OUTCOMES
    from .results import ResultRecord, ResultsWriter, check_appendable, cut_torn_tail, environment, load

    path = Path(args.results)
    check_appendable(path, "results")
    if not detect_gpus():
        raise DDTreeInputError("envelope", str(path), "a host with the GPU the results came from",
                               "no GPU visible: the bisection's probes run the kernels")
    cut_torn_tail(path)
    writer = None
    probes, tried = 0, set()
    with tempfile.TemporaryDirectory(prefix="ddtree-envelope-") as tmp:
        while probes < args.max_probes:
            todo = [(e, b) for e in envelopes(load([path]).records) for b in (probe(e),)
                    if b is not None and (e.key, b) not in tried]
            if not todo:
                break
            for env, batch in todo[:args.max_probes - probes]:
                tried.add((env.key, batch))
                case = env.case_at(batch)
                case_path = case.save(args.cases_dir or tmp)
                cmd = [sys.executable, "-m", "ddtree_compat", "replay", str(case_path), "--backend", env.backend,
                       "--kernel", env.kernel, "--tier", "device"]
                start = time.time()
                try:
                    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                    text, code = (done.stdout or "") + (done.stderr or ""), done.returncode
                except subprocess.TimeoutExpired:  # the probe's process is killed: a hang of the kernel
                    text, code = f"fault: the probe timed out after {args.timeout} s", -9
                outcome = text.split(":", 1)[0].strip() if text else ""
                if outcome not in OUTCOMES:  # a replay that printed no verdict line: killed, or our own failure
                    outcome = "fault" if code < 0 else "error"
                writer = writer or ResultsWriter(path, environment("device", "scale"))
                writer.write(ResultRecord(kernel=env.kernel, tier="device", backend=env.backend, arch=env.arch,
                                          case_id=case.id, outcome=outcome, **case.coordinates(),
                                          fault_class=classify(text) if outcome == "fault" else None,
                                          duration_s=time.time() - start, message="" if outcome == "pass"
                                          else text[-2000:], case_path=str(case_path) if args.cases_dir else "",
                                          nodeid=" ".join(cmd)))
                probes += 1
                last = text.strip().splitlines()[-1][:160] if text.strip() else "no output"
                print(f"{PROG} envelope: {env.kernel} {env.backend} {env.group} batch {batch}: {outcome}"
                      + ("" if outcome == "pass" else f" ({last})"), file=sys.stderr)
    rows = envelopes(load([path]).records)
    for e in rows:
        print(f"{e.kernel}\t{e.backend}\t{e.arch}\t{e.group}\t{e.verdict}")
    return Exit.OK if all(e.first_bad is None for e in rows) else Exit.FAILED


def _replay_record(case, kernel: str | None, backend):
    """The record a replayed case runs under: ``--kernel`` (a name or label among the records of the case's
    type that the backend implements), or the only such record (the only one the backend implements).

    Raises:
        DDTreeInputError: ``--kernel`` names no such record, or the case type has several and none is named.
    """
    from . import contract, records

    candidates = records.for_case(case)
    names = [r.name for r in candidates]
    if kernel is None and getattr(case, "label", None) in names:  # a case that names its kernel (a scale case)
        kernel = case.label
    if kernel is None:
        implemented = [r for r in candidates if contract.base_name(r.name) in contract.kernels_of(backend)]
        candidates = implemented if len(implemented) == 1 else candidates  # sglang-triton has one of three
        if len(candidates) > 1:
            raise DDTreeInputError("--kernel", None, ", ".join(names), f"a {type(case).__name__} feeds several kernels")
    record = candidates[0] if kernel is None else next(
        (r for r in candidates if kernel in (r.name, r.label_of(case))), None)
    if record is None:
        raise DDTreeInputError("--kernel", kernel, ", ".join(names), f"not a kernel of a {type(case).__name__}")
    if contract.base_name(record.name) not in contract.kernels_of(backend):
        have = [n for n in names if contract.base_name(n) in contract.kernels_of(backend)]
        wanted = f"a backend with {record.name}" + (
            " (a DDTree implementation's kernel: --backend ddtree-impl:PATH of a DDTree build of SGLang)"
            if record.table == "ddtree" else "")
        raise DDTreeInputError("--kernel" if kernel else "--backend", kernel or backend.name, ", ".join(have) or wanted,
                               f"{backend.name} has no {record.name}")
    return record


def _replay_case(ref: str, profile: str = "default"):
    """The case to replay: the JSON file ``ref`` (any registered case type), or else the case whose id is
    ``ref`` among the cases of every kernel record in ``profile``'s run (:func:`ddtree_compat.case_lookup.find`).

    Raises:
        DDTreeInputError: ``ref`` is neither a readable case file nor the id of such a case.
    """
    from . import case_lookup, records

    path = Path(ref)
    if path.exists() or path.suffix == ".json" or "/" in ref:
        try:
            text = path.read_bytes().decode("utf-8")
        except OSError as e:
            raise DDTreeInputError("path", ref, "a readable case JSON file", e.strerror or "unreadable") from None
        except UnicodeDecodeError:
            raise DDTreeInputError("path", ref, "a case JSON file (UTF-8 text)", "binary, not text") from None
        try:
            return records.case_from_json(text, ref)
        except DDTreeInputError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:  # a field of the wrong shape
            raise DDTreeInputError("case", ref, "a case file this suite writes (python -m ddtree_compat cases "
                                   "--write DIR)", f"malformed ({type(e).__name__}: {e})") from None
    found = case_lookup.find(ref, profile)
    if found is None:
        raise DDTreeInputError("case", ref, f"a case JSON file or the id of a {profile} case (python -m ddtree_compat "
                                            f"cases --profile {profile} [--kernel K])", "not found")
    return found


def cmd_cases(args: argparse.Namespace) -> int:
    from .families.verify.records import check_profile, grid

    from . import records
    from .contract import CaseContext

    if args.attention:
        from .families.attention.records import attention_cases

        cases = attention_cases(args.attention)
    elif args.kernel:
        record = records.get(args.kernel)
        if record is None:
            raise DDTreeInputError("--kernel", args.kernel, ", ".join(records.registry()), "not a kernel")
        verify = grid(check_profile(args.profile))
        cases = list({c.id: c for c in record.cases(CaseContext(args.profile, tuple(verify)))}.values())
    else:
        cases = grid(check_profile(args.profile))
    for c in cases:
        line = c.id
        if args.write:
            line += f"  {c.save(args.write)}"
        print(line)
    what = f"{args.kernel} " if args.kernel and not args.attention else "attention " if args.attention else ""
    print(f"{len(cases)} {what}cases in profile {args.attention or args.profile}", file=sys.stderr)
    return Exit.OK


def _exit_statuses() -> str:
    """The exit-status table as ``--help`` ends with it (an installed wheel has no docs/ to point at)."""
    lines = ["exit statuses (every subcommand):"]
    for status, meaning in TABLE:
        lines += textwrap.wrap(f"{int(status):>3} {status.name.lower()}: {meaning.replace('`', '')}", width=100,
                               subsequent_indent=" " * 6)
    return "\n".join(lines)


SEE_EXIT_STATUSES = f"Exit statuses: {PROG} --help."
BACKENDS = ("a backend: oracle, sglang-triton, sglang-cuda, sglang-torch, flashinfer, a DDTree implementation's name "
            "(its $DDTREE_IMPLS or installed sglang), ddtree-impl:PATH, or module:object")
"""What ``--backend`` takes, for ``--help`` (the built-ins are :data:`ddtree_compat.backends.registry.BUILTIN`)."""


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description="DDTree kernel compatibility suite: the sweep and "
                      "its reports, the upgrade gate, replay of one case, the case grid.", epilog=_exit_statuses(),
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("sweep", help="run the kernel sweep on this host's tiers and write results + report",
                       epilog=SEE_EXIT_STATUSES)
    s.add_argument("--tier", default="auto", choices=["auto", "interpret", "device", "all"],
                   help="auto: device with a GPU, else interpret (Triton's CPU interpreter); all: interpret and "
                        "device (default auto)")
    s.add_argument("--profile", default=None, help="default, full or scale (the deployment-shape cells alone) "
                                                   "(default: $DDTREE_PROFILE, else default)")
    s.add_argument("--vocab", action="append", help="the deployment-shape cells' vocabularies (comma-separated, "
                                                     "repeatable; default 32000, 128256, 151936, 248320)")
    s.add_argument("--backend", action="append", help=f"{BACKENDS} (repeatable; default: all)")
    s.add_argument("--out-dir", default="results", help="directory for results JSONL and report (default results/)")
    s.add_argument("--name", help="file stem (default DATE-ARCH-PROFILE, then DATE-ARCH-PROFILE-2, -3 ...: each sweep "
                                  "its own files, latest-ARCH-PROFILE.* link to the newest report; a trailing .jsonl "
                                  "is dropped); an earlier sweep's name is refused without --replace, --resume or "
                                  "--append")
    keep = s.add_mutually_exclusive_group()
    keep.add_argument("--replace", action="store_true",
                      help="start the file of --name (default: DATE-ARCH-PROFILE) over, its report and cases too")
    keep.add_argument("--append", action="store_true",
                      help="append to the file of --name (default: the newest sweep of this arch and profile)")
    keep.add_argument("--resume", action="store_true",
                      help="continue a killed or interrupted sweep: run only the cells without a result line in "
                           "the file of --name (default: the newest sweep of this arch and profile)")
    s.add_argument("--resume-passes", type=int, default=5,
                   help="after a failing pass, resume up to N times to run cells a crashed worker left (default 5)")
    s.add_argument("--timeout", type=int, default=CELL_TIMEOUT_S,
                   help=f"seconds per cell before it is a hang (default {CELL_TIMEOUT_S})")
    s.add_argument("--fsync", action="store_true",
                   help="fsync the results file after every line (a host that may hang or reboot on a GPU fault)")
    s.add_argument("--sanitize", choices=["memcheck", "racecheck", "initcheck", "synccheck"],
                   help="re-run failing device cells under compute-sanitizer")
    s.add_argument("--tests", default=str(KERNEL_TESTS), help="kernel tests folder or file (default: the package's)")
    s.add_argument("-n", "--workers", help="xdist workers (default on device: several load-balanced workers for one GPU, one pinned worker per GPU for several; auto on interpret)")
    s.add_argument("pytest_args", nargs="*", help="extra pytest options (after --: -k EXPR, -m sm120, ...); a test "
                                                  "path there adds to --tests, so narrow the tests with --tests PATH")
    s.set_defaults(func=cmd_sweep)

    r = sub.add_parser("report", help="merge results JSONL files into one matrix: Markdown, HTML page, summary PNG",
                       epilog=SEE_EXIT_STATUSES)
    r.add_argument("results", nargs="+", help="results JSONL files (.jsonl or .jsonl.gz) of one or several sweeps")
    r.add_argument("-o", "--output", help="write the Markdown here instead of stdout")
    r.add_argument("--html", metavar="PAGE.html", help="also write a self-contained HTML page and PAGE.png beside it")
    r.set_defaults(func=cmd_report)

    d = sub.add_parser("diff", help="upgrade gate: cells compared, regressed (pass -> other), fixed, newly "
                                    "covered; exit 1 on a regression, 3 when something could not be compared",
                       epilog=SEE_EXIT_STATUSES)
    d.add_argument("baseline", help="results JSONL of the pinned version")
    d.add_argument("candidate", help="results JSONL of the candidate version")
    d.add_argument("-o", "--output", help="also write the Markdown verdict here (e.g. $GITHUB_STEP_SUMMARY)")
    d.add_argument("--limit", type=int, default=50, help="cells listed per section (default 50)")
    d.add_argument("--backend", action="append", help="compare only this backend's cells (repeatable)")
    d.add_argument("--kernel", action="append", help="compare only this kernel's cells (a name, or a label such as "
                                                     "verify_tree_greedy@graph; repeatable)")
    d.set_defaults(func=cmd_diff)

    y = sub.add_parser("replay", help="run one case (a JSON file, or any case's id) through one backend "
                                      "in this process", epilog=SEE_EXIT_STATUSES)
    y.add_argument("case", help="case JSON file, or a case id as `cases` and the reports list it")
    y.add_argument("--backend", required=True, help=BACKENDS + " (as the report's replay line names it)")
    y.add_argument("--profile", default="default", help="the run a case id is looked up in: default, full or scale "
                                                        "(a deployment-shape cell's id; default: default)")
    y.add_argument("--tier", default="auto", choices=["auto", "interpret", "device"],
                   help="auto: device with a GPU, else interpret (default auto)")
    y.add_argument("--gpu", type=int, default=0, help="GPU index on the device tier")
    y.add_argument("--kernel", default=None,
                   help="the kernel to run the case under when its case type feeds several (a commit case: "
                        "accept_out_cache_loc, move_kv, ...); default: the case type's only kernel")
    y.add_argument("--allow-skip", action="store_true", help="exit 0 when the backend cannot run the case here")
    y.set_defaults(func=cmd_replay)

    e = sub.add_parser("envelope", help="bisect the deployment-shape cells of a results file between the largest "
                                        "passing and the first failing batch (each probe a replay in its own "
                                        "process, appended to the file), then print the envelope",
                       epilog=SEE_EXIT_STATUSES)
    e.add_argument("results", help="results JSONL of a sweep with deployment-shape cells (--profile scale)")
    e.add_argument("--max-probes", type=int, default=64, help="probes in all before stopping (default 64)")
    e.add_argument("--timeout", type=int, default=300, help="seconds per probe (default 300)")
    e.add_argument("--cases-dir", help="keep each probe's case JSON here (default: a temporary folder)")
    e.set_defaults(func=cmd_envelope)

    c = sub.add_parser("cases", help="list a profile's case ids (verify's grid, or a kernel's cases); optionally "
                                     "write each case as JSON", epilog=SEE_EXIT_STATUSES)
    c.add_argument("--profile", default="default", help="default, full or scale (default: default)")
    c.add_argument("--kernel", help="list this kernel's cases (move_kv, ddtree_follow, ...) instead of the verify "
                                    "grid; every id listed replays with replay ID")
    c.add_argument("--write", metavar="DIR", help="also write each case as DIR/ID.json")
    c.add_argument("--attention", choices=["interpret", "device"],
                   help="list this verify-attention profile's cases instead (every tile configuration)")
    c.set_defaults(func=cmd_cases)
    f = sub.add_parser("preflight", help="one serving configuration: will it work on this GPU, and if not, what to "
                                         "change (the cells its launch flags reach, at its own shapes)",
                       epilog=SEE_EXIT_STATUSES)
    f.add_argument("launch", nargs="*", help="after --: the arguments of sglang.launch_server, exactly as deployed")
    f.add_argument("--from-file", help="a launch script or a saved command line (its words after "
                                       "sglang.launch_server)")
    f.add_argument("--model-config", help="the model's config.json, when --model-path is no local folder")
    f.add_argument("--arch", help="the serving GPU's arch for the static builds on a host without it (sm120, ...)")
    f.add_argument("--sampling", action="append", help="greedy, or temperature=T[,top_p=P][,top_k=K] (repeatable; "
                                                       "default: greedy and temperature=1)")
    f.add_argument("--ddtree-impl", help="the DDTree build you serve (default: DDTREE_IMPLS, else the installed "
                                         "SGLang)")
    f.add_argument("--out-dir", default="results", help="where its results file and report go (default results/)")
    f.add_argument("-n", "--workers", help="xdist workers (default: the sweep's)")
    f.add_argument("--plan-only", action="store_true", help="print the configuration read and the plan; run nothing")
    f.set_defaults(func=cmd_preflight)
    return p


def cmd_preflight(args: argparse.Namespace) -> int:
    from .preflight.command import run

    return run(args)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit status (:class:`ddtree_compat.exitcodes.Exit`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except DDTreeInputError as e:
        print(f"{PROG} {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `cases | head`: the reader left; stop quietly (and keep Python's exit-time
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # flush off the closed pipe)
        return int(Exit.OK)
    except OSError as e:  # an output path of the user's that cannot be written (a folder, no permission)
        where = f"{e.filename}: " if e.filename else ""
        print(f"{PROG} {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return int(Exit.INTERRUPTED)
