"""A test-only Triton kernel with a planted over-sized configuration (imported by the compile worker only).

``oversized_smem_kernel`` is a pipelined ``tl.dot`` loop. With ``BM = BN = 128``, ``BK = 128`` fp16 and
``num_stages = 4`` (:class:`ddtree_compat.faultinject.OversizedSmem`), Triton 3.6 stages its operand tiles
in shared memory: 160 KB on sm90 (wgmma pipeline; fits the 227 KB per block there), 128 KB on sm80
(fits 163 KB) and 128 KB on sm120 (over its 99 KB). The static tier
must call the sm120 cell ``out of resources`` and pass the sm90 one; ``tests/kernels/test_static.py``
checks both. It is launched by no backend's verify path (see :class:`ddtree_compat.faultinject.OversizedSmem`).
"""

import triton
import triton.language as tl


@triton.jit
def oversized_smem_kernel(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
