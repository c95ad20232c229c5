"""Where SGLang's releases (and the DDTree trees of SGLang) keep the commit family's kernels, written once: the
backends that call them (:mod:`ddtree_compat.backends.sglang_triton`, :mod:`~ddtree_compat.backends.sglang_torch`)
and the static tier that compiles them (:mod:`ddtree_compat.static.kernels`) read these tuples (newest first; see
:mod:`ddtree_compat.families.verify.places`)."""

from __future__ import annotations

from ...contract import Place
from ..verify.places import OLD, OPS

ACCEPT_OUT_CACHE_LOC_KERNEL = (Place(f"{OPS}.speculative.eagle", "fill_accept_out_cache_loc", "launch", "0.5.18+"),
                               Place(f"{OLD}.eagle", "fill_accept_out_cache_loc", "launch", "0.5.15, dbguo"))
ACCEPT_OUT_CACHE_LOC = (Place(f"{OPS}.speculative.eagle", "fill_accept_out_cache_loc_func", seen="0.5.18+"),
                        *ACCEPT_OUT_CACHE_LOC_KERNEL)
ASSIGN_EXTEND_CACHE_LOCS_KERNEL = (Place(f"{OPS}.speculative.cache_locs", "assign_extend_cache_locs", "launch",
                                         "0.5.18+"),
                                   Place(f"{OLD}.cache_locs", "assign_extend_cache_locs", "launch", "0.5.15"))
"""The kernel ``fill_front_out_cache_loc_func`` launches (the static tier compiles it)."""
FRONT_OUT_CACHE_LOC = (Place(f"{OPS}.speculative.cache_locs", "fill_front_out_cache_loc_func", seen="0.5.23"),)
COMMIT_OUTPUTS = (Place(f"{OPS}.speculative.eagle", "prepare_verify_commit_outputs", seen="0.5.22+"),)
BONUS_TOKENS = (Place(f"{OPS}.speculative.eagle", "fill_bonus_tokens_func", seen="0.5.18+"),
                Place(f"{OLD}.eagle", "fill_bonus_tokens", "launch", "0.5.15, dbguo, rancy-ddtree"))
ASSIGN_REQ_TO_TOKEN = (Place("sglang.srt.mem_cache.allocation", "assign_req_to_token_pool_func", seen="0.5.18+"),
                       Place(f"{OLD}.cache_locs", "assign_req_to_token_pool_func", seen="0.5.15"),
                       Place("sglang.srt.speculative.spec_utils", "assign_req_to_token_pool_func", seen="0.5.12"))
MOVE_KV_KERNEL = (Place(f"{OPS}.kvcache.cache_move", "copy_all_layer_kv_cache_tiled", "launch", "0.5.18+"),
                  Place("sglang.srt.mem_cache.triton_ops.cache_move", "copy_all_layer_kv_cache_tiled", "launch",
                        "0.5.15, DDTree trees of June 2026"),
                  Place("sglang.srt.mem_cache.memory_pool", "copy_all_layer_kv_cache_tiled", "launch", "0.5.12"))
"""The token KV pool's tiled copy kernel (the static tier compiles it; before 0.5.18 the pool launched it itself)."""
MOVE_KV = (Place(f"{OPS}.kvcache.cache_move", "copy_all_layer_kv_cache_func", seen="0.5.18+"), *MOVE_KV_KERNEL)
"""``move_kv`` on the token KV pool's default (Triton) path."""
MOVE_KV_TORCH = (Place("sglang.srt.mem_cache.memory_pool", "move_kv_cache_native", seen="0.5.12-0.5.23, DDTree trees"),)
"""``move_kv`` on the pool's torch fallback (``sglang-torch``)."""
