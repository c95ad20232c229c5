"""The reference column a kernel's CPU tests judge it against, by the kernel's name (a record's ``@scale`` suffix
ignored): one rule for the one-shape tests (test_check_shape.py) and the deployment-shape tests (test_scale.py).
SGLang's kernels are judged against the oracle column, a DDTree tree's kernels (``ddtree_`` names) against the DDTree
reference. A kernel whose reference is neither gets its line here."""

from __future__ import annotations

from ddtree_compat.backends.oracle_column import OracleBackend
from ddtree_compat.families.ddtree.reference import DDTreeReference


class _DDTreeSampler(DDTreeReference):
    """The DDTree reference's sampler, called as the sampling family's law cells call an implementation's."""

    def ddtree_sample_distribution(self, *args) -> None:
        self.ddtree_sample(*args)


def reference_column(kernel: str):
    """A fresh reference backend for ``kernel`` (``verify_tree_greedy``, ``ddtree_prune@scale``, ...)."""
    kernel = kernel.partition("@")[0]
    if kernel == "ddtree_sample_distribution":
        return _DDTreeSampler()
    return DDTreeReference() if kernel.startswith("ddtree_") else OracleBackend()
