"""``sglang-torch``: SGLang's torch-native KV move, ``move_kv_cache_native``
(``sglang.srt.mem_cache.memory_pool``, sglang 0.5.23): per-layer ``[slots, heads, head_dim]`` pools,
``k[tgt_loc] = k[src_loc]`` by advanced indexing (the compacting commit of DDTree PR #27509).
Importing the memory pool pulls in transformers and torchvision, so on a bare CPU box this is a skip.
"""

from __future__ import annotations

from ..tiers import Target
from ._sglang import device_reason, import_error

MODULE = "sglang.srt.mem_cache.memory_pool"


class SGLangTorchBackend:
    name = "sglang-torch"

    def unavailable_reason(self, target: Target) -> str | None:
        if target.tier == "device":
            reason = device_reason(target)
            if reason:
                return reason
        return import_error(MODULE)

    def move_kv(self, k_buffers, v_buffers, tgt_loc, src_loc) -> None:
        from sglang.srt.mem_cache.memory_pool import move_kv_cache_native

        move_kv_cache_native(k_buffers, v_buffers, tgt_loc, src_loc)
