"""ddtree-compat: hardware-compatibility suite for DDTree speculative-decoding kernels in SGLang.

Where things live: ``oracle`` (reference algorithms), ``tree`` + ``topologies`` (draft trees),
``cases`` (verify cases, JSON, the grid), ``buffers`` (poisoned, canary-guarded kernel buffers),
``backends/`` (one adapter per kernel implementation), ``harness`` (run + judge one cell),
``arch`` + ``tiers`` (where cells run), ``results`` + ``report`` (the matrix), ``plugin`` (pytest),
``cli`` (``python -m ddtree_compat``).
"""

__version__ = "0.1.0"
