"""How long ``python -m ddtree_compat preflight`` takes to answer, per serving configuration: once cold (an empty
static-build and Triton cache) and once warm (the same cache again), with the cells it planned and ran and its
answer. The issue's targets: on a GPU at most 3 minutes cold and 60 s warm; on a 2-core CPU box with
``--arch sm120`` at most 90 s cold.

Prints a Markdown table; never asserts. From the repo root:

    python benchmarks/preflight.py --arch sm120                       # a CPU box: the serving card named
    python benchmarks/preflight.py --config eagle-flashinfer --ddtree-impl PATH

Configurations (``--config``, repeatable; default: every one this SGLang can read): the field's model
(``tests/unit/fixtures/models/qwen3.6-27b``: Qwen3.6-27B's ``config.json``, hybrid, vocabulary 248320) at
``--max-running-requests 256`` under

* ``eagle-flashinfer``: EAGLE, 9 draft tokens (budget 8), top-k 4, FlashInfer: the installed release's drafter;
* ``eagle-triton``: the same on SGLang's Triton attention (its verify attention runs on a CPU, interpreted);
* ``ddtree-b8`` / ``ddtree-b12`` / ``ddtree-b15``: DDTREE at block size 16, FlashInfer (the field's launch
  flags; a DDTree build through ``--ddtree-impl`` or ``DDTREE_IMPLS``).

The host load is printed with the table: on a shared box the wall times are the box's, not the command's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "unit" / "fixtures" / "models" / "qwen3.6-27b"
FIELD = ["--max-running-requests", "256", "--speculative-draft-model-path", str(MODEL)]
DDTREE = ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-block-size", "16",
          "--attention-backend", "flashinfer"]
CONFIGS = {
    "eagle-flashinfer": ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
                         "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "9",
                         "--attention-backend", "flashinfer"],
    "eagle-triton": ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "9",
                     "--attention-backend", "triton"],
    "ddtree-b8": DDTREE + ["--speculative-ddtree-budget", "8"],
    "ddtree-b12": DDTREE + ["--speculative-ddtree-budget", "12"],
    "ddtree-b15": DDTREE + ["--speculative-ddtree-budget", "15"],
}
VERDICT = re.compile(r"^(PASS|FAIL|NOT CHECKED)\s{2,}")


def preflight(name: str, arch: str | None, out_dir: Path, cache: Path, impl: str | None, workers: str | None):
    """One run: ``(wall seconds, exit status, verdict lines, results file or None, last output line)``."""
    cmd = [sys.executable, "-m", "ddtree_compat", "preflight", "--out-dir", str(out_dir)]
    cmd += ["--arch", arch] if arch else []
    cmd += ["--ddtree-impl", impl] if impl else []
    cmd += ["--workers", workers] if workers else []
    cmd += ["--", "--model-path", str(MODEL), *CONFIGS[name], *FIELD]
    env = dict(os.environ, DDTREE_STATIC_CACHE=str(cache), TRITON_CACHE_DIR=str(cache / "triton"))
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - start
    lines = (done.stdout + done.stderr).strip().splitlines()
    verdicts = [m.group(1) for m in map(VERDICT.match, lines) if m]
    found = [ln.split("results: ", 1)[1].split(" ", 1)[0] for ln in lines if ln.startswith("results: ")]
    return wall, done.returncode, verdicts, Path(found[0]) if found else None, lines[-1] if lines else ""


def cells(results: Path | None) -> tuple[int, int]:
    """``(planned, run)``: the result lines of the file (the sweep's selected cells and preflight's own), and those
    that ran (not a skip)."""
    if results is None or not results.exists():
        return 0, 0
    planned = ran = 0
    for line in results.read_text().splitlines():
        row = json.loads(line)
        if row.get("kind") == "result":
            planned += 1
            ran += row.get("outcome") != "skip"
    return planned, ran


def summary(status: int, verdicts: list[str], last: str) -> str:
    if not verdicts:
        return f"exit {status}: {last[:120]}"
    counts = {v: verdicts.count(v) for v in ("PASS", "FAIL", "NOT CHECKED") if v in verdicts}
    return f"exit {status}: " + ", ".join(f"{n} {v}" for v, n in counts.items())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", help="the serving card's arch on a host without it (sm120)")
    p.add_argument("--config", action="append", choices=sorted(CONFIGS), help="repeatable; default: every one")
    p.add_argument("--ddtree-impl", help="a DDTree build (else DDTREE_IMPLS); without one the ddtree-* rows need an "
                                         "SGLang with DDTREE")
    p.add_argument("--workers", help="the sweep's -n (default: the sweep's)")
    p.add_argument("--keep", help="keep the results files in this folder (default: a temporary one)")
    args = p.parse_args(argv)
    names = args.config or list(CONFIGS)
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ddtree-preflight-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs; load "
          f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())}; arch {args.arch or 'this GPU'}\n")
    print("| configuration | arch | cold wall s | warm wall s | cells planned / run | verdict |")
    print("|---|---|---|---|---|---|")
    for name in names:
        cache = Path(tempfile.mkdtemp(prefix="ddtree-preflight-cache-"))
        try:
            cold = preflight(name, args.arch, out / name, cache, args.ddtree_impl, args.workers)
            warm = preflight(name, args.arch, out / name, cache, args.ddtree_impl, args.workers) \
                if cold[3] is not None else None
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        planned, ran = cells(cold[3])
        print(f"| {name} | {args.arch or 'this GPU'} | {cold[0]:.0f} | "
              f"{f'{warm[0]:.0f}' if warm else '-'} | {planned} / {ran} | {summary(cold[1], cold[2], cold[4])} |",
              flush=True)
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
