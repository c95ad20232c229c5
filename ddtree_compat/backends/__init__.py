"""The built-in backends, one thin adapter per file: who implements the kernels under test.

* :mod:`.oracle_column`: the ``oracle`` column, composed of each family's reference (``families/<family>/reference.py``);
* :mod:`.sglang_triton`, :mod:`.sglang_cuda`, :mod:`.sglang_torch`: SGLang's kernels, called as SGLang calls them,
  found where each release keeps them (the families' ``places.py``);
* :mod:`.flashinfer`: FlashInfer's verify attention as SGLang's flashinfer backend calls it;
* :mod:`.ddtree_impl`: one backend per DDTree implementation found (its kernels, and FA3 verify attention through
  its FA metadata);
* :mod:`.registry`: the built-ins (``BUILTIN``), entry points, ``--ddtree-backend`` and the DDTree implementations
  of a run.

What a backend is (:class:`~ddtree_compat.contract.Backend`, :class:`~ddtree_compat.contract.KernelImpl`) and where
a kernel can run (:func:`~ddtree_compat.contract.unavailable`) is the shared contract, :mod:`ddtree_compat.contract`.
"""
