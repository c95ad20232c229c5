"""Verify attention (SGLang ``extend_attention_fwd`` under DDTree's ancestor-only mask, and FlashInfer's and FA3's
paths) against a float32 reference, per tile configuration: the device's own (``native``) and sm80 / sm86 / sm89 /
sm90 / sm100 / sm120's choices emulated on this target (kernel ``verify_attention@emulated-<arch>``); through a CUDA
graph captured at capacity and replayed at the live width and batch (``verify_attention_graph``); as a cascade of a
prefix pass and a tree pass merged by their log-sum-exp (``verify_attention_cascade``).

Parametrized by the ddtree_compat plugin: ``ddtree_target`` x ``ddtree_backend`` x ``ddtree_kernel`` (every record
of the verify-attention family the backend implements) x ``ddtree_attention_case`` (``--ddtree-attention-profile``:
``interpret``, small shapes for CPU CI; ``device``, the shape sweep; default the tier's own). Ids read
``sm90-sglang-triton-verify_attention-b8-spine-none-bs3-h32g4d128-pre1000-bf16-pg16-emulated-sm120``. Layout,
reference, tolerances: ``ddtree_compat/families/attention/`` and ``docs/verify-attention.md``. A new record of the
family needs no new test here.
"""


def test_verify_attention(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_attention_case, ddtree_check):
    verdict = ddtree_check(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_attention_case)
    # every check of the family compares each element against the reference; a pass states its worst error
    assert verdict.message.startswith("max |err| "), verdict.message
