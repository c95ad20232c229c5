"""Where a sweep's wall time goes, phase by phase, for one or several checkouts side by side.

    python benchmarks/sweep_phases.py --repo before=/tmp/before --repo after=. -- --tier device -- \\
        --ddtree-static=off --ignore=tests/kernels/test_verify_attention.py --ignore=tests/kernels/test_ddtree.py

For each ``--repo`` (a checkout of any commit, with or without ``.git``) it runs that checkout's own
``python -m ddtree_compat sweep ARGS`` (``--pytest``: ``python -m pytest ARGS``) in the checkout, with the
checkout first on ``PYTHONPATH`` and this file, copied into a temporary folder as a module, loaded into every
pytest process with ``-p`` (the controller and each xdist worker: xdist hands ``-p`` on to its workers). Nothing
of either tree is changed; it needs only the standard library, and pytest for the probe (a process's start time
comes from Linux's ``/proc``; elsewhere it is when the probe was imported).

The probe (the ``pytest_*`` functions below, inert unless loaded as a plugin) writes one JSON-lines file per
process into ``$SWEEP_PHASES_DIR``: its role (controller, xdist worker, or solo without xdist), when the
process started, when the session started, when collection finished, and per test its start and finish
(``pytest_runtest_logstart`` / ``logfinish``) and the setup / call / teardown durations of its reports. The
sweep's own stdout is timestamped line by line (its ``+ python -m pytest`` line, its ``tier ...: ... in N s``
line after pytest, its ``results:`` line after the report), and the kernel seconds the suite recorded per cell
(``duration_s`` of the results file's ``result`` lines) are joined to the tests by node id.

It then prints, per checkout, the wall path (consecutive spans that add up to the wall time), what the
workers spent their time on (summed over workers), the floor, and a side-by-side comparison, in Markdown
(``--out FILE`` writes the same). Run data stays in ``--work-dir`` (probe files, timestamped log, results).
Figures from one run each; ``--rounds N`` alternates the checkouts N times and reports each checkout's
(lower) median-wall run.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV_DIR = "SWEEP_PHASES_DIR"
"""The folder each probed pytest process writes its JSON-lines file into."""
PROBE_MODULE = "_sweep_phases_probe"
"""The name this file is copied under to be loaded with ``-p``."""
FRESH_CACHES = {"TRITON_CACHE_DIR": "triton", "TVM_FFI_CACHE_DIR": "tvm-ffi", "SGLANG_JIT_CACHE_DIR": "sglang-jit",
                "FLASHINFER_WORKSPACE_BASE": "flashinfer"}
"""The compile caches a run gets fresh (unless ``--shared-caches``), one folder each: Triton's kernels, tvm-ffi's JIT
builds (SGLang's JIT kernels: the CUDA verify, the tree sampler), SGLang's own JIT cache (newer releases) and
FlashInfer's JIT workspace."""
TESTS_PLACES = ("tests/kernels", "ddtree_compat/kernel_tests")
"""Where a checkout keeps the kernel tests (the checkout's folder, or the wheel's subpackage)."""


# --------------------------------------------------------------------------------------------------------------
# The probe: hooks pytest calls when this file is loaded as a plugin (-p _sweep_phases_probe). Standard library
# and pytest only; every hook returns at once when $SWEEP_PHASES_DIR is unset. Times are time.time() (one clock
# for every process); durations are pytest's own (report.duration).

_IMPORTED = time.time()


class _Probe:
    def __init__(self, folder: str, role: str):
        self.pid, self.role = os.getpid(), role
        self.file = open(Path(folder) / f"{self.pid}.jsonl", "a", buffering=1 << 16)
        self.test: dict = {}
        self.own = 0.0  # seconds spent in the probe's hooks (its cost)
        atexit.register(self.exit)

    def emit(self, **line) -> None:
        self.file.write(json.dumps(line, separators=(",", ":")) + "\n")
        if line["ev"] != "test":  # (a process killed without its atexit keeps its few session lines)
            self.file.flush()

    def exit(self) -> None:
        if not self.file.closed:
            self.emit(ev="exit", t=time.time(), own=round(self.own, 6))
            self.file.close()


_probe: _Probe | None = None


def _process_started() -> float | None:
    """When this process started (Unix seconds), or ``None`` off Linux. The kernel's start time (``/proc/self/stat``
    field 22, clock ticks on the boot-time clock) against ``CLOCK_BOOTTIME`` now: exact to a tick (10 ms), where
    ``psutil``'s ``create_time`` adds the boot time's rounding to whole seconds (up to 1 s off ``time.time()``)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time() - age


def _hookimpl(**opts):
    """``pytest.hookimpl(**opts)``, or nothing where pytest is not importable (this file run as a script)."""
    try:
        import pytest
    except ImportError:
        return lambda f: f
    return pytest.hookimpl(**opts)


@_hookimpl(tryfirst=True)  # before xdist's, which starts the workers
def pytest_sessionstart(session) -> None:
    global _probe
    folder = os.environ.get(ENV_DIR)
    if not folder or _probe is not None:
        return
    t, c = time.time(), time.perf_counter()
    config = session.config
    role = ("worker" if hasattr(config, "workerinput") else
            "controller" if config.pluginmanager.has_plugin("dsession") else "solo")
    _probe = _Probe(folder, role)
    _probe.emit(ev="start", role=role, worker=os.environ.get("PYTEST_XDIST_WORKER", ""), pid=_probe.pid,
                ppid=os.getppid(), created=_process_started(), imported=_IMPORTED, sessionstart=t)
    _probe.own += time.perf_counter() - c


@_hookimpl(trylast=True)  # after the other plugins' (collection done)
def pytest_collection_finish(session) -> None:
    if _probe is not None:
        _probe.emit(ev="collected", t=time.time(), items=len(session.items))


@_hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid, location) -> None:
    if _probe is not None and _probe.role != "controller":
        c = time.perf_counter()
        _probe.test = {"nodeid": nodeid, "start": time.time()}
        _probe.own += time.perf_counter() - c


def pytest_runtest_logreport(report) -> None:
    if _probe is not None and _probe.role != "controller" and _probe.test.get("nodeid") == report.nodeid:
        c = time.perf_counter()
        _probe.test[report.when] = report.duration
        if report.when == "call" or report.failed:
            _probe.test["outcome"] = report.outcome
        _probe.own += time.perf_counter() - c


@_hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid, location) -> None:
    if _probe is not None and _probe.role != "controller" and _probe.test.get("nodeid") == nodeid:
        t, c = time.time(), time.perf_counter()
        _probe.emit(ev="test", finish=t, **_probe.test)
        _probe.test = {}
        _probe.own += time.perf_counter() - c


@_hookimpl(tryfirst=True)  # the session's end as the other plugins' sessionfinish see it
def pytest_sessionfinish(session, exitstatus) -> None:
    if _probe is not None:
        _probe.emit(ev="sessionfinish", t=time.time(), exitstatus=int(exitstatus))


@_hookimpl(tryfirst=True)
def pytest_unconfigure(config) -> None:
    if _probe is not None:
        _probe.emit(ev="unconfigure", t=time.time())
        _probe.file.flush()


# --------------------------------------------------------------------------------------------------------------
# Reading a run back (pure: the unit tests feed it synthetic lines).

MARKERS = (
    ("pytest", re.compile(r"^\+ .*-m pytest\b")),  # the sweep is about to start pytest
    ("tier", re.compile(r"^tier \S+: .* in [\d.]+ ?s$")),  # pytest (and its resume passes) returned
    ("results", re.compile(r"^results: ")),  # the sweep wrote its report (pytest's summary has a results: line too)
)
"""The sweep's stdout lines that mark its steps, in the order it prints them (both before and after the 2026-12-02 start-up changes)."""


def markers(lines: list[tuple[float, str]]) -> dict[str, float]:
    """When each marker line of the sweep's stdout arrived (timestamped ``(t, line)`` pairs): the first match
    of each marker after the previous marker's line."""
    found: dict[str, float] = {}
    todo = list(MARKERS)
    for t, line in lines:
        if todo and todo[0][1].search(line.rstrip()):
            found[todo.pop(0)[0]] = t
    return found


def read_probe(folder: Path) -> list[dict]:
    """One dict per process: its ``start`` line's fields plus ``collected``, ``tests`` (list), ``sessionfinish``,
    ``unconfigure``, ``exit`` (times, or absent when the process died before)."""
    processes = []
    for path in sorted(folder.glob("*.jsonl")):
        proc: dict = {"tests": []}
        for raw in path.read_text().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:  # a process killed mid-line
                continue
            ev = line.pop("ev", "")
            if ev == "start":
                proc.update(line)
            elif ev == "test":
                proc["tests"].append(line)
            elif ev in ("collected", "sessionfinish", "unconfigure", "exit"):
                proc[ev] = line["t"]
                if ev == "exit":
                    proc["own"] = line.get("own", 0.0)
        if "role" in proc:
            processes.append(proc)
    return processes


def read_kernel_seconds(path: Path | None) -> tuple[dict[str, float], int, float]:
    """``(kernel seconds per node id, result lines, kernel seconds over all result lines)`` of a results file."""
    per_node: dict[str, float] = {}
    count, total = 0, 0.0
    if path is None or not path.is_file():
        return per_node, count, total
    for raw in path.read_text().splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if line.get("kind") != "result":
            continue
        d = float(line.get("duration_s") or 0.0)
        count, total = count + 1, total + d
        per_node[line.get("nodeid", "")] = per_node.get(line.get("nodeid", ""), 0.0) + d
    return per_node, count, total


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def aggregate(processes: list[dict], kernel: dict[str, float], launched: float, ended: float,
              marks: dict[str, float]) -> dict:
    """The phases of one run.

    Args:
        processes: :func:`read_probe`'s answer.
        kernel: kernel seconds per node id (:func:`read_kernel_seconds`).
        launched, ended: when the sweep (or pytest) command was started and when it returned.
        marks: :func:`markers` of its stdout.
    Returns:
        ``path``: ``[(label, seconds)]``, consecutive spans from launch to return (they add up to ``wall``);
        ``work``: ``[(label, worker-seconds summed, median per test or None)]``; ``startup``: per-worker
        start-up spans (median, max); ``workers``, ``tests``, ``floor`` and the figures behind them.
    """
    sessions = sorted((p for p in processes if p["role"] in ("controller", "solo")), key=lambda p: p["sessionstart"])
    if not sessions:
        raise ValueError("no pytest session was probed (was the probe loaded? see the run's log)")
    first = sessions[0]
    workers = [p for p in processes if p["role"] in ("worker", "solo")]  # the processes that ran tests
    main_workers = [first] if first["role"] == "solo" else [p for p in workers if p.get("ppid") == first["pid"]]
    ran = [w for w in main_workers if w["tests"]]
    wall = ended - launched

    # The wall path: consecutive points in time; a missing point takes the one before it (a zero span).
    created = first.get("created") or first["imported"]
    first_test = min((w["tests"][0]["start"] for w in ran), default=first["sessionstart"])
    last_test = max((w["tests"][-1]["finish"] for w in ran), default=first_test)
    later_span = sum((s.get("exit") or s.get("unconfigure") or s["sessionstart"]) - (s.get("created") or s["imported"])
                     for s in sessions[1:])
    sweep = "tier" in marks  # the sweep CLI around pytest (else pytest was the command)
    points = [
        ("sweep CLI before pytest: its imports, GPU detection, input checks" if sweep else
         "command start to the pytest process's start", created),
        ("controller pytest start-up: interpreter, imports, plugins, conftests", first["sessionstart"]),
        ("workers start, import, collect (grid build), get their first tests", first_test),
        ("tests running: first test start to last test end, any worker", last_test),
        ("workers wind down: last test end to the controller's sessionfinish", first.get("sessionfinish")),
        ("sessionfinish hooks (xdist stops its workers there) and terminal summary", first.get("unconfigure")),
        ("unconfigure hooks to interpreter exit (atexit)", first.get("exit")),
    ]
    if sweep:
        points += [("pytest process teardown, resume passes, until the sweep's tier line", marks["tier"]),
                   ("sweep CLI writes the report (.md, .html, .png)", marks.get("results")),
                   ("sweep CLI exit", ended)]
    else:
        points += [("after atexit: interpreter teardown, process exit, later pytest sessions", ended)]
    path, previous = [], launched
    for label, t in points:
        t = max(previous, min(t if t is not None else previous, ended))
        path.append((label, t - previous))
        previous = t

    # What the workers did (every worker process of every session: resume passes and replaced workers too).
    tests = [t for w in workers for t in w["tests"]]
    phase = {k: [float(t.get(k) or 0.0) for t in tests] for k in ("setup", "call", "teardown")}
    kern = [kernel.get(t["nodeid"], 0.0) for t in tests]
    matched = sum(t["nodeid"] in kernel for t in tests)
    harness = [c - k for c, k in zip(phase["call"], kern)]
    outside = [(t["finish"] - t["start"]) - s - c - d
               for t, s, c, d in zip(tests, phase["setup"], phase["call"], phase["teardown"])]
    gaps = [b["start"] - a["finish"] for w in workers for a, b in zip(w["tests"], w["tests"][1:])]
    startup = [w["tests"][0]["start"] - (w.get("created") or w["imported"]) for w in workers if w["tests"]]
    before_first = [(w["tests"][0]["start"] - w["collected"]) for w in workers if w["tests"] and "collected" in w]
    tails = [(w.get("exit") or w.get("unconfigure") or w.get("sessionfinish") or w["tests"][-1]["finish"])
             - w["tests"][-1]["finish"] for w in workers if w["tests"]]
    work = [
        ("setup phase (fixtures: target, backend, case; CUDA/Triton start on a worker's first test)",
         sum(phase["setup"]), _median(phase["setup"])),
        ("call phase (the test body)", sum(phase["call"]), _median(phase["call"])),
        ("  of it kernel, as the suite recorded it (results' duration_s)", sum(kern), _median(kern)),
        ("  of it harness: call - kernel (oracle, inputs, checks, sync)", sum(harness), _median(harness)),
        ("teardown phase", sum(phase["teardown"]), _median(phase["teardown"])),
        ("in a test outside its phases: report hooks (result line written), logstart/logfinish",
         sum(outside), _median(outside)),
        ("between tests on a worker: xdist scheduling and messaging, waiting for work", sum(gaps), _median(gaps)),
        ("worker start-up: process start to its first test start", sum(startup), None),
        ("worker tail: its last test end to its exit", sum(tails), None),
    ]
    stages = {
        "process start to probe loaded (Python, pytest import, option parsing)":
            [w["imported"] - w["created"] for w in workers if w.get("created")],
        "probe loaded to session start (plugins, conftests, configure hooks)":
            [w["sessionstart"] - w["imported"] for w in workers],
        "session start to collection finished (collection incl. grid build)":
            [w["collected"] - w["sessionstart"] for w in workers if "collected" in w],
        "collection finished to first test start (controller gathers collections, schedules)": before_first,
        "process start to first test start (all of the above)": startup,
    }
    # Floor: the kernels spread over the workers, plus one CUDA/Triton start (a worker's first test's setup and
    # call less its kernel time), paid by every worker at once.
    n_workers = len({w.get("worker") or w["pid"] for w in main_workers}) or 1
    firsts = [float(w["tests"][0].get("setup") or 0) + float(w["tests"][0].get("call") or 0)
              - kernel.get(w["tests"][0]["nodeid"], 0.0) for w in main_workers if w["tests"]]
    floor_start = _median(firsts)
    by_function: dict[str, list[float]] = {}  # test function -> [tests, call s, kernel s]
    for t, c, k in zip(tests, phase["call"], kern):
        row = by_function.setdefault(t["nodeid"].split("[")[0], [0, 0.0, 0.0])
        row[0] += 1
        row[1] += c
        row[2] += k
    return {
        "by_function": sorted(by_function.items(), key=lambda kv: kv[1][2] - kv[1][1]),
        "wall": wall, "path": path, "work": work, "startup": {k: (_median(v), max(v, default=0.0))
                                                              for k, v in stages.items()},
        "workers": n_workers, "worker_processes": len(workers), "sessions": len(sessions), "tests": len(tests),
        "matched": matched, "kernel_sum": sum(kern), "floor": sum(kern) / n_workers + floor_start,
        "floor_start": floor_start, "probe_own": sum(p.get("own", 0.0) for p in processes),
        "later_sessions_s": later_span,
    }


# --------------------------------------------------------------------------------------------------------------
# Tables.

def _pct(s: float, wall: float) -> str:
    return f"{100 * s / wall:.1f} %" if wall > 0 else "n/a"


def table(label: str, a: dict, results_lines: int, results_kernel: float) -> str:
    """Markdown: one checkout's run."""
    wall, w = a["wall"], a["workers"]
    later = f" (the later ones: {a['later_sessions_s']:.1f} s)" if a["sessions"] > 1 else ""
    out = [f"### {label}: {wall:.1f} s wall", "",
           f"{a['tests']} tests in {a['worker_processes']} worker process(es) ({w} concurrent), "
           f"{a['sessions']} pytest session(s){later}; results file: {results_lines} result lines, "
           f"{results_kernel:.1f} s kernel; {a['matched']} tests matched to a result line by node id. The probe's "
           f"own hooks took {a['probe_own']:.2f} s over all processes.", "",
           "Wall path (consecutive spans from the command's start to its return; they add up to the wall time):", "",
           "| span | s | % of wall |", "|---|---:|---:|"]
    out += [f"| {name} | {s:.2f} | {_pct(s, wall)} |" for name, s in a["path"]]
    out += [f"| **wall total** | **{wall:.2f}** | 100 % |", "",
            f"Worker time (summed over every worker process; ÷ {w} is the average worker's share of the wall):", "",
            "| worker time | sum, worker-s | ÷ workers, s | % of wall | median per test, ms |",
            "|---|---:|---:|---:|---:|"]
    out += [f"| {name} | {s:.2f} | {s / w:.2f} | {_pct(s / w, wall)} | {'' if m is None else f'{1000 * m:.2f}'} |"
            for name, s, m in a["work"]]
    out += ["", "Worker start-up, per worker process:", "", "| stage | median, s | max, s |", "|---|---:|---:|"]
    out += [f"| {name} | {m:.2f} | {x:.2f} |" for name, (m, x) in a["startup"].items()]
    out += ["", f"Floor: kernel {a['kernel_sum']:.2f} s ÷ {w} workers + one CUDA/Triton start per worker "
            f"({a['floor_start']:.2f} s: median over workers of the first test's setup + call - kernel) = "
            f"**{a['floor']:.2f} s** ({_pct(a['floor'], wall)} of the wall).", ""]
    out += ["Call phase per test function (worker-seconds; harness = call - kernel; largest harness first):", "",
            "| test function | tests | call, s | kernel, s | harness, s | harness per test, ms |",
            "|---|---:|---:|---:|---:|---:|"]
    out += [f"| {name} | {n} | {c:.2f} | {k:.2f} | {c - k:.2f} | {1000 * (c - k) / max(n, 1):.2f} |"
            for name, (n, c, k) in a.get("by_function", [])]
    out += [""]
    return "\n".join(out)


def comparison(labels: list[str], runs: list[dict]) -> str:
    """Markdown: the runs side by side, each against the first."""
    head = f"| | {' | '.join(labels)} | " + " | ".join(f"{x} - {labels[0]}" for x in labels[1:]) + " |"
    rule = "|---|" + "---:|" * (2 * len(labels) - 1)

    def row(name: str, values: list[float], fmt: str = "{:.2f}") -> str:
        deltas = [("+" if v >= values[0] else "") + fmt.format(v - values[0]) for v in values[1:]]
        return f"| {name} | {' | '.join(fmt.format(v) for v in values)} | {' | '.join(deltas)} |"

    out = ["### Side by side (seconds; worker rows ÷ workers)", "", head, rule,
           row("**wall total**", [r["wall"] for r in runs])]
    for name, _ in runs[0]["path"]:  # (a run the interrupt cut may lack the later spans: 0 there)
        out.append(row(f"wall: {name}", [dict(r["path"]).get(name, 0.0) for r in runs]))
    for i, (name, _, _) in enumerate(runs[0]["work"]):
        out.append(row(f"workers, ÷ n: {name.strip()}", [r["work"][i][1] / r["workers"] for r in runs]))
    for i, (name, _, m) in enumerate(runs[0]["work"]):
        if m is not None:
            out.append(row(f"median per test, ms: {name.strip()}", [1000 * r["work"][i][2] for r in runs]))
    for name in runs[0]["startup"]:
        out.append(row(f"worker start-up, median: {name}", [r["startup"][name][0] for r in runs]))
    out.append(row("tests", [r["tests"] for r in runs], "{:.0f}"))
    out.append(row("workers", [r["workers"] for r in runs], "{:.0f}"))
    out.append(row("floor (kernel ÷ workers + one start)", [r["floor"] for r in runs]))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------------------
# Running.

def map_tests_paths(args: list[str], repo: Path) -> list[str]:
    """``args`` with each kernel-tests path (``tests/kernels/...`` or ``ddtree_compat/kernel_tests/...``, bare or
    after ``--opt=``) moved to where ``repo`` keeps its kernel tests, when it is not there and the other is."""
    out = []
    for arg in args:
        prefix, _, value = arg.partition("=") if arg.startswith("-") and "=" in arg else ("", "", arg)
        for here, there in (TESTS_PLACES, TESTS_PLACES[::-1]):
            if (value == here or value.startswith(here + "/")) and not (repo / value).exists() \
                    and (repo / there).is_dir():
                value = there + value[len(here):]
                break
        out.append(f"{prefix}={value}" if prefix else value)
    return out


def _option(args: list[str], name: str) -> str | None:
    """The last value of ``name`` in ``args`` (``--name V`` or ``--name=V``)."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def command(repo: Path, args: list[str], run_dir: Path, pytest_mode: bool) -> tuple[list[str], Path]:
    """The command to run in ``repo`` and the results file it writes."""
    args = map_tests_paths(args, repo)
    if pytest_mode:
        results = _option(args, "--ddtree-results")
        if results is None:
            results = str(run_dir / "results.jsonl")
            args = [*args, f"--ddtree-results={results}"]
        return [sys.executable, "-m", "pytest", *args, "-p", PROBE_MODULE], repo / results
    own, rest = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
    if _option(own, "--out-dir") is None:  # each run its own results (a later run would replace them)
        own = ["--out-dir", str(run_dir / "results"), *own]
    if _option(own, "--name") is None:
        own = ["--name", "sweep", *own]
    results = repo / _option(own, "--out-dir") / f"{_option(own, '--name').removesuffix('.jsonl')}.jsonl"
    return [sys.executable, "-m", "ddtree_compat", "sweep", *own, "--", *rest, "-p", PROBE_MODULE], results


def run_once(label: str, repo: Path, args: list[str], run_dir: Path, pytest_mode: bool, fresh_cache: bool) -> dict:
    probe_dir = run_dir / "probe"
    module_dir = run_dir / "module"
    for d in (probe_dir, module_dir):
        d.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(__file__, module_dir / f"{PROBE_MODULE}.py")
    cmd, results = command(repo, args, run_dir, pytest_mode)
    env = {**os.environ, ENV_DIR: str(probe_dir), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(repo), str(module_dir), *filter(None, [os.environ.get("PYTHONPATH")])])}
    cache = tempfile.mkdtemp(prefix="sweep-phases-caches-") if fresh_cache else None
    if cache:  # every compile cache a first run fills, empty: as on a fresh machine
        env.update({var: str(Path(cache) / sub) for var, sub in FRESH_CACHES.items()})
    print(f"[{label}] in {repo}: {shlex.join(cmd)}", flush=True)
    lines: list[tuple[float, str]] = []
    launched = time.time()
    interrupted = False

    def on_sigint(signum, frame):  # the first SIGINT stops the reading; later ones are ignored (timeout -s INT sends
        nonlocal interrupted       # one to its child and one to the group)
        if not interrupted:
            interrupted = True
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    with open(run_dir / "sweep.log", "w") as log, subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE,
                                                                   stderr=subprocess.STDOUT, text=True) as proc:
        try:
            for line in proc.stdout:
                t = time.time()
                lines.append((t, line))
                log.write(f"{t - launched:9.3f} {line}")
        except KeyboardInterrupt:  # the sweep got it too (the group): it stops and reports what finished
            try:
                rest = proc.communicate(timeout=120)[0]
            except subprocess.TimeoutExpired:
                proc.kill()
                rest = proc.communicate()[0]
            t = time.time()  # (the rest's lines all get the time they were read)
            for line in rest.splitlines(keepends=True):
                lines.append((t, line))
                log.write(f"{t - launched:9.3f} {line}")
    signal.signal(signal.SIGINT, previous)
    ended = time.time()
    if cache:
        shutil.rmtree(cache, ignore_errors=True)
    kernel, result_lines, result_kernel = read_kernel_seconds(results)
    try:
        summary = aggregate(read_probe(probe_dir), kernel, launched, ended, markers(lines))
    except ValueError as e:
        tail = "".join(line for _, line in lines[-15:])
        print(f"[{label}] exit {proc.returncode}: {e}\n{tail}", flush=True)
        return {"label": label, "interrupted": interrupted, "failed": str(e)}
    summary.update(label=label, repo=str(repo), exit=proc.returncode, results=str(results),
                   result_lines=result_lines, result_kernel=result_kernel, interrupted=interrupted)
    print(f"[{label}] exit {proc.returncode} in {summary['wall']:.1f} s; log {run_dir / 'sweep.log'}", flush=True)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _label(spec: str) -> tuple[str, Path]:
    label, _, path = spec.rpartition("=")
    repo = Path(path).resolve()
    if not label and (repo / ".git").exists():
        try:
            label = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                                   text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            pass
    return label or repo.name, repo


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, sweep_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                usage="%(prog)s --repo [LABEL=]PATH [--repo ...] [options] -- SWEEP_ARGS")
    p.add_argument("--repo", action="append", required=True, metavar="[LABEL=]PATH",
                   help="a checkout to run (repeatable; the comparison is against the first); LABEL defaults to "
                        "its git short hash, else its folder name")
    p.add_argument("--pytest", action="store_true", help="run python -m pytest SWEEP_ARGS instead of the sweep")
    p.add_argument("--rounds", type=int, default=1,
                   help="run the checkouts alternately N times; each checkout's (lower) median-wall run is reported")
    p.add_argument("--work-dir", help="where the runs' probe files, logs and results go (default: a new temp dir)")
    p.add_argument("--shared-caches", "--shared-triton-cache", action="store_true", dest="shared_caches",
                   help="use the environment's Triton and JIT caches (default: fresh ones per run: "
                        + ", ".join(FRESH_CACHES) + ")")
    p.add_argument("--out", help="also write the tables (Markdown) here")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: the tables of the runs already in --work-dir (their summary.json; a device call "
                        "cut before the tables were printed), the checkouts in --repo's order, labels only")
    args = p.parse_args(ours)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="sweep-phases-")).resolve()
    repos = [_label(r) for r in args.repo]
    runs: dict[str, list[dict]] = {label: [] for label, _ in repos}
    stop = args.report_only
    if args.report_only:
        for done in sorted(work.glob("*-*/summary.json")):
            summary = json.loads(done.read_text())
            runs.setdefault(summary["label"], []).append(summary)
        repos = [(label, path) for label, path in repos if runs.get(label)]
    for n in range(args.rounds):
        for label, repo in repos:
            if not stop:
                run = run_once(label, repo, sweep_args, work / f"{label}-{n}", args.pytest,
                               not args.shared_caches)
                stop = run["interrupted"]
                if "failed" not in run:
                    runs[label].append(run)
    chosen = []
    for label, _ in repos:  # a run the interrupt cut short is reported only where its checkout has no whole run
        whole = [r for r in runs[label] if not r["interrupted"]] or runs[label]
        ordered = sorted(whole, key=lambda r: r["wall"])
        if ordered:
            chosen.append(ordered[(len(ordered) - 1) // 2])
    text = [f"## Sweep phases, {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()}, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f} at the end", "",
            f"Sweep arguments: `{shlex.join(sweep_args)}`{' (pytest)' if args.pytest else ''}", ""]
    if args.report_only:  # the host and arguments of the runs are not this one's
        text = [f"## Sweep phases, the runs in {work} (their summary.json), re-read "
                f"{time.strftime('%Y-%m-%d %H:%M')}", ""]
    for s in chosen:
        walls = ", ".join(f"{r['wall']:.1f}" for r in runs[s["label"]])
        cut = ", interrupted" if s["interrupted"] else ""
        text += [table(f"{s['label']} ({s['repo']}, exit {s['exit']}{cut}; runs: {walls} s)", s, s["result_lines"],
                       s["result_kernel"])]
    if len(chosen) > 1:
        text.append(comparison([s["label"] for s in chosen], chosen))
    text.append(f"Run data: {work}")
    out = "\n".join(text)
    print("\n" + out)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(out + "\n")
    return 0 if chosen else 1


if __name__ == "__main__":
    sys.exit(main())
