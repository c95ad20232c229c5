"""Launch, probe and stop real SGLang servers; never leave one behind.

* :func:`probe` asks the installed SGLang (in a child with the server's environment) which command-line
  flags ``ServerArgs`` defines, which ``SpeculativeAlgorithm`` members exist, which optional modules
  import (``flashinfer`` for DFLASH) and whether the HTTP server imports at all.
* :func:`resolve_attention` asks the installed SGLang which attention backend it would choose for each
  configuration here: a child with the server's environment builds SGLang's own ``ServerArgs`` from the
  server's command line without ``--attention-backend`` (``prepare_server_args``, which runs SGLang's
  selection) and reads ``attention_backend`` back; the suite keeps no copy of SGLang's selection table.
  :func:`attention_reason` says why a backend cannot serve here (``fa3`` off sm80/sm90 or without
  sgl-kernel's ``flash_ops``; ``flashinfer`` not importable).
* :func:`server_argv` builds ``python -m sglang.launch_server ...`` for a :class:`~.configs.ServerConfig`
  from the flags the probe found; a configuration the installed SGLang cannot express gets a reason
  (:func:`unavailable_reason`): a skip, never a pass.
* :class:`ServerProcess` starts the server bound to 127.0.0.1 on a free port in its own process group
  (``start_new_session``), with its stdout and stderr written straight to a log file; the child also
  gets ``PR_SET_PDEATHSIG`` = SIGKILL, so it dies with this process even on SIGKILL, and SGLang's own
  workers die with it (``kill_itself_when_parent_died``). :meth:`ServerProcess.wait_ready` polls
  ``/ready`` (``/health`` on servers without it) until a deadline, failing fast if the child exits or its log
  shows a child that failed (:meth:`ServerProcess.check_log`: a traceback, or SGLang's SIGQUIT line, which
  comes 1-2 minutes before the server exits);
  :meth:`ServerProcess.stop` sends SIGTERM to the whole group, then SIGKILL, and kills by pid any
  descendant that left the group. Every started server is registered: :func:`stop_all` runs at exit
  and on SIGTERM/SIGHUP (the signal then goes on as before).
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import checkpoints as ck
from . import standby
from .configs import DDTREE, ServerConfig
from ..identity import identify
from ..processes import group_alive, pid_alive

SERVER_MODULE = os.environ.get("DDTREE_E2E_SERVER_MODULE", "sglang.launch_server")
"""The module run as the server (``python -m SERVER_MODULE``). Another module is a stand-in (the CPU tests'
``tests/e2e/fake_sglang.py``): it must answer ``--ddtree-probe`` with the probe's JSON line."""

DEFAULTS = {
    "mem_fraction_static": float(os.environ.get("DDTREE_E2E_MEM_FRACTION", "0.25")),
    "max_total_tokens": int(os.environ.get("DDTREE_E2E_MAX_TOTAL_TOKENS", "16384")),
}

