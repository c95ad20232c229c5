"""Self-contained HTML report: one page, no external files (the heatmap PNG is inlined as base64).

Rendered from the jinja2 template ``templates/report.html.j2`` (autoescaped) with the same counts as the
Markdown report (:mod:`ddtree_compat.report.summary`): environment, counts, the heatmap, skips by
reason, faults by class, known issues with their source links, failures with replay commands, the
verify-attention table (shape x tile choice) and the detailed matrix (collapsed).
"""

from __future__ import annotations

import base64
import time

from jinja2 import Environment, PackageLoader, select_autoescape

from ..results import Results
from .heatmap import STYLE, render_heatmap
from .summary import (count_header, ENV_HEADER, KNOWN_HEADER, attention_rows, count_rows, e2e_rows, env_rows,
                      known_rows, matrix_columns, matrix_rows, parts, replay_command, summarize, worst)

_TEMPLATES = Environment(loader=PackageLoader("ddtree_compat.report", "templates"),
                         autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True)


def render_html(results: Results, png: bytes | None = None, title: str = "DDTree compatibility matrix",
                max_failures: int = 200) -> str:
    """The HTML page of ``results``; ``png`` is the heatmap (drawn with :func:`render_heatmap` if ``None``).

    Raises:
        ValueError: ``results`` has no result lines.
    """
    s = summarize(results)
    png = png if png is not None else render_heatmap(results)
    matrix = [(key, mode, [(worst(c), parts(c)) if c else None for c in cells]) for key, mode, cells in matrix_rows(s)]
    tiles, attention = attention_rows(s)
    e2e_archs, e2e = e2e_rows(s)
    e2e = [(key, [(worst(c), parts(c)) if c else None for c in cells]) for key, cells in e2e]
    return _TEMPLATES.get_template("report.html.j2").render(
        title=title,
        generated=time.strftime("%Y-%m-%d %H:%M %Z"),
        cells=len(s.records),
        env_header=ENV_HEADER, envs=env_rows(results),
        count_header=count_header(s), counts=count_rows(s),
        png=base64.b64encode(png).decode("ascii"),
        skips=sorted(s.skips.items()), faults=sorted(s.faults.items()),
        known_header=KNOWN_HEADER, known=known_rows(s),
        failures=[(r, replay_command(r)) for r in s.failures[:max_failures]], n_failures=len(s.failures),
        xpassed=s.xpassed,
        columns=matrix_columns(s), matrix=matrix,
        attention_tiles=tiles,
        attention=[(key, [(worst(c), parts(c)) if c else None for c in cells]) for key, cells in attention],
        e2e_archs=e2e_archs, e2e=e2e,
        colours={k: v[0] for k, v in STYLE.items()},
    )
