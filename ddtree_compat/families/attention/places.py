"""Where SGLang's releases, FlashInfer and sgl-kernel keep the verify-attention family's kernels, written once: the
backends that call them, SGLang's tile table (:mod:`.tiles`) and the static tier that compiles them read these
tuples (newest first; see :mod:`ddtree_compat.families.verify.places`)."""

from __future__ import annotations

from ...contract import Place

EXTEND_MODULE = "sglang.kernels.ops.attention.extend_attention"
OLD_EXTEND_MODULE = "sglang.srt.layers.attention.triton_ops.extend_attention"
EXTEND_ATTENTION = (Place(EXTEND_MODULE, "extend_attention_fwd", seen="0.5.18+, ddtree-v2"),
                    Place(OLD_EXTEND_MODULE, "extend_attention_fwd", seen="0.5.12, 0.5.15, the June 2026 DDTree trees"))
"""SGLang's Triton verify attention, ``extend_attention_fwd`` (its target verify on the ``triton`` backend)."""
EXTEND_ATTENTION_KERNEL = (Place(EXTEND_MODULE, "_fwd_kernel", "launch", "0.5.18+, ddtree-v2"),
                           Place(OLD_EXTEND_MODULE, "_fwd_kernel", "launch", "0.5.12, 0.5.15, the June 2026 DDTree trees"))
"""The ``@triton.jit`` kernel ``extend_attention_fwd`` launches (the static tier compiles it per arch)."""
FLASHINFER_PREFILL = (Place("flashinfer.prefill", "BatchPrefillWithPagedKVCacheWrapper",
                            seen="flashinfer-python 0.6, 0.7"),)
"""FlashInfer's paged prefill wrapper, which SGLang's ``flashinfer`` backend plans with a custom mask for target verify."""
FA3 = (Place("sgl_kernel.flash_attn", "flash_attn_with_kvcache", seen="sglang-kernel 0.4.3, 0.4.5"),)
"""SGLang's FA3 (sgl-kernel's ``flash_ops``), which its ``fa3`` attention backend calls for target verify."""
MERGE_STATE = (Place("sgl_kernel", "merge_state_v2", seen="sglang-kernel 0.4.3, 0.4.5"),)
"""The cascade's merge of two attention passes by their log-sum-exp (sgl-kernel's prebuilt ``common_ops``)."""
