"""Tiers and the targets a sweep runs on.

* ``interpret``: Triton kernels under ``TRITON_INTERPRET=1`` on the CPU (runs in CPU CI). The variable
  must be set before Triton decorates a kernel, so a process runs either the interpret tier or the
  device tier, never both; the plugin sets it at configure time.
* ``device``: one target per visible GPU, named by its arch (``sm90``), marked with that arch marker.
  The sweep runs one xdist worker per GPU, pinned with ``CUDA_VISIBLE_DEVICES``
  (:func:`pinned_worker_args`), so each worker sees, collects and runs on its own GPU only.
* ``static``: every kernel compiled ahead of time for each arch in
  :data:`ddtree_compat.static.runner.STATIC_ARCHES` and checked against it (resources, SASS), on the
  CPU. Not a process's tier: its cells run in every process, whatever ``--ddtree-tier`` says, and
  carry their target arch's marker (``pytest -m sm120`` on a CPU machine runs the sm120 static cells).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .arch import Gpu
from .errors import DDTreeInputError

TIERS = ("interpret", "device")
STATIC = "static"
E2E = "e2e"
"""The end-to-end tier (:mod:`ddtree_compat.e2e`): real SGLang servers on the first visible GPU. Like the
static tier it is not a process's tier: its cells run in any process that collects them (and skip, with
the reason, where no GPU or no SGLang server can run)."""
TIER_CHOICES = ("auto", *TIERS)


@dataclass(frozen=True)
class Target:
    """Where a test runs.

    Attributes:
        tier: ``interpret`` or ``device``.
        device: torch device string (``cpu``, ``cuda:0``).
        arch: ``sm{major}{minor}`` for device targets, ``None`` for interpret.
        gpu_name: the GPU's name, or ``cpu``.
        fake: the GPU comes from ``DDTREE_FAKE_GPUS`` (no real device behind it).
    """

    tier: str
    device: str
    arch: str | None = None
    gpu_name: str = "cpu"
    fake: bool = False

    @property
    def id(self) -> str:
        """Test-id prefix: ``interpret`` or the arch (``sm90``; ``sm90.1`` for a second sm90 GPU)."""
        if self.tier == "interpret":
            return "interpret"
        index = int(self.device.split(":")[1])
        return self.arch if index == 0 else f"{self.arch}.{index}"

    @property
    def column(self) -> str:
        """Matrix column suffix: ``interpret`` or the arch."""
        return self.arch or "interpret"


def resolve_tier(choice: str, gpus: list[Gpu]) -> str:
    """``auto`` -> ``device`` when a GPU is visible, else ``interpret``.

    Raises:
        DDTreeInputError: unknown tier name.
    """
    if choice not in TIER_CHOICES:
        raise DDTreeInputError("--ddtree-tier", choice, ", ".join(TIER_CHOICES), "unknown tier")
    if choice == "auto":
        return "device" if gpus else "interpret"
    return choice


def targets_for(tier: str, gpus: list[Gpu]) -> list[Target]:
    """The targets of a tier: the CPU interpreter, or each GPU."""
    if tier == "interpret":
        return [Target("interpret", "cpu")]
    return [Target("device", f"cuda:{g.index}", g.arch, g.name, g.fake) for g in gpus]


def enable_interpreter() -> None:
    """Set ``TRITON_INTERPRET=1`` for this process (before any Triton kernel is imported)."""
    os.environ["TRITON_INTERPRET"] = "1"


def pinned_worker_args(gpus: list[Gpu]) -> list[str]:
    """pytest-xdist arguments for one worker per GPU, each pinned with ``CUDA_VISIBLE_DEVICES``.

    ``--dist each`` hands every worker its *own* collection to run in full, so a worker that sees one
    GPU collects that GPU's target only: a host with mixed GPUs gives one results column per arch and
    each cell runs on the device its worker was pinned to. A ``CUDA_VISIBLE_DEVICES`` of integers in
    this process is honoured (``gpus[i]`` is its ``i``-th entry).

    Returns:
        e.g. ``["--dist", "each", "--tx", "popen//env:CUDA_VISIBLE_DEVICES=0", "--tx", ...]``.
    """
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    mapped = visible and all(v.isdigit() for v in visible)
    args = ["--dist", "each"]
    for g in gpus:
        device = visible[g.index] if mapped and g.index < len(visible) else str(g.index)
        args += ["--tx", f"popen//env:CUDA_VISIBLE_DEVICES={device}"]
    return args

