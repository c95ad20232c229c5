"""``sglang-triton``: SGLang's Triton tree verify, ``verify_tree_greedy_triton``
(``sglang.kernels.ops.speculative.spec_tree``, sglang 0.5.23), and its Triton commit kernels:
``fill_accept_out_cache_loc``, ``prepare_verify_commit_outputs``, ``fill_bonus_tokens``
(``...speculative.eagle``); ``fill_front_out_cache_loc_func`` (``...speculative.cache_locs``, its
``assign_extend_cache_locs`` kernel: the compacting commit's targets); ``assign_req_to_token_pool``
(``sglang.srt.mem_cache.allocation``); and the token KV pool's default ``move_kv_cache`` kernel,
``copy_all_layer_kv_cache_tiled`` (``sglang.kernels.ops.kvcache.cache_move``). Runs on the device tier
and, under ``TRITON_INTERPRET=1``, on the CPU interpret tier (``assign_req_to_token`` only where
SGLang's memory pool imports: it needs torchvision and transformers). The verify kernel infers ``bs``,
``C`` and ``accept_width`` from tensor shapes and specialises on them (constexpr), so each shape
compiles once. Also the target verify's attention, ``extend_attention_fwd``
(``sglang.kernels.ops.attention.extend_attention``) with a custom mask, under its own tile choice or
another arch's (:mod:`ddtree_compat.backends.sglang_tiles`).
"""

from __future__ import annotations

from contextlib import nullcontext

from .._triton_env import interpreter_scalar_index
from ..static.kernels import (SGLANG_FILL_ACCEPT_TRITON, SGLANG_FRONT_OUT_TRITON, SGLANG_MOVE_KV_TRITON,
                              SGLANG_VERIFY_ATTENTION, SGLANG_VERIFY_TRITON)
from ..tiers import Target
from . import sglang_tiles
from ._sglang import device_reason, import_error, interpreter_on, interpreter_reason

MODULE = "sglang.kernels.ops.speculative.spec_tree"
COMMIT_MODULES = {  # commit kernel -> module it lives in (sglang 0.5.23)
    "accept_out_cache_loc": "sglang.kernels.ops.speculative.eagle",
    "commit_outputs": "sglang.kernels.ops.speculative.eagle",
    "bonus_tokens": "sglang.kernels.ops.speculative.eagle",
    "front_out_cache_loc": "sglang.kernels.ops.speculative.cache_locs",
    "assign_req_to_token": "sglang.srt.mem_cache.allocation",
    "verify_attention": sglang_tiles.MODULE,
    "move_kv": "sglang.kernels.ops.kvcache.cache_move",
}


def kv_copy_config(row_bytes: int) -> dict:
    """Launch parameters of ``copy_all_layer_kv_cache_tiled`` as SGLang 0.5.23's token KV pool picks
    them (``MHATokenToKVPool._init_kv_copy_and_warmup``) for slot rows of ``row_bytes``: a byte tile
    of 512 / 256 / 128 for rows of >= 8192 / >= 4096 / fewer bytes, 8 warps for 512-byte tiles (else
    4), and at most 128 (512-byte tiles) or 256 slots per launch (``num_locs_upper``)."""
    tile = 512 if row_bytes >= 8192 else 256 if row_bytes >= 4096 else 128
    return {"bytes_per_tile": tile, "byte_tiles": -(-row_bytes // tile), "num_warps": 8 if tile > 256 else 4,
            "num_locs_upper": 128 if tile >= 512 else 256}


class SGLangTritonBackend:
    name = "sglang-triton"
    attention_tiles = True  # verify_attention can run another arch's tile choice (sglang_tiles)
    # compiled for every arch by the static tier: the verify kernel, the commit step's kernels and the
    # verify attention (each arch's own tile choice)
    static_kernels = (SGLANG_VERIFY_TRITON, SGLANG_FILL_ACCEPT_TRITON, SGLANG_FRONT_OUT_TRITON, SGLANG_MOVE_KV_TRITON,
                      SGLANG_VERIFY_ATTENTION)

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
        """Commit kernels live in other modules; ``assign_req_to_token`` pulls in SGLang's memory pool;
        ``front_out_cache_loc`` is probed once under the interpreter (see
        :func:`~ddtree_compat.backends._sglang.interpreter_reason`)."""
        reason = self.unavailable_reason(target) or import_error(COMMIT_MODULES.get(kernel, MODULE))
        if not reason and target.tier == "interpret" and kernel == "front_out_cache_loc":
            reason = interpreter_reason("assign_extend_cache_locs (fill_front_out_cache_loc_func)", self._probe_front)
        return reason

    def _probe_front(self) -> None:
        import torch

        out = torch.zeros(2, dtype=torch.int64)
        self.front_out_cache_loc(torch.tensor([1, 1], dtype=torch.int32), torch.arange(4), out)
        if out.tolist() != [0, 2]:
            raise AssertionError(f"probe wrote {out.tolist()}, want [0, 2]")

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        from sglang.kernels.ops.speculative.spec_tree import verify_tree_greedy_triton

        verify_tree_greedy_triton(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                  retrive_next_token, retrive_next_sibling, target_predict)

    # ---- commit kernels: sglang.kernels.ops.speculative.eagle and sglang.srt.mem_cache.allocation

    def accept_out_cache_loc(self, accept_index, out_cache_loc, accept_out_cache_loc) -> None:
        from sglang.kernels.ops.speculative.eagle import fill_accept_out_cache_loc_func

        fill_accept_out_cache_loc_func(accept_index, out_cache_loc, accept_out_cache_loc, accept_index.numel())

    def front_out_cache_loc(self, num_front, out_cache_loc, front_out_cache_loc) -> None:
        from sglang.kernels.ops.speculative.cache_locs import fill_front_out_cache_loc_func

        fill_front_out_cache_loc_func(num_front, out_cache_loc, front_out_cache_loc)

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
    def move_kv(self, k_buffers, v_buffers, tgt_loc, src_loc) -> None:
        """The token KV pool's ``move_kv_cache`` (``MHATokenToKVPool._move_kv_cache_impl``, default path):
        one launch per ``num_locs_upper`` slots, every layer's K and V rows by pointer table."""
        import torch
        from sglang.kernels.ops.kvcache.cache_move import copy_all_layer_kv_cache_func
        from sglang.srt.utils import next_power_of_2

        buffers = [*k_buffers, *v_buffers]
        device = tgt_loc.device
        ptrs = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.uint64, device=device)
        strides = torch.tensor([b.stride(0) * b.element_size() for b in buffers], dtype=torch.int64, device=device)
        config = kv_copy_config(buffers[0].stride(0) * buffers[0].element_size())
        n, cap = tgt_loc.numel(), config["num_locs_upper"]
        for start in range(0, n, cap):
            count = min(cap, n - start)
            copy_all_layer_kv_cache_func(ptrs, strides, tgt_loc[start:start + count], src_loc[start:start + count],
                                         count, next_power_of_2(count), config)
