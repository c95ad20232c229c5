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
from ..kernels.attention import KERNEL as VERIFY_ATTENTION
from ..kernels.commit import (ACCEPT_OUT_CACHE_LOC, ASSIGN_REQ_TO_TOKEN, BONUS_TOKENS, COMMIT_OUTPUTS,
                              FRONT_OUT_CACHE_LOC, MOVE_KV)
from ..kernels.verify import VERIFY
from ..static.kernels import (SGLANG_FILL_ACCEPT_TRITON, SGLANG_FRONT_OUT_TRITON, SGLANG_MOVE_KV_TRITON,
                              SGLANG_VERIFY_ATTENTION, SGLANG_VERIFY_TRITON, kv_copy_config)
from . import Backend, Implementation, interpreter_on
from . import sglang_tiles

SPEC_TREE = "sglang.kernels.ops.speculative.spec_tree"
EAGLE = "sglang.kernels.ops.speculative.eagle"


def _probe_front(backend) -> None:
    """One tiny ``fill_front_out_cache_loc_func`` launch under the interpreter (Triton 3.6's interpreter
    turns a loaded scalar into a one-element array; with NumPy >= 2.4, ``range()`` over it, a
    data-dependent loop count in ``assign_extend_cache_locs``, raises)."""
    import torch

    out = torch.zeros(2, dtype=torch.int64)
    backend.front_out_cache_loc(torch.tensor([1, 1], dtype=torch.int32), torch.arange(4), out)
    if out.tolist() != [0, 2]:
        raise AssertionError(f"probe wrote {out.tolist()}, want [0, 2]")


def _refuse_bf16_interpreted(target, case) -> str | None:
    """bf16 on the interpret tier: Triton's interpreter stores bf16 as uint16 and its ``tl.dot``
    multiplies the bit patterns (triton-lang/triton#11584; bf16 arithmetic is unsupported there)."""
    if target.tier == "interpret" and case.dtype == "bf16":
        return ("Triton's interpreter has no bf16 arithmetic (tl.dot multiplies the uint16 bit patterns, "
                "triton-lang/triton#11584): bf16 runs on the device tier")
    return None


class SGLangTritonBackend(Backend):
    name = "sglang-triton"
    attention_tiles = True  # verify_attention can run another arch's tile choice (sglang_tiles)
    # each with its static-tier entries (compiled for every arch): the verify kernel, the commit step's
    # kernels and the verify attention (each arch's own tile choice)
    implements = (
        Implementation(VERIFY, "triton", module=SPEC_TREE, static=(SGLANG_VERIFY_TRITON,)),
        Implementation(ACCEPT_OUT_CACHE_LOC.name, "triton", module=EAGLE, static=(SGLANG_FILL_ACCEPT_TRITON,)),
        Implementation(FRONT_OUT_CACHE_LOC.name, "triton", module="sglang.kernels.ops.speculative.cache_locs",
                       probe=_probe_front, static=(SGLANG_FRONT_OUT_TRITON,)),
        Implementation(COMMIT_OUTPUTS.name, "triton", module=EAGLE),
        Implementation(BONUS_TOKENS.name, "triton", module=EAGLE),
        Implementation(ASSIGN_REQ_TO_TOKEN.name, "triton", module="sglang.srt.mem_cache.allocation"),
        Implementation(MOVE_KV.name, "triton", module="sglang.kernels.ops.kvcache.cache_move",
                       static=(SGLANG_MOVE_KV_TRITON,)),
        Implementation(VERIFY_ATTENTION, "triton", module=sglang_tiles.MODULE, refuse=_refuse_bf16_interpreted,
                       static=(SGLANG_VERIFY_ATTENTION,)),
    )

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
