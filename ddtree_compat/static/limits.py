"""Per-arch resource limits a kernel must fit to launch, and the check against them.

The limits themselves are columns of the arch table (:class:`ddtree_compat.arch.Arch`: shared memory,
registers and threads per block, with their NVIDIA sources); this module compares a kernel's usage
with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arch import ARCHES, Arch
from ..errors import ArchError


def limits_for(arch: str) -> Arch:
    """The row of ``arch`` (its ``smem_per_block``, ``regs_per_thread``, ``regs_per_block``,
    ``threads_per_block``). Raises :class:`ArchError` for an arch the table lacks."""
    if arch not in ARCHES:
        raise ArchError("arch", arch, ", ".join(ARCHES), "no row in the arch table")
    return ARCHES[arch]


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
