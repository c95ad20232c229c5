"""``sglang-torch``: SGLang's torch-native KV move, ``move_kv_cache_native``
(``sglang.srt.mem_cache.memory_pool``, sglang 0.5.23): per-layer ``[slots, heads, head_dim]`` pools,
``k[tgt_loc] = k[src_loc]`` by advanced indexing (the compacting commit of DDTree PR #27509; the
pool's path with ``SGLANG_NATIVE_MOVE_KV_CACHE``; its default Triton copy is ``sglang-triton``'s
``move_kv``). Importing the memory pool runs ``sglang.srt.configs``, which needs transformers and
torchvision (PyPI's torchvision is a CUDA build that does not import under the CPU torch), so on a
CPU box this is a skip with that reason; it runs wherever the module imports.
"""

from __future__ import annotations

from ..contract import Backend, KernelImpl, locate
from ..families.commit.places import MOVE_KV_TORCH as PLACES
from ..families.commit.records import MOVE_KV


class SGLangTorchBackend(Backend):
    name = "sglang-torch"
    implements = (KernelImpl(MOVE_KV.name, "torch", what="SGLang's move_kv_cache_native", places=PLACES),)

    def move_kv(self, k_buffers, v_buffers, tgt_loc, src_loc) -> None:
        move_kv_cache_native, _ = locate(PLACES)
        move_kv_cache_native(k_buffers, v_buffers, tgt_loc, src_loc)  # page_size (0.5.15-0.5.18) defaults to 1
