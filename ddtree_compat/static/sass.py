"""Read a cubin or an nvcc object with ``cuobjdump``: per-arch cubins, per-function resources, SASS.

``cuobjdump -res-usage -sass FILE`` lists, for every cubin in the file (a Triton ``.cubin``, or each
``-gencode`` of an nvcc ``.o``), its arch, each function's ``REG``/``STACK``/``SHARED``/``LOCAL`` and
its SASS. From that this module answers: which cubin would a GPU of arch ``smXY`` load
(:func:`runs_on`), which instructions in it that GPU cannot execute (:data:`RULES`,
:func:`illegal_instructions`) and how much local memory (spills) each function uses.

Disassembly costs a fixed ~0.15 s of nvdisasm start per file: :func:`inspect_batch` reads many Triton cubins
with one nvdisasm per arch and caches, for each, what :func:`inspect` would have parsed.

Tools (:func:`find_cuobjdump`): ``DDTREE_CUOBJDUMP`` if set, else the newest of the pip wheels
``nvidia-cuda-cuobjdump`` / ``nvidia-cuda-nvdisasm`` (``nvidia/cu*/bin``), ``cuobjdump`` on ``PATH``,
``$CUDA_HOME/bin`` and the copy Triton bundles (12.8, which cannot decode sm_103a or sm_121a).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from ..arch import ARCHES, parse_arch

TOOL_ENV = "DDTREE_CUOBJDUMP"
INSTALL_HINT = "pip install 'ddtree-compat[static]' (the nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels)"


class ToolUnavailable(RuntimeError):
    """cuobjdump is missing, or cannot decode this arch; the message says which and how to fix it."""


@dataclass(frozen=True)
class Tool:
    """A ``cuobjdump`` with an ``nvdisasm`` beside it (cuobjdump runs nvdisasm to print SASS)."""

    cuobjdump: str
    version: tuple[int, int]

    @property
    def label(self) -> str:
        return f"cuobjdump {self.version[0]}.{self.version[1]} ({self.cuobjdump})"

    @property
    def env(self) -> dict[str, str]:
        """This process's environment with the tool's folder first on ``PATH`` (cuobjdump runs the nvdisasm
        beside it)."""
        return {**os.environ, "PATH": os.path.dirname(self.cuobjdump) + os.pathsep + os.environ.get("PATH", "")}


def _candidates() -> list[str]:
    found = []
    try:
        import nvidia  # namespace package of NVIDIA's pip wheels

        for root in getattr(nvidia, "__path__", []):
            found += sorted(str(p) for p in Path(root).glob("*/bin/cuobjdump"))
    except ImportError:
        pass
    on_path = shutil.which("cuobjdump")
    if on_path:
        found.append(on_path)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            found.append(os.path.join(home, "bin", "cuobjdump"))
    try:
        import triton

        found.append(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump"))
    except ImportError:
        pass
    return [p for p in dict.fromkeys(found) if os.path.isfile(p) and os.access(p, os.X_OK)]


def _version(path: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


@lru_cache(maxsize=1)
def find_cuobjdump() -> Tool:
    """The cuobjdump to use (see the module docstring for the order).

    Raises:
        ToolUnavailable: none found, or ``DDTREE_CUOBJDUMP`` names something that does not run.
    """
    explicit = os.environ.get(TOOL_ENV)
    if explicit:
        version = _version(explicit)
        if version is None:
            raise ToolUnavailable(f"{TOOL_ENV}={explicit} does not run as cuobjdump --version")
        return Tool(explicit, version)
    tools = [Tool(p, v) for p in _candidates() if (v := _version(p)) is not None]
    if not tools:
        raise ToolUnavailable(f"no cuobjdump found: {INSTALL_HINT}")
    return max(tools, key=lambda t: t.version)


@dataclass
class Function:
    """One kernel in a cubin: resources (cuobjdump ``-res-usage``) and SASS opcode counts."""

    name: str
    regs: int = 0
    stack: int = 0
    shared: int = 0
    local: int = 0
    opcodes: Counter = field(default_factory=Counter)

    @property
    def local_traffic(self) -> int:
        """Local-memory load/store instructions (``LDL``/``STL``): spills or local arrays."""
        return self.opcodes["LDL"] + self.opcodes["STL"]


@dataclass
class Cubin:
    """One cubin: its arch as the file names it (``sm_120f``, ``sm_90a``, ``sm_80``) and its functions.

    ``reserved_smem`` is the driver-reserved shared memory (the ``.nv.reservedSmem.cap``, 1 KB) of a
    cubin with a ``.nv.shared.reserved`` section (sm_80 and later, kernels using barriers). A kernel's
    shared window then starts with it, so cuobjdump's ``SHARED`` counts it (a kernel with no shared
    window reports 0). The per-block limits exclude it, so :meth:`static_smem` subtracts it; a kernel
    that declares ``__shared__`` arrays but no reserved window, in a cubin where another kernel has
    one, is under-counted by at most that 1 KB.
    """

    arch: str
    functions: dict[str, Function] = field(default_factory=dict)
    reserved_smem: int = 0

    def function(self, name: str) -> Function:
        return self.functions.setdefault(name, Function(name))

    def static_smem(self, fn: Function) -> int:
        """Bytes of ``__shared__`` arrays the kernel itself declares (reserved part excluded)."""
        return max(0, fn.shared - self.reserved_smem)

    def find(self, pattern: str) -> list[Function]:
        """Functions whose (mangled) name contains ``pattern``."""
        return [f for name, f in self.functions.items() if pattern in name]


_RES = re.compile(r"(REG|STACK|SHARED|LOCAL):(\d+)")
_RES_FIELDS = {"REG": "regs", "STACK": "stack", "SHARED": "shared", "LOCAL": "local"}
_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*)")  # address, opcode
_CAP = re.compile(r"^\s*0x[0-9a-f]+\s+(0x[0-9a-f]+)\s.*\.nv\.reservedSmem\.cap\s*$")
_FUNCTION = re.compile(r"Function\s*:?\s*(\S+?):?$")


def parse(text: str) -> list[Cubin]:
    """Parse ``cuobjdump -elf -res-usage -sass`` output into cubins, in file order (PTX entries skipped)."""
    cubins: list[Cubin] = []
    fn: Function | None = None
    state = {"new": True, "ptx": False, "listing": False}  # a raw .cubin has no "Fatbin elf code" header

    def current() -> Cubin:
        if state["new"]:
            cubins.append(Cubin(""))
            state["new"] = False
        return cubins[-1]

    for line in text.splitlines():
        s = line.strip()
        if s.startswith(("Fatbin elf code", "Fatbin ptx code")):
            state.update(new=True, ptx=s.startswith("Fatbin ptx"), listing=False)
            fn = None
            continue
        if state["ptx"]:
            continue
        if m := re.match(r"arch = (sm_\w+)", s):
            current().arch = m.group(1)
        elif m := re.match(r"code for (sm_\w+)", s):
            cubin = current()
            cubin.arch = cubin.arch or m.group(1)
            state["listing"] = True
        elif s == "Resource usage:":
            current()
            state["listing"] = True
        elif m := _CAP.match(line):
            current().reserved_smem = int(m.group(1), 16)
        elif ".nv.shared.reserved" in s:
            cubin = current()
            cubin.reserved_smem = cubin.reserved_smem or 1024
        elif state["listing"] and (m := _FUNCTION.match(s)):
            fn = current().function(m.group(1))
        elif fn is not None and s.startswith("REG:"):
            for key, value in _RES.findall(s):
                setattr(fn, _RES_FIELDS[key], int(value))
        elif fn is not None and (m := _INSN.match(line)):
            fn.opcodes[m.group(2)] += 1
    return cubins


def _to_json(cubins: list[Cubin]) -> str:
    return json.dumps([{"arch": c.arch, "reserved_smem": c.reserved_smem,
                        "functions": [{**asdict(f), "opcodes": dict(f.opcodes)} for f in c.functions.values()]}
                       for c in cubins])


def _from_json(text: str) -> list[Cubin]:
    cubins = []
    for c in json.loads(text):
        fns = {f["name"]: Function(**{**f, "opcodes": Counter(f["opcodes"])}) for f in c["functions"]}
        cubins.append(Cubin(c["arch"], fns, c["reserved_smem"]))
    return cubins


def inspect(path: str | os.PathLike, tool: Tool | None = None, timeout: float = 300, cache: bool = False) -> list[Cubin]:
    """The cubins in a ``.cubin`` or ``.o`` file (``cuobjdump -elf -res-usage -sass``).

    With ``cache``, the parsed result is kept beside the file (``<file>.cuobjdump-<version>.json``)
    and reused: for content-addressed files only (the static tier's build cache), since disassembly
    costs a noticeable fraction of a second a cubin.

    Raises:
        ToolUnavailable: no cuobjdump, or it cannot decode an arch in the file (message names both).
        RuntimeError: cuobjdump failed otherwise.
    """
    tool = tool or find_cuobjdump()
    memo = _memo(path, tool)
    if cache and memo.is_file():
        return _from_json(memo.read_text())
    r = subprocess.run([tool.cuobjdump, "-elf", "-res-usage", "-sass", str(path)], capture_output=True, text=True,
                       env=tool.env, timeout=timeout)
    err = r.stderr.strip()
    m = re.search(r"Cannot decode architecture '(\w+)'", err)
    if m:
        raise ToolUnavailable(f"{tool.label} cannot decode {m.group(1)}: {INSTALL_HINT}")
    if r.returncode != 0:
        raise RuntimeError(f"{tool.label} failed on {path}: {err[:500]}")
    cubins = parse(r.stdout)
    if cache:
        _write_memo(memo, cubins)
    return cubins


_ELF_ARCH = re.compile(r"\bsm=(\d+[af]?)\b")
_SECTION = re.compile(r"^\s*[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)\s.*\s\.text\.(\S+)\s*$")


def _memo(path: str | os.PathLike, tool: Tool) -> Path:
    return Path(f"{path}.cuobjdump-{tool.version[0]}.{tool.version[1]}.json")


@dataclass
class _Pending:
    """A cubin whose SASS the batch still has to read: its resources, parsed, and where each function's
    code lies in the file (``.text.<function>``: offset, size)."""

    path: str
    cubin: Cubin
    texts: dict[str, tuple[int, int]]


def _run(argv: list[str], tool: Tool, timeout: float) -> str | None:
    """``argv``'s standard output, or ``None`` where it did not run to a zero exit (in time)."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, env=tool.env, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def _resources(path: str, tool: Tool, timeout: float) -> _Pending | None:
    """``cuobjdump -elf -res-usage`` of a raw cubin (no SASS: no nvdisasm start): its arch from the ELF header,
    its functions' resources, its reserved shared memory and its code sections. ``None`` where that cannot be
    read whole (the single-file path then decides)."""
    out = _run([tool.cuobjdump, "-elf", "-res-usage", path], tool, timeout)
    if out is None:
        return None
    cubins = parse(out)
    m = _ELF_ARCH.search(out)
    texts = {s.group(3): (int(s.group(1), 16), int(s.group(2), 16)) for s in map(_SECTION.match, out.splitlines())
             if s}
    if m is None or len(cubins) != 1 or set(texts) != set(cubins[0].functions):
        return None
    cubins[0].arch = f"sm_{m.group(1)}"
    return _Pending(path, cubins[0], texts)


def _disassemble(arch: str, pending: list[_Pending], tool: Tool, timeout: float) -> bool:
    """One ``nvdisasm --binary SMxy`` over the code of every function of ``pending`` (all of ``arch``),
    laid end to end; each function's opcodes counted from its address range. False where nvdisasm fails."""
    blob, spans = bytearray(), []
    for p in pending:
        data = Path(p.path).read_bytes()
        for name, (offset, size) in p.texts.items():
            if size % 16 or offset + size > len(data):
                return False
            spans.append((len(blob), len(blob) + size, p.cubin.functions[name]))
            blob += data[offset:offset + size]
    nvdisasm = os.path.join(os.path.dirname(tool.cuobjdump), "nvdisasm")
    raw = Path(pending[0].path).with_suffix(f".{os.getpid()}.{arch}.text")
    raw.write_bytes(blob)
    try:
        out = _run([nvdisasm if os.path.isfile(nvdisasm) else "nvdisasm", "--binary", "SM" + arch[3:], "-novliw",
                    str(raw)], tool, timeout)
    finally:
        raw.unlink(missing_ok=True)
    if out is None:
        return False
    k = 0
    for line in out.splitlines():
        m = _INSN.match(line)
        if m is None:
            continue
        address = int(m.group(1), 16)
        while k < len(spans) and address >= spans[k][1]:
            k += 1
        if k == len(spans) or address < spans[k][0]:
            return False
        spans[k][2].opcodes[m.group(2)] += 1
    return True


def inspect_batch(paths: Iterable[str | os.PathLike], tool: Tool | None = None, timeout: float = 300) -> int:
    """Fill :func:`inspect`'s cache for many Triton ``.cubin`` files at once; how many files it filled.

    Disassembly costs a fixed ~0.15 s per nvdisasm start, about all of a small kernel's inspection. Here each
    cubin's resources come from ``cuobjdump -elf -res-usage`` (no disassembly), and the code of all the
    cubins of one arch is disassembled by a single ``nvdisasm --binary SMxy`` over their ``.text`` sections
    laid end to end; each function's opcodes are counted in its own address range. The cached result is
    what :func:`inspect` would have parsed from ``cuobjdump -elf -res-usage -sass`` of the file (the unit
    tests compare the two). Files already cached, files that are not raw cubins, and any arch whose batch
    fails (a tool that exits non-zero or outlasts ``timeout`` seconds, an address outside every function) are
    left to :func:`inspect`: nothing is written for them. It never raises for those, nor for a missing tool
    (it then fills nothing): it only ever saves time.
    """
    try:
        tool = tool or find_cuobjdump()
    except ToolUnavailable:
        return 0
    by_arch: dict[str, list[_Pending]] = {}
    for path in dict.fromkeys(str(p) for p in paths):
        if not path.endswith(".cubin") or _memo(path, tool).is_file():
            continue
        pending = _resources(path, tool, timeout)
        if pending is not None:
            by_arch.setdefault(pending.cubin.arch, []).append(pending)
    filled = 0
    for arch, pending in by_arch.items():
        if not _disassemble(arch, pending, tool, timeout):
            continue
        for p in pending:
            _write_memo(_memo(p.path, tool), [p.cubin])
            filled += 1
    return filled


def _write_memo(memo: Path, cubins: list[Cubin]) -> None:
    tmp = memo.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(_to_json(cubins))
    os.replace(tmp, memo)


def _split(cubin_arch: str) -> tuple[int, int, str]:
    m = re.fullmatch(r"sm_(\d+)(\d)([af]?)", cubin_arch)
    if not m:
        raise ValueError(f"not a cubin arch: {cubin_arch!r}")
    return int(m.group(1)), int(m.group(2)), m.group(3)


def runs_on(cubin_arch: str, target: str) -> bool:
    """Whether a GPU of arch ``target`` (``sm121``) loads a cubin built for ``cubin_arch`` (``sm_120f``).

    CUDA's rules: a plain ``sm_XY`` cubin runs on the same major with minor >= Y; a family ``sm_XYf``
    cubin likewise within its family (same major); an arch-specific ``sm_XYa`` cubin only on X.Y.
    """
    major, minor, suffix = _split(cubin_arch)
    t_major, t_minor = parse_arch(target)
    if suffix == "a":
        return (major, minor) == (t_major, t_minor)
    return major == t_major and t_minor >= minor


@dataclass(frozen=True)
class Rule:
    """Instructions of one class (an :attr:`ddtree_compat.arch.Arch.sass` name) that only some archs
    execute: SASS opcodes (exact, or by prefix)."""

    name: str
    feature: str
    opcodes: frozenset[str]
    prefixes: tuple[str, ...] = ()

    @property
    def archs(self) -> frozenset[str]:
        """The archs whose row lists this instruction class."""
        return frozenset(a for a, row in ARCHES.items() if self.feature in row.sass)

    def matches(self, opcode: str) -> bool:
        return opcode in self.opcodes or (bool(self.prefixes) and opcode.startswith(self.prefixes))


RULES: tuple[Rule, ...] = (
    Rule("wgmma (Hopper warpgroup MMA)", "wgmma", frozenset({"HGMMA", "IGMMA", "QGMMA", "BGMMA", "WARPGROUP"})),
    Rule("tcgen05 (tensor memory MMA)", "tcgen05", frozenset({"LDTM", "STTM"}), ("UTC",)),
    Rule("TMA bulk tensor copy", "tma", frozenset({"UTMALDG", "UTMASTG", "UTMAPF", "UTMAREDG", "UTMACCTL", "UBLKCP",
                                                   "UBLKRED", "UBLKPF"})),
)


def illegal_instructions(fn: Function, target: str) -> dict[str, int]:
    """``{"HGMMA (wgmma (Hopper warpgroup MMA))": count, ...}`` for opcodes ``target`` cannot execute."""
    out: dict[str, int] = {}
    for opcode, count in sorted(fn.opcodes.items()):
        for rule in RULES:
            if target not in rule.archs and rule.matches(opcode):
                out[f"{opcode} ({rule.name})"] = count
    return out
