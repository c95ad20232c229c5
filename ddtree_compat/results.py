"""The durable results file: JSON lines, appended and flushed as each cell finishes.

Six kinds of line, each a JSON object with ``"kind"``:

* ``env``: one per writing process: ``env_id``, host, GPUs (name, arch, compute capability), the
  process's ``CUDA_VISIBLE_DEVICES`` (one xdist worker per GPU: one ``env`` line per device), driver,
  CUDA, torch, triton, sglang versions, tier, profile, the known issues in force, what the session could
  not test and why (``not_tested``), start time.
* ``plan``: one per collecting process: how many cells its session selected (``cells``, those a resume
  skips included), so a reader can tell a partial run (:attr:`Results.planned`).
* ``start``: written just before a cell runs (its coordinates, time, pid); a ``start`` with no
  ``result`` after it marks a cell whose process died (see :mod:`ddtree_compat.isolation`).
* ``result``: one per cell: :class:`ResultRecord` fields, with the ``env_id`` of its process.
* ``repair``: a torn last line cut before appending (``at_byte``, ``cut_bytes``, the first bytes cut).
* ``collect_error``: a test file the session could not collect (``path``, ``error``: the exception's last line),
  so that none of its cells ran. It is the suite's own error (a missing dependency, a broken import), never a
  kernel's: readers say so instead of "no cell" (:attr:`Results.collect_errors`).

A line is whole when its ``\n`` is written. A writer killed mid-line (or a host that crashed before the page
cache reached the disk) leaves a *torn* last line: readers leave it out and say so (:class:`Torn`), and the
next writer cuts it before appending (:func:`cut_torn_tail`), so a resumed run never glues a line onto it.

Each line goes out in one ``write`` on an ``O_APPEND`` descriptor under a blocking ``flock`` of the file
itself, so xdist workers and several runs can share one file, and files from several runners
concatenate or merge into one matrix. A written line survives its process being killed (a sticky CUDA
fault, a hang past ``--timeout``); ``fsync`` per line (``--ddtree-fsync``) also survives a host crash or
hang, at a cost: with many workers sharing one GPU, a polled lock plus an ``fsync`` per line held the
sweep's cells to several times the kernels' own time (``docs/benchmarks.md``).
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import os
import platform
import socket
import time
import tempfile
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable

from .arch import detect_gpus
from .errors import ResultsFileError
from .outcomes import OUTCOMES


COMMAND_ENV = "DDTREE_COMPAT_COMMAND"
"""Set by ``python -m ddtree_compat sweep`` for its pytest child: the command the user typed, which the ``env`` line
records (the results archive's index names each run by it)."""


def _command() -> str | None:
    """The command that made this results file: the sweep's, else this pytest process's (None in an xdist worker,
    whose argv is the worker's, not the user's)."""
    import shlex
    import sys

    if os.environ.get(COMMAND_ENV):
        return os.environ[COMMAND_ENV]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return "pytest " + shlex.join(sys.argv[1:])


REPORT_BY_SWEEP = "DDTREE_SWEEP_WRITES_REPORT"
"""Set to ``1`` by ``python -m ddtree_compat sweep`` for the pytest processes it runs: the sweep writes the report
of their results file once every tier has run, so their summary names the file without offering the ``report``
command. A pytest command copied from the sweep's ``+`` line, run alone, offers it."""


@dataclass
class ResultRecord:
    """One cell of the matrix.

    Attributes:
        kernel: kernel under test (``verify_tree_greedy``, ``fill_accept_out_cache_loc``, ...).
        tier: ``interpret``, ``device``, ``static`` or ``e2e`` (a real SGLang server: :mod:`ddtree_compat.e2e`).
        backend: backend name.
        arch: ``sm{major}{minor}`` of the device or of the static tier's compile target, ``interpret``
            for the CPU interpreter.
        case_id: the verify case (``b8-spine-deep-bs3``) or, static tier, the specialization
            (``bs3-w16-c16``: batch, ``accept_index`` width, slots ``C``).
        outcome: one of ``pass, wrong, zero-accept, fault, skip``.
        budget, topology, plant, batch, block_size, mode: a verify case's coordinates (``None``/``""``
            for static cells).
        layout: ``exact`` (buffers of ``D`` slots) or ``cap<C>`` (padded to capacity ``C``); ``""`` static.
        duration_s: kernel wall seconds (static: compile and inspection wall seconds).
        message: what differed / the error / the skip reason.
        fault_class: for faults.
        nodeid: pytest node id (the replay handle).
        case_path: the case's JSON file (written on failure), or ``""``; e2e cells: the capture folder.
        env_id: the ``env`` line this result belongs to.
        sanitizer: path of a compute-sanitizer report for this cell (``--sanitize``), or ``""``.
        time: when the cell finished (Unix seconds).
        known_issue: id of the known-issues manifest entry the cell is expected to fail under (run as
            strict xfail), or ``""``.
        shape: verify-attention cells: heads, GQA group, head_dim, prefix and dtype
            (``h32g4d128-pre1000-bf16``); ``""`` for other kernels.
        log_excerpt: e2e cells: the server log lines around the first fault line (or the log's tail when
            the server died), else ``""``.
        attention: e2e cells: the attention backend the server ran on (``triton``, ``flashinfer``, ``fa3``;
            SGLang's own choice for a ``-attn-default`` cell), else ``""``.
        measured: what a cell measured besides its outcome: a sampling distribution cell's law test
            (``statistic``, ``p_value``, ``dof``, ``rows``, ``alpha``), an e2e sampling cell's accept-length
            spread; ``{}`` otherwise.
    """

    kernel: str
    tier: str
    backend: str
    arch: str
    case_id: str
    outcome: str
    budget: int | None = None
    topology: str = ""
    plant: str = ""
    batch: int | None = None
    block_size: int | None = None
    mode: str = ""
    layout: str = "exact"
    duration_s: float = 0.0
    message: str = ""
    fault_class: str | None = None
    nodeid: str = ""
    case_path: str = ""
    env_id: str = ""
    time: float = 0.0
    sanitizer: str = ""
    known_issue: str = ""
    shape: str = ""
    log_excerpt: str = ""
    attention: str = ""
    measured: dict = field(default_factory=dict)


def _version(module: str) -> str | None:
    """The installed distribution's version; else, for a package on ``PYTHONPATH`` without its metadata (the lent
    GPU host's SGLang carry), the ``__version__`` its ``_version.py`` / ``version.py`` states, read without importing
    it; ``None`` when neither says."""
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001 - no metadata: look for the package's own version file
        pass
    import importlib.util
    import re

    try:
        spec = importlib.util.find_spec(module.replace("-", "_"))
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for name in ("_version.py", "version.py"):
            try:
                text = (Path(folder) / name).read_text(encoding="utf-8")
            except OSError:
                continue
            found = re.search(r"""__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text)
            if found:
                return found.group(1)
    return None


def environment(tier: str, profile: str, known_issues: dict | None = None,
                implementations: dict | None = None, not_tested: dict | None = None) -> dict:
    """The ``env`` header for this process. Reads GPUs through NVML (no CUDA init).

    ``known_issues`` is ``{id: {"reason", "source"}}`` of the manifest in force (reports link from it);
    ``implementations`` is ``{backend: {"name", "repo", "commit", "path"}}`` of the DDTree implementations
    under test (:mod:`ddtree_compat.impls`: ``sglang.__version__`` does not identify them); ``not_tested`` is
    ``{what: why}`` for what the session cannot test before any cell exists (``{"ddtree": "no DDTree
    implementation found ..."}``: its tests skip without a cell, so the reports read it from here).
    """
    driver = None
    try:
        import pynvml

        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML / no driver
        pass
    try:
        import torch

        cuda = torch.version.cuda
    except ImportError:
        cuda = None
    env = {
        "kind": "env",
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "gpus": [{"index": g.index, "name": g.name, "arch": g.arch, "cc": f"{g.major}.{g.minor}", "fake": g.fake}
                 for g in detect_gpus()],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "driver": driver,
        "cuda": cuda,
        "torch": _version("torch"),
        "triton": _version("triton"),
        "sglang": _version("sglang"),
        "flashinfer": _version("flashinfer-python"),
        "sgl_kernel": _version("sglang-kernel"),
        "ddtree_compat": _version("ddtree-compat"),
        "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
        "tier": tier,
        "profile": profile,
        "known_issues": known_issues or {},
        "implementations": implementations or {},
        "not_tested": not_tested or {},
    }
    # Same machine + software + tier = same id, so xdist workers' headers collapse into one.
    env["env_id"] = hashlib.sha1(json.dumps(env, sort_keys=True).encode()).hexdigest()[:12]
    env["started"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    env["command"] = _command()  # after env_id: workers of one run share its id whatever their argv
    return env


class ResultsWriter:
    """Appends lines to a results file shared by processes, writing this process's ``env`` line first.

    Args:
        path: the JSONL file (created with its directory at the first line written).
        env: this process's ``env`` line (:func:`environment`).
        fsync: ``fsync`` after every append (survives a host crash, not just a killed process).
    """

    def __init__(self, path: str | os.PathLike, env: dict, fsync: bool = False):
        self.path = Path(path)
        self.env = env
        self.fsync = fsync
        self._env_written = False
        self._fd: int | None = None
        self._fd_pid = 0

    def _descriptor(self) -> int:
        if self._fd is None or self._fd_pid != os.getpid():  # opened lazily, and again in a forked child
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            self._fd_pid = os.getpid()
        return self._fd

    def _append(self, lines: Iterable[dict]) -> None:
        fd = self._descriptor()
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks in the kernel: no polling interval
        try:
            repair = _cut_torn_tail(fd)  # a writer killed mid-line: never glue this line onto its bytes
            _write_lines(fd, [repair, *lines] if repair else lines)
            if self.fsync:
                os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _write(self, line: dict) -> None:
        lines = [] if self._env_written else [self.env]
        self._append([*lines, line])
        self._env_written = True

    def write(self, record: ResultRecord) -> None:
        """Append a ``result`` line (in the file, for any later reader, before returning).

        Raises:
            OSError: the file cannot be opened, locked or written (a full disk included).
        """
        record.env_id = record.env_id or self.env["env_id"]
        record.time = record.time or time.time()
        self._write({"kind": "result", **asdict(record)})

    def start(self, coordinates: dict) -> None:
        """Append a ``start`` line for a cell about to run: its coordinates, time and pid, so a cell
        whose process dies mid-run can still be recorded (by the xdist controller) and resumed."""
        self._write({"kind": "start", **coordinates, "env_id": self.env["env_id"], "time": time.time(),
                     "pid": os.getpid()})

    def plan(self, cells: int) -> None:
        """Append a ``plan`` line: this session selected ``cells`` cells (those a resume skips included), so a
        report can tell a partial run from a whole one."""
        self._write({"kind": "plan", "cells": cells, "env_id": self.env["env_id"], "time": time.time(),
                     "pid": os.getpid()})

    def collect_error(self, path: str, error: str) -> None:
        """Append a ``collect_error`` line: the test file ``path`` could not be collected (``error``: why)."""
        self._write({"kind": "collect_error", "path": path, "error": error, "env_id": self.env["env_id"],
                     "time": time.time(), "pid": os.getpid()})


def _write_lines(fd: int, lines: Iterable[dict]) -> None:
    data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


TORN_SHOWN = 120
"""Bytes of a torn line a ``repair`` line keeps (what was cut, for whoever reads the file)."""


def _cut_torn_tail(fd: int) -> dict | None:
    """Cut the bytes after the last ``\n`` of the file open at ``fd`` (read-write, locked by the caller);
    returns the ``repair`` line to append, or ``None`` when the file ends with a whole line (or is empty)."""
    size = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return None
    cut, end = 0, size
    while end > 0:  # back from the end, a chunk at a time, to the last newline
        start = max(0, end - 65536)
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            cut = start + found + 1
            break
        end = start
    torn = os.pread(fd, min(size - cut, TORN_SHOWN), cut).decode("utf-8", "replace")
    os.ftruncate(fd, cut)
    return {"kind": "repair", "at_byte": cut, "cut_bytes": size - cut, "torn": torn, "time": time.time(),
            "pid": os.getpid(), "host": socket.gethostname()}


def cut_torn_tail(path: str | os.PathLike) -> dict | None:
    """Before appending to ``path``: cut a torn last line (a writer killed mid-line) and append a ``repair``
    line saying so, under the file's lock. Returns that line, or ``None`` when there was nothing to cut (or no
    file).

    Raises:
        OSError: the file cannot be opened, locked or written.
    """
    if not Path(path).is_file():
        return None
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        repair = _cut_torn_tail(fd)
        if repair:
            _write_lines(fd, [repair])
        return repair
    finally:
        os.close(fd)  # releases the lock


@dataclass(frozen=True)
class Torn:
    """A torn line a read left out: the last line of ``path`` without its ``\\n`` (a writer killed mid-line, or a
    host that crashed before the page cache reached the disk), or, ``glued``, torn bytes that a later line was
    appended straight after (by a version of this suite that did not cut them: the whole line after them is
    read).

    Attributes:
        path: the results file as named to the reader.
        line: its line number (1-based).
        at_byte: where the torn bytes start (bytes from the start of the file, gzip: of its contents).
        size: how many bytes are torn.
        glued: a whole line follows the torn bytes on the same line.
    """

    path: str
    line: int
    at_byte: int
    size: int
    glued: bool = False

    def __str__(self) -> str:
        if self.glued:
            return (f"{self.path}:{self.line}: {self.size} torn bytes (a writer killed mid-line) before a whole "
                    "line, left out; the whole line is read")
        return (f"{self.path}:{self.line}: a torn last line ({self.size} bytes at byte {self.at_byte}: a writer "
                "killed mid-line) left out; every whole line is read")


@dataclass
class Results:
    """A loaded set of results files: one verdict per cell (:func:`latest`).

    Attributes:
        envs: ``env_id`` -> the ``env`` line.
        records: one :class:`ResultRecord` per cell, the latest verdict of each (files' order kept).
        superseded: older verdicts of re-run cells that were dropped (a results file appended to by
            several runs holds a re-run cell more than once).
        sources: the files read, as named (a second name of one file, a ``latest-*`` link, read once).
        torn: the torn lines left out (:class:`Torn`).
        repairs: the ``repair`` lines: torn last lines a later writer cut before appending (with ``path``).
        planned: cells the runs' sessions selected (their latest ``plan`` line per host, device and tier; 0
            where no session said: files written before plan lines existed).
        done: how many of those have a result line.
        collect_errors: the test files a session could not collect, once each: ``(path, error)``.
    """

    envs: dict[str, dict]
    records: list[ResultRecord]
    superseded: int = 0
    sources: list[str] = field(default_factory=list)
    torn: list[Torn] = field(default_factory=list)
    repairs: list[dict] = field(default_factory=list)
    planned: int = 0
    done: int = 0
    collect_errors: list[tuple[str, str]] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """Some selected cells have no result line: a run killed or interrupted (``--resume`` runs the rest)."""
        return self.done < self.planned


CellKey = tuple
"""``(host, CUDA_VISIBLE_DEVICES, tier, kernel, backend, arch, case_id)``: see :func:`cell_key`."""


def cell_key(record: ResultRecord, envs: dict[str, dict]) -> CellKey:
    """What makes a cell one cell: its kernel, backend, arch, case and tier, on one host's device.

    Re-runs of a cell on the same host and device (another pytest run appending to the same file, a
    resumed sweep) share a key; the same cell on two GPUs of one arch (``CUDA_VISIBLE_DEVICES`` differs in
    their ``env`` lines) or on two runners (hosts) does not, so merged runners keep each verdict.
    """
    env = envs.get(record.env_id, {})
    return (env.get("host", ""), env.get("cuda_visible_devices") or "", record.tier, record.kernel, record.backend,
            record.arch, record.case_id)


def latest(envs: dict[str, dict], records: list[ResultRecord]) -> tuple[list[ResultRecord], int]:
    """One verdict per cell (:func:`cell_key`): the one that finished last (``time``; on a tie, the later
    line). Returns ``(records in their first line's order, number of older verdicts dropped)``.

    The upgrade gate and the reports read through this, so a cell run twice counts once.
    """
    order: dict[CellKey, int] = {}
    chosen: dict[CellKey, tuple[float, int, ResultRecord]] = {}
    for n, r in enumerate(records):
        key = cell_key(r, envs)
        order.setdefault(key, n)
        if key not in chosen or (r.time, n) >= chosen[key][:2]:
            chosen[key] = (r.time, n, r)
    kept = [chosen[k][2] for k in sorted(chosen, key=order.__getitem__)]
    return kept, len(records) - len(kept)


def _read_text(path: str | os.PathLike) -> str:
    try:
        raw = Path(path).read_bytes()
        return (gzip.decompress(raw) if str(path).endswith(".gz") else raw).decode("utf-8")
    except UnicodeDecodeError:
        raise ResultsFileError("path", str(path), "a readable JSONL results file", "binary, not text") from None
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        reason = getattr(e, "strerror", None) or str(e).split(":")[0]
        raise ResultsFileError("path", str(path), "a readable JSONL results file", reason) from None


_NAMES = {f.name for f in fields(ResultRecord)}
_REQUIRED = {f.name for f in fields(ResultRecord) if f.default is MISSING and f.default_factory is MISSING}
KINDS = ("env", "plan", "start", "result", "repair", "collect_error")
"""The line kinds of a results file (the module's docstring says what each holds)."""


def parse_line(line: str, where: str) -> dict | None:
    """One line of a results file as a dict (``None`` for a blank line), validated.

    Raises:
        ResultsFileError: not a JSON object, an unknown ``kind``, a result line missing fields or with an
            unknown outcome, a plan line without its count (the message names ``where``: file and line).
    """
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        raise ResultsFileError("line", line[:40], "one JSON object per line (JSONL)", "not JSON", where) from None
    if not isinstance(obj, dict) or obj.get("kind") not in KINDS:
        kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
        raise ResultsFileError("kind", kind, ", ".join(KINDS), "unknown line kind", where)
    if obj["kind"] == "plan" and (not isinstance(obj.get("cells"), int) or isinstance(obj.get("cells"), bool)):
        raise ResultsFileError("cells", obj.get("cells"), "an integer (the cells a session selected)", "wrong type",
                               where)
    if obj["kind"] == "result":
        missing = _REQUIRED - set(obj)
        if missing:
            raise ResultsFileError(sorted(missing)[0], None, "present in every result line", "missing", where)
        if obj["outcome"] not in OUTCOMES:
            raise ResultsFileError("outcome", obj["outcome"], ", ".join(OUTCOMES), "unknown outcome", where)
        for name, kinds, allowed in _TYPES:
            value = obj.get(name)
            if name in obj and (not isinstance(value, kinds) or isinstance(value, bool)):
                raise ResultsFileError(name, value, allowed, "wrong type", where)
    return obj


_TYPES = ((*((n, str, "a string") for n in sorted(_REQUIRED)),
           *((n, (int, type(None)), "an integer or null") for n in ("budget", "batch", "block_size")),
           *((n, (int, float), "a number") for n in ("duration_s", "time"))))
_LINE_START = '{"kind":"'
"""How every line :class:`ResultsWriter` writes starts (compact JSON, ``kind`` first)."""


def _glued(line: str, where: str) -> tuple[int, dict] | None:
    """``(where the whole line starts, its object)`` for torn bytes with a whole line of ours appended straight
    after them, or ``None`` when ``line`` is no such thing."""
    at = line.rfind(_LINE_START)
    while at > 0:
        try:
            return at, parse_line(line[at:], where)
        except ResultsFileError:
            at = line.rfind(_LINE_START, 0, at)
    return None


def read_lines(path: str | os.PathLike) -> tuple[list[tuple[int, dict]], list[Torn]]:
    """The lines of a results file: ``([(line number, object), ...], torn lines)``; blank lines are skipped, a
    torn last line and torn bytes glued before a whole line are left out and returned as :class:`Torn`.

    Raises:
        ResultsFileError: unreadable, or a whole line that is not one of ours (:func:`parse_line`).
    """
    text = _read_text(path)
    body, newline, tail = text.rpartition("\n")
    lines = body.split("\n") if newline else []
    out: list[tuple[int, dict]] = []
    torn: list[Torn] = []
    for n, line in enumerate(lines, 1):
        where = f"{path}:{n}"
        try:
            obj = parse_line(line, where)
        except ResultsFileError:
            glued = _glued(line, where)
            if glued is None:
                raise
            at, obj = glued
            start = len("\n".join(lines[:n - 1]).encode()) + (n > 1)
            torn.append(Torn(str(path), n, start, len(line[:at].encode()), glued=True))
        if obj is not None:
            out.append((n, obj))
    if tail:
        torn.append(Torn(str(path), len(lines) + 1, len(text.encode()) - len(tail.encode()), len(tail.encode())))
    return out, torn


@dataclass
class FailureLog:
    """The result lines of a results file that did not pass or skip, as the run's processes append them.

    :meth:`read` reads only what was appended since its last call, so a process that asks before each of
    thousands of cells parses each line once (reading the whole file each time cost about 1 s a cell once it
    held 44,000 lines). A line still being written waits for the next call; a line that is not JSON (torn bytes
    of a killed worker) is passed over; a file that shrank (cut, or started over) is read again from its start.
    """

    path: str
    offset: int = 0
    failed: list[dict] = field(default_factory=list)

    def read(self) -> list[dict]:
        """Every result line so far whose outcome is neither ``pass`` nor ``skip``, in file order (the same list,
        grown). Never raises: an unreadable or absent file gives what was read before (this only saves time)."""
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size < self.offset:
                    self.offset, self.failed = 0, []
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return self.failed
        whole = chunk[:chunk.rfind(b"\n") + 1]
        self.offset += len(whole)
        for raw in whole.splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and line.get("kind") == "result" and line.get("outcome") not in ("pass", "skip"):
                self.failed.append(line)
        return self.failed


def check_appendable(path: str | os.PathLike, option: str = "--ddtree-results") -> None:
    """Check that ``path`` may be appended to as a results file: absent, empty, or JSONL this suite wrote
    (a torn last line, from a writer killed mid-write, is tolerated: the writer cuts it first,
    :func:`cut_torn_tail`); never gzipped. ``option`` is what the user typed to name it (the error names it).

    Raises:
        ResultsFileError: a ``.gz`` path, an unreadable file, or a line that is not one of ours.
    """
    p = Path(path)
    if str(p).endswith(".gz"):
        raise ResultsFileError(option, str(p), "a plain .jsonl file (archives are read, never appended "
                               "to)", "gzipped")
    if not p.exists():
        return
    if p.is_dir():
        raise ResultsFileError(option, str(p), "a JSONL results file", "is a directory")
    try:
        read_lines(p)
    except ResultsFileError as e:
        line = e.where.rpartition(":")[2] if e.where else ""
        raise ResultsFileError(option, str(p), "a results file this suite wrote (or a new path)",
                               f"line {line}: {e.problem}" if line else e.problem) from None


def check_writable(path: str | os.PathLike, option: str, folder: bool = False) -> None:
    """Check, before anything runs, that ``path`` can be written: a results file (appended to, created with its
    folders if missing) or, with ``folder``, an output folder. Nothing is left behind: an existing file is
    opened for appending and closed; otherwise a temporary file is made and removed in ``path`` (a folder) or
    in its nearest existing folder.

    Raises:
        ResultsFileError: a read-only file system, no permission, or a file where a folder is needed (the
            message names ``option``).
    """
    p = Path(path)
    allowed = "a folder this user can write (created if missing)" if folder else \
        "a file this user can write (created, with its folders, if missing)"
    here = p if p.exists() else next((a for a in p.parents if a.exists()), Path("."))
    if here is not p and not here.is_dir():
        raise ResultsFileError(option, str(p), allowed, f"{here} is a file, not a folder")
    if here is p and p.is_dir() != folder:
        raise ResultsFileError(option, str(p), allowed, "is a folder" if p.is_dir() else "is a file")
    try:
        if here is p and not folder:
            os.close(os.open(p, os.O_WRONLY | os.O_APPEND))
        else:
            fd, probe = tempfile.mkstemp(dir=here, prefix=".ddtree-write-check-")
            os.close(fd)
            os.unlink(probe)
    except OSError as e:
        raise ResultsFileError(option, str(p), allowed, f"cannot write {'there' if here is p else here}: "
                               f"{e.strerror or e}") from None


def _session_of(env_id: str, envs: dict[str, dict]) -> tuple:
    """``(host, CUDA_VISIBLE_DEVICES, tier)`` of the process that wrote a line: one pytest session (several
    xdist workers sharing a device share it)."""
    env = envs.get(env_id, {})
    return env.get("host", ""), env.get("cuda_visible_devices") or "", env.get("tier", "")


def _completion(envs: dict[str, dict], records: list[ResultRecord], plans: list[dict]) -> tuple[int, int]:
    """``(planned, done)``: per session, its latest plan's cells and how many distinct cells (by node id) of it
    have a result line."""
    latest_plan: dict[tuple, dict] = {}
    for plan in plans:
        key = _session_of(plan.get("env_id", ""), envs)
        if key not in latest_plan or plan.get("time", 0) >= latest_plan[key].get("time", 0):
            latest_plan[key] = plan
    ran: dict[tuple, set] = {}
    for r in records:
        ran.setdefault(_session_of(r.env_id, envs), set()).add(r.nodeid or cell_key(r, envs))
    planned = sum(plan["cells"] for plan in latest_plan.values())
    done = sum(min(len(ran.get(key, ())), plan["cells"]) for key, plan in latest_plan.items())
    return planned, done


def load(paths: Iterable[str | os.PathLike]) -> Results:
    """Read and validate results files (``.jsonl``, or ``.jsonl.gz`` for archived runs), keeping one verdict
    per cell, the latest (:func:`latest`). A torn line is left out and listed (:attr:`Results.torn`); a file named
    twice (a ``latest-*`` link beside the file it points at) is read once.

    Raises:
        ResultsFileError: unreadable file, a whole line that is not a JSON object, an unknown ``kind``,
            missing fields or an unknown outcome (the message names file and line), or no result line
            in any of the files.
    """
    paths = list(paths)
    envs: dict[str, dict] = {}
    records: list[ResultRecord] = []
    plans: list[dict] = []
    out = Results(envs, records)
    seen: set[str] = set()
    for path in paths:
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        out.sources.append(str(path))
        lines, torn = read_lines(path)
        out.torn += torn
        for _, obj in lines:
            if obj["kind"] == "env":
                envs[obj.get("env_id", "")] = obj
            elif obj["kind"] == "result":
                records.append(ResultRecord(**{k: v for k, v in obj.items() if k in _NAMES}))
            elif obj["kind"] == "plan":
                plans.append(obj)
            elif obj["kind"] == "repair":
                out.repairs.append({**obj, "path": str(path)})
            elif obj["kind"] == "collect_error":
                error = (str(obj.get("path", "?")), str(obj.get("error", "")))
                if error not in out.collect_errors:  # each xdist worker collects, and says so, on its own
                    out.collect_errors.append(error)
    if not records:
        raise ResultsFileError("result", None, "at least one result line", "no cells in " + ", ".join(map(str, paths)))
    out.planned, out.done = _completion(envs, records, plans)
    out.records, out.superseded = latest(envs, records)
    return out
