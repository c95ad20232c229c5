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
another arch's (:mod:`ddtree_compat.families.attention.tiles`). And the rejection sampler,
``chain_speculative_sampling_triton`` (``...speculative.reject_sampling``; block verification where the release has
it): the sampling verify of ``--speculative-use-rejection-sampling``.
"""

from __future__ import annotations

from contextlib import nullcontext

from .._triton_env import interpreter_scalar_index
from ..contract import Backend, KernelImpl, interpreter_on, locate
from .linear_calls import LinearCalls
from ..families.attention import places as attention_places
from ..families.attention import tiles as sglang_tiles
from ..families.attention.records import KERNEL as VERIFY_ATTENTION
from ..families.commit import places as commit_places
from ..families.linear import places as linear_places
from ..families.linear.records import (conv_build, CONV_VERIFY_TREE, CONV_WINDOW_COMMIT, GDN_VERIFY_CHAIN, GDN_VERIFY_TREE,
                                       SSM_STATE_COMMIT)
from ..families.commit.records import ACCEPT_OUT_CACHE_LOC, ASSIGN_REQ_TO_TOKEN, BONUS_TOKENS, COMMIT_OUTPUTS, FRONT_OUT_CACHE_LOC, MOVE_KV
from ..families.sampling.places import CHAIN_SAMPLING
from ..families.sampling.records import CHAIN as CHAIN_SAMPLING_KERNEL, interpret_refusal
from ..families.verify.places import VERIFY_TRITON
from ..families.verify.records import VERIFY
from ..static.kernels import (SGLANG_CONV_VERIFY_TRITON, SGLANG_GDN_VERIFY_CHAIN_TRITON, SGLANG_GDN_VERIFY_TREE_TRITON,
                              SGLANG_CHAIN_SAMPLING_TRITON, SGLANG_FILL_ACCEPT_TRITON, SGLANG_FRONT_OUT_TRITON,
                              SGLANG_MOVE_KV_TRITON, SGLANG_VERIFY_ATTENTION, SGLANG_VERIFY_TRITON, kv_copy_config)

PLACES = {  # kernel -> where releases keep it (the families' places.py); first found wins
    VERIFY: VERIFY_TRITON,
    ACCEPT_OUT_CACHE_LOC.name: commit_places.ACCEPT_OUT_CACHE_LOC,
    FRONT_OUT_CACHE_LOC.name: commit_places.FRONT_OUT_CACHE_LOC,
    COMMIT_OUTPUTS.name: commit_places.COMMIT_OUTPUTS,
    BONUS_TOKENS.name: commit_places.BONUS_TOKENS,
    ASSIGN_REQ_TO_TOKEN.name: commit_places.ASSIGN_REQ_TO_TOKEN,
    MOVE_KV.name: commit_places.MOVE_KV,
    VERIFY_ATTENTION: attention_places.EXTEND_ATTENTION,
    CHAIN_SAMPLING_KERNEL: CHAIN_SAMPLING,
    GDN_VERIFY_TREE.name: linear_places.GDN_RECURRENT,
    GDN_VERIFY_CHAIN.name: linear_places.GDN_RECURRENT,
    CONV_VERIFY_TREE.name: linear_places.CONV_UPDATE,
    SSM_STATE_COMMIT.name: linear_places.SSM_SCATTER,
    CONV_WINDOW_COMMIT.name: linear_places.CONV_SCATTER,
}


LAUNCHED = {SSM_STATE_COMMIT.name: linear_places.SSM_SCATTER_KERNEL,
            CONV_WINDOW_COMMIT.name: linear_places.CONV_SCATTER_KERNEL}
"""The commits' kernels, launched as their wrappers launch them where the wrappers refuse host tensors (the
interpret tier)."""


def _next_pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _interpreted():
    """Triton 3.6's interpreter needs :func:`~ddtree_compat._triton_env.interpreter_scalar_index` for SGLang's
    kernels with a data-dependent loop count (``assign_extend_cache_locs``, ``assign_req_to_token_pool``,
    the attention prefix loop, the rejection sampler's walk) under NumPy >= 2.4 (triton-lang/triton#9171); compiled Triton never needs it."""
    return interpreter_scalar_index() if interpreter_on() else nullcontext()


def _refuse_attention(target, case) -> str | None:
    """bf16 on the interpret tier: Triton's interpreter stores bf16 as uint16 and its ``tl.dot``
    multiplies the bit patterns (triton-lang/triton#11584; bf16 arithmetic is unsupported there). A paged
    case on a release whose ``extend_attention_fwd`` takes no ``page_size`` (0.5.12, the June 2026 DDTree
    trees)."""
    if target.tier == "interpret" and case.dtype == "bf16":
        return ("Triton's interpreter has no bf16 arithmetic (tl.dot multiplies the uint16 bit patterns, "
                "triton-lang/triton#11584): bf16 runs on the device tier")
    if case.page_size != 1:
        import inspect

        fn, place = locate(PLACES[VERIFY_ATTENTION])
        if "page_size" not in inspect.signature(fn).parameters:
            return f"{place} takes no page_size in this sglang: page size {case.page_size} cannot be expressed"
    return None


def _refuse_sampling(target, case) -> str | None:
    """Block verification where the installed release's rejection sampler has no ``block_verification``
    (before 0.5.22); on the interpret tier, distribution cases but one (:func:`interpret_refusal`)."""
    why = interpret_refusal(target, case)
    if why or case is None or not case.block:
        return why
    import inspect

    fn, place = locate(PLACES[CHAIN_SAMPLING_KERNEL])
    if "block_verification" not in inspect.signature(fn).parameters:
        return f"{place} has no block_verification in this sglang: block verification cannot be expressed"
    return None


class SGLangTritonBackend(LinearCalls, Backend):
    name = "sglang-triton"
    attention_tiles = True  # verify_attention can run another arch's tile choice (families/attention/tiles.py)
    # each with its static-tier entries (compiled for every arch): the verify kernel, the commit step's
    # kernels and the verify attention (each arch's own tile choice)
    implements = (
        KernelImpl(VERIFY, "triton", places=PLACES[VERIFY], static=(SGLANG_VERIFY_TRITON,)),
        KernelImpl(ACCEPT_OUT_CACHE_LOC.name, "triton", places=PLACES[ACCEPT_OUT_CACHE_LOC.name],
                       static=(SGLANG_FILL_ACCEPT_TRITON,)),
        KernelImpl(FRONT_OUT_CACHE_LOC.name, "triton", places=PLACES[FRONT_OUT_CACHE_LOC.name],
                       static=(SGLANG_FRONT_OUT_TRITON,)),
        KernelImpl(COMMIT_OUTPUTS.name, "triton", places=PLACES[COMMIT_OUTPUTS.name]),
        KernelImpl(BONUS_TOKENS.name, "triton", places=PLACES[BONUS_TOKENS.name]),
        KernelImpl(ASSIGN_REQ_TO_TOKEN.name, "triton", places=PLACES[ASSIGN_REQ_TO_TOKEN.name]),
        KernelImpl(MOVE_KV.name, "triton", places=PLACES[MOVE_KV.name], static=(SGLANG_MOVE_KV_TRITON,)),
        KernelImpl(VERIFY_ATTENTION, "triton", places=PLACES[VERIFY_ATTENTION], refuse=_refuse_attention,
                       static=(SGLANG_VERIFY_ATTENTION,)),
        KernelImpl(CHAIN_SAMPLING_KERNEL, "triton", places=PLACES[CHAIN_SAMPLING_KERNEL], refuse=_refuse_sampling,
                   static=(SGLANG_CHAIN_SAMPLING_TRITON,)),
        KernelImpl(GDN_VERIFY_TREE.name, "triton", places=PLACES[GDN_VERIFY_TREE.name],
                   static=(SGLANG_GDN_VERIFY_TREE_TRITON,)),
        KernelImpl(GDN_VERIFY_CHAIN.name, "triton", places=PLACES[GDN_VERIFY_CHAIN.name],
                   static=(SGLANG_GDN_VERIFY_CHAIN_TRITON,)),
        KernelImpl(CONV_VERIFY_TREE.name, "triton", places=PLACES[CONV_VERIFY_TREE.name], build_key=conv_build,
                   static=(SGLANG_CONV_VERIFY_TRITON,)),
        *(KernelImpl(r.name, "triton", places=PLACES[r.name]) for r in (SSM_STATE_COMMIT, CONV_WINDOW_COMMIT)),
    )

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        """``verify_tree_greedy_triton``; where only its kernel imports, the kernel launched as that wrapper
        launches it: grid ``(bs,)``, ``batch_size = bs``, ``num_speculative_tokens = accept_index.shape[1]``,
        ``num_draft_tokens = candidates.shape[1]``."""
        fn, place = locate(PLACES[VERIFY])
        args = (predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                retrive_next_sibling, target_predict)
        if place.kind == "launch":
            fn[(candidates.shape[0],)](*args, batch_size=candidates.shape[0],
                                       num_speculative_tokens=accept_index.shape[1],
                                       num_draft_tokens=candidates.shape[1])
        else:
            fn(*args)

    def chain_speculative_sampling(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                                   retrive_next_token, retrive_next_sibling, uniform_samples,
                                   uniform_samples_for_final_sampling, target_probs, draft_probs,
                                   threshold_single=1.0, threshold_acc=1.0, deterministic=True,
                                   block_verification=False) -> None:
        """``chain_speculative_sampling_triton`` as SGLang's workers call it; ``block_verification`` passed only
        when set (releases before 0.5.22 have no such keyword: :func:`_refuse_sampling`)."""
        fn, _ = locate(PLACES[CHAIN_SAMPLING_KERNEL])
        extra = {"block_verification": True} if block_verification else {}
        with _interpreted():
            fn(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
               retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs,
               threshold_single, threshold_acc, deterministic, **extra)

    # ---- commit kernels

    def accept_out_cache_loc(self, accept_index, out_cache_loc, accept_out_cache_loc) -> None:
        """``fill_accept_out_cache_loc_func(..., size)``; 0.5.15's launch: grid ``(size,)``,
        ``size_upper = next_pow2(size)``, ``size = bs * accept_index.shape[1]``."""
        fn, place = locate(PLACES[ACCEPT_OUT_CACHE_LOC.name])
        size = accept_index.numel()
        if place.kind == "launch":
            fn[(size,)](accept_index, out_cache_loc, accept_out_cache_loc, size_upper=_next_pow2(size))
        else:
            fn(accept_index, out_cache_loc, accept_out_cache_loc, size)

    def front_out_cache_loc(self, num_front, out_cache_loc, front_out_cache_loc) -> None:
        fn, _ = locate(PLACES[FRONT_OUT_CACHE_LOC.name])
        with _interpreted():
            fn(num_front, out_cache_loc, front_out_cache_loc)

    def commit_outputs(self, predict, accept_index, accept_lens, seq_lens):
        fn, _ = locate(PLACES[COMMIT_OUTPUTS.name])
        return fn(predict, accept_index, accept_lens, seq_lens)

    def bonus_tokens(self, accept_tokens, accept_lens, bonus, accept_stride) -> None:
        """``fill_bonus_tokens_func(..., accept_stride, bs)``; 0.5.15's launch: grid ``(bs,)``, constexpr
        ``accept_stride = accept_index.shape[1]``."""
        fn, place = locate(PLACES[BONUS_TOKENS.name])
        if place.kind == "launch":
            fn[(accept_lens.numel(),)](accept_tokens, accept_lens, bonus, accept_stride=accept_stride)
        else:
            fn(accept_tokens, accept_lens, bonus, accept_stride, accept_lens.numel())

    def assign_req_to_token(self, req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc) -> None:
        fn, _ = locate(PLACES[ASSIGN_REQ_TO_TOKEN.name])
        with _interpreted():
            fn(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, req_pool_indices.numel())

    # ---- verify attention

    def attention_tile_choice(self, tiles: str, head_dim: int) -> dict:
        """SGLang's tile choice for ``tiles`` (``native`` or an arch name) at this head_dim."""
        return sglang_tiles.tile_choice(tiles, head_dim)

    def verify_attention(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                         mask_indptr, max_len_extend, sm_scale, page_size, tiles="native") -> dict | None:
        """``extend_attention_fwd`` as SGLang's Triton backend calls it in target verify (``is_causal=True``,
        unit ``k_scale``/``v_scale``, the prefix's mask columns skipped: its default), under ``tiles``'
        tile choice; returns the recorded launch (tile sizes, warps, grid). ``page_size`` is passed where
        the release takes it (0.5.15+)."""
        import inspect

        fn, _ = locate(PLACES[VERIFY_ATTENTION])
        extra = {"page_size": page_size} if "page_size" in inspect.signature(fn).parameters else {}
        with _interpreted(), sglang_tiles.capability(tiles), sglang_tiles.record_launch() as launches:
            fn(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, True,
               mask_indptr, max_len_extend, 1.0, 1.0, sm_scale=sm_scale, **extra)
        return launches[-1] if launches else None

    def move_kv(self, k_buffers, v_buffers, tgt_loc, src_loc) -> None:
        """The token KV pool's ``move_kv_cache`` (``MHATokenToKVPool``, default path): one launch per
        ``num_locs_upper`` slots, every layer's K and V rows by pointer table (``copy_all_layer_kv_cache_func``;
        before 0.5.18 the pool launched ``copy_all_layer_kv_cache_tiled`` itself, the same way: grid
        ``(buffers, byte tiles)``, ``num_stages=2``)."""
        import torch

        fn, place = locate(PLACES[MOVE_KV.name])
        buffers = [*k_buffers, *v_buffers]
        device = tgt_loc.device
        ptrs = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.uint64, device=device)
        strides = torch.tensor([b.stride(0) * b.element_size() for b in buffers], dtype=torch.int64, device=device)
        config = kv_copy_config(buffers[0].stride(0) * buffers[0].element_size())
        n, cap = tgt_loc.numel(), config["num_locs_upper"]
        for start in range(0, n, cap):
            count = min(cap, n - start)
            tgt, src = tgt_loc[start:start + count], src_loc[start:start + count]
            if place.kind == "launch":
                fn[(len(buffers), config["byte_tiles"])](ptrs, strides, tgt, src, count,
                                                         num_locs_upper=_next_pow2(count),
                                                         BYTES_PER_TILE=config["bytes_per_tile"],
                                                         num_warps=config["num_warps"], num_stages=2)
            else:
                fn(ptrs, strides, tgt, src, count, _next_pow2(count), config)

    # ---- linear attention (families/linear): the calls are LinearCalls'; here, where this release keeps them

    def linear_function(self, kernel: str, on_host: bool):
        """The function a linear-attention kernel calls: where the release keeps its wrapper, or (``on_host``, for
        the commits, whose wrappers refuse host tensors) its ``@triton.jit`` kernel."""
        return locate(LAUNCHED[kernel] if on_host and kernel in LAUNCHED else PLACES[kernel])
