"""GPU architectures: names, families, exact/family predicates and detection.

Each compute capability ``(major, minor)`` is named ``sm{major}{minor}`` (``sm90``, ``sm120``, ``sm121``).
Gate by exact arch or by family, never by ``>=``: an sm121 (GB10) host is not an sm120 host, and a
major-version-only gate once made sm121 run sm120-only code. To add an architecture, add a row to
:data:`ARCHES` (one :class:`Arch`: family, limits, instruction classes, static target, tile emulation).

Detection uses NVML first (``pynvml`` from ``nvidia-ml-py``; no CUDA context in the parent, so
xdist workers fork cleanly), then ``torch.cuda`` as a fallback. ``DDTREE_FAKE_GPUS="sm120,sm121"``
replaces detection (for testing the gating on hosts without those cards). Either way an integer
``CUDA_VISIBLE_DEVICES`` picks and renumbers the GPUs, as CUDA does (``CUDA_VISIBLE_DEVICES=1`` with
fake ``sm90,sm120`` is one sm120 at index 0): the sweep pins one xdist worker per GPU that way.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import ArchError

KB = 1024


@dataclass(frozen=True)
class Arch:
    """Everything the suite knows about one architecture (one row of :data:`ARCHES`).

    Attributes:
        name: ``sm{major}{minor}``.
        family: ``ampere``, ``ada``, ``hopper``, ``blackwell`` (data centre), ``blackwell-rtx``
            (workstation / consumer); a marker each (``-`` becomes ``_``).
        products: examples, for the marker's help text.
        smem_per_block: bytes of shared memory one block may use (static + dynamic), the opt-in
            maximum ``cudaDevAttrMaxSharedMemoryPerBlockOptin`` Triton checks at load.
        regs_per_thread, regs_per_block, threads_per_block: the other per-block limits.
        sass: instruction classes beyond the common set this arch executes (``wgmma``: Hopper warpgroup
            MMA; ``tcgen05``: tensor-memory MMA; ``tma``: bulk tensor copies), exactly (never ``>=``).
        static_target: the static tier compiles every kernel for it.
        tile_emulation: verify attention also runs SGLang's tile choice for it on any target.

    Sources for the limits (NVIDIA): CUDA C++ Programming Guide, "Compute Capabilities", table
    "Technical Specifications per Compute Capability"; the per-block shared memory agrees with CCCL
    ``cuda/experimental/__device/arch_traits.cuh`` (per-SM capacity minus the 1 KB the driver reserves
    per block) and CUTLASS ``cutlass/arch/arch.h`` (``sm90``/``sm100_smem_capacity_bytes = 232448``,
    ``sm120_smem_capacity_bytes = 101376``). ``tests/kernels/test_static.py`` checks the row of each
    visible GPU against ``torch.cuda.get_device_properties``. Instruction classes: PTX ISA (wgmma needs
    sm_90a; tcgen05 the sm_100a family, not sm_120; cp.async.bulk.tensor sm_90 and later).
    """

    name: str
    family: str
    products: str
    smem_per_block: int
    regs_per_thread: int = 255
    regs_per_block: int = 64 * KB
    threads_per_block: int = 1024
    sass: frozenset[str] = frozenset()
    static_target: bool = False
    tile_emulation: bool = False


def _rows(*rows: Arch) -> dict[str, Arch]:
    return {r.name: r for r in rows}


ARCHES: dict[str, Arch] = _rows(
    Arch("sm80", "ampere", "A100, A30", 163 * KB, static_target=True, tile_emulation=True),  # 164 KB per SM
    Arch("sm86", "ampere", "RTX 30xx, A10, A40, RTX A6000", 99 * KB, static_target=True, tile_emulation=True),
    # sm87 and sm110 (Jetson) are markers and limits only, no static target: not serving GPUs for SGLang, and the
    # ptxas Triton 3.6 bundles (CUDA 12.8 / 12.9) knows Thor as sm_101, not CUDA 13's sm_110 (each cell would skip)
    Arch("sm87", "ampere", "Jetson AGX Orin", 163 * KB),
    Arch("sm89", "ada", "RTX 40xx, L4, L40S, RTX 6000 Ada", 99 * KB, static_target=True, tile_emulation=True),
    Arch("sm90", "hopper", "H100, H200, GH200", 227 * KB, sass=frozenset({"wgmma", "tma"}), static_target=True,
         tile_emulation=True),  # 228 KB per SM
    Arch("sm100", "blackwell", "B200, GB200", 227 * KB, sass=frozenset({"tcgen05", "tma"}), static_target=True,
         tile_emulation=True),
    Arch("sm103", "blackwell", "B300, GB300", 227 * KB, sass=frozenset({"tcgen05", "tma"}), static_target=True),
    Arch("sm110", "blackwell", "Jetson Thor", 227 * KB, sass=frozenset({"tcgen05", "tma"})),
    Arch("sm120", "blackwell-rtx", "RTX 50xx, RTX PRO 6000 Blackwell", 99 * KB, sass=frozenset({"tma"}),
         static_target=True, tile_emulation=True),  # 128 KB per SM
    Arch("sm121", "blackwell-rtx", "DGX Spark (GB10)", 99 * KB, sass=frozenset({"tma"}), static_target=True),
)
"""To add an architecture, add its row here: markers, limits, the static tier's targets, the SASS
check and the attention tile emulation all read it."""
STATIC_ARCHES = tuple(a for a, row in ARCHES.items() if row.static_target)
TILE_ARCHES = tuple(a for a, row in ARCHES.items() if row.tile_emulation)
FAMILIES = tuple(dict.fromkeys(row.family for row in ARCHES.values()))
FAKE_ENV = "DDTREE_FAKE_GPUS"
_NAME = re.compile(r"^sm(\d{1,2})(\d)$")


def arch_name(major: int, minor: int) -> str:
    """``sm{major}{minor}``, e.g. ``(12, 0) -> "sm120"``."""
    return f"sm{major}{minor}"


def parse_arch(name: str) -> tuple[int, int]:
    """``"sm120" -> (12, 0)``. Raises :class:`ArchError` for anything not ``sm<major><minor>``."""
    m = _NAME.match(name.strip().lower())
    if not m:
        raise ArchError("arch", name, "sm<major><minor>, e.g. " + ", ".join(ARCHES), "not an arch name")
    return int(m.group(1)), int(m.group(2))


def family(name: str) -> str:
    """Family of a known arch (``sm120 -> blackwell-rtx``); ``sm{major}x`` for an unknown one."""
    if name in ARCHES:
        return ARCHES[name].family
    return f"sm{parse_arch(name)[0]}x"


@dataclass(frozen=True)
class Gpu:
    """One visible GPU. ``index`` is its CUDA ordinal; ``fake`` marks a ``DDTREE_FAKE_GPUS`` entry."""

    index: int
    name: str
    major: int
    minor: int
    fake: bool = False

    @property
    def arch(self) -> str:
        return arch_name(self.major, self.minor)

    @property
    def family(self) -> str:
        return family(self.arch)

    def is_arch(self, *names: str) -> bool:
        """Exact match against arch names."""
        return self.arch in names

    def in_family(self, *families: str) -> bool:
        return self.family in families


def _fake_gpus(spec: str) -> list[Gpu]:
    gpus = []
    for i, name in enumerate(s for s in spec.split(",") if s.strip()):
        major, minor = parse_arch(name)
        gpus.append(Gpu(i, f"fake {arch_name(major, minor)}", major, minor, fake=True))
    return gpus


def _nvml_gpus() -> list[Gpu] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound / DriverNotLoaded: no NVIDIA GPU
        return None
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            gpus.append(Gpu(i, name.decode() if isinstance(name, bytes) else name, major, minor))
        return _respect_visible_devices(gpus)
    finally:
        pynvml.nvmlShutdown()


def _respect_visible_devices(gpus: list[Gpu]) -> list[Gpu]:
    """NVML lists every GPU; keep those ``CUDA_VISIBLE_DEVICES`` (integer form) exposes, renumbered."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not all(v.strip().isdigit() for v in visible.split(",") if v.strip()):
        return gpus
    picked = [int(v) for v in visible.split(",") if v.strip()]
    return [replace(gpus[old], index=new) for new, old in enumerate(picked) if old < len(gpus)]


def _torch_gpus() -> list[Gpu]:
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        out.append(Gpu(i, torch.cuda.get_device_name(i), major, minor))
    return out


def detect_gpus() -> list[Gpu]:
    """Visible GPUs: ``DDTREE_FAKE_GPUS`` if set, else NVML, else ``torch.cuda``; ``[]`` without a GPU.

    Raises:
        ArchError: ``DDTREE_FAKE_GPUS`` names something that is not an arch.
    """
    fake = os.environ.get(FAKE_ENV)
    if fake:
        return _respect_visible_devices(_fake_gpus(fake))
    gpus = _nvml_gpus()
    if gpus is not None:
        return gpus
    return [] if _no_nvidia_driver() else _torch_gpus()


def _no_nvidia_driver() -> bool:
    """Whether this Linux host plainly has no NVIDIA driver (no ``/proc/driver/nvidia``, no ``/dev/nvidia*``
    device node): then CUDA sees no GPU, and asking ``torch.cuda`` would only import torch (seconds, paid by
    every pytest process). Elsewhere (not Linux) torch is asked."""
    if not sys.platform.startswith("linux"):
        return False
    return not Path("/proc/driver/nvidia").exists() and not any(Path("/dev").glob("nvidia*"))
