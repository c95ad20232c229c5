"""Planted faults (test-only): backends whose kernels fault on purpose, one fault class each, and the static tier's
planted kernel (:class:`OversizedSmem`, whose compile must be ``out of resources`` on the 99 KB-per-block archs).

Each GPU injector is a ``verify_tree_greedy`` backend for the device tier that launches a small Triton kernel doing
exactly one bad thing, so a sweep mixing them with good cells proves that every fault lands on its
own cell with the right class and that good cells after it still pass (the worker is replaced).

=====================  =======================================================  ==========================
backend                what the kernel does                                      expected class
=====================  =======================================================  ==========================
``fault-oob-write``    stores 4 bytes 2**40 bytes past an output                 illegal-memory-access
``fault-misaligned``   loads an int64 from an odd byte address                   misaligned-address
``fault-assert``       ``tl.device_assert`` on a false condition (debug build)   device-side-assert
``fault-trap``         PTX ``trap``                                              launch-failure
``fault-illegal-insn`` PTX indirect ``call`` to code address 4096                illegal-instruction
``fault-hang``         spins until a flag no one sets                            hang (needs ``--timeout``)
``fault-oom``          allocates 16 TiB                                          out-of-memory (not sticky)
=====================  =======================================================  ==========================

Seen on the H200 (driver 580.159, 2026-11-30): the indirect call raises
``cudaErrorIllegalInstruction``; PTX ``brkpt`` without a debugger reports ``unspecified launch failure``
like ``trap``; ``setmaxnreg`` outside a warpgroup-aligned region raised nothing.
"""

from __future__ import annotations

from ._triton_env import triton_or_none
from .backends.oracle_column import OracleBackend
from .contract import Backend, KernelImpl, Place, with_static
from .families.verify.records import VERIFY
from .static.build import Spec
from .static.kernels import TritonKernel

triton, tl = triton_or_none()