_PROBE = r"""
import importlib, importlib.util, json, sys
out = {"python": sys.version.split()[0], "error": None, "flags": [], "algorithms": [], "modules": {}}
try:
    import sglang
    out["sglang"] = getattr(sglang, "__version__", None)
    import argparse
    from sglang.srt.server_args import ServerArgs
    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    out["flags"] = sorted(o for a in p._actions for o in a.option_strings)
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    out["algorithms"] = [m.name for m in SpeculativeAlgorithm]
    for m in ("flashinfer", "flash_mla", "sgl_kernel", "uvicorn", "fastapi", "prometheus_client", "transformers"):
        out["modules"][m] = importlib.util.find_spec(m) is not None
    import os
    out["path"] = os.path.dirname(sglang.__file__)
    try:  # the distribution whose files are this package (PEP 610 direct_url.json: a VCS install's commit)
        import importlib.metadata as md
        dist = md.distribution("sglang")
        if os.path.realpath(str(dist.locate_file("sglang"))) == os.path.realpath(out["path"]):
            out["dist_version"] = dist.version
            text = dist.read_text("direct_url.json")
            out["direct_url"] = json.loads(text) if text else None
    except Exception:
        pass
    for action in p._actions:  # the --attention-backend values this SGLang accepts
        if "--attention-backend" in action.option_strings:
            out["attention_choices"] = sorted(str(c) for c in (action.choices or ()))
    try:  # FA3's kernels (sgl-kernel's compiled flash_ops)
        out["modules"]["sgl_kernel.flash_ops"] = importlib.util.find_spec("sgl_kernel.flash_ops") is not None
    except Exception:
        out["modules"]["sgl_kernel.flash_ops"] = False
    try:
        import torch
        if torch.cuda.is_available():
            out["capability"] = list(torch.cuda.get_device_capability(0))
    except Exception:
        pass
    spec = importlib.util.find_spec("sglang.srt.speculative.eagle_worker_v2")
    if spec is not None and spec.origin:  # SGLang 0.5.23 imports FlashMLABackend when it captures draft graphs
        out["eagle_graphs_import_flash_mla"] = "FlashMLABackend" in open(spec.origin, encoding="utf-8").read()
    importlib.import_module("sglang.srt.entrypoints.http_server")
except ImportError as e:  # SGLang or a module it needs is not installed: the servers cannot run here
    out["error"] = f"{type(e).__name__}: {e}"[:600]
except Exception as e:  # the installed SGLang broke in another way: an error, reported as such
    import traceback
    out["failure"] = " | ".join(traceback.format_exception_only(type(e), e)).strip()[:600]
print("DDTREE_PROBE " + json.dumps(out))
"""


@dataclass(frozen=True)
class Capabilities:
    """What the installed SGLang offers (from :func:`probe`).

    Attributes:
        sglang: version string.
        flags: every ``--option`` of ``ServerArgs``.
        algorithms: ``SpeculativeAlgorithm`` member names.
        modules: optional modules -> importable (``flashinfer``, ``sgl_kernel``, ...).
        error: the module that is missing here, when SGLang (or its HTTP server) does not import for that
            reason (the cells skip with it), else ``None``.
        failure: why the probe failed otherwise (it raised something else, printed nothing or hung): the
            cells are ``error``, never a skip; else ``None``.
        attention_choices: the values ``--attention-backend`` accepts (``()`` when unknown).
        capability: ``(major, minor)`` of GPU 0 as the server's torch sees it (``None`` when unknown).
        implementation: :meth:`ddtree_compat.identity.ImplIdentity.as_json` of the imported ``sglang``
            (repository and commit where known).
        eagle_graphs_import_flash_mla: the EAGLE worker imports ``FlashMLABackend`` while it captures the
            draft's CUDA graphs (SGLang 0.5.23), so EAGLE / STANDALONE graphs need ``flash_mla``.
    """

    sglang: str | None = None
    flags: frozenset[str] = frozenset()
    algorithms: tuple[str, ...] = ()
    modules: dict[str, bool] = field(default_factory=dict)
    error: str | None = None
    implementation: dict = field(default_factory=dict)
    eagle_graphs_import_flash_mla: bool = True
    failure: str | None = None
    attention_choices: tuple[str, ...] = ()
    capability: tuple[int, int] | None = None

    def has(self, flag: str) -> bool:
        return flag in self.flags


def server_env(base: dict | None = None) -> dict[str, str]:
    """The server child's environment: this process's (``PYTHONPATH`` and SGLang settings included),
    offline hub, unbuffered output, no Triton interpreter, no shared Prometheus directory."""
    env = dict(os.environ if base is None else base)
    env.pop("TRITON_INTERPRET", None)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # each server makes its own: shared, their metrics would mix
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    return env


