"""``sglang-triton``: SGLang's Triton tree verify, ``verify_tree_greedy_triton``
(``sglang.kernels.ops.speculative.spec_tree``, sglang 0.5.23). Runs on the device tier and, under
``TRITON_INTERPRET=1``, on the CPU interpret tier. The kernel infers ``bs``, ``C`` and
``accept_width`` from tensor shapes and specialises on them (constexpr), so each shape compiles once.
"""

from __future__ import annotations

from ..static.kernels import SGLANG_FILL_ACCEPT_TRITON, SGLANG_VERIFY_TRITON
from ..tiers import Target
from ._sglang import device_reason, import_error, interpreter_on

MODULE = "sglang.kernels.ops.speculative.spec_tree"


class SGLangTritonBackend:
    name = "sglang-triton"
    # compiled for every arch by the static tier: the verify kernel and the commit step's kernel
    static_kernels = (SGLANG_VERIFY_TRITON, SGLANG_FILL_ACCEPT_TRITON)

    def unavailable_reason(self, target: Target) -> str | None:
        if target.tier == "interpret" and not interpreter_on():
            return "interpret tier needs TRITON_INTERPRET=1 set before Triton is imported"
        if target.tier == "device":
            if interpreter_on():
                return "TRITON_INTERPRET=1 is set: the device tier needs compiled Triton"
            reason = device_reason(target)
            if reason:
                return reason
        return import_error(MODULE)

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        from sglang.kernels.ops.speculative.spec_tree import verify_tree_greedy_triton

        verify_tree_greedy_triton(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                  retrive_next_token, retrive_next_sibling, target_predict)
