"""What importing a module costs a fresh interpreter here: once alone, again, and ``--at-once N`` fresh
interpreters importing it together (an e2e wave of SGLang servers, a sweep's workers), each with and without
bytecode (``--source-only`` points ``PYTHONPYCACHEPREFIX`` at an empty folder, so nothing compiled is found and
nothing is written: what a host with ``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` pays).

Prints a Markdown table; never asserts. From the repo root, in the servers' environment:

    python benchmarks/import_cost.py sglang.srt.entrypoints.http_server --at-once 13 --source-only

On the H200, 2026-12-02 (``docs/benchmarks.md``): the SGLang server's HTTP import took
34 s from source and 12 s with bytecode, alone; 36-39 s and 11-14 s each with 13 at once.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

TIMER = "import time, sys; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"


def start(module: str, env: dict[str, str]) -> subprocess.Popen:
    """A fresh interpreter importing ``module``; it prints the import's seconds."""
    return subprocess.Popen([sys.executable, "-c", TIMER.format(module=module)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def seconds(proc: subprocess.Popen) -> float | None:
    """The seconds ``proc`` printed (``None`` when its import failed; its error goes to stderr here)."""
    out, err = proc.communicate()
    if proc.returncode != 0:
        sys.stderr.write(err[-2000:])
        return None
    return float(out.strip().splitlines()[-1])


def measure(module: str, at_once: int, env: dict[str, str]) -> list[tuple[str, str]]:
    """Rows: alone, alone again, and ``at_once`` together (min-max)."""
    rows = []
    for label in ("alone", "alone, again"):
        took = seconds(start(module, env))
        rows.append((label, "failed" if took is None else f"{took:.2f} s"))
    if at_once > 1:
        took = [seconds(p) for p in [start(module, env) for _ in range(at_once)]]
        ok = [t for t in took if t is not None]
        rows.append((f"{at_once} at once, each", f"{min(ok):.2f}-{max(ok):.2f} s" if ok else "failed"))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("module", help="the module to import (e.g. sglang.srt.entrypoints.http_server)")
    p.add_argument("--at-once", type=int, default=1, metavar="N", help="also N interpreters importing it together")
    p.add_argument("--source-only", action="store_true", help="also time it with no bytecode found or written")
    args = p.parse_args(argv)
    table = [("bytecode as installed", *row) for row in measure(args.module, args.at_once, dict(os.environ))]
    if args.source_only:
        with tempfile.TemporaryDirectory() as empty:
            env = {**os.environ, "PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"}
            table += [("source only", *row) for row in measure(args.module, args.at_once, env)]
    print(f"# Import cost of `{args.module}`\n\n{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, Python "
          f"{sys.version.split()[0]}, PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}\n")
    print("| bytecode | run | import |\n|---|---|---:|")
    for row in table:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
