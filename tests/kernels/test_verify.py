"""Greedy tree verify (``verify_tree_greedy``) across the case grid, every backend, every target.

Parametrized by the ddtree_compat plugin: ``ddtree_target`` (interpret or one GPU), ``ddtree_backend``,
``ddtree_case`` (``--ddtree-profile``; ``--ddtree-case FILE`` to replay). Ids read like the matrix:
``sm90-sglang-cuda-b8-spine-deep-bs3``.
"""


def test_verify_tree_greedy(ddtree_target, ddtree_backend, ddtree_case, ddtree_check_verify):
    verdict = ddtree_check_verify(ddtree_target, ddtree_backend, ddtree_case)
    # run_verify compares every element; this states the seed's symptom explicitly for planted cases.
    planted = [b for b, e in enumerate(verdict.accepted_expected) if e > 0]
    assert all(verdict.accepted_got[b] > 0 for b in planted), "accept length 1.00 on a planted acceptance"
