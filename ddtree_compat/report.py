"""Markdown report of a results set: environment, counts, skips by reason, the matrix, failures.

Matrix rows are ``budget x topology x layout`` (``exact``, or ``cap16``: buffers padded to capacity 16); columns ``backend x arch`` (``interpret`` for the CPU
interpreter). A cell aggregates its plants and batch sizes: ``✅ 15`` when all 15 passed, otherwise
the count of each outcome, worst first. Static-tier cells (AOT compiles) get their own table: rows
``backend x kernel x specialization``, columns the compile targets; their counts columns read
``backend · arch · static``.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from .harness import OUTCOMES
from .results import ResultRecord, Results
from .tiers import STATIC

WORST_FIRST = ("fault", "zero-accept", "wrong", "skip", "pass")


def _column(r: ResultRecord) -> str:
    return f"{r.backend} · {r.arch}" + (f" · {STATIC}" if r.tier == STATIC else "")


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


def _natural(key: tuple) -> list:
    """Sort key reading digit runs as numbers (``bs3-w9-c9`` before ``bs3-w16-c16``)."""
    return [int(t) if t.isdigit() else t for part in key for t in re.split(r"(\d+)", str(part))]


def _static_table(recs: list[ResultRecord]) -> list[str]:
    """Rows ``backend x kernel x specialization``, columns the compile targets in arch order."""
    if not recs:
        return []
    archs = sorted({r.arch for r in recs}, key=lambda a: (len(a), a))
    cells: dict[tuple, Counter] = defaultdict(Counter)
    for r in recs:
        cells[(r.backend, r.kernel, r.case_id, r.arch)][r.outcome] += 1
    rows = []
    for backend, kernel, case_id in sorted({(r.backend, r.kernel, r.case_id) for r in recs}, key=_natural):
        rows.append([backend, kernel, case_id,
                     *(_cell(cells[(backend, kernel, case_id, a)]) if cells[(backend, kernel, case_id, a)] else ""
                       for a in archs)])
    head = "## Static tier (AOT compile per arch: resources and SASS; rows: backend x kernel x specialization)"
    return [head, ""] + _table(["backend", "kernel", "specialization", *archs], rows) + [""]


def render_markdown(results: Results, title: str = "DDTree compatibility matrix", max_failures: int = 40) -> str:
    """Render ``results`` as one Markdown document (fit for a CI step summary)."""
    recs = results.records
    lines = [f"# {title}", ""]
    lines += ["## Environment", ""]
    env_rows = []
    for env_id, e in results.envs.items():
        gpus = ", ".join(f"{g['name']} ({g['arch']}, cc {g['cc']})" for g in e.get("gpus", [])) or "none"
        env_rows.append([env_id, e.get("tier"), gpus, e.get("driver"), e.get("cuda"), e.get("torch"),
                         e.get("triton"), e.get("sglang"), e.get("host"), e.get("started")])
    lines += _table(["env", "tier", "GPUs", "driver", "CUDA", "torch", "triton", "sglang", "host", "started"],
                    env_rows) + [""]

    columns = sorted({_column(r) for r in recs}, key=lambda c: _natural((c,)))
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

    verify = [r for r in recs if r.tier != STATIC]
    verify_columns = [c for c in columns if not c.endswith(f" · {STATIC}")]
    lines += ["## Matrix (rows: budget x topology; cells aggregate plants and batch sizes)", ""]
    cells: dict[tuple, Counter] = defaultdict(Counter)
    for r in verify:
        cells[(r.budget, r.topology, r.layout, _column(r))][r.outcome] += 1
    row_keys = sorted({(r.budget, r.topology, r.layout, r.mode) for r in verify})
    rows = []
    for budget, topology, layout, mode in row_keys:
        key = (budget, topology, layout)
        rows.append([budget, topology, layout, mode,
                     *(_cell(cells[(*key, c)]) if cells[(*key, c)] else "" for c in verify_columns)])
    lines += _table(["budget", "topology", "layout", "SGLang mode", *verify_columns], rows) + [""]
    lines += _static_table([r for r in recs if r.tier == STATIC])

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
