"""The summary picture (PNG): which budget x topology cells fail on which arch, kernel and backend, in one
image whose size does not grow with the profile.

One panel per report table whose cells have a budget and a topology (:func:`.summary.table_of`:
``matrix``, SGLang's verify and commit kernels; ``ddtree``, the DDTree implementations' kernels, topology
``ddtree-<logits>``). In a panel:

* a row per arch x kernel x backend (a bold header row per arch; ``interpret`` last), kernels in registry
  order; on the right, the row's cells and its non-pass counts;
* a column per topology x budget: the topologies left to right (:data:`ddtree_compat.families.verify.topologies.TOPOLOGIES`
  order, ``custom`` last: property-test trees), inside each the budgets with a cell; a dotted line where
  SGLang's spine mode gives way to tree mode, when the budgets split cleanly;
* a square's colour: the worst status of its cells (plants, batch sizes, layouts, block sizes; order
  :data:`ddtree_compat.outcomes.WORST_FIRST`); white: no cell.

Rows are bounded by records x backends x arches and columns by topologies x budgets, so the default profile
and the full one (22 budgets, 3 block sizes, batch 64) give pictures of about the same size. Verify-attention
cells are tabulated by shape and tile choice instead (no budget axis of their own); static and e2e cells
by arch. Drawn with matplotlib's Agg canvas (no display needed).
"""

from __future__ import annotations

import io
import os
import textwrap
from collections import Counter, defaultdict

import numpy as np

from ..results import ResultRecord, Results
from ..families.ddtree.records import LOGITS
from ..families.verify.topologies import TOPOLOGIES
from .coverage import NOT_TESTED, report_title, sources, untested
from .summary import arch_key, cell_status, kernel_key, parts, summarize, table_of, worst


# Status -> (colour, legend label). Failures warm and dark, known issues yellow, fixed blue.
STYLE: dict[str, tuple[str, str]] = {
    "pass": ("#1a9850", "pass"),
    "skip": ("#cfcfcf", "skip"),
    "xfail": ("#fee08b", "known issue (xfail)"),
    "xpass": ("#4575b4", "known issue passed (xpass)"),
    "wrong": ("#f99157", "wrong"),
    "zero-accept": ("#d73027", "zero-accept"),
    "error": ("#9e7bb5", "error (the suite's)"),
    "fault": ("#5e0b2b", "fault"),
}
LEGEND_ORDER = ("pass", "skip", "xfail", "xpass", "wrong", "zero-accept", "error", "fault")
PICTURED = ("matrix", "ddtree")
TITLES = {"matrix": "SGLang verify and commit kernels", "ddtree": "DDTree implementations' kernels"}

CELL_W, CELL_H = 0.105, 0.17  # inches per square
LABEL_W, RIGHT_W = 3.3, 2.3  # inches for the row labels and the counts on the right
MIN_W = 9.5  # inches: room for the titles of a run with few budgets
DPI = 100


def _topology_key(name: str) -> tuple:
    """The verify grid's topologies in :data:`TOPOLOGIES` order, the DDTree kernels' ``ddtree-<logits>`` in
    :data:`~ddtree_compat.families.ddtree.records.LOGITS` order, ``custom`` (property-test trees) last."""
    ddtree = [f"ddtree-{lg}" for lg in LOGITS]
    for group, order in enumerate((list(TOPOLOGIES), ddtree)):
        if name in order:
            return (group, order.index(name), name)
    return (3 if name == "custom" else 2, 0, name)


def _columns(records: list[ResultRecord]) -> list[tuple[str, int]]:
    """``(topology, budget)`` columns, grouped by topology."""
    return sorted({(r.topology, r.budget) for r in records}, key=lambda c: (_topology_key(c[0]), c[1]))


def _rows(records: list[ResultRecord]) -> list[tuple[str, str, str]]:
    """``(arch, kernel, backend)`` rows, arches in :func:`arch_key` order, kernels in registry order."""
    return sorted({(r.arch, r.kernel, r.backend) for r in records},
                  key=lambda k: (arch_key(k[0]), kernel_key(k[1]), k[2]))


def _splits(records: list[ResultRecord], columns: list[tuple[str, int]]) -> list[float]:
    """x positions between the last spine-only and the first tree-only budget of each topology, where
    its budgets split cleanly."""
    modes: dict[tuple[str, int], set] = defaultdict(set)
    for r in records:
        modes[(r.topology, r.budget)].add(r.mode)
    out = []
    for topology in dict.fromkeys(t for t, _ in columns):
        xs = [i for i, c in enumerate(columns) if c[0] == topology]
        seen = [modes[columns[i]] for i in xs]
        for k in range(1, len(xs)):
            if all(m == {"spine"} for m in seen[:k]) and all(m == {"tree"} for m in seen[k:]):
                out.append(xs[k] - 0.5)
    return out


