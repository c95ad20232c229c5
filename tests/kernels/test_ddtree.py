"""DDTree implementations' own kernels (``ddtree_compat.kernels.ddtree``): every record, every DDTree
implementation found (``--ddtree-impl`` / ``DDTREE_IMPLS``, or the installed sglang's), every case. Ids:
``sm90-rancy-ddtree-v2-433c58ed-ddtree_follow-b8-k8-peaked-bs3-worker``. Triton wrappers run on the device
tier (on the CPU they are counted skips: they refuse CPU tensors); CPU helpers on every tier.
"""


def test_ddtree_kernel(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_ddtree_case, ddtree_check):
    ddtree_check(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_ddtree_case)
