"""``sglang-triton``: SGLang's Triton tree verify, ``verify_tree_greedy_triton``
(``sglang.kernels.ops.speculative.spec_tree``, sglang 0.5.23), and its Triton commit kernels
(``fill_accept_out_cache_loc``, ``prepare_verify_commit_outputs``, ``fill_bonus_tokens`` in
``...speculative.eagle``; ``assign_req_to_token_pool`` in ``sglang.srt.mem_cache.allocation``), and the target verify's attention, ``extend_attention_fwd``
(``sglang.kernels.ops.attention.extend_attention``) with a custom mask, under its own tile choice or
another arch's (:mod:`ddtree_compat.backends.sglang_tiles`). Runs on the device tier and, under
``TRITON_INTERPRET=1``, on the CPU interpret tier. The kernel infers ``bs``, ``C`` and
``accept_width`` from tensor shapes and specialises on them (constexpr), so each shape compiles once.
"""

from __future__ import annotations

from contextlib import nullcontext

from .._triton_env import interpreter_scalar_index
from ..static.kernels import SGLANG_FILL_ACCEPT_TRITON, SGLANG_VERIFY_TRITON
from ..tiers import Target
from . import sglang_tiles
from ._sglang import device_reason, import_error, interpreter_on

MODULE = "sglang.kernels.ops.speculative.spec_tree"
COMMIT_MODULES = {  # commit kernel -> module it lives in (sglang 0.5.23)
    "accept_out_cache_loc": "sglang.kernels.ops.speculative.eagle",
    "commit_outputs": "sglang.kernels.ops.speculative.eagle",
    "bonus_tokens": "sglang.kernels.ops.speculative.eagle",
    "assign_req_to_token": "sglang.srt.mem_cache.allocation",
    "verify_attention": sglang_tiles.MODULE,
}


class SGLangTritonBackend:
    name = "sglang-triton"
    attention_tiles = True  # verify_attention can run another arch's tile choice (sglang_tiles)
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

    def kernel_unavailable_reason(self, target: Target, kernel: str) -> str | None:
        """Commit kernels live in other modules; ``assign_req_to_token`` pulls in SGLang's memory pool."""
        return self.unavailable_reason(target) or import_error(COMMIT_MODULES.get(kernel, MODULE))

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        from sglang.kernels.ops.speculative.spec_tree import verify_tree_greedy_triton

        verify_tree_greedy_triton(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                  retrive_next_token, retrive_next_sibling, target_predict)

    # ---- commit kernels: sglang.kernels.ops.speculative.eagle and sglang.srt.mem_cache.allocation

    def accept_out_cache_loc(self, accept_index, out_cache_loc, accept_out_cache_loc) -> None:
        from sglang.kernels.ops.speculative.eagle import fill_accept_out_cache_loc_func

        fill_accept_out_cache_loc_func(accept_index, out_cache_loc, accept_out_cache_loc, accept_index.numel())

    def commit_outputs(self, predict, accept_index, accept_lens, seq_lens):
        from sglang.kernels.ops.speculative.eagle import prepare_verify_commit_outputs

        return prepare_verify_commit_outputs(predict, accept_index, accept_lens, seq_lens)

    def bonus_tokens(self, accept_tokens, accept_lens, bonus, accept_stride) -> None:
        from sglang.kernels.ops.speculative.eagle import fill_bonus_tokens_func

        fill_bonus_tokens_func(accept_tokens, accept_lens, bonus, accept_stride, accept_lens.numel())

    def assign_req_to_token(self, req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc) -> None:
        from sglang.srt.mem_cache.allocation import assign_req_to_token_pool_func

        assign_req_to_token_pool_func(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc,
                                      req_pool_indices.numel())

    # ---- verify attention: sglang.kernels.ops.attention.extend_attention

    def attention_unavailable_reason(self, target: Target, case) -> str | None:
        """bf16 on the interpret tier: Triton's interpreter stores bf16 as uint16 and its ``tl.dot``
        multiplies the bit patterns (triton-lang/triton#11584; bf16 arithmetic is unsupported there)."""
        if target.tier == "interpret" and case.dtype == "bf16":
            return ("Triton's interpreter has no bf16 arithmetic (tl.dot multiplies the uint16 bit patterns, "
                    "triton-lang/triton#11584): bf16 runs on the device tier")
        return None

    def attention_tile_choice(self, tiles: str, head_dim: int) -> dict:
        """SGLang's tile choice for ``tiles`` (``native`` or an arch name) at this head_dim."""
        return sglang_tiles.tile_choice(tiles, head_dim)

    def verify_attention(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                         mask_indptr, max_len_extend, sm_scale, page_size, tiles="native") -> dict | None:
        """``extend_attention_fwd`` as SGLang's Triton backend calls it in target verify (``is_causal=True``,
        unit ``k_scale``/``v_scale``, the prefix's mask columns skipped: its default), under ``tiles``'
        tile choice; returns the recorded launch (tile sizes, warps, grid)."""
        from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

        interp = interpreter_scalar_index() if interpreter_on() else nullcontext()
        with interp, sglang_tiles.capability(tiles), sglang_tiles.record_launch() as launches:
            extend_attention_fwd(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, True,
                                 mask_indptr, max_len_extend, 1.0, 1.0, sm_scale=sm_scale, page_size=page_size)
        return launches[-1] if launches else None
