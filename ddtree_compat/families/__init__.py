"""Kernel families: one folder each, holding everything about its kernels.

Each family folder holds its torch-free records (``records.py``: the :class:`~ddtree_compat.records.KernelRecord`
of each kernel, its case type and case generator), its checks (``checks.py``: lay a case out, call a backend once,
judge it against the oracle, on the shared harness :mod:`ddtree_compat.harness`), its oracle (``oracle.py``: the
pure rules the expected values come from), and its broken variants (``variants.py``: test-only backends each
check must call ``wrong``; the DDTree family's correct reference backend is ``reference.py``). The DDTree family
also says where the implementations keep each kernel (``places.py``).

Adding a kernel to a family touches that folder and one method of each backend that has it. Adding a family is
a new folder here and one line in :data:`FAMILIES`.
"""

FAMILIES = ("verify", "commit", "attention", "ddtree")
"""The built-in families, in registry order (their ``records.RECORDS``)."""