def probe(env: dict[str, str] | None = None, python: str = sys.executable, timeout: float = 240.0) -> Capabilities:
    """Run the probe in a child process (same interpreter and environment as the servers)."""
    cmd = [python, "-c", _PROBE] if SERVER_MODULE == "sglang.launch_server" else [python, "-m", SERVER_MODULE,
                                                                                  "--ddtree-probe"]
    try:
        proc = subprocess.run(cmd, env=server_env(env), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Capabilities(failure=f"probe of the installed SGLang timed out after {timeout:.0f}s")
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("DDTREE_PROBE ")), None)
    if line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return Capabilities(failure=f"probe exited {proc.returncode} without its line: {' | '.join(tail)[:600]}")
    d = json.loads(line[len("DDTREE_PROBE "):])
    impl = identify(d.get("path") or "", d.get("dist_version") or d.get("sglang"), d.get("direct_url"),
                    server_env(env))
    cap = d.get("capability")
    return Capabilities(d.get("sglang"), frozenset(d.get("flags", ())), tuple(d.get("algorithms", ())),
                        d.get("modules", {}), d.get("error"), impl.as_json(),
                        bool(d.get("eagle_graphs_import_flash_mla", True)), d.get("failure"),
                        tuple(d.get("attention_choices") or ()), tuple(cap) if cap else None)


_RESOLVE = r"""
import json, sys
out = {}
try:
    from sglang.srt.server_args import prepare_server_args
except Exception as e:
    print("DDTREE_ATTN " + json.dumps({"*": {"error": f"{type(e).__name__}: {e}"[:400]}}))
    raise SystemExit(0)
for cid, argv in json.load(sys.stdin).items():
    try:
        sa = prepare_server_args(argv)
        out[cid] = {"attention_backend": sa.attention_backend,
                    "prefill": getattr(sa, "prefill_attention_backend", None),
                    "decode": getattr(sa, "decode_attention_backend", None)}
    except BaseException as e:  # SystemExit from argparse included
        out[cid] = {"error": f"{type(e).__name__}: {e}"[:400]}
print("DDTREE_ATTN " + json.dumps(out))
"""


def resolve_attention(argvs: dict[str, list[str]], env: dict[str, str] | None = None, python: str = sys.executable,
                      timeout: float = 300.0) -> dict[str, dict]:
    """SGLang's own attention choice per configuration: ``argvs`` maps an id to the server's command line
    (after ``-m MODULE``, without ``--attention-backend``); the answer maps it to ``{"attention_backend":
    name, ...}`` or ``{"error": why}``. A stand-in server module answers ``--ddtree-resolve-attention``."""
    cmd = [python, "-c", _RESOLVE] if SERVER_MODULE == "sglang.launch_server" else [
        python, "-m", SERVER_MODULE, "--ddtree-resolve-attention"]
    try:
        proc = subprocess.run(cmd, env=server_env(env), input=json.dumps(argvs), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {cid: {"error": f"resolving SGLang's attention choice timed out after {timeout:.0f}s"} for cid in argvs}
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("DDTREE_ATTN ")), None)
    if line is None:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])[:400]
        return {cid: {"error": f"attention probe exited {proc.returncode} without its line: {tail}"} for cid in argvs}
    got = json.loads(line[len("DDTREE_ATTN "):])
    if "*" in got:
        return {cid: got["*"] for cid in argvs}
    return {cid: got.get(cid, {"error": "attention probe gave no answer for it"}) for cid in argvs}


FA3_ARCHS = (8, 9)
"""Compute-capability majors FA3 serves (sm80 and sm90 families)."""


def attention_reason(name: str, caps: Capabilities) -> str:
    """Why attention backend ``name`` cannot serve here (``""`` when it can, or when nothing rules it out)."""
    if name == "fa3":
        if caps.capability is not None and caps.capability[0] not in FA3_ARCHS:
            major, minor = caps.capability
            return f"fa3 serves sm80/sm90 only; this GPU is sm{major}{minor}"
        if not caps.modules.get("sgl_kernel.flash_ops"):
            return "fa3 needs sgl-kernel's flash_ops, which does not import here (sgl_kernel.flash_ops missing)"
    if name == "flashinfer" and not caps.modules.get("flashinfer"):
        return "flashinfer does not import here"
    return ""


def missing_attention(names, caps: Capabilities) -> list[str]:
    """Of ``names`` (``default`` aside), those the installed SGLang's ``--attention-backend`` does not accept
    (none when the probe could not read its choices)."""
    if not caps.attention_choices:
        return []
    return [n for n in names if n != "default" and n not in caps.attention_choices]


