"""Where SGLang's releases (and the DDTree trees of SGLang) keep the verify family's kernels, written once: the
backends that call them (:mod:`ddtree_compat.backends.sglang_triton`, :mod:`~ddtree_compat.backends.sglang_cuda`)
and the static tier that compiles them (:mod:`ddtree_compat.static.kernels`) read these tuples.

A tuple lists a kernel's :class:`~ddtree_compat.contract.Place` s, newest first (:func:`~ddtree_compat.contract.locate`
takes the first the installed SGLang has). ``seen`` names the releases read (0.5.12, 0.5.15, 0.5.18, 0.5.20, 0.5.22,
0.5.23) and the DDTree trees; ``tests/unit/test_places.py`` holds each place said kept in the installed release to it.
"""

from __future__ import annotations

from ...contract import Place

OPS = "sglang.kernels.ops"
"""SGLang's kernel package since 0.5.18."""
OLD = "sglang.srt.speculative.triton_ops"
"""Where 0.5.15 and the June 2026 DDTree trees keep the speculative Triton kernels."""

VERIFY_TRITON_KERNEL = (Place(f"{OPS}.speculative.spec_tree", "verify_tree_greedy_kernel_triton", "launch", "0.5.18+"),
                        Place(f"{OLD}.spec_tree", "verify_tree_greedy_kernel_triton", "launch", "0.5.15"))
"""The ``@triton.jit`` kernel of SGLang's Triton tree verify: the static tier compiles it; a release whose wrapper
needs the whole server gets it launched as its wrapper launches it."""
VERIFY_TRITON = (Place(f"{OPS}.speculative.spec_tree", "verify_tree_greedy_triton", seen="0.5.23"),
                 Place("sglang.srt.speculative.eagle_utils", "verify_tree_greedy_triton", seen="0.5.15-0.5.22, ddtree-v2"),
                 *VERIFY_TRITON_KERNEL)
"""``verify_tree_greedy`` on SGLang's Triton path (``sglang-triton``)."""

VERIFY_CUDA = (Place(f"{OPS}.speculative.tree", "verify_tree_greedy", seen="0.5.22, 0.5.23"),
               Place("sgl_kernel", "verify_tree_greedy", seen="sgl-kernel 0.4 (releases before 0.5.22, rancy-ddtree)"))
"""``verify_tree_greedy`` as SGLang's tvm-ffi JIT CUDA kernel (``sglang-cuda``), else sgl-kernel's prebuilt op of the
same name and argument order, which releases before 0.5.22 and rancy-ddtree 398fc2c7 call
(``srt/speculative/eagle_utils.py``, ``verify_tree_greedy_func``)."""
VERIFY_CUDA_LOADER = (Place(f"{OPS}.speculative.tree", "_jit_tree_module", "loader", "0.5.22, 0.5.23"),)
"""The function whose call builds that kernel's JIT module (SGLang's ``load_jit``): the static tier runs it per arch."""
