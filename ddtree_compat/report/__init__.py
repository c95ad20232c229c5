"""Reports of a (merged) results set: one verdict per cell (:func:`ddtree_compat.results.load`).

* :func:`render_markdown` (``markdown.py``): the summary table and failures at a glance, the rest collapsed;
  fit for a CI step summary.
* :func:`render_summary` (``picture.py``): the summary picture, a PNG of the worst status per budget x
  topology, a row per arch x kernel x backend (matplotlib, Agg).
* :func:`render_html` (``html_page.py``): one self-contained HTML page (jinja2 template
  ``templates/report.html.j2``): the summary table and picture inlined, failures, known issues, the static
  tier per arch, details per kernel, environment and counts.
* ``summary.py``: the counting all three share; ``coverage.py``: what the top of a report says (the title, what was
  not tested and why, partial runs); ``deployment.py``: the envelope and deployment-concurrency tables.
"""

from .html_page import render_html
from .markdown import render_markdown
from .picture import render_summary

__all__ = ["render_markdown", "render_summary", "render_html"]
