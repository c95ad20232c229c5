"""What a static-tier compile job is asked for and hands back (plain, picklable data shared by the
kernel entries and the compile jobs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Spec:
    """One compile of a kernel.

    Attributes:
        id: its name in the matrix (``case_id``), e.g. ``bs3-w16-c16``.
        constexprs: ``(name, value)`` pairs, in any order.
        num_warps, num_stages: launch options; ``None`` = Triton's default, as SGLang launches it.
    """

    id: str
    constexprs: tuple[tuple[str, int], ...] = ()
    num_warps: int | None = None
    num_stages: int | None = None


@dataclass(frozen=True)
class Build:
    """What a compile job hands back (picklable).

    Attributes:
        binary: path of the ``.cubin`` (Triton) or ``.o`` (nvcc) it wrote.
        config: the launch/compile configuration in words (``num_warps=4, num_stages=3``).
        dynamic_smem: dynamic shared memory bytes per block the launch requests.
        threads: threads per block.
        functions: substring selecting the functions to check in the binary (``""`` = all).
        command: how the binary was built (nvcc command line, or the Triton call).
        seconds: compile wall seconds (0 on a cache hit).
    """

    binary: str
    config: str
    dynamic_smem: int
    threads: int
    functions: str = ""
    command: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Unavailable:
    """The compile cannot be attempted here (no nvcc, a toolchain too old for the arch, ...)."""

    reason: str


@dataclass(frozen=True)
class BuildError:
    """The compiler rejected the kernel. ``fault_class``: ``triton-compile-error`` or ``nvcc-compile-error``."""

    fault_class: str
    text: str