def _panel(ax, records: list[ResultRecord], table: str) -> None:
    from matplotlib.colors import ListedColormap

    columns, rows = _columns(records), _rows(records)
    squares: dict[tuple, Counter] = defaultdict(Counter)
    per_row: dict[tuple, Counter] = defaultdict(Counter)
    for r in records:
        squares[((r.arch, r.kernel, r.backend), (r.topology, r.budget))][cell_status(r)] += 1
        per_row[(r.arch, r.kernel, r.backend)][cell_status(r)] += 1
    lines: list[tuple | str] = []  # an arch header (str) or a row key
    for row in rows:  # sorted by arch: a header before each arch's first row
        if not lines or lines[-1][0] != row[0]:
            lines.append(row[0])
        lines.append(row)
    index = np.full((len(lines), len(columns)), np.nan)
    col_of = {c: j for j, c in enumerate(columns)}
    line_of = {x: i for i, x in enumerate(lines)}
    for (row, col), counts in squares.items():
        index[line_of[row], col_of[col]] = LEGEND_ORDER.index(worst(counts))
    cmap = ListedColormap([STYLE[s][0] for s in LEGEND_ORDER]).with_extremes(bad="white")
    ax.imshow(np.ma.masked_invalid(index), cmap=cmap, vmin=-0.5, vmax=len(LEGEND_ORDER) - 0.5, aspect="auto",
              interpolation="nearest")
    # grid lines between squares, heavier between topologies and before each arch header
    ax.set_xticks(np.arange(-0.5, len(columns)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(lines)), minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6)
    ax.tick_params(which="minor", length=0)
    starts = [j for j, c in enumerate(columns) if j == 0 or columns[j - 1][0] != c[0]]
    for j in starts[1:]:
        ax.axvline(j - 0.5, color="#444444", linewidth=1.0)
    for x in _splits(records, columns):
        ax.axvline(x, color="#444444", linewidth=0.8, linestyle=":")
    for i, x in enumerate(lines):
        if isinstance(x, str) and i:
            ax.axhline(i - 0.5, color="#444444", linewidth=1.0)
    ax.set_xticks(range(len(columns)), [str(b) for _, b in columns], fontsize=5.5, rotation=90)
    ax.set_yticks(range(len(lines)), [x if isinstance(x, str) else f"{x[1]} · {x[2]}" for x in lines], fontsize=7)
    for label, x in zip(ax.get_yticklabels(), lines):
        if isinstance(x, str):
            label.set_fontweight("bold")
            label.set_fontsize(8)
    for j in starts:  # topology names above their budgets
        end = next((k for k in starts if k > j), len(columns))
        ax.annotate(columns[j][0], xy=((j + end - 1) / 2, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=7, annotation_clip=False)
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks(range(len(lines)), ["" if isinstance(x, str) else _row_counts(per_row[x]) for x in lines],
                     fontsize=6.5)
    right.tick_params(length=0)
    for label, x in zip(right.get_yticklabels(), lines):
        if not isinstance(x, str) and any(per_row[x][s] for s in ("fault", "error", "zero-accept", "wrong", "xpass")):
            label.set_color("#b2182b")
            label.set_fontweight("bold")
    total = Counter(cell_status(r) for r in records)
    ax.set_title(f"{TITLES.get(table, table)}: {len(records)} cells ({parts(total)})", fontsize=9, loc="left",
                 pad=14, fontweight="bold")
    ax.set_xlabel("budget B (drafted nodes), per topology", fontsize=7)


def _row_counts(counts: Counter) -> str:
    """``1145 pass`` when all passed, else each status worst first: ``16 zero-accept, 1129 pass``."""
    n = sum(counts.values())
    if counts["pass"] == n:
        return f"{n} pass"
    return parts(counts)


def pictured(results: Results) -> dict[str, list[ResultRecord]]:
    """The records each panel draws, by table (those with a budget and a topology)."""
    out: dict[str, list[ResultRecord]] = {}
    for r in results.records:
        table = table_of(r)
        if table in PICTURED and r.budget is not None and r.topology:
            out.setdefault(table, []).append(r)
    return {t: out[t] for t in PICTURED if t in out}


UNDRAWN = {"static": "static", "attention": "verify-attention", "scale": "deployment-shape", "e2e": "e2e"}
"""The words for the tables whose cells the picture leaves to the report (others: ``other``)."""


def undrawn_kinds(results: Results, panels: dict[str, list[ResultRecord]]) -> str:
    """Which kinds of cell the picture leaves out, in the report's table order: ``static and e2e``,
    ``static, verify-attention and deployment-shape`` (``""``: none)."""
    drawn = {id(r) for recs in panels.values() for r in recs}
    tables = {table_of(r) for r in results.records if id(r) not in drawn}
    order = [*UNDRAWN, *sorted(tables - set(UNDRAWN))]
    words = list(dict.fromkeys(UNDRAWN.get(t, "other") for t in order if t in tables))
    return " and ".join(filter(None, [", ".join(words[:-1]), *words[-1:]]))


def _title(results: Results) -> str:
    """The picture's title, as the report's: what was tested, the results file(s), what was not tested (names;
    the report says why), a partial run."""
    s = summarize(results)
    lines = [report_title(s), "worst outcome per budget x topology, by arch, kernel and backend"
             + (f" · from {sources(results)}" if results.sources else "")]
    missing = [u.subject if u.verdict == NOT_TESTED else f"{u.subject}: {u.verdict}" for u in untested(s)]
    if missing:
        lines.append(f"not tested: {', '.join(missing)} (the report says why)")
    if results.partial:
        lines.append(f"partial run: {results.done:,} of {results.planned:,} cells")
    return "\n".join(lines)


def render_summary(results: Results, path: str | os.PathLike | None = None, title: str | None = None) -> bytes:
    """Draw the summary picture of ``results``; write it to ``path`` if given; return the PNG bytes. ``title``:
    default, the report's (what was tested, the results file, what was not tested, a partial run).

    Raises:
        ValueError: no cell with a budget and a topology (only static, e2e or verify-attention cells).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    panels = pictured(results)
    if not panels:
        raise ValueError("no kernel cell with a budget and a topology to draw (static, e2e and verify-attention "
                         "cells are tabulated)")
    sizes = [(len(_columns(recs)), len(_rows(recs)) + len({r.arch for r in recs})) for recs in panels.values()]
    width = max(LABEL_W + RIGHT_W + CELL_W * max(c for c, _ in sizes), MIN_W)
    heights = [CELL_H * n + 1.2 for _, n in sizes]
    fig = Figure(figsize=(width, sum(heights) + 1.1), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=heights)
    for ax, (table, recs) in zip(axes[:, 0], panels.items()):
        _panel(ax, recs, table)
    title = title if title is not None else _title(results)
    drawn = sum(map(len, panels.values()))
    if drawn < len(results.records):  # the report's totals count every cell: say which part is drawn
        title += (f"\n{drawn} of the {len(results.records)} cells drawn (those with a budget and a topology; the "
                  f"{undrawn_kinds(results, panels)} cells are in the report's tables)")
    chars = int(width * DPI / 8.5)  # a bold 11 pt character (15 px at 100 dpi) is about 8.5 px wide on average
    fig.suptitle("\n".join(textwrap.fill(line, chars) for line in title.splitlines()), fontsize=11, fontweight="bold")
    shown = {cell_status(r) for recs in panels.values() for r in recs}
    handles = [Patch(facecolor=STYLE[s][0], edgecolor="#888888", label=STYLE[s][1])
               for s in LEGEND_ORDER if s in shown or s in ("pass", "skip")]
    handles.append(Patch(facecolor="white", edgecolor="#888888", label="no cell"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=7, frameon=False,
               title="a square: the worst status of its cells (plants, batch sizes, layouts, block sizes)",
               title_fontsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    png = buf.getvalue()
    if path is not None:
        with open(path, "wb") as f:
            f.write(png)
    return png


def render_envelope(results: Results) -> bytes:
    """The envelope picture: per kernel (a panel), for each backend · arch x shape, a bar to the largest batch verified
    correct and a red mark at the first failing batch (log scale). PNG bytes.

    Raises:
        ValueError: no deployment-shape cell in ``results``.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..families.scale.envelope import envelopes

    found = envelopes(results.records)
    if not any(e.cells for e in found):
        raise ValueError("no deployment-shape cell ran: nothing to draw")
    kernels = sorted({e.kernel for e in found})
    fig = Figure(figsize=(12, 2.2 + 1.1 * sum(len([e for e in found if e.kernel == k]) ** 0.5 for k in kernels) * 1.5),
                 dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(kernels), 1, squeeze=False)
    for ax, kernel in zip(axes[:, 0], kernels):
        rows = [e for e in found if e.kernel == kernel]
        labels = [f"{e.backend} · {e.arch} · {e.group}" for e in rows]
        y = np.arange(len(rows))
        shown = [(i, e.verified) for i, e in enumerate(rows) if e.verified]
        if shown:
            ax.barh([i for i, _ in shown], [v for _, v in shown], color="#3a9d5d", label="largest batch verified")
        clean = [(e.tested, i) for i, e in enumerate(rows) if e.first_bad is None and e.tested]
        if clean:
            ax.scatter(*zip(*clean), marker="|", color="#1f5f3a", s=80, label="every batch run passed (largest run)")
        bad = [(e.first_bad, i) for i, e in enumerate(rows) if e.first_bad]
        if bad:
            ax.scatter(*zip(*bad), marker="x", color="#c0392b", s=60, label="first failing batch")
        ax.set_yticks(y, labels, fontsize=6)
        if any(e.verified or e.tested or e.first_bad for e in rows):
            ax.set_xscale("log")
        ax.set_xlabel("batch (requests)")
        ax.set_title(kernel, fontsize=9, loc="left")
        if shown or clean or bad:
            ax.legend(fontsize=6, loc="lower right")
    fig.suptitle("Envelope: the largest batch verified correct per kernel x shape", fontsize=11, fontweight="bold")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
