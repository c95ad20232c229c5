"""Where SGLang's releases keep the sampling family's kernels, written once: the backends that call them and the
static tier that compiles them read these tuples (newest first; see :mod:`ddtree_compat.families.verify.places`).
Facts read from the releases' sources (``docs/sampling-kernels.md``)."""

from __future__ import annotations

from ...contract import Place
from ..verify.places import OPS

TREE_SAMPLING = (Place(f"{OPS}.speculative.sampling", "tree_speculative_sampling_target_only", seen="0.5.22, 0.5.23"),
                 Place("sgl_kernel", "tree_speculative_sampling_target_only",
                       seen="sglang-kernel 0.4.2.post2 .. 0.4.7 (SGLang 0.5.12-0.5.20)"))
"""``tree_speculative_sampling_target_only``: SGLang's tvm-ffi JIT CUDA kernel (0.5.22+), else sgl-kernel's prebuilt
op of the same name, which older releases call."""
TREE_SAMPLING_LOADER = (Place(f"{OPS}.speculative.sampling", "_jit_sampling_module", "loader", "0.5.22, 0.5.23"),)
"""The function whose call builds the tree sampler's JIT module, ``(vec_size, deterministic)``: the static tier runs it
per arch."""
CHAIN_SAMPLING_KERNEL = (Place(f"{OPS}.speculative.reject_sampling", "speculative_sampling_classic_kernel", "launch",
                               "0.5.18+"),
                         Place("sglang.srt.speculative.reject_sampling", "speculative_sampling_classic_kernel", "launch",
                               "0.5.15"))
"""The ``@triton.jit`` kernel of the chain sampler (the static tier compiles it)."""
CHAIN_SAMPLING = (Place(f"{OPS}.speculative.reject_sampling", "chain_speculative_sampling_triton", seen="0.5.18+"),
                  Place("sglang.srt.speculative.reject_sampling", "chain_speculative_sampling_triton", seen="0.5.15"))
"""``chain_speculative_sampling_triton``: rejection sampling (and, 0.5.22+, block verification)."""
