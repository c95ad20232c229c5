"""The durable results file: JSON lines, appended and flushed as each cell finishes.

Three kinds of line, each a JSON object with ``"kind"``:

* ``env``: one per writing process: ``env_id``, host, GPUs (name, arch, compute capability), the
  process's ``CUDA_VISIBLE_DEVICES`` (one xdist worker per GPU: one ``env`` line per device), driver,
  CUDA, torch, triton, sglang versions, tier, profile, the known issues in force, start time.
* ``start``: written just before a cell runs (its coordinates, time, pid); a ``start`` with no
  ``result`` after it marks a cell whose process died (see :mod:`ddtree_compat.isolation`).
* ``result``: one per cell: :class:`ResultRecord` fields, with the ``env_id`` of its process.

Each line goes out in one ``write`` on an ``O_APPEND`` descriptor under a blocking ``flock`` of the file
itself, so xdist workers and several runs can share one file, and files from several runners
concatenate or merge into one matrix. A written line survives its process being killed (a sticky CUDA
fault, a hang past ``--timeout``); ``fsync`` per line (``--ddtree-fsync``) also survives a host crash or
hang, at a cost: on the H200 host, with 16 workers sharing one GPU, ``filelock``'s polled lock plus an
``fsync`` per line held the sweep's cells to ~63 ms each while the kernels took ~8 ms
(docs/device-runs.md, session 3).
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
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Iterable

from .arch import detect_gpus
from .errors import ResultsFileError
from .outcomes import OUTCOMES


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


def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001 - not installed
        return None


def environment(tier: str, profile: str, known_issues: dict | None = None,
                implementations: dict | None = None) -> dict:
    """The ``env`` header for this process. Reads GPUs through NVML (no CUDA init).

    ``known_issues`` is ``{id: {"reason", "source"}}`` of the manifest in force (reports link from it);
    ``implementations`` is ``{backend: {"name", "repo", "commit", "path"}}`` of the DDTree implementations
    under test (:mod:`ddtree_compat.impls`: ``sglang.__version__`` does not identify them).
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
        "ddtree_compat": _version("ddtree-compat"),
        "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
        "tier": tier,
        "profile": profile,
        "known_issues": known_issues or {},
        "implementations": implementations or {},
    }
    # Same machine + software + tier = same id, so xdist workers' headers collapse into one.
    env["env_id"] = hashlib.sha1(json.dumps(env, sort_keys=True).encode()).hexdigest()[:12]
    env["started"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
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
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._fd_pid = os.getpid()
        return self._fd

    def _append(self, lines: Iterable[dict]) -> None:
        data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
        fd = self._descriptor()
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks in the kernel: no polling interval
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
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


@dataclass
class Results:
    """A loaded set of results files."""

    envs: dict[str, dict]
    records: list[ResultRecord]


def load(paths: Iterable[str | os.PathLike]) -> Results:
    """Read and validate results files (``.jsonl``, or ``.jsonl.gz`` for archived runs).

    Raises:
        ResultsFileError: unreadable file, a line that is not a JSON object, an unknown ``kind``,
            missing fields or an unknown outcome (the message names file and line), or no result line
            in any of the files.
    """
    paths = list(paths)
    envs: dict[str, dict] = {}
    records: list[ResultRecord] = []
    names = {f.name for f in fields(ResultRecord)}
    required = {f.name for f in fields(ResultRecord) if f.default is MISSING}
    for path in paths:
        try:
            raw = Path(path).read_bytes()
            text = (gzip.decompress(raw) if str(path).endswith(".gz") else raw).decode("utf-8")
        except (OSError, EOFError, UnicodeDecodeError) as e:
            raise ResultsFileError("path", str(path), "a readable JSONL results file", str(e).split(":")[0])
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                raise ResultsFileError("line", line[:40], "one JSON object per line (JSONL)", "not JSON", where)
            if not isinstance(obj, dict) or obj.get("kind") not in ("env", "start", "result"):
                kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
                raise ResultsFileError("kind", kind, "env, start, result", "unknown line kind", where)
            if obj["kind"] == "env":
                envs[obj.get("env_id", "")] = obj
                continue
            if obj["kind"] == "start":
                continue
            body = {k: v for k, v in obj.items() if k in names}
            missing = required - set(body)
            if missing:
                raise ResultsFileError(sorted(missing)[0], None, "present in every result line", "missing", where)
            if body["outcome"] not in OUTCOMES:
                raise ResultsFileError("outcome", body["outcome"], ", ".join(OUTCOMES), "unknown outcome", where)
            records.append(ResultRecord(**body))
    if not records:
        raise ResultsFileError("result", None, "at least one result line", "no cells in " + ", ".join(map(str, paths)))
    return Results(envs, records)
