"""``sglang-cuda``: SGLang's CUDA tree verify, the tvm-ffi JIT kernel ``verify_tree_greedy``
(``sglang.kernels.ops.speculative.tree``, sglang 0.5.23; compiled by nvcc on first use).

Its host checks (``csrc/speculative/tree.cuh``) require int64 ``[bs, D]`` tree tensors and
``target_predict``, int32 ``accept_index [bs, S]``, ``accept_token_num [bs]``, ``predicts [bs*D]``,
all on one CUDA device. One CUDA thread walks each request.
"""

from __future__ import annotations

from ..static.kernels import SGLANG_VERIFY_CUDA
from ..tiers import Target
from ._sglang import device_reason, import_error

MODULE = "sglang.kernels.ops.speculative.tree"


class SGLangCudaBackend:
    name = "sglang-cuda"
    static_kernels = (SGLANG_VERIFY_CUDA,)  # nvcc-built for every arch by the static tier

    def unavailable_reason(self, target: Target) -> str | None:
        if target.tier != "device":
            return "tvm-ffi JIT CUDA kernel runs on the device tier only"
        return device_reason(target) or import_error(MODULE)

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        from sglang.kernels.ops.speculative.tree import verify_tree_greedy

        verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict)
