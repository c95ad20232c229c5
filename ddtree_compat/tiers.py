"""Tiers and the targets a sweep runs on.

* ``interpret``: Triton kernels under ``TRITON_INTERPRET=1`` on the CPU (runs in CPU CI). The variable
  must be set before Triton decorates a kernel, so a process runs either the interpret tier or the
  device tier, never both; the plugin sets it at configure time.
* ``device``: one target per visible GPU, named by its arch (``sm90``), marked with that arch marker.
  The sweep runs one xdist worker per GPU, pinned with ``CUDA_VISIBLE_DEVICES``
  (:func:`pinned_worker_args`), so each worker sees, collects and runs on its own GPU only.
* ``static``: every kernel compiled ahead of time for each arch in
  :data:`ddtree_compat.arch.STATIC_ARCHES` and checked against it (resources, SASS), on the
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
DEVICE_ONLY = "device only"
"""Opens the skip of a cell that needs a GPU by its nature (a deployment-shape cell off the device tier)."""
DEVICE_TIER_ONLY = "runs on the device tier only"
"""Says in a skip that a backend's kernel is compiled CUDA, off the device tier (:mod:`ddtree_compat.contract.backend`).
A report counts the skips carrying either phrase as "device only" (:func:`ddtree_compat.report.coverage.device_only_split`)."""


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


ONE_GPU_WORKERS = 16
"""At most this many load-balanced xdist workers share a one-GPU host's device tier, leaving two cores to the
controller (:func:`device_worker_args`). Each cell launches for microseconds and spends milliseconds in the
harness's Python, so workers, not the GPU, set the pace (the figures: ``docs/benchmarks.md``)."""


LOAD_BALANCED = ("--dist", "worksteal")
"""How load-balanced sweep workers share the cells: each starts with one contiguous share of the collection
(neighbouring cells are one kernel at neighbouring shapes, so a worker compiles each Triton specialization
of its share once, instead of every worker compiling nearly all of them, as xdist's round-robin ``load``
makes it), and a worker that runs dry takes half of the longest queue left (no worker idles through the
others' last cells). A crashed worker's pending cells go back to the queue as under ``load``."""


def device_worker_args(gpus: list[Gpu], cpus: int | None = None) -> list[str]:
    """pytest-xdist arguments for the device tier: ``-n N`` (the cores less two, at most :data:`ONE_GPU_WORKERS`;
    :data:`LOAD_BALANCED`) when one GPU is visible, else :func:`pinned_worker_args` (one worker per GPU,
    so a host with mixed GPUs gives one results column per arch).

    Workers sharing a GPU keep fault containment: a sticky fault poisons only its own process's CUDA
    context, and xdist hands the dead worker's pending cells to the others.
    """
    if len(gpus) != 1:
        return pinned_worker_args(gpus)
    cpus = cpus or os.cpu_count() or 1
    return ["-n", str(max(1, min(ONE_GPU_WORKERS, cpus - 2))), *LOAD_BALANCED]


def worker_cpu_threads(workers: int, cpus: int | None = None) -> int:
    """Intra-op CPU threads for one of ``workers`` xdist workers sharing ``cpus`` cores (at least 1).

    Each worker's torch would otherwise start one OpenMP thread per core, and ``N`` workers then run
    ``N x cores`` spinning threads: concurrent collections of ``tests/kernels`` took several times as long with
    torch's default threads as with one thread each, and on a 16-core GPU host 8 workers never finished
    collecting (H200, 2026-11-30: ``docs/benchmarks.md``).

    Args:
        workers: xdist's worker count (``workerinput["workercount"]``); ``>= 1``.
        cpus: cores to share; default ``os.cpu_count()``.
    """
    cpus = cpus or os.cpu_count() or 1
    return max(1, cpus // max(1, workers))


def cap_worker_threads(workerinput: dict | None) -> int | None:
    """In an xdist worker, cap torch's intra-op threads at :func:`worker_cpu_threads` (unless the user
    set ``OMP_NUM_THREADS``). Returns the threads set, or ``None`` when nothing was changed."""
    if not workerinput or os.environ.get("OMP_NUM_THREADS"):
        return None
    threads = worker_cpu_threads(int(workerinput.get("workercount", 1)))
    import torch

    torch.set_num_threads(threads)
    return threads


def in_xdist_worker(config) -> bool:
    """Whether this pytest process is an xdist worker (its ``config`` has ``workerinput``)."""
    return hasattr(config, "workerinput")
