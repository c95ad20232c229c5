"""Kernel families: one folder each, holding everything about its kernels.

Each family folder holds its torch-free records (``records.py``: the :class:`~ddtree_compat.contract.KernelRecord`
of each kernel, its case type and case generator), its oracle (``oracle.py``: the pure rules the expected values
come from), where the systems under test keep its kernels (``places.py``), its checks (``checks.py``: lay a case
out, call a backend once, judge it against the oracle, on the shared harness :mod:`ddtree_compat.harness`), its
reference (``reference.py``: the contract computed from the oracle, the ``oracle`` backend's column for SGLang's
kernels) and its broken variants (``variants.py``: test-only backends each check must call ``wrong``).

Adding a kernel to a family touches that folder and one method of each backend that has it. Adding a family is
a new folder here and its name in :data:`ddtree_compat.records.FAMILIES`.
"""
