"""ddtree-compat: hardware-compatibility suite for DDTree speculative-decoding kernels in SGLang.

Where things live (``docs/architecture.md``): ``kernels/`` (one record per kernel under test: its case
type, cases, check), ``backends/`` (who implements them, and where they run), ``checks/`` (lay a case
out, call once, judge against the oracle), ``oracle`` (reference algorithms), ``cases`` (verify cases,
the grid), ``arch`` + ``tiers`` (where cells run), ``results`` + ``report`` + ``gate`` (the matrix),
``static/`` and ``e2e/`` (the static and end-to-end tiers), ``plugin/`` (pytest), ``cli`` (``python -m
ddtree_compat``).
"""

__version__ = "0.1.0"
