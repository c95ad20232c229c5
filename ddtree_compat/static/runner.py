"""Static cells: compile one kernel specialization for one arch, then judge the binary against the arch.

A cell (:class:`StaticCell`) is ``(arch, backend, kernel entry, spec)``. :func:`run_static` compiles
it in a worker process, reads the binary with cuobjdump (:mod:`~ddtree_compat.static.sass`) and
returns a :class:`~ddtree_compat.outcomes.Verdict`:

* ``pass``: a cubin the arch loads, every checked function within the arch's limits
  (:mod:`~ddtree_compat.static.limits`), no instruction the arch cannot execute. The message gives
  registers, shared memory, threads and local memory (spills) against the limits.
* ``fault``, class ``out-of-resources``: over a limit; the message names kernel, config and arch.
* ``fault``, class ``illegal-instruction``: SASS the arch cannot execute (e.g. wgmma off sm90).
* ``fault``, class ``no-kernel-image``: no cubin in the binary loads on the arch.
* ``fault``, class ``triton-compile-error`` / ``nvcc-compile-error``: the compiler rejected it.
* ``skip``: the compile or the inspection cannot be done here (no nvcc, no cuobjdump, a toolchain
  that cannot target the arch, a kernel this SGLang does not have or a module not installed:
  :mod:`ddtree_compat.contract.places`), with the reason. Never a pass. Anything else the
  preparation raises (a wrong name of ours, an adapter error) propagates: the cell is an ``error`` of the
  suite, never a skip.

Compiles run in one worker process per pytest process (``concurrent.futures.ProcessPoolExecutor``,
spawned): its initializer unsets ``TRITON_INTERPRET`` before any kernel is imported, because the
interpret tier sets it in the pytest process and ``@triton.jit`` then makes functions that
``triton.compile`` cannot compile. The worker also isolates the test process from a compiler crash.
Triton's cache is ``<cache>/triton`` unless ``TRITON_CACHE_DIR`` is set, so repeated runs are warm.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Union

from ..arch import STATIC_ARCHES
from ..families.verify.records import VerifyCase
from ..outcomes import Verdict
from ..tiers import STATIC
from .build import Build, BuildError, Spec, Unavailable
from .claims import Claims, job_key
from .kernels import CudaJitKernel, CuteDslKernel, FlashInferPrefillKernel, SGLangAttentionKernel, TritonKernel
from .limits import Usage, limits_for, over_limits
from .sgl_kernel_libs import SglKernelLibrary
from .sass import Cubin, ToolUnavailable, find_cuobjdump, illegal_instructions, inspect, inspect_batch, runs_on

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ddtree-compat" / "static"
COMPILE_TIMEOUT_S = 1200

Entry = Union[TritonKernel, CudaJitKernel, SGLangAttentionKernel, FlashInferPrefillKernel, CuteDslKernel,
              SglKernelLibrary]


@dataclass(frozen=True)
class StaticCell:
    """One static cell: ``entry`` compiled with ``spec`` for ``arch``, in ``backend``'s column."""

    arch: str
    backend: str
    entry: Entry
    spec: Spec

    @property
    def id(self) -> str:
        """Test id, e.g. ``static-sm120-sglang-triton-verify_tree_greedy-bs3-w16-c16``."""
        return f"{STATIC}-{self.arch}-{self.backend}-{self.entry.kernel}-{self.spec.id}"


def static_cells(backends: Iterable, cases: Iterable[VerifyCase], archs: Iterable[str] = STATIC_ARCHES,
                 profile: str = "full") -> list[StaticCell]:
    """Every cell: arch x backend x the static entries of the kernels it implements x their
    specializations over ``cases``. An entry with ``default_archs`` (a heavy build) compiles only for those, and one
    with ``in_default`` only the specializations it keeps, outside the ``full`` profile (the nightly workflow's)."""
    cases = tuple(cases)
    cells = []
    for arch in archs:
        for backend in backends:
            for entry in (e for impl in getattr(backend, "implements", ()) for e in impl.static):
                if profile != "full" and getattr(entry, "default_archs", None) and arch not in entry.default_archs:
                    continue
                keep = getattr(entry, "in_default", None) if profile != "full" else None
                cells += [StaticCell(arch, backend.name, entry, spec) for spec in entry.specs(cases, arch)
                          if keep is None or keep(spec)]
    return cells