def unavailable_reason(config: ServerConfig, caps: Capabilities) -> str:
    """Why the installed SGLang cannot run ``config`` (``""`` when it can)."""
    if caps.error:
        return f"sglang server unavailable: {caps.error}"
    if config.speculative:
        if config.algorithm not in caps.algorithms:
            return (f"SpeculativeAlgorithm of sglang {caps.sglang} has no {config.algorithm} "
                    f"(members: {', '.join(caps.algorithms)})")
        if config.algorithm == ck.DFLASH and not caps.modules.get("flashinfer"):
            return ("DFLASH needs flashinfer, which does not import here: its draft sampling calls "
                    "flashinfer.sampling.top_p_renorm_probs on CUDA (sglang/kernels/ops/sampling/renorm.py)")
        if (config.cuda_graph and config.algorithm in (ck.EAGLE, ck.STANDALONE) and caps.eagle_graphs_import_flash_mla
                and not caps.modules.get("flash_mla")):
            return ("speculative CUDA graphs need flash_mla, which does not import here: capturing the draft "
                    "graphs imports FlashMLABackend whatever the attention backend "
                    "(sglang/srt/speculative/eagle_worker_v2.py, _capture_cuda_graphs)")
    missing = [f for f in _required_flags(config) if not caps.has(f)]
    if missing:
        return f"sglang {caps.sglang} has no {', '.join(missing)}"
    return ""


def _required_flags(config: ServerConfig) -> list[str]:
    flags = ["--model-path", "--host", "--port", "--attention-backend", "--sampling-backend",
             "--disable-radix-cache", "--skip-tokenizer-init", "--dtype", "--mem-fraction-static",
             "--max-total-tokens", "--enable-metrics", "--decode-log-interval"]
    if config.speculative:
        flags += ["--speculative-algorithm", "--speculative-draft-model-path"]
    if config.algorithm in (ck.EAGLE, ck.STANDALONE):
        flags += ["--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"]
    if config.algorithm == ck.DFLASH:
        flags += ["--speculative-num-draft-tokens"]
    if config.algorithm == DDTREE:
        flags += ["--speculative-ddtree-budget"]
    return flags + list(config.flags)


def server_argv(config: ServerConfig, caps: Capabilities, target: Path, draft: Path | None, port: int,
                nccl_port: int | None = None, python: str = sys.executable, attention: str | None = "") -> list[str]:
    """``python -m sglang.launch_server ...`` for ``config`` (flags known to work on the lent H200:
    ``../shared/device-sglang/README.md``). Radix cache off (its Rust extension panics there); greedy
    requests need no tokenizer; one ``Decode batch`` line per decode batch; metrics on. DDTREE adds
    ``--speculative-ddtree-budget B`` and the block size (``--speculative-ddtree-block-size`` where it
    exists), then ``config.flags`` (prune, CPU build / follow, ``--speculative-dflash-enable-ddtree``).

    ``--attention-backend`` is ``attention`` when given, else ``config.attention``; none at all for
    ``default`` or ``None`` (SGLang chooses)."""
    backend = attention or config.attention or "triton"
    attn = [] if attention is None or backend == "default" else ["--attention-backend", backend]
    argv = [python, "-m", SERVER_MODULE, "--model-path", str(target), "--host", "127.0.0.1",
            "--port", str(port), *attn, "--sampling-backend", "pytorch",
            "--disable-radix-cache", "--skip-tokenizer-init", "--dtype", "bfloat16",
            "--mem-fraction-static", str(DEFAULTS["mem_fraction_static"]),
            "--max-total-tokens", str(DEFAULTS["max_total_tokens"]),
            "--enable-metrics", "--decode-log-interval", "1"]
    if caps.has("--max-running-requests"):
        argv += ["--max-running-requests", str(max(8, config.max_batch))]
    if caps.has("--random-seed"):
        argv += ["--random-seed", "0"]
    if nccl_port is not None and caps.has("--nccl-port"):
        argv += ["--nccl-port", str(nccl_port)]
    argv += _graph_flags(config, caps)
    if config.speculative:
        argv += ["--speculative-algorithm", config.algorithm, "--speculative-draft-model-path", str(draft)]
    if config.algorithm in (ck.EAGLE, ck.STANDALONE):
        argv += ["--speculative-num-steps", str(config.steps), "--speculative-eagle-topk", str(config.topk),
                 "--speculative-num-draft-tokens", str(config.draft_tokens)]
    elif config.algorithm == ck.DFLASH:
        argv += ["--speculative-num-draft-tokens", str(config.draft_tokens)]
    elif config.algorithm == DDTREE:
        argv += ["--speculative-ddtree-budget", str(config.budget)]
        block = "--speculative-ddtree-block-size" if caps.has("--speculative-ddtree-block-size") else \
            "--speculative-num-draft-tokens"
        argv += [block, str(config.block_size)]
    return argv + list(config.flags)


