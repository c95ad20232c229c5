"""Markdown report of a results set: environment, counts, skips by reason, the matrix, failures.

Matrix rows are ``budget x topology x layout`` (``exact``, or ``cap16``: buffers padded to capacity 16); columns ``backend x arch`` (``interpret`` for the CPU
interpreter). A cell aggregates its plants and batch sizes: ``✅ 15`` when all 15 passed, otherwise
the count of each outcome, worst first.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from .harness import OUTCOMES
from .results import ResultRecord, Results

WORST_FIRST = ("fault", "zero-accept", "wrong", "skip", "pass")


def _column(r: ResultRecord) -> str:
    return f"{r.backend} · {r.arch}"


def _cell(counts: Counter) -> str:
    total = sum(counts.values())
    if counts["pass"] == total:
        return f"✅ {total}"
    if counts["skip"] == total:
        return "⏭ skip"
    parts = [f"{counts[o]} {o}" for o in WORST_FIRST if counts[o]]
    mark = "❌" if counts["fault"] or counts["zero-accept"] or counts["wrong"] else "⚠"
    return f"{mark} " + ", ".join(parts)


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


def render_markdown(results: Results, title: str = "DDTree compatibility matrix", max_failures: int = 40) -> str:
    """Render ``results`` as one Markdown document (fit for a CI step summary)."""
    recs = results.records
    lines = [f"# {title}", ""]
    lines += ["## Environment", ""]
    env_rows = []
    for env_id, e in results.envs.items():
        gpus = ", ".join(f"{g['name']} ({g['arch']}, cc {g['cc']})" for g in e.get("gpus", [])) or "none"
        env_rows.append([env_id, *(e.get(k) or "-" for k in ("tier",)), gpus,
                         *(e.get(k) or "-" for k in ("driver", "cuda", "torch", "triton", "sglang", "host", "started"))])
    lines += _table(["env", "tier", "GPUs", "driver", "CUDA", "torch", "triton", "sglang", "host", "started"],
                    env_rows) + [""]

    columns = sorted({_column(r) for r in recs})
    by_col: dict[str, Counter] = defaultdict(Counter)
    for r in recs:
        by_col[_column(r)][r.outcome] += 1
    lines += ["## Counts", ""]
    count_rows = [[c, *(by_col[c][o] for o in OUTCOMES), sum(by_col[c].values())] for c in columns]
    total = Counter(r.outcome for r in recs)
    count_rows.append(["**all**", *(total[o] for o in OUTCOMES), len(recs)])
    lines += _table(["backend · arch", *OUTCOMES, "cells"], count_rows) + [""]

    skips = Counter((_column(r), r.message) for r in recs if r.outcome == "skip")
    if skips:
        lines += ["## Skips by reason", ""]
        lines += _table(["backend · arch", "reason", "cells"], [[c, m, n] for (c, m), n in sorted(skips.items())])
        lines += [""]

    faults = Counter((_column(r), r.fault_class) for r in recs if r.outcome == "fault")
    if faults:
        lines += ["## Faults by class", ""]
        lines += _table(["backend · arch", "class", "cells"], [[c, f, n] for (c, f), n in sorted(faults.items())])
        lines += [""]

    lines += ["## Matrix", "",
              "Rows: budget x topology x layout (`exact`: buffers of D = B + 1 node slots per request; `capC`: "
              "padded to capacity C, as for a CUDA graph captured at C). SGLang mode: `spine` when "
              "B <= block_size - 1 (the spine topology exists only there), else `tree`. A cell aggregates "
              "plants and batch sizes.", ""]
    cells: dict[tuple, Counter] = defaultdict(Counter)
    for r in recs:
        cells[(r.budget, r.topology, r.layout, _column(r))][r.outcome] += 1
    row_keys = sorted({(r.budget, r.topology, r.layout, r.mode) for r in recs})
    rows = []
    for budget, topology, layout, mode in row_keys:
        key = (budget, topology, layout)
        rows.append([budget, topology, layout, mode, *(_cell(cells[(*key, c)]) if cells[(*key, c)] else "" for c in columns)])
    lines += _table(["budget", "topology", "layout", "SGLang mode", *columns], rows) + [""]

    bad = [r for r in recs if r.outcome in ("wrong", "zero-accept", "fault")]
    lines += [f"## Failures ({len(bad)})", ""]
    for r in bad[:max_failures]:
        replay = f"`python -m ddtree_compat replay {r.case_path} --backend {r.backend}`" if r.case_path else ""
        lines.append(f"- **{r.outcome}** `{r.nodeid or r.case_id}` ({_column(r)}): {r.message[:400]} {replay}")
    if len(bad) > max_failures:
        lines.append(f"- ... and {len(bad) - max_failures} more")
    if not bad:
        lines.append("None.")
    return "\n".join(lines) + "\n"
