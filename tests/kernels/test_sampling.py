"""Sampling verify (temperature > 0): SGLang's target-only tree sampler (``tree_speculative_sampling``, its tvm-ffi JIT
CUDA kernel), its rejection sampler (``chain_speculative_sampling``, Triton; block verification too) and the DDTree
implementations' own sampler (``ddtree_sample_distribution``), on EAGLE chains, EAGLE top-k trees and DDTree-shaped
trees. Exact cells judge every output against the oracle with given uniforms; distribution cells call the sampler once
with ``N`` rows and judge the rows and, by a stated chi-square test at a false-alarm rate of 1e-6, the law of what they
emitted (``ddtree_compat/families/sampling/``, ``docs/tiers.md``). Ids read
``sm90-sglang-cuda-tree_speculative_sampling-tree-exact-eagle-topk-b7-flat-bs3``.
"""


def test_sampling(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_sampling_case, ddtree_check):
    verdict = ddtree_check(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_sampling_case)
    if ddtree_sampling_case.kind == "distribution":  # a pass states the test, its p-value and N
        assert verdict.message.startswith("law test: chi-square"), verdict.message
