"""``sglang-cuda``: SGLang's CUDA tree verify, the tvm-ffi JIT kernel ``verify_tree_greedy``
(``sglang.kernels.ops.speculative.tree``, sglang 0.5.23; compiled by nvcc on first use; where that module is absent,
sgl-kernel's prebuilt op of the same name, which releases before 0.5.22 and rancy-ddtree call), and its target-only tree
sampler ``tree_speculative_sampling_target_only`` (``...speculative.sampling``, a tvm-ffi JIT kernel on FlashInfer's
headers; sgl-kernel's prebuilt op of the same name in releases before 0.5.22): the sampling verify at temperature > 0.

Its host checks (``csrc/speculative/tree.cuh``) require int64 ``[bs, D]`` tree tensors and
``target_predict``, int32 ``accept_index [bs, S]``, ``accept_token_num [bs]``, ``predicts [bs*D]``,
all on one CUDA device. One CUDA thread walks each request.
"""

from __future__ import annotations

import math

from ..contract import Backend, KernelImpl, locate
from ..families.sampling.places import TREE_SAMPLING
from ..families.sampling.records import TREE as TREE_SAMPLING_KERNEL
from ..families.verify.places import VERIFY_CUDA as PLACES
from ..families.verify.records import VERIFY
from ..static.kernels import SGL_KERNEL_OPS, SGLANG_TREE_SAMPLING_CUDA, SGLANG_VERIFY_CUDA


def sampler_build(case) -> int:
    """The tree sampler's JIT instance a case needs (its :attr:`KernelImpl.build_key`).

    Args:
        case: a sampling or deployment-shape case (``case.vocab``: the vocabulary ``V`` of ``target_probs [bs, D, V]``).

    Returns:
        ``vec_size = gcd(4, V)``: 1, 2 or 4. SGLang 0.5.22+'s ``tree_speculative_sampling_target_only`` builds one
        tvm-ffi module per ``(vec_size, deterministic)`` (``sglang.kernels.ops.speculative.sampling.
        _jit_sampling_module``; ``deterministic`` is always true here): about 24 s of nvcc each on first use (H100).
    """
    return math.gcd(4, case.vocab)


class SGLangCudaBackend(Backend):
    name = "sglang-cuda"
    implements = (
        KernelImpl(VERIFY, "cuda", what="tvm-ffi JIT CUDA kernel", places=PLACES,
                       # nvcc-built for every arch by the static tier; and sgl-kernel's prebuilt ops that the
                       # DDTree trees' verify path imports, read from the library each arch loads
                       static=(SGLANG_VERIFY_CUDA, SGL_KERNEL_OPS)),
        KernelImpl(TREE_SAMPLING_KERNEL, "cuda", what="tvm-ffi JIT CUDA kernel on FlashInfer's headers",
                   places=TREE_SAMPLING, static=(SGLANG_TREE_SAMPLING_CUDA,), build_key=sampler_build),
    )

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        verify_tree_greedy, _ = locate(PLACES)
        verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict)

    def tree_speculative_sampling(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                                  retrive_next_token, retrive_next_sibling, uniform_samples,
                                  uniform_samples_for_final_sampling, target_probs, draft_probs,
                                  threshold_single=1.0, threshold_acc=1.0, deterministic=True) -> None:
        """``tree_speculative_sampling_target_only``, positionally as SGLang's EAGLE worker calls it (the JIT
        wrapper and sgl-kernel's op take the same order)."""
        sample, _ = locate(TREE_SAMPLING)
        sample(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
               retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs,
               threshold_single, threshold_acc, deterministic)
