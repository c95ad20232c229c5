"""Benchmarks of the suite itself: time-to-verdict, fault-containment overhead, CPU-tier cost.

Prints a Markdown table (and writes it with ``--out FILE``); never asserts. Run from the repo root:

    python benchmarks/suite_cost.py --out /tmp/suite-cost-$(date +%F).md   # figures worth keeping go to docs/benchmarks.md

1. **time-to-verdict**: wall time of the default kernel sweep (``python -m ddtree_compat sweep``:
   verify + commit + graph cells, every backend) on this host's tier, with the sweep's own worker
   count or each of ``--sweep-workers 8,16``. Aim on an H200: <= 60 s. ``--e2e`` also times the e2e
   smoke tests (real SGLang servers) for the ratio.
2. **containment overhead**: the same slice of cells (``-k SLICE``) in one process without xdist,
   under the sweep's containment (xdist worker, ``--timeout``, ``--max-worker-restart``), and one
   process per cell (``python -m ddtree_compat replay``). Aim: containment <= 10 % over one process. An untimed
   run first warms the Triton and grid caches; ``--budgets all`` times every cell of ``test_verify.py``.
3. **interpret tier, cold vs warm**: the slice under ``TRITON_INTERPRET=1`` with a fresh
   ``TRITON_CACHE_DIR`` and again with the same one. (The static tier, when installed, is timed the
   same way with ``-m static``.)

``--from-e2e-log PYTEST_LOG`` reads an e2e run's pytest output (its verdict lines, ``e2e: <cell> (B 8) at 3:03:
fault ...``, timed from pytest's start) and prints the budget sweep's time to the first dead-budget verdict and
to the last verdict (``docs/benchmarks.md``; aim: <= 90 s and <= 180 s).

``--test-command`` times the README's test command instead (``python -m pytest -n auto``, wall and CPU
time of it and its children) and prints the per-module table (sum of test durations per file, from a
JUnit XML); ``--from-junit FILE`` prints that table from an earlier run's XML without running anything.

Where one sweep's wall time goes (start-up, collection, setup / call / teardown, kernel, gaps, report), for
several commits side by side: ``benchmarks/sweep_phases.py`` (standalone: it imports nothing of the checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, int]:
    start = time.perf_counter()
    rc = subprocess.call(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, rc


def result_lines(path: Path) -> int:
    """Result lines in a results file (0 when the sweep wrote none)."""
    if not path.exists():
        return 0
    return sum(json.loads(line).get("kind") == "result" for line in path.read_text().splitlines() if line.strip())


def pytest_cmd(tier: str, slice_: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "tests/kernels/test_verify.py", "-q", "-p", "no:cacheprovider",
            f"--ddtree-tier={tier}", "--ddtree-results=", *(["-k", slice_] if slice_ else []), *extra]


def per_module_table(junit: Path, top: int = 15) -> str:
    """Markdown: the ``top`` test files by the sum of their tests' durations (setup, call and teardown, as
    JUnit XML records them), and the total."""
    import collections
    import xml.etree.ElementTree as ET

    per_file: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
    for case in ET.parse(junit).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/") + ".py"
        per_file[path][0] += float(case.get("time") or 0)
        per_file[path][1] += 1
    total = sum(t for t, _ in per_file.values())
    rows = sorted(per_file.items(), key=lambda kv: -kv[1][0])[:top]
    lines = ["| test file | tests | sum of durations | share |", "|---|---|---|---|"]
    lines += [f"| `{f}` | {n} | {t:.0f} s | {100 * t / max(total, 1e-9):.0f} % |" for f, (t, n) in rows]
    lines.append(f"| all {len(per_file)} files | {sum(n for _, n in per_file.values())} | {total:.0f} s | |")
    return "\n".join(lines)


def e2e_verdict_times(text: str) -> dict[str, float | None]:
    """From an e2e run's verdict lines (:data:`ddtree_compat.plugin.e2e.VERDICT_LINE`): seconds to the first
    ``fault`` of a cell with a budget (a dead budget), to the last verdict, and the number of verdicts (``None``
    where there is none)."""
    from ddtree_compat.plugin.e2e import VERDICT_LINE

    seen = [(m.group("budget") is not None, m.group("outcome"), 60 * int(m.group("m")) + int(m.group("s")))
            for m in VERDICT_LINE.finditer(text) if m.group("m") is not None]
    dead = [t for budget, outcome, t in seen if budget and outcome == "fault"]
    return {"first_dead_s": min(dead) if dead else None, "last_s": max((t for *_, t in seen), default=None),
            "verdicts": len(seen)}


def e2e_table(path: Path) -> str:
    times = e2e_verdict_times(path.read_text(errors="replace"))
    fmt = lambda t: "n/a" if t is None else f"{t:.0f} s"  # noqa: E731
    return "\n".join(["| e2e budget sweep | value | aim |", "|---|---:|---|",
                      f"| first dead-budget verdict | {fmt(times['first_dead_s'])} | <= 90 s |",
                      f"| last verdict ({times['verdicts']} cells) | {fmt(times['last_s'])} | <= 180 s |"])


SERVER_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] (.*)$", re.M)
START_MARKS = (("first line", lambda m: True), ("scheduler", lambda m: m.startswith("Init torch distributed begin")),
               ("HTTP up", lambda m: "Uvicorn running" in m))


def e2e_start_table(root: Path) -> str:
    """Where each server's start went, from an e2e session folder (``--ddtree-e2e-dir``: its ``timeline.jsonl`` and
    ``servers/*/server.log``): seconds from its launch (the argv given: a standby's release, else its start) to
    its log's first SGLang line (the main process's imports done), to the scheduler's first line (its spawn and
    imports), to the HTTP server, and to ready or dead (the timeline); the standby's head start. SGLang's log
    stamps whole seconds of the host's clock; the timeline's ``session`` line gives its zero on that clock."""
    events = [json.loads(x) for x in (root / "timeline.jsonl").read_text().splitlines() if x.strip()]
    zero = next((e["wall"] for e in events if e["event"] == "session" and "wall" in e), None)
    launched = {e["server"]: e for e in reversed(events) if e["event"] == "launched"}  # the first launch of each
    end = {e["server"]: (e["event"], e["t"]) for e in events if e["event"] in ("ready", "failed before ready")}
    rows = ["| server | launched at | stood by | " + " | ".join(name for name, _ in START_MARKS) + " | ready or dead |",
            "|---|---:|---:|" + "---:|" * len(START_MARKS) + "---|"]
    for server, e in sorted(launched.items(), key=lambda kv: kv[1]["order"]):
        log = root / "servers" / server / "server.log"
        stamps = [(time.mktime(time.strptime(d, "%Y-%m-%d %H:%M:%S")), m)
                  for d, m in SERVER_LINE.findall(log.read_text(errors="replace"))] if log.exists() else []
        marks = []
        for _, test in START_MARKS:
            at = next((w for w, m in stamps if test(m)), None)
            marks.append("n/a" if at is None or zero is None else f"{at - zero - e['t']:.0f} s")
        kind, t = end.get(server, ("", None))
        done = "n/a" if t is None else f"{'ready' if kind == 'ready' else 'dead'} {t - e['t']:.0f} s"
        rows.append(f"| {server} | {e['t']:.1f} s | {e.get('standby_s', 0):.1f} s | " + " | ".join(marks) +
                    f" | {done} |")
    return "\n".join(rows)


def test_command(out: str | None, workers: str) -> int:
    """Time ``python -m pytest -n WORKERS`` (the README's test command) and print the per-module table."""
    import resource

    with tempfile.TemporaryDirectory() as d:
        junit = Path(d) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-n", workers, "-p", "no:cacheprovider", "--junitxml", str(junit)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall, rc = timed(cmd)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        load = os.getloadavg()[0]
        text = (f"# Test command cost\n\n{time.strftime('%Y-%m-%d %H:%M')} on {platform.node()}, {os.cpu_count()} CPUs, "
                f"load average {load:.1f} at the end\n\n`{' '.join(cmd[1:])}`: **{wall:.0f} s wall**, "
                f"{cpu:.0f} s CPU (it and its children), exit {rc}\n\n"
                f"{per_module_table(junit) if junit.exists() else '(no JUnit XML written)'}\n")
    print(text)
    if out:
        Path(out).write_text(text)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tier", default="auto", choices=["auto", "interpret", "device"])
    p.add_argument("--budgets", default="8,12",
                   help="budgets of the slice for parts 2 and 3 (all: every cell of test_verify.py)")
    p.add_argument("--topology", default="spine", help="topology of the slice for parts 2 and 3")
    p.add_argument("--sweep-workers", default="default",
                   help="comma-separated xdist worker counts to time part 1 with ('default': the sweep's own choice)")
    p.add_argument("--skip-sweep", action="store_true", help="skip part 1 (the full sweep)")
    p.add_argument("--replays", type=int, default=-1,
                   help="run only the first N one-process-per-case replays and scale the time (0: none; default: all)")
    p.add_argument("--e2e", action="store_true", help="also time the e2e smoke tests (tests/e2e, -m e2e) for the ratio")
    p.add_argument("--skip-cpu-tiers", action="store_true", help="skip the interpret cold/warm rows")
    p.add_argument("--static", action="store_true", help="also time the static tier cold and warm (minutes)")
    p.add_argument("--out", help="also write the table here")
    p.add_argument("--test-command", action="store_true",
                   help="time the README's test command (python -m pytest -n WORKERS) and print its per-module table")
    p.add_argument("--workers", default="auto", help="xdist workers for --test-command (default auto)")
    p.add_argument("--from-junit", metavar="FILE", help="print the per-module table of an earlier run's JUnit XML")
    p.add_argument("--from-e2e-log", metavar="PYTEST_LOG",
                   help="print the e2e budget sweep's times to its first dead-budget verdict and its last")
    p.add_argument("--from-e2e-dir", metavar="E2E_DIR",
                   help="print where each server's start went (an e2e session folder: timeline and server logs)")
    args = p.parse_args()
    if args.from_e2e_dir:
        print(e2e_start_table(Path(args.from_e2e_dir)))
        return 0
    if args.from_e2e_log:
        print(e2e_table(Path(args.from_e2e_log)))
        return 0
    if args.from_junit:
        print(per_module_table(Path(args.from_junit)))
        return 0
    if args.test_command:
        return test_command(args.out, args.workers)
    budgets = None if args.budgets == "all" else [int(b) for b in args.budgets.split(",")]
    args.slice = "" if budgets is None else " or ".join(f"b{b}-{args.topology}-" for b in budgets)

    sys.path.insert(0, str(ROOT))
    from ddtree_compat.arch import detect_gpus
    from ddtree_compat.families.verify.records import grid
    from ddtree_compat.tiers import resolve_tier

    gpus = detect_gpus()
    tier = resolve_tier(args.tier, gpus)
    rows: list[tuple[str, str, str]] = []

    if not args.skip_sweep:
        # The verify and commit kernel sweep (graph cells and hypothesis properties included); the static
        # tier is a CPU tier (part 3) and verify attention has its own shape sweep.
        for workers in args.sweep_workers.split(","):
            sweep = [sys.executable, "-m", "ddtree_compat", "sweep", f"--tier={tier}", "--name", "bench",
                     *(["-n", workers] if workers != "default" else [])]
            with tempfile.TemporaryDirectory() as out:
                wall, rc = timed([*sweep, "--out-dir", out, "--", "--ddtree-static=off",
                                  "--ignore=tests/kernels/test_verify_attention.py"])
                cells = result_lines(Path(out) / "bench.jsonl")
            rows.append((f"time-to-verdict: default sweep (verify + commit + graph + properties), workers {workers}",
                         f"{wall:.1f} s", f"{cells} cells, exit {rc}"))
        if args.e2e:
            e2e, rc_e2e = timed([sys.executable, "-m", "pytest", "tests/e2e", "-m", "e2e", "-q", "-p", "no:cacheprovider",
                                 "--ddtree-results="])
            rows.append(("time-to-verdict: e2e smoke tests (real SGLang servers)", f"{e2e:.1f} s",
                         f"kernel sweep is {e2e / max(wall, 1e-9):.1f}x faster, exit {rc_e2e}"))
        else:
            rows.append(("time-to-verdict: e2e smoke tests, ratio", "n/a", "run with --e2e (needs a GPU and SGLang's server)"))

    timed(pytest_cmd(tier, args.slice))  # untimed: warms the Triton and grid caches, so neither timed run pays them
    one, rc1 = timed(pytest_cmd(tier, args.slice))
    contained, rc2 = timed(pytest_cmd(tier, args.slice, "-n", "1", "--max-worker-restart=1000", "--timeout=300",
                                      "--timeout-method=thread"))
    cases = [c for c in grid() if budgets is None or c.budget in budgets and c.topology == args.topology]
    sample = cases[: args.replays] if args.replays >= 0 else cases
    with tempfile.TemporaryDirectory() as d:
        paths = [c.save(d) for c in sample]
        start = time.perf_counter()
        failed = 0
        for path in paths:
            failed += 0 != subprocess.call([sys.executable, "-m", "ddtree_compat", "replay", str(path), "--backend", "sglang-triton",
                             f"--tier={tier}", "--allow-skip"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
        per_case = (time.perf_counter() - start) * len(cases) / max(len(sample), 1)
    rows.append((f"containment: {args.slice or 'every cell'!r} of test_verify.py, one process, warm caches",
                 f"{one:.1f} s", f"exit {rc1}"))
    rows.append(("containment: xdist worker + timeout (the sweep's)", f"{contained:.1f} s",
                 f"{100 * (contained / one - 1):+.0f} % vs one process, exit {rc2}"))
    sampled = f", {len(sample)} run and scaled" if len(sample) < len(cases) else ""
    if sample:
        rows.append((f"containment: one process per case ({len(cases)} sglang-triton replays{sampled})",
                     f"{per_case:.1f} s",
                     f"{per_case / max(one, 1e-9):.1f}x one process (which runs every backend), {failed} replays failed"))
    else:
        rows.append(("containment: one process per case", "not run", "--replays 0"))

    if not args.skip_cpu_tiers:
        cache = tempfile.mkdtemp(prefix="triton-cache-")
        env = {"TRITON_CACHE_DIR": cache}
        cold, _ = timed(pytest_cmd("interpret", args.slice), env)
        warm, _ = timed(pytest_cmd("interpret", args.slice), env)
        rows.append((f"interpret tier {args.slice!r}: cold Triton cache", f"{cold:.1f} s", ""))
        rows.append((f"interpret tier {args.slice!r}: warm", f"{warm:.1f} s", f"{cold / max(warm, 1e-9):.2f}x faster"))
    if args.static:
        static_cache = tempfile.mkdtemp(prefix="ddtree-static-")
        static = [sys.executable, "-m", "pytest", "tests/kernels/test_static.py", "-q", "-p", "no:cacheprovider",
                  "-m", "static", "-n", str(os.cpu_count() or 1), "--ddtree-results=",
                  f"--ddtree-static-cache={static_cache}"]
        cold, rc_c = timed(static)
        warm, rc_w = timed(static)
        rows.append(("static tier (every arch): cold build cache", f"{cold:.1f} s", f"exit {rc_c}"))
        rows.append(("static tier (every arch): warm", f"{warm:.1f} s", f"{cold / max(warm, 1e-9):.2f}x faster, exit {rc_w}"))

    import torch

    gpu = ", ".join(f"{g.name} ({g.arch})" for g in gpus) or "no GPU"
    header = (f"# Suite cost benchmark\n\n{time.strftime('%Y-%m-%d %H:%M')} on {platform.node()}: {gpu}, "
              f"{os.cpu_count()} CPUs, Python {platform.python_version()}, torch {torch.__version__}, tier {tier}\n")
    table = "\n".join(["| measure | time | note |", "|---|---|---|", *(f"| {a} | {b} | {c} |" for a, b, c in rows)])
    text = f"{header}\n{table}\n"
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
