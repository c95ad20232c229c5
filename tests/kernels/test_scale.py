"""Deployment shapes: each kernel at the batches where a tensor it indexes passes 2^31 / 2^32 elements (or bytes),
derived from the shapes SGLang and the DDTree workers allocate, every row judged against a plant
(``ddtree_compat/families/scale/``, ``docs/tiers.md``). Device only; ``--ddtree-profile scale`` runs them all, other
profiles a slice. Ids read ``sm90-sglang-cuda-tree_speculative_sampling@scale-v248320-b16-bs509-above-2^31-el-...``.
"""


def test_scale(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_scale_case, ddtree_check):
    verdict = ddtree_check(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_scale_case)
    assert verdict.outcome == "pass", verdict.message
