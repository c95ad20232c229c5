"""Heatmap PNG: the worst status per budget x topology, one panel per backend x arch.

Rows of panels are backends (``backend:kernel`` for kernels other than verify), columns arches (``interpret`` last). In a panel, x is the budget ``B``, y
the topology; a square aggregates every case with that budget and topology (plants, batch sizes,
layouts, block sizes) and takes the colour of its worst status (order
:data:`ddtree_compat.outcomes.WORST_FIRST`). Its label is the number of cases, or ``k/n`` when
only ``k`` of the ``n`` have that worst status. White squares have no case (the grid has none there,
e.g. only the spine exists at ``B = 0``). A dashed line separates SGLang's spine mode from tree mode
where the budgets split cleanly. Rendered with matplotlib's Agg canvas (no display needed).
"""

from __future__ import annotations

import io
import os
from collections import Counter

import numpy as np

from ..arch import parse_arch
from ..results import ResultRecord, Results
from ..tiers import E2E, STATIC
from ..topologies import TOPOLOGIES
from ..outcomes import WORST_FIRST
from .summary import backend_kernel, cell_status, worst

# Status -> (colour, legend label). Failures warm and dark, known issues yellow, fixed blue.
STYLE: dict[str, tuple[str, str]] = {
    "pass": ("#1a9850", "pass"),
    "skip": ("#cfcfcf", "skip"),
    "xfail": ("#fee08b", "known issue (xfail)"),
    "xpass": ("#4575b4", "known issue passed (xpass)"),
    "wrong": ("#f99157", "wrong"),
    "zero-accept": ("#d73027", "zero-accept"),
    "fault": ("#5e0b2b", "fault"),
}
LEGEND_ORDER = ("pass", "skip", "xfail", "xpass", "wrong", "zero-accept", "fault")


def _arch_key(arch: str) -> tuple:
    return (1, 0, 0) if arch == "interpret" else (0, *parse_arch(arch))


def _topology_key(name: str) -> tuple:
    order = list(TOPOLOGIES)
    return (order.index(name), name) if name in order else (len(order), name)


def _dark(hex_colour: str) -> bool:
    r, g, b = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b < 0.55


def _mode_split(records: list[ResultRecord], budgets: list[int]) -> float | None:
    """x position between the last spine-only and the first tree-only budget, if they split cleanly."""
    modes = [{r.mode for r in records if r.budget == b} for b in budgets]
    for i in range(1, len(budgets)):
        if all(m == {"spine"} for m in modes[:i]) and all(m == {"tree"} for m in modes[i:]):
            return i - 0.5
    return None


def _panel(ax, records: list[ResultRecord], budgets: list[int], topologies: list[str], title: str) -> None:
    from matplotlib.colors import ListedColormap

    cells: dict[tuple[int, str], Counter] = {}
    for r in records:
        cells.setdefault((r.budget, r.topology), Counter())[cell_status(r)] += 1
    index = np.full((len(topologies), len(budgets)), np.nan)
    for (budget, topology), counts in cells.items():
        index[topologies.index(topology), budgets.index(budget)] = LEGEND_ORDER.index(worst(counts))
    cmap = ListedColormap([STYLE[s][0] for s in LEGEND_ORDER]).with_extremes(bad="white")
    ax.imshow(np.ma.masked_invalid(index), cmap=cmap, vmin=-0.5, vmax=len(LEGEND_ORDER) - 0.5, aspect="auto",
              interpolation="nearest")
    for (budget, topology), counts in cells.items():
        status, n = worst(counts), sum(counts.values())
        label = str(n) if counts[status] == n else f"{counts[status]}/{n}"
        ax.text(budgets.index(budget), topologies.index(topology), label, ha="center", va="center", fontsize=7.5,
                color="white" if _dark(STYLE[status][0]) else "black")
    ax.set_xticks(range(len(budgets)), [str(b) for b in budgets], fontsize=8)
    ax.set_yticks(range(len(topologies)), topologies, fontsize=8)
    ax.set_xticks(np.arange(-0.5, len(budgets)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(topologies)), minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("budget B (drafted nodes)", fontsize=8)
    split = _mode_split(records, budgets)
    if split is not None:
        ax.axvline(split, color="#333333", linestyle="--", linewidth=1.2)
        ax.text(split - 0.1, -0.62, "spine mode ◀", ha="right", va="bottom", fontsize=7, color="#333333")
        ax.text(split + 0.1, -0.62, "▶ tree mode", ha="left", va="bottom", fontsize=7, color="#333333")
    totals = Counter(cell_status(r) for r in records)
    counts = ", ".join(f"{totals[s]} {s}" for s in WORST_FIRST if totals[s])
    ax.set_title(f"{title}  ({len(records)} cases: {counts})", fontsize=9.5, loc="left",
                 pad=20 if split is not None else 6, fontweight="bold")


def render_heatmap(results: Results, path: str | os.PathLike | None = None, title: str = "") -> bytes:
    """Draw the heatmap of ``results``; write it to ``path`` if given; return the PNG bytes.

    Raises:
        ValueError: ``results`` has no result lines.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    recs = [r for r in results.records if r.tier not in (STATIC, E2E)]  # tabulated, not mapped
    if not recs:
        raise ValueError("no kernel-run result lines to draw (static and e2e cells are tabulated, not mapped)")
    backends = sorted({backend_kernel(r) for r in recs})
    arches = sorted({r.arch for r in recs}, key=_arch_key)
    budgets = sorted({r.budget for r in recs})
    topologies = sorted({r.topology for r in recs}, key=_topology_key)
    pw, ph = max(6.5, 0.46 * len(budgets) + 2.0), 0.36 * len(topologies) + 1.3
    fig = Figure(figsize=(pw * len(arches), ph * len(backends) + 1.2), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(backends), len(arches), squeeze=False)
    for i, backend in enumerate(backends):
        for j, arch in enumerate(arches):
            panel = [r for r in recs if backend_kernel(r) == backend and r.arch == arch]
            if panel:
                _panel(axes[i][j], panel, budgets, topologies, f"{backend} · {arch}")
            else:
                axes[i][j].set_axis_off()
    fig.suptitle(title or "DDTree kernels: worst outcome per budget x topology", fontsize=12,
                 fontweight="bold")
    handles = [Patch(facecolor=STYLE[s][0], edgecolor="#888888", label=STYLE[s][1]) for s in LEGEND_ORDER]
    handles.append(Patch(facecolor="white", edgecolor="#888888", label="no case"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False,
               title="a square aggregates plants, batch sizes and layouts; its label counts cases "
                     "(k/n: k of the n cases have the colour's outcome)", title_fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    png = buf.getvalue()
    if path is not None:
        with open(path, "wb") as f:
            f.write(png)
    return png
