"""Per-arch resource limits a kernel must fit to launch, and the check against them.

Sources (NVIDIA): CUDA C++ Programming Guide, "Compute Capabilities", table "Technical
Specifications per Compute Capability" (rows *Maximum number of threads per block*, *Maximum number
of 32-bit registers per thread*, *per thread block*, *Maximum amount of shared memory per thread
block*; the last is the opt-in maximum, ``cudaDevAttrMaxSharedMemoryPerBlockOptin``, which is what
Triton compares a kernel's shared memory with at load). The per-block shared-memory figures agree
with NVIDIA's CCCL ``cuda/experimental/__device/arch_traits.cuh`` (per-SM capacity minus the 1 KB the
driver reserves per block: sm80 164 - 1, sm86 100 - 1, sm90 228 - 1 KB) and CUTLASS
``cutlass/arch/arch.h`` (``sm90``/``sm100_smem_capacity_bytes = 232448``,
``sm120_smem_capacity_bytes = 101376``). On a GPU, ``tests/kernels/test_static.py`` checks the row
of each visible GPU against ``torch.cuda.get_device_properties``.

To add an architecture, add its row to :data:`LIMITS` (a unit test requires one per
:data:`ddtree_compat.arch.ARCHES` row).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ArchError

KB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """What one thread block may use on an arch.

    Attributes:
        smem_per_block: bytes of shared memory per block (static + dynamic), opt-in maximum.
        regs_per_thread: 32-bit registers per thread.
        regs_per_block: 32-bit registers per block (``regs_per_thread * threads`` must fit).
        threads_per_block: threads per block.
    """

    smem_per_block: int
    regs_per_thread: int = 255
    regs_per_block: int = 64 * KB
    threads_per_block: int = 1024


LIMITS: dict[str, ArchLimits] = {
    "sm80": ArchLimits(smem_per_block=163 * KB),   # A100: 164 KB per SM
    "sm86": ArchLimits(smem_per_block=99 * KB),    # GA10x: 100 KB per SM
    "sm87": ArchLimits(smem_per_block=163 * KB),   # Orin: 164 KB per SM
    "sm89": ArchLimits(smem_per_block=99 * KB),    # Ada: 100 KB per SM
    "sm90": ArchLimits(smem_per_block=227 * KB),   # H100/H200: 228 KB per SM
    "sm100": ArchLimits(smem_per_block=227 * KB),  # B200: 228 KB per SM
    "sm103": ArchLimits(smem_per_block=227 * KB),  # B300: 228 KB per SM
    "sm110": ArchLimits(smem_per_block=227 * KB),  # Thor: 228 KB per SM
    "sm120": ArchLimits(smem_per_block=99 * KB),   # RTX 50xx / RTX PRO 6000: 128 KB per SM
    "sm121": ArchLimits(smem_per_block=99 * KB),   # GB10: 128 KB per SM
}


def limits_for(arch: str) -> ArchLimits:
    """The row of ``arch``. Raises :class:`ArchError` for an arch without one."""
    if arch not in LIMITS:
        raise ArchError("arch", arch, ", ".join(LIMITS), "no resource-limits row")
    return LIMITS[arch]


@dataclass(frozen=True)
class Usage:
    """What one kernel launch asks of a block (from the cubin and the launch configuration).

    Attributes:
        regs: 32-bit registers per thread (cuobjdump ``REG``).
        static_smem: bytes of ``__shared__`` arrays (cuobjdump ``SHARED``).
        dynamic_smem: bytes of dynamic shared memory the launch requests (Triton's ``metadata.shared``).
        threads: threads per block (Triton ``num_warps * 32``; CUDA: the launch's block size).
    """

    regs: int
    static_smem: int
    dynamic_smem: int
    threads: int

    @property
    def smem(self) -> int:
        return self.static_smem + self.dynamic_smem


def over_limits(usage: Usage, arch: str) -> list[str]:
    """Every limit of ``arch`` that ``usage`` exceeds, one phrase each (``[]`` when it fits).

    Example phrase: ``"shared memory 131072 B > 101376 B per block"``.
    """
    lim = limits_for(arch)
    problems = []
    if usage.smem > lim.smem_per_block:
        problems.append(f"shared memory {usage.smem} B > {lim.smem_per_block} B per block")
    if usage.regs > lim.regs_per_thread:
        problems.append(f"registers {usage.regs} > {lim.regs_per_thread} per thread")
    if usage.threads > lim.threads_per_block:
        problems.append(f"threads {usage.threads} > {lim.threads_per_block} per block")
    if usage.regs * usage.threads > lim.regs_per_block:
        problems.append(f"registers {usage.regs} x {usage.threads} threads = {usage.regs * usage.threads}"
                        f" > {lim.regs_per_block} per block")
    return problems
