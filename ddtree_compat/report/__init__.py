"""Reports of a (merged) results set.

* :func:`render_markdown` (``markdown.py``): the Markdown matrix, fit for a CI step summary.
* :func:`render_heatmap` (``heatmap.py``): a PNG of the worst status per budget x topology, one panel
  per backend x arch (matplotlib, Agg).
* :func:`render_html` (``html_page.py``): one self-contained HTML page (jinja2 template
  ``templates/report.html.j2``) with the environment, counts, known issues, the heatmap inlined, the
  matrix and the failures.
* ``summary.py``: the counting all three share.
"""

from .heatmap import render_heatmap
from .html_page import render_html
from .markdown import render_markdown

__all__ = ["render_markdown", "render_heatmap", "render_html"]
