"""What a deployment-shape run (``--profile scale``) cost on its GPU, read from its results file(s): per kernel x
backend, the cells that ran and skipped, the kernel seconds, the wall span of its cells (first start to last finish),
and the largest peak GPU memory a cell recorded (``measured.peak_bytes``: the arena and the kernel's own); and per
file the run's wall span. Prints Markdown tables; never asserts. From the repo root:

    python benchmarks/scale_cost.py docs/results/2026-12-04-sm90-scale-run4.jsonl.gz

The aim: one implementation's envelope in <= 10 minutes of device time. Figures: ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from ddtree_compat.results import read_lines


def _lines(path: str):
    """The file's lines (``.jsonl`` or ``.jsonl.gz``), a torn last line left out."""
    lines, _torn = read_lines(path)
    return (obj for _, obj in lines)


def table(paths: list[str]) -> str:
    rows: dict[tuple[str, str], dict] = defaultdict(lambda: dict(ran=0, skipped=0, kernel_s=0.0, first=None,
                                                                 last=None, peak=0))
    spans = []
    for path in paths:
        starts, ends = [], []
        for d in _lines(path):
            if not str(d.get("kernel", "")).endswith("@scale"):
                continue
            if d.get("kind") == "start":
                starts.append(d["time"])
                continue
            if d.get("kind") != "result":
                continue
            ends.append(d["time"])
            r = rows[(d["kernel"].partition("@")[0], d["backend"])]
            r["ran" if d["outcome"] != "skip" else "skipped"] += 1
            r["kernel_s"] += d.get("duration_s") or 0.0
            r["peak"] = max(r["peak"], (d.get("measured") or {}).get("peak_bytes") or 0)
        if starts and ends:
            spans.append((path, len(ends), max(ends) - min(starts)))
    out = ["| kernel | backend | cells run | skipped | kernel s | peak GPU memory (GiB) |", "|---|---|---|---|---|---|"]
    for (kernel, backend), r in sorted(rows.items()):
        out.append(f"| {kernel} | {backend} | {r['ran']} | {r['skipped']} | {r['kernel_s']:.1f} | "
                   f"{r['peak'] / 2 ** 30:.1f} |")
    out += ["", "| results file | cells | wall span of the cells (s) |", "|---|---|---|"]
    out += [f"| `{p}` | {n} | {s:.0f} |" for p, n, s in spans]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="results JSONL files (.jsonl or .jsonl.gz) of scale runs")
    args = parser.parse_args(argv)
    print(table(args.results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
