"""ddtree-compat: hardware-compatibility suite for DDTree speculative-decoding kernels in SGLang.

Where things live (``docs/architecture.md`` has the floors and which way imports point): :mod:`ddtree_compat.contract`
(the shared vocabulary: a backend, a kernel record, where a release keeps a kernel), ``families/`` (one folder per
kernel family: its records, oracle, places, checks, reference and broken variants; :mod:`ddtree_compat.families`),
:mod:`ddtree_compat.harness` (the one check harness), :mod:`ddtree_compat.backends` (who implements the kernels),
:mod:`ddtree_compat.records` (the registry), :mod:`ddtree_compat.arch` and :mod:`ddtree_compat.tiers` (where cells
run), :mod:`ddtree_compat.results`, :mod:`ddtree_compat.report` and :mod:`ddtree_compat.gate` (the matrix),
:mod:`ddtree_compat.static` and :mod:`ddtree_compat.e2e` (the static and end-to-end tiers), :mod:`ddtree_compat.plugin`
(pytest) and :mod:`ddtree_compat.cli` (``python -m ddtree_compat``).
"""

__version__ = "0.1.0"
