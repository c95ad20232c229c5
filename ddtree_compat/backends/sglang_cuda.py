"""``sglang-cuda``: SGLang's CUDA tree verify, the tvm-ffi JIT kernel ``verify_tree_greedy``
(``sglang.kernels.ops.speculative.tree``, sglang 0.5.23; compiled by nvcc on first use).

Its host checks (``csrc/speculative/tree.cuh``) require int64 ``[bs, D]`` tree tensors and
``target_predict``, int32 ``accept_index [bs, S]``, ``accept_token_num [bs]``, ``predicts [bs*D]``,
all on one CUDA device. One CUDA thread walks each request.
"""

from __future__ import annotations

from ..contract import Backend, KernelImpl, locate
from ..families.verify.places import VERIFY_CUDA as PLACES
from ..families.verify.records import VERIFY
from ..static.kernels import SGL_KERNEL_OPS, SGLANG_VERIFY_CUDA


class SGLangCudaBackend(Backend):
    name = "sglang-cuda"
    implements = (
        KernelImpl(VERIFY, "cuda", what="tvm-ffi JIT CUDA kernel", places=PLACES,
                       # nvcc-built for every arch by the static tier; and sgl-kernel's prebuilt ops that the
                       # DDTree trees' verify path imports, read from the library each arch loads
                       static=(SGLANG_VERIFY_CUDA, SGL_KERNEL_OPS)),
    )

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        verify_tree_greedy, _ = locate(PLACES)
        verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict)
