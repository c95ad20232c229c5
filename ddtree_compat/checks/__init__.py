"""Checks: lay a case out on a device, call one backend kernel, judge the outputs exactly against the
oracle (the torch side; what is checked, and on which cases, is declared in :mod:`ddtree_compat.kernels`).

* :mod:`.verify`: ``verify_tree_greedy``;
* :mod:`.commit`: the six commit kernels;
* :mod:`.attention`: verify attention (float, per-dtype tolerance);
* :mod:`.graphs`: CUDA-graph capture at capacity and replay at the live width;
* :mod:`.buffers`: poison, canary bands, SGLang's verify batch layout;
* :mod:`.common`: synchronising, fault verdicts, element diffs.
"""