def _graph_flags(config: ServerConfig, caps: Capabilities) -> list[str]:
    if not config.cuda_graph:
        if caps.has("--disable-cuda-graph"):
            return ["--disable-cuda-graph"]
        return ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]
    from .configs import CAPTURED_BS

    bs = str(max(max(CAPTURED_BS), config.max_batch))
    # prefill graphs are not under test (decode / verify graphs are); off where the flag exists, as the
    # DDTree build was seen serving on the H200 (../shared/device-sglang/README.md)
    prefill = ["--cuda-graph-backend-prefill", "disabled"] if caps.has("--cuda-graph-backend-prefill") else []
    out = []
    for flag in ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"):
        if caps.has(flag):
            out = [flag, bs]
            break
    # the captured sizes, so live batches of 3, 5 and 6 replay a padded graph (SGLang's speculative default
    # captures every size up to 8)
    for flag in ("--cuda-graph-bs-decode", "--cuda-graph-bs"):
        if caps.has(flag):
            out += [flag, *map(str, CAPTURED_BS)]
            break
    return out + prefill


PORT_RANGE = (20000, 55535)
"""Ports the servers get: DDTree trees of June-July 2026 (rancy-ddtree 398fc2c7, dbguo-ddtree-dev 514ea1f3) set
their gRPC port to ``port + 10000`` and refuse to start above 65535 (``ServerArgs._handle_deprecated_args``:
``SGLANG_GRPC_PORT (69511) must be between 1 and 65535``, seen on the H200 with ephemeral ports). Cut at the
kernel's ephemeral range (:func:`ephemeral_floor`): a port picked there can be taken by an outgoing connection
in the minute before the server binds it (H200, session 11: two of 25 servers died on ``address already in
use``)."""
PORT_SPACING = 16
"""Ports picked for one session stay this far apart (a server binds a few ports next to its own)."""


