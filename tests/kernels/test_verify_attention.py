"""Verify attention (SGLang ``extend_attention_fwd`` under DDTree's ancestor-only mask) against a float32
reference, per tile configuration: the device's own (``native``) and sm80 / sm86 / sm89 / sm90 / sm100 /
sm120's choices emulated on this target (kernel ``verify_attention@emulated-<arch>``).

Parametrized by the ddtree_compat plugin: ``ddtree_target`` x ``ddtree_backend`` (those with
``verify_attention``) x ``ddtree_attention_case`` (``--ddtree-attention-profile``: ``interpret``, small
shapes for CPU CI; ``device``, the shape sweep; default the tier's own). Ids read
``sm90-sglang-triton-b8-spine-none-bs3-h32g4d128-pre1000-bf16-pg16-emulated-sm120``. Layout, reference,
tolerances: ``ddtree_compat/attention.py`` and ``docs/verify-attention.md``.
"""


def test_verify_attention(ddtree_target, ddtree_backend, ddtree_attention_case, ddtree_check_attention):
    verdict = ddtree_check_attention(ddtree_target, ddtree_backend, ddtree_attention_case)
    # run_attention compares every element against the reference; a pass states its worst error.
    assert verdict.message.startswith("max |err| "), verdict.message


def test_verify_attention_graph(ddtree_target, ddtree_backend, ddtree_attention_graph_case, ddtree_check):
    """The same cases through a CUDA graph captured at capacity ``C`` and a captured batch (1, 2, 4, 8, 16),
    replayed at the live width and batch (padding requests fill the batch); judged like the eager call."""
    verdict = ddtree_check(ddtree_target, ddtree_backend, "verify_attention_graph", ddtree_attention_graph_case)
    assert verdict.message.startswith("max |err| "), verdict.message


def test_verify_attention_cascade(ddtree_target, ddtree_backend, ddtree_attention_cascade_case, ddtree_check):
    """The same cases as a cascade: the prefix pass and the tree pass (each row over its own ancestors), merged by
    their log-sum-exp (SGLang's fa3 target verify with a DDTree implementation's tree attention); judged alike."""
    verdict = ddtree_check(ddtree_target, ddtree_backend, "verify_attention_cascade", ddtree_attention_cascade_case)
    assert verdict.message.startswith("max |err| "), verdict.message
