"""Commit kernels (``ddtree_compat.commit``) on every verify grid case's accepted paths, every backend
that has the kernel, every target. Ids: ``sm90-sglang-triton-accept_out_cache_loc-b8-spine-deep-bs3-p16-...``.
"""


def test_commit_kernel(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_commit_case, ddtree_check_commit):
    ddtree_check_commit(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_commit_case)
