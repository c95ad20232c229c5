"""sgl-kernel's prebuilt op libraries, checked per arch: does the library a GPU of that arch would load hold a
kernel image it can run for each op SGLang's speculative verify and commit path calls?

sgl-kernel ships one ``common_ops`` library per arch family (``sgl_kernel/sm90/``, ``sgl_kernel/sm100/``) and
``sgl_kernel/load_utils.py`` picks one by the GPU's compute capability. We ask that code which file it would load
for an arch (its capability lookup answered with the arch, its module loader stopped before it loads anything,
so no GPU and no matching torch are needed), then read the file's kernel images with cuobjdump: the cubins it
holds (``-lelf``), the PTX (``-lptx``), and the functions of the cubin the arch would load (``-res-usage``). A cubin
loads on the arch by CUDA's rules (:func:`ddtree_compat.static.sass.runs_on`: ``sm_120a`` is sm120's alone); with
none, PTX of a lower plain arch could still be JIT-compiled by the driver (said in the verdict). No op kernel in
the loadable cubin is ``no kernel image`` for that op: the CUDA error a server would raise at its first call.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from ..arch import parse_arch
from ..outcomes import Verdict
from .build import Spec, Unavailable
from .sass import Tool, ToolUnavailable, find_cuobjdump, runs_on

OPS = (  # sgl-kernel op -> a substring of its CUDA kernel's mangled name (read from the libraries' symbols)
    ("verify_tree_greedy", "VerifyTreeGreedy"),
    ("build_tree_kernel_efficient", "20build_tree_efficient"),
    ("tree_speculative_sampling_target_only", "TreeSpeculativeSamplingTargetOnly"),
    ("top_k_renorm_prob", "TopKRenormProb"),
    ("top_p_renorm_prob", "TopPRenormProb"),
    ("segment_packbits", "SegmentPackBitsKernel"),
    ("merge_state_v2", "merge_attn_states_kernel"),
)
"""The sgl-kernel ops the DDTree trees' verify and commit path imports (EAGLE tree verify and build, DFlash
sampling verify, the tree mask's packing, FA3's cascade merge)."""


def _pinned_wheel() -> str:
    """``sglang-kernel==X`` as the installed SGLang pins it (sgl-kernel's distribution name), else unpinned."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        pins = [re.match(r"sglang[-_]kernel\s*==\s*([^;\s]+)", r) for r in requires("sglang") or []]
    except PackageNotFoundError:
        pins = []
    version = next((m.group(1) for m in pins if m), None)
    return f"sglang-kernel=={version}" if version else "sglang-kernel"


class _Chosen(Exception):
    """Raised from inside sgl-kernel's loader once it has chosen a file."""


def library_for(arch: str) -> Path | Unavailable:
    """The ``common_ops`` file sgl-kernel's own ``load_utils`` loads on a GPU of ``arch`` (``sm120``), or why
    that cannot be asked here (:class:`Unavailable`: sgl-kernel not installed, no ``load_utils.py``, or its
    loader chose nothing). Its module is executed from the file (the package is never imported) with its
    compute-capability lookup answering ``major * 10 + minor``."""
    spec = importlib.util.find_spec("sgl_kernel")  # locating only: importing sgl_kernel loads a library
    if spec is None or not spec.submodule_search_locations:
        return Unavailable(f"sgl-kernel is not installed (a GPU host's SGLang install has it; on a CPU box: "
                           f"pip install --no-deps {_pinned_wheel()}, about 400 MB: the package sgl_kernel is "
                           f"published as sglang-kernel)")
    package = Path(list(spec.submodule_search_locations)[0])
    loader_file = package / "load_utils.py"
    if not loader_file.is_file():
        return Unavailable(f"{package} has no load_utils.py: this sgl-kernel loads its ops another way")
    loader_spec = importlib.util.spec_from_file_location("_ddtree_sgl_kernel_load_utils", loader_file)
    load_utils = importlib.util.module_from_spec(loader_spec)
    loader_spec.loader.exec_module(load_utils)
    major, minor = parse_arch(arch)
    chosen: list[str] = []
    real = importlib.util.spec_from_file_location

    def record(name, location, *args, **kwargs):
        if str(location).startswith(str(package)) and ".so" in str(location):
            chosen.append(str(location))
            raise _Chosen
        return real(name, location, *args, **kwargs)

    with mock.patch.object(load_utils, "_get_compute_capability", lambda: major * 10 + minor), \
            mock.patch.object(importlib.util, "spec_from_file_location", record):
        try:
            load_utils._load_architecture_specific_ops()
        except _Chosen:
            pass
        except Exception:  # noqa: BLE001 - it found nothing it could load: said below
            pass
    if not chosen:
        return Unavailable(f"sgl-kernel's load_utils chose no library for {arch} in {package}")
    return Path(chosen[0])


def _run(tool: Tool, *args: str) -> str:
    r = subprocess.run([tool.cuobjdump, *args], capture_output=True, text=True, timeout=300)
    return r.stdout


def images(tool: Tool, library: Path) -> tuple[list[str], list[str]]:
    """``(cubin archs, PTX archs)`` in ``library``, each as cuobjdump names them (``sm_120a``, ``sm_90``),
    deduplicated and sorted (``cuobjdump -lelf`` / ``-lptx``)."""
    cubins = sorted(set(re.findall(r"\.(sm_\d+[af]?)\.cubin", _run(tool, "-lelf", str(library)))))
    ptx = sorted(set(re.findall(r"\.(sm_\d+[af]?)\.ptx", _run(tool, "-lptx", str(library)))))
    return cubins, ptx


def functions(tool: Tool, library: Path, cubin_arch: str) -> set[str]:
    """Mangled names of the functions in ``library``'s ``cubin_arch`` cubins."""
    return set(re.findall(r"Function ([^\s:]+):", _run(tool, "-res-usage", "-arch", cubin_arch, str(library))))


def _ptx_jits_to(ptx_arch: str, arch: str) -> bool:
    """Plain PTX for ``compute_XY`` is JIT-compiled by the driver for any arch >= X.Y; ``a``/``f`` PTX is not
    portable that way."""
    m = re.fullmatch(r"sm_(\d+)(\d)", ptx_arch)
    return bool(m) and (int(m.group(1)), int(m.group(2))) <= parse_arch(arch)


@dataclass(frozen=True)
class SglKernelLibrary:
    """Static-tier entry: sgl-kernel's prebuilt ``common_ops`` for each arch, one spec per op of :data:`OPS`.
    Judged here (:meth:`check`), not compiled: the binary is sgl-kernel's."""

    kernel: str = "sgl_kernel_ops"

    def specs(self, cases, arch: str) -> list[Spec]:
        return [Spec(op) for op, _ in OPS]

    def check(self, spec: Spec, arch: str) -> Verdict:
        """The verdict for one op on one arch (``skip`` with the reason when sgl-kernel or cuobjdump is missing)."""
        try:
            tool = find_cuobjdump()
        except ToolUnavailable as e:
            return Verdict("skip", str(e))
        library = library_for(arch)
        if isinstance(library, Unavailable):
            return Verdict("skip", library.reason)
        symbol = dict(OPS)[spec.id]
        cubins, ptx = images(tool, library)
        loadable = [c for c in cubins if runs_on(c, arch)]
        where = f"sgl-kernel {library.parent.name}/{library.name} (chosen for {arch} by its load_utils)"
        if not loadable:
            jit = [p for p in ptx if _ptx_jits_to(p, arch)]
            more = (f"; PTX {', '.join(jit)} could be JIT-compiled by the driver" if jit else "; no PTX to JIT either")
            return Verdict("fault", f"no kernel image for {arch}: {where} holds cubins {', '.join(cubins) or 'none'}"
                           f"{more} ({spec.id} fails at its first launch)", fault_class="no-kernel-image")
        best = max(loadable, key=lambda c: (c.endswith("a"), c))
        found = sorted(f for f in functions(tool, library, best) if symbol in f)
        if not found:
            return Verdict("fault", f"{where}: its {best} cubin has no {symbol} kernel for {spec.id}",
                           fault_class="no-kernel-image")
        return Verdict("pass", f"fits {arch}: {where}: {spec.id} in its {best} cubin ({len(found)} kernel(s): "
                               f"{found[0][:60]})")