def init_worker(cache_dir: str) -> None:
    """Compile-worker initializer: a compiling Triton (no interpreter) with its cache under ``cache_dir``."""
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(cache_dir) / "triton"))


_POOLS: dict[str, ProcessPoolExecutor] = {}


def _pool(cache_dir: str) -> ProcessPoolExecutor:
    if cache_dir not in _POOLS:
        _POOLS[cache_dir] = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=init_worker, initargs=(cache_dir,))
    return _POOLS[cache_dir]


def _discard_pool(cache_dir: str) -> None:
    """Stop a compile worker and kill its process: ``shutdown(wait=False)`` alone leaves a hung compile
    running after its cell is judged, and after pytest exits."""
    pool = _POOLS.pop(cache_dir, None)
    if pool is None:
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())  # CPython's executor keeps them here
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.kill()
        proc.join(5)


def shutdown_pools() -> None:
    """Kill every compile worker of this process (the plugin calls it at unconfigure, Ctrl-C included)."""
    for cache_dir in list(_POOLS):
        _discard_pool(cache_dir)


def in_worker(cache_dir: str | os.PathLike, func, *args, timeout: float = COMPILE_TIMEOUT_S):
    """``func(*args)`` (picklable) in this process's compile worker, where ``TRITON_INTERPRET`` is unset
    (:func:`init_worker`): its return value, or the exception it raised, raised here."""
    return _pool(str(cache_dir)).submit(func, *args).result(timeout=timeout)


def build_group(jobs: list[tuple[str, object, tuple]], claims_root: str) -> int:
    """Worker side of :func:`warm`: build each job of ``jobs`` (``(key, func, args)``) that no process of the
    run has claimed, then read all their cubins in one batch (:func:`~ddtree_compat.static.sass.inspect_batch`);
    how many it built. A job that raises is left to its cell, whose own build raises the same again."""
    claims, taken, binaries = Claims(claims_root), [], []
    try:
        for key, func, args in jobs:
            if not claims.take(key):
                continue
            taken.append(key)
            try:
                built = func(*args)
            except Exception:  # noqa: BLE001 - the cell's own build reports it
                continue
            if isinstance(built, Build):
                binaries.append(built.binary)
        if binaries:
            inspect_batch(binaries)
    finally:
        for key in taken:
            claims.finish(key)
    return len(taken)


def warm(cells: Iterable[StaticCell], cache_dir: str | os.PathLike, claims: Claims,
         timeout: float = COMPILE_TIMEOUT_S) -> None:
    """Build the cells of one group (one kernel entry on one arch, in one backend's column, all its
    specializations) that no other process of the run has taken, in this process's compile worker, and read
    their cubins in one batch: disassembly starts once per batch, not once per cubin. Only the caches change
    (the Triton cache, the cubins' inspection); each cell is then compiled and judged as before, from them.
    A stuck or dead worker is left to the cells (each then builds on its own)."""
    cache_dir = str(cache_dir)
    jobs = [(job_key(func, args), func, args) for func, args in (c.entry.job(c.spec, c.arch, cache_dir) for c in cells)]
    try:
        in_worker(cache_dir, build_group, jobs, str(claims.root), timeout=timeout)
    except (FutureTimeout, BrokenProcessPool):
        _discard_pool(cache_dir)


def build(cell: StaticCell, cache_dir: str | os.PathLike = DEFAULT_CACHE,
          timeout: float = COMPILE_TIMEOUT_S, claims: Claims | None = None) -> Build | Unavailable | BuildError:
    """Run the cell's compile job in the worker process (after the process that claimed it, if any, is
    done with it). A dead or stuck worker is a :class:`BuildError`."""
    cache_dir = str(cache_dir)
    func, args = cell.entry.job(cell.spec, cell.arch, cache_dir)
    if claims is not None:
        claims.wait(job_key(func, args), timeout)
    try:
        return in_worker(cache_dir, func, *args, timeout=timeout)
    except FutureTimeout:
        _discard_pool(cache_dir)
        return BuildError("hang", f"compile did not finish in {timeout:.0f}s (timed out)")
    except BrokenProcessPool as e:
        _discard_pool(cache_dir)
        return BuildError("other", f"the compile worker died: {e}")


