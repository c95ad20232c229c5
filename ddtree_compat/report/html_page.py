"""Self-contained HTML report: one page, no external files (the summary picture is inlined as base64).

Rendered from the jinja2 template ``templates/report.html.j2`` (autoescaped) with the same counts as the
Markdown report (:mod:`ddtree_compat.report.summary`): the summary table and picture, failures with replay
commands, the deployment-shape envelope and the e2e deployment concurrency (when cells of theirs ran), known
issues, the static tier per arch (backend · kernel x arch, each specialization collapsed),
then per kernel its details (collapsed): a budget x topology x layout table over ``backend · arch`` for the
verify, commit and DDTree kernels, shape x tile choice for verify attention, configurations for e2e, the
distribution cells' law tests (when a cell measured one); last the environment, counts, skips by reason and faults
by class; the footer points to the glossary (:data:`~.coverage.FOOTER`).
"""

from __future__ import annotations

import base64
import time
from collections import Counter

from jinja2 import Environment, PackageLoader, select_autoescape

from ..results import Results
from .picture import STYLE, render_summary
from .coverage import FOOTER, GLOSSARY, not_tested, notices, repairs, report_title, sources
from .deployment import (CONCURRENCY_HEADER, CONCURRENCY_TITLE, ENVELOPE_HEADER, ENVELOPE_TITLE, concurrency_rows,
                         envelope_rows)
from .summary import (DISTRIBUTION_HEADER, ENV_HEADER, KNOWN_HEADER, attention_rows, count_header, count_rows,
                      distribution_rows, e2e_rows, env_rows, kernel_matrix, kernels_with_cells, known_rows, parts,
                      replay_command, static_rows, summarize, summary_table, worst)


_TEMPLATES = Environment(loader=PackageLoader("ddtree_compat.report", "templates"),
                         autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True)


def _shown(counts: Counter | None):
    """``(worst status, "2 wrong, 13 pass")`` for a table cell, or ``None``."""
    return (worst(counts), parts(counts)) if counts else None


def _static_by_arch(rows: list) -> list:
    """Static rows folded per ``(backend, kernel)``: the statuses over its specializations, per arch."""
    out: dict[tuple, list[Counter]] = {}
    for (backend, kernel, _spec), cells in rows:
        folded = out.setdefault((backend, kernel), [Counter() for _ in cells])
        for total, c in zip(folded, cells):
            if c:
                total.update(c)
    return [(key, [_shown(c) for c in cells]) for key, cells in out.items()]


def render_html(results: Results, png: bytes | None = None, title: str | None = None,
                max_failures: int = 200) -> str:
    """The HTML page of ``results``; ``png`` is the summary picture (drawn with :func:`render_summary` if
    ``None``; ``b""`` for none); ``title``: default, what was tested (:func:`~.coverage.report_title`). Under the
    title, as in the Markdown: the results file(s), a partial run or torn lines, what was not tested and why.

    Raises:
        ValueError: ``png`` is ``None`` and ``results`` has no cell to draw.
    """
    s = summarize(results)
    png = png if png is not None else render_summary(results)
    arches, summary = summary_table(s)
    static_archs, static = static_rows(s)
    tiles, attention = attention_rows(s)
    e2e_archs, e2e = e2e_rows(s)
    details = []
    for kernel in kernels_with_cells(s):
        cols, rows = kernel_matrix(s, kernel)
        total = Counter()
        for *_, cells in rows:
            for c in cells:
                total.update(c or {})
        details.append((kernel, parts(total), worst(total), cols,
                        [(key, mode, [_shown(c) for c in cells]) for key, mode, cells in rows]))
    return _TEMPLATES.get_template("report.html.j2").render(
        title=title or report_title(s), sources=sources(results), notices=notices(results),
        repairs=repairs(results), not_tested=not_tested(s),
        generated=time.strftime("%Y-%m-%d %H:%M %Z"),
        cells=len(s.records), superseded=results.superseded, totals=parts(s.total("statuses")),
        arches=arches,
        summary=[(key, [(c.status, parts(c.counts), c.where()) if c else None for c in cells]) for key, cells in summary],
        png=base64.b64encode(png).decode("ascii") if png else "",
        tables=[(title, header, rows) for title, header, rows in (
            (ENVELOPE_TITLE, ENVELOPE_HEADER, envelope_rows(s)),
            (CONCURRENCY_TITLE, CONCURRENCY_HEADER, concurrency_rows(s))) if rows],
        failures=[(r, replay_command(r)) for r in s.failures[:max_failures]], n_failures=len(s.failures),
        xpassed=s.xpassed,
        known_header=KNOWN_HEADER, known=known_rows(s),
        static_archs=static_archs, static_by_arch=_static_by_arch(static),
        static=[(key, [_shown(c) for c in cells]) for key, cells in static],
        details=details,
        attention_tiles=tiles, attention=[(key, [_shown(c) for c in cells]) for key, cells in attention],
        e2e_archs=e2e_archs, e2e=[(key, [_shown(c) for c in cells]) for key, cells in e2e],
        distribution_header=DISTRIBUTION_HEADER, distribution=distribution_rows(s),
        env_header=ENV_HEADER, envs=env_rows(results),
        count_header=count_header(s), counts=count_rows(s),
        skips=sorted(s.skips.items()), faults=sorted(s.faults.items()),
        colours={k: v[0] for k, v in STYLE.items()},
        footer=FOOTER.split(GLOSSARY), glossary=GLOSSARY,
    )
