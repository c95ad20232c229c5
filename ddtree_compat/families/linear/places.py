"""Where SGLang's releases (and the DDTree trees of SGLang) keep the linear-attention family's kernels, written once:
the backends that call them (:mod:`ddtree_compat.backends.sglang_triton`, :mod:`~ddtree_compat.backends.flashinfer`)
and the static tier that compiles them read these tuples (newest first; see
:mod:`ddtree_compat.families.verify.places`). Releases read: 0.5.12, 0.5.15, 0.5.18, 0.5.20, 0.5.22, 0.5.23."""

from __future__ import annotations

from ...contract import Place
from ..verify.places import OPS

MAMBA_OLD = "sglang.srt.layers.attention.mamba"
"""Where releases before 0.5.18 and the June 2026 DDTree trees keep the conv and state-scatter kernels."""

GDN_RECURRENT_KERNEL = (
    Place(f"{OPS}.attention.linear.fused_sigmoid_gating_recurrent", "fused_sigmoid_gating_delta_rule_update_kernel",
          "launch", "0.5.23"),
    Place(f"{OPS}.attention.fla.fused_sigmoid_gating_recurrent", "fused_sigmoid_gating_delta_rule_update_kernel",
          "launch", "0.5.18-0.5.22, rancy-ddtree-v2"),
    Place("sglang.srt.layers.attention.fla.fused_sigmoid_gating_recurrent",
          "fused_sigmoid_gating_delta_rule_update_kernel", "launch", "0.5.12-0.5.15, rancy-ddtree, dbguo"))
"""The gated delta rule's ``@triton.jit`` kernel (the static tier compiles it)."""
GDN_RECURRENT = (
    Place(f"{OPS}.attention.linear.fused_sigmoid_gating_recurrent", "fused_sigmoid_gating_delta_rule_update",
          seen="0.5.23"),
    Place(f"{OPS}.attention.fla.fused_sigmoid_gating_recurrent", "fused_sigmoid_gating_delta_rule_update",
          seen="0.5.18-0.5.22, rancy-ddtree-v2"),
    Place("sglang.srt.layers.attention.fla.fused_sigmoid_gating_recurrent", "fused_sigmoid_gating_delta_rule_update",
          seen="0.5.12-0.5.15, rancy-ddtree, dbguo"))
"""The Triton GDN kernel backend's ``target_verify`` (``TritonGDNKernel``) calls this wrapper."""
CONV_UPDATE_KERNEL = (Place(f"{OPS}.mamba.causal_conv1d_triton", "_causal_conv1d_update_kernel", "launch", "0.5.18+"),
                      Place(f"{MAMBA_OLD}.causal_conv1d_triton", "_causal_conv1d_update_kernel", "launch",
                            "0.5.12-0.5.15, rancy-ddtree, dbguo"))
CONV_UPDATE = (Place(f"{OPS}.mamba.causal_conv1d_triton", "causal_conv1d_update", seen="0.5.18+"),
               Place(f"{MAMBA_OLD}.causal_conv1d_triton", "causal_conv1d_update", seen="0.5.12-0.5.15, rancy-ddtree, dbguo"))
"""The GDN backend's verify-time short convolution (``causal_conv1d_update`` with the retrieve links)."""
SSM_SCATTER_KERNEL = (Place(f"{OPS}.mamba.mamba_state_scatter_triton", "_fused_mamba_state_scatter_with_mask_kernel",
                            "launch", "0.5.18+"),
                      Place(f"{MAMBA_OLD}.mamba_state_scatter_triton", "_fused_mamba_state_scatter_with_mask_kernel",
                            "launch", "0.5.12-0.5.15, rancy-ddtree, dbguo"))
SSM_SCATTER = (Place(f"{OPS}.mamba.mamba_state_scatter_triton", "fused_mamba_state_scatter_with_mask", seen="0.5.18+"),
               Place(f"{MAMBA_OLD}.mamba_state_scatter_triton", "fused_mamba_state_scatter_with_mask",
                     seen="0.5.12-0.5.15, rancy-ddtree, dbguo"),
               *SSM_SCATTER_KERNEL)
"""The recurrent-state commit (``update_mamba_state_after_mtp_verify``); on a CPU target its kernel, launched as the
wrapper launches it (the wrapper accepts CUDA tensors only)."""
CONV_SCATTER_KERNEL = (Place(f"{OPS}.mamba.mamba_state_scatter_triton", "_fused_conv_window_scatter_with_mask_kernel",
                             "launch", "0.5.18+"),
                       Place(f"{MAMBA_OLD}.mamba_state_scatter_triton", "_fused_conv_window_scatter_with_mask_kernel",
                             "launch", "0.5.15"))
CONV_SCATTER = (Place(f"{OPS}.mamba.mamba_state_scatter_triton", "fused_conv_window_scatter_with_mask", seen="0.5.18+"),
                Place(f"{MAMBA_OLD}.mamba_state_scatter_triton", "fused_conv_window_scatter_with_mask", seen="0.5.15"),
                *CONV_SCATTER_KERNEL)
"""The conv-window commit (0.5.15+; 0.5.12 and the June 2026 DDTree trees have no such kernel)."""
FLASHINFER_GDN = (Place("sglang.srt.layers.attention.linear.kernels.gdn_flashinfer", "FlashInferGDNKernel",
                        seen="0.5.12+"),)
"""SGLang's FlashInfer GDN kernel class: its ``target_verify`` runs FlashInfer's ``gated_delta_rule_mtp`` (chains
only; SM90 and SM100)."""
FLASHINFER_GDN_STATE = {9: "fp32", 10: "bf16"}
"""The state pool dtype SGLang pairs with FlashInfer's GDN kernels per arch major (``flashinfer_gdn_prefill_default``:
SM90's fused Hopper kernel on fp32, SM100's on bf16); other archs run SGLang's Triton kernel in verify."""
CUTEDSL_GDN_MTP_RING = (Place(f"{OPS}.attention.cutedsl_gdn_mtp_ring", "gated_delta_rule_mtp", seen="0.5.23"),)
"""SGLang's own CuTe DSL GDN kernel for chain verify: the ReplaySSM fold (``--enable-linear-replayssm``) calls it in
ring mode when the verify is FlashInfer's with a bf16 state and at least 3 draft tokens
(``GDNAttnBackend._replayssm_fold_uses_cutedsl``); chains only. (``CuteDSLGDNKernel`` itself has no target verify:
under ``--linear-attn-decode-backend cutedsl`` SGLang verifies with the Triton kernel.) Its module asks the GPU for
its SM count and compute capability when imported."""