def _pick(cubins: list[Cubin], arch: str) -> Cubin | None:
    """The cubin a GPU of ``arch`` would load: arch-specific first, then the closest minor."""
    loadable = [c for c in cubins if c.arch and runs_on(c.arch, arch)]
    return max(loadable, key=lambda c: (c.arch.endswith("a"), c.arch), default=None)


def judge(cell: StaticCell, built: Build, cubins: list[Cubin]) -> Verdict:
    """Judge a built binary against ``cell.arch`` (see the module docstring for outcomes)."""
    arch, what = cell.arch, f"{cell.entry.kernel} ({cell.backend}) {cell.spec.id} [{built.config}]"
    cubin = _pick(cubins, arch)
    if cubin is None:
        held = ", ".join(c.arch for c in cubins) or "no cubin"
        return Verdict("fault", f"no kernel image: {what}: {built.binary} holds {held}, none loads on {arch}",
                       built.seconds, fault_class="no-kernel-image")
    fns = [f for name, f in cubin.functions.items() if built.functions in name]
    if not fns:
        return Verdict("fault", f"{what}: no function matching {built.functions!r} in the {cubin.arch} cubin "
                       f"(has {sorted(cubin.functions)})", built.seconds, fault_class="other")
    lim = limits_for(arch)
    illegal, over, facts = [], [], []
    for fn in fns:
        usage = Usage(fn.regs, cubin.static_smem(fn), built.dynamic_smem, built.threads)
        over += over_limits(usage, arch)
        illegal += [f"{op} x{n}" for op, n in illegal_instructions(fn, arch).items()]
        local = (f"local memory: stack {fn.stack} B, local {fn.local} B, {fn.local_traffic} LDL/STL (spills)"
                 if fn.stack or fn.local or fn.local_traffic else "no local memory")
        facts.append(f"regs {usage.regs}/{lim.regs_per_thread}, smem {usage.smem}/{lim.smem_per_block} B, "
                     f"threads {usage.threads}/{lim.threads_per_block}, {local}")
    where = f"{what} on {arch} (cubin {cubin.arch})"
    if illegal:
        return Verdict("fault", f"illegal instruction: {where}: {', '.join(illegal)}", built.seconds,
                       fault_class="illegal-instruction")
    if over:
        return Verdict("fault", f"out of resources: {where}: {'; '.join(over)}", built.seconds,
                       fault_class="out-of-resources")
    return Verdict("pass", f"fits {where}: {'; '.join(facts)}", built.seconds)


def prebuilt(cell: StaticCell) -> bool:
    """The cell reads a binary it does not build (an sgl-kernel library): its entry judges it (``check``)."""
    return hasattr(cell.entry, "check")


def run_static(cell: StaticCell, cache_dir: str | os.PathLike = DEFAULT_CACHE,
               timeout: float = COMPILE_TIMEOUT_S, group: Iterable[StaticCell] = (),
               claims: Claims | None = None) -> Verdict:
    """Compile ``cell``, inspect its binary, judge it. Never raises for a kernel or toolchain problem.

    With ``claims`` (the run's, :class:`~ddtree_compat.static.claims.Claims`), the build waits for a process
    of the run that took the same job; with a ``group`` too (the cell's group, on its first cell in this
    process), the group is warmed first (:func:`warm`) and this cell's time includes it."""
    start = time.perf_counter()
    if prebuilt(cell):  # judged by its entry (sgl_kernel_libs)
        verdict = cell.entry.check(cell.spec, cell.arch)
        verdict.duration_s = time.perf_counter() - start
        return verdict
    try:
        tool = find_cuobjdump()
    except ToolUnavailable as e:
        return Verdict("skip", str(e))
    if claims is not None and group:
        warm(group, cache_dir, claims, timeout)
    built = build(cell, cache_dir, timeout, claims)
    if isinstance(built, Unavailable):
        return Verdict("skip", built.reason, time.perf_counter() - start)
    if isinstance(built, BuildError):
        return Verdict("fault", f"{built.fault_class}: {cell.entry.kernel} ({cell.backend}) {cell.spec.id} "
                       f"for {cell.arch}: {built.text}", time.perf_counter() - start, fault_class=built.fault_class)
    try:
        cubins = inspect(built.binary, tool, cache=True)
    except ToolUnavailable as e:
        return Verdict("skip", str(e), time.perf_counter() - start)
    verdict = judge(cell, built, cubins)
    verdict.duration_s = time.perf_counter() - start
    return verdict