if triton is not None:

    @triton.jit
    def _oob_write(out_ptr):
        tl.store(out_ptr + (1 << 38), 7)  # int32 elements: 2**40 bytes past the buffer

    @triton.jit
    def _misaligned_read(in_ptr, out_ptr):
        odd = (in_ptr.to(tl.pointer_type(tl.int8)) + 1).to(tl.pointer_type(tl.int64))
        tl.store(out_ptr, tl.load(odd).to(tl.int32))

    @triton.jit(debug=True)
    def _device_assert(out_ptr):
        x = tl.load(out_ptr)
        tl.device_assert(x == 123456789, "injected device-side assert")

    @triton.jit
    def _inline(out_ptr, ASM: tl.constexpr):
        x = tl.load(out_ptr)
        y = tl.inline_asm_elementwise(ASM, "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)
        tl.store(out_ptr, y)

    @triton.jit
    def _spin(flag_ptr, out_ptr):
        v = tl.load(flag_ptr, volatile=True)
        while v == 0:
            v = tl.load(flag_ptr, volatile=True)
        tl.store(out_ptr, v)


class _Injector(Backend):
    name = "fault"
    expected_fault = "other"
    implements = (KernelImpl(VERIFY, "cuda", what="fault injection (a real CUDA device)",
                                 places=(Place("triton", "jit"),)),)

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        self.inject(predicts, candidates)

    def inject(self, out, scratch) -> None:
        raise NotImplementedError


class OobWrite(_Injector):
    name, expected_fault = "fault-oob-write", "illegal-memory-access"

    def inject(self, out, scratch):
        _oob_write[(1,)](out)


class Misaligned(_Injector):
    name, expected_fault = "fault-misaligned", "misaligned-address"

    def inject(self, out, scratch):
        _misaligned_read[(1,)](scratch, out)


class DeviceAssert(_Injector):
    name, expected_fault = "fault-assert", "device-side-assert"

    def inject(self, out, scratch):
        _device_assert[(1,)](out)


class Trap(_Injector):
    name, expected_fault = "fault-trap", "launch-failure"

    def inject(self, out, scratch):
        _inline[(1,)](out, ASM="trap; mov.b32 $0, $1;")


class IllegalInstruction(_Injector):
    name, expected_fault = "fault-illegal-insn", "illegal-instruction"

    def inject(self, out, scratch):
        _inline[(1,)](out, ASM="{ .reg .b64 f; prot: .callprototype ()_ (); mov.b64 f, 4096; call f, prot; } "
                               "mov.b32 $0, $1;")


class Hang(_Injector):
    name, expected_fault = "fault-hang", "hang"

    def inject(self, out, scratch):
        import torch

        flag = torch.zeros(1, dtype=torch.int32, device=out.device)
        _spin[(1,)](flag, out)


class Oom(_Injector):
    name, expected_fault = "fault-oom", "out-of-memory"

    def inject(self, out, scratch):
        import torch

        torch.empty(1 << 44, dtype=torch.uint8, device=out.device)


INJECTORS = (OobWrite, Misaligned, DeviceAssert, Trap, IllegalInstruction, Hang, Oom)


# --------------------------------------------------------------------------------------------------
# CPU fault backends: the same fault classes without a GPU (containment tests on any host)
# --------------------------------------------------------------------------------------------------


class Raises(OracleBackend):
    """Raises a CUDA-style error (classified ``illegal-instruction``)."""

    name = "mutant-raises"

    def verify_tree_greedy(self, *args) -> None:
        raise RuntimeError("CUDA error: an illegal instruction was encountered")


class RaisesOOM(OracleBackend):
    """Raises an out-of-memory error: a fault, but not sticky (the worker goes on)."""

    name = "mutant-oom"

    def verify_tree_greedy(self, *args) -> None:
        raise RuntimeError("CUDA out of memory. Tried to allocate 16.00 TiB")


class Aborts(OracleBackend):
    """Kills its own process (SIGABRT), as a crashing native library would: the controller records it."""

    name = "mutant-aborts"

    def verify_tree_greedy(self, *args) -> None:
        import os

        os.abort()


class Hangs(OracleBackend):
    """Never returns (a kernel spinning forever): the per-case timeout kills the worker; class ``hang``."""

    name = "mutant-hangs"

    def verify_tree_greedy(self, *args) -> None:
        import time

        while True:
            time.sleep(1)


class Slow(OracleBackend):
    """Correct but takes 0.3 s a cell: for killing a run midway and resuming it."""

    name = "mutant-slow"

    def verify_tree_greedy(self, *args) -> None:
        import time

        time.sleep(0.3)
        super().verify_tree_greedy(*args)


# --------------------------------------------------------------------------------------------------
# The static tier's planted kernel: a resource fault, found at compile time
# --------------------------------------------------------------------------------------------------


def _oversized_spec(case, arch: str) -> Spec:
    return Spec("bm128-bn128-bk128-s4", (("BM", 128), ("BN", 128), ("BK", 128)), num_warps=8, num_stages=4)


class OversizedSmem(OracleBackend):
    """Correct verify, plus a planted static kernel (:mod:`ddtree_compat.static.planted`) whose shared
    memory (128 KB on sm120, 160 KB on sm90) fits sm90's 227 KB per block but not sm120's 99 KB: its
    static cells are ``out of resources`` on sm86/sm89/sm120/sm121 and pass elsewhere."""

    name = "mutant-oversized-smem"
    PLANTED = TritonKernel(kernel="oversized_smem_kernel", fn="ddtree_compat.static.planted:oversized_smem_kernel",
                           signature=(("a_ptr", "*fp16"), ("b_ptr", "*fp16"), ("c_ptr", "*fp32"), ("K", "i32")),
                           specialize=_oversized_spec)
    implements = with_static(OracleBackend.implements, VERIFY, (PLANTED,))
