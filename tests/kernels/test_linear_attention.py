"""The linear-attention layers of a hybrid target (``ddtree_compat.families.linear``): SGLang's Gated DeltaNet verify
(tree and chain), the verify-time short convolution and the recurrent-state and conv-window commits, on DDTree,
EAGLE and chain trees, every backend that has the kernel, every target. Ids read
``interpret-sglang-triton-gdn_verify_tree-b8-spine-deep-bs2-cap16-h1v2d128w4-sfp32-iofp32``. The profile is the
verify-attention profile's (``--ddtree-attention-profile``: ``interpret`` small head counts, ``device`` the Qwen3.5 /
3.6 and Qwen3-Next geometries). A new record of the family needs no new test here.
"""


def test_linear_attention(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_linear_case, ddtree_check):
    ddtree_check(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_linear_case)