def ephemeral_floor(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The lowest port the kernel hands to outgoing connections (Linux's default 32768 where unreadable)."""
    try:
        return int(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class PortInUse(RuntimeError):
    """The server could not bind its HTTP port (something took it after it was picked): ours to retry, not a
    verdict on the server."""


def free_port(taken: set[int] | None = None, port_range: tuple[int, int] = PORT_RANGE) -> int:
    """A TCP port in ``port_range`` (half-open) below the kernel's ephemeral ports (:func:`ephemeral_floor`), free
    on 127.0.0.1 now and at least :data:`PORT_SPACING` from every port in ``taken`` (added to it).

    Raises:
        RuntimeError: none found in 200 tries.
    """
    import random

    taken = taken if taken is not None else set()
    low, high = port_range[0], min(port_range[1], max(port_range[0] + 1000, ephemeral_floor()))
    for _ in range(200):
        port = random.randrange(low, high)
        if any(abs(port - t) < PORT_SPACING for t in taken):
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise RuntimeError(f"no free port in {(low, high)} found in 200 tries")


class ServerFault(RuntimeError):
    """A server that cannot serve: its log shows a child that failed (:meth:`ServerProcess.check_log`), or
    (:class:`ServerStartError`) it exited or missed its readiness deadline.

    Attributes:
        fault_class: ``hang`` for a missed deadline, else the class read from the log.
        excerpt: the log lines around the first fault line (or the log's tail).
        seen_s: seconds from the server's start to when its log showed the failure (``None``: not from the log).
    """

    def __init__(self, message: str, fault_class: str, excerpt: str, seen_s: float | None = None):
        super().__init__(message)
        self.fault_class = fault_class
        self.excerpt = excerpt
        self.seen_s = seen_s


class ServerStartError(ServerFault):
    """A server failed before it was ready: it exited, missed its readiness deadline, or its log shows a child
    that failed."""


LOG_SETTLE_S = 1.0
"""Once a traceback or the SIGQUIT line shows, the log is read again after it has been quiet this long (at most
five times as long), so the traceback's exception line is complete."""
FAILED_GRACE_S = 2.0
"""SIGTERM -> SIGKILL grace for a server whose child failed: nothing of it is worth draining."""
_CARRY_LINES, _CARRY_BYTES = 20, 1 << 16


_LIVE: dict[int, "ServerProcess"] = {}
_LOCK = threading.Lock()
_HANDLERS_INSTALLED = False


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _child_setup(niceness: int):
    """The child's set-up between fork and exec: killed with this thread (``PR_SET_PDEATHSIG``), and ``nice``d
    by ``niceness`` (its own children inherit it)."""

    def setup() -> None:
        _set_pdeathsig()
        if niceness:
            os.nice(niceness)

    return setup


def stop_many(servers: list["ServerProcess"], grace_s: float = 10.0) -> list[int]:
    """Stop servers together: SIGTERM to every group at once, one shared grace period, then SIGKILL to
    what is left (so eight servers take ~``grace_s``, not eight times it). Returns pids left alive."""
    for s in servers:
        s.terminate()
    deadline = time.time() + grace_s
    for s in servers:
        if s.proc is not None:
            try:
                s.proc.wait(timeout=max(0.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
    left: list[int] = []
    for s in servers:
        left += s.stop(grace_s=0.5)
    return left


def stop_all() -> None:
    """Stop every server this process started and has not stopped (atexit, signals, session end)."""
    with _LOCK:
        live = list(_LIVE.values())
    stop_many(live)


def _install_handlers() -> None:
    """``stop_all`` at exit and on SIGTERM / SIGHUP, then the previous handler (or the default action)."""
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED or threading.current_thread() is not threading.main_thread():
        return
    _HANDLERS_INSTALLED = True
    atexit.register(stop_all)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(sig)

        def handler(signum, frame, previous=previous):
            stop_all()
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_IGN:
                return
            else:
                raise KeyboardInterrupt(f"signal {signum}: servers stopped")

        signal.signal(sig, handler)


class ServerProcess:
    """One server child. ``argv`` runs with ``env``; output goes to ``log_path``.

    Attributes:
        name: the configuration id.
        port: the HTTP port on 127.0.0.1.
        proc: the ``Popen`` (``None`` before :meth:`start`).
        ready_s: seconds from start to ready (``None`` until ready).
        ready_offset: log size in bytes when it became ready (the startup log is ``[0, ready_offset)``).
        failure: the :class:`ServerFault` :meth:`check_log` raised (``None`` until then).
        niceness: the ``nice`` increment the child starts with (0: this process's priority).
        standing_by: ``(python, module)`` while the child is a standby waiting for its argv (:meth:`stand_by`).
        standby_s: seconds it stood by before :meth:`release` (0 for a child started with its argv).
    """

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: str | Path, port: int,
                 niceness: int = 0):
        self.name, self.argv, self.env, self.port, self.niceness = name, argv, env, port, niceness
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.ready_s: float | None = None
        self.ready_offset = 0
        self.descendants: set[int] = set()
        self.failure: ServerFault | None = None
        self.standing_by: tuple[str, str] | None = None  # (python, module) of a standby not yet released
        self.standby_s = 0.0
        self._scanned = 0  # log bytes check_log has read
        self._carry = b""  # their last lines, read again with the next bytes (a header waits for its frame)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "ServerProcess":
        """Start the child (own session and process group; stdout+stderr -> log file)."""
        return self._spawn(self.argv, subprocess.DEVNULL, self.niceness)

    def _spawn(self, argv: list[str], stdin, niceness: int) -> "ServerProcess":
        _install_handlers()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=stdin, start_new_session=True, preexec_fn=_child_setup(niceness))
        self.started_at = time.time()
        with _LOCK:
            _LIVE[self.proc.pid] = self
        return self

    def stand_by(self, python: str = sys.executable, module: str = SERVER_MODULE) -> "ServerProcess":
        """Start the child as a :mod:`standby <.standby>` of ``python -m module`` (its imports now, its
        arguments at :meth:`release`), at this process's priority whatever :attr:`niceness` says (that applies
        from :meth:`release`); ``argv`` may still be empty."""
        self.standing_by = (python, module)
        return self._spawn(standby.command(python, module), subprocess.PIPE, 0)

    def release(self, argv: list[str]) -> bool:
        """Give a standing-by child its argv (``[python, "-m", module, *args]``, as :meth:`start` would run it) at
        :attr:`niceness` (raised before it reads the argv; lowering a priority needs privilege); the server starts
        from there (:attr:`started_at` is now, :attr:`standby_s` the time it stood by). ``False`` (nothing given)
        when the child is gone or stands by for another interpreter or module."""
        if self.standing_by is None or list(argv[:3]) != [self.standing_by[0], "-m", self.standing_by[1]]:
            return False
        if not self.alive():
            return False
        if self.niceness:
            try:
                os.setpriority(os.PRIO_PROCESS, self.proc.pid, os.getpriority(os.PRIO_PROCESS, 0) + self.niceness)
            except OSError:
                pass
        try:
            self.proc.stdin.write((json.dumps(list(argv[3:])) + "\n").encode())
            self.proc.stdin.close()
        except (OSError, ValueError):
            return False
        self.argv, self.standing_by = list(argv), None
        self.standby_s = time.time() - self.started_at
        self.started_at = time.time()
        return True

    def dismiss(self) -> None:
        """End a standing-by child that will not serve (it exits at the end of its stdin) and stop it; its log
        (imports only) goes, and its folder when that is left empty."""
        if self.standing_by is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=2.0)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        self.standing_by = None
        self.stop(grace_s=2.0)
        self.log_path.unlink(missing_ok=True)
        try:
            self.log_path.parent.rmdir()
        except OSError:
            pass

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def read_log(self, start: int = 0, end: int | None = None) -> str:
        """The log from byte ``start`` to ``end`` (decoded leniently)."""
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(start)
            data = f.read() if end is None else f.read(max(0, end - start))
        return data.decode("utf-8", "replace")

    def settle_log(self, quiet: float = 0.4, limit: float = 5.0) -> int:
        """Wait until the log has not grown for ``quiet`` seconds (at most ``limit``); its size."""
        size, since, t0 = self.log_size(), time.time(), time.time()
        while time.time() - t0 < limit:
            time.sleep(0.1)
            now = self.log_size()
            if now != size:
                size, since = now, time.time()
            elif time.time() - since >= quiet:
                break
        return size

    def check_log(self) -> None:
        """Read the log's bytes written since the last call; raise :class:`ServerFault` when they show a child
        that failed (:func:`.logparse.child_failure`: a traceback, or SGLang's SIGQUIT line), :class:`PortInUse`
        when they show that the server's own port was taken before it could bind it. Before it raises,
        the log settles (:data:`LOG_SETTLE_S`) so the exception line is complete. Once raised, every later call
        raises the same (:attr:`failure`).

        The message names the traceback's last frame and exception line: ``scheduler raised at
        .../ddtree_worker.py:412 in verify: RuntimeError: CUDA error: an illegal instruction was encountered``.
        """
        from .logparse import child_failure, excerpt

        if self.failure is not None:
            raise self.failure
        size = self.log_size()
        if size <= self._scanned:
            return
        with open(self.log_path, "rb") as f:
            f.seek(self._scanned)
            new = f.read(size - self._scanned)
        start = self._scanned - len(self._carry)  # the byte where the text read now begins
        data = self._carry + new
        self._scanned += len(new)
        carry = b"\n".join(data.split(b"\n")[-_CARRY_LINES:])
        if len(carry) > _CARRY_BYTES:  # a very long line: keep whole lines only (line numbers stay right)
            carry = carry[-_CARRY_BYTES:]
            carry = carry[carry.find(b"\n") + 1:]
        self._carry = carry
        text = data.decode("utf-8", "replace")
        if f"('127.0.0.1', {self.port}): address already in use" in text:  # uvicorn's failed bind of our port
            raise PortInUse(f"server {self.name}: its port {self.port} was taken before it could bind it (log "
                            f"{self.log_path})")
        if child_failure(text) is None:
            return
        seen_s = time.time() - self.started_at
        self.settle_log(quiet=LOG_SETTLE_S, limit=5 * LOG_SETTLE_S)
        found = child_failure(self.read_log(start))
        full = self.read_log()
        at = len(self.read_log(0, start).splitlines()) + found.line_no
        self.failure = ServerFault(found.message, found.fault_class,
                                   excerpt(full, at, before=20, after=len(full.splitlines()) - at), seen_s)
        raise self.failure

    def _snapshot_descendants(self) -> None:
        try:
            import psutil

            self.descendants |= {c.pid for c in psutil.Process(self.proc.pid).children(recursive=True)}
        except Exception:  # noqa: BLE001 - psutil missing or the process is gone
            pass

    def wait_ready(self, deadline_s: float, poll_s: float = 1.0) -> float:
        """Poll until the server answers ``/ready`` (or ``/health``) with 200; seconds taken.

        Raises:
            ServerStartError: the log shows a child that failed (:meth:`check_log`; the server is then stopped),
                the child exited, or ``deadline_s`` passed (``hang``).
            PortInUse: the log shows that its HTTP port was taken (the server is stopped): start it again on
                another port.
        """
        import requests

        from .logparse import classify_log, excerpt, fault_lines

        path = "/ready"
        while True:
            try:
                self.check_log()
            except PortInUse:
                self.stop(grace_s=FAILED_GRACE_S)
                raise
            except ServerFault as e:
                self.stop(grace_s=FAILED_GRACE_S)
                raise ServerStartError(f"server {self.name}: {e} ({e.seen_s:.0f}s after start, before it was ready; "
                                       f"server stopped; log {self.log_path})", e.fault_class, e.excerpt,
                                       e.seen_s) from e
            if not self.alive():
                text = self.read_log()
                hits = fault_lines(text)
                where = hits[0].line_no if hits else len(text.splitlines()) - 1
                raise ServerStartError(
                    f"server {self.name} exited with code {self.proc.returncode if self.proc else None} after "
                    f"{time.time() - self.started_at:.0f}s before it was ready (log {self.log_path})",
                    classify_log(text, hits) if hits else "other", excerpt(text, where, before=30, after=10))
            elapsed = time.time() - self.started_at
            if elapsed > deadline_s:
                text = self.read_log()
                raise ServerStartError(f"server {self.name} not ready after {elapsed:.0f}s (deadline {deadline_s:.0f}s; "
                                       f"log {self.log_path})", "hang",
                                       excerpt(text, len(text.splitlines()) - 1, before=30, after=0))
            try:
                r = requests.get(self.base_url + path, timeout=5)
                if r.status_code == 404 and path == "/ready":
                    path = "/health"
                    continue
                if r.status_code == 200:
                    self.ready_s = time.time() - self.started_at
                    self.ready_offset = self.settle_log(quiet=0.3, limit=2.0)
                    self._snapshot_descendants()
                    return self.ready_s
            except requests.RequestException:
                pass
            time.sleep(poll_s)

    def terminate(self) -> None:
        """SIGTERM to the whole process group, without waiting (see :meth:`stop`)."""
        if self.alive():
            self._snapshot_descendants()
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self, grace_s: float = 10.0) -> list[int]:
        """Stop the whole process group (SIGTERM, then SIGKILL after ``grace_s``) and any descendant
        that left it; returns the pids still alive afterwards (``[]`` when all are gone)."""
        if self.proc is None:
            return []
        if self.alive():
            self._snapshot_descendants()
        pgid = self.proc.pid  # start_new_session: the child leads its own group
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=wait)
                if not group_alive(pgid):
                    break
            except subprocess.TimeoutExpired:
                continue
        leftover = [p for p in self.descendants if pid_alive(p)]
        for p in leftover:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        with _LOCK:
            _LIVE.pop(self.proc.pid, None)
        time.sleep(0.2 if leftover else 0)
        return [p for p in leftover if pid_alive(p)]
