"""One server process, from start to stop, never left behind.

:class:`ServerProcess` starts the server bound to 127.0.0.1 on its port in its own process group
(``start_new_session``), with its stdout and stderr written straight to a log file; the child also gets
``PR_SET_PDEATHSIG`` = SIGKILL, so it dies with this process even on SIGKILL, and SGLang's own workers die with it
(``kill_itself_when_parent_died``). A standby (:mod:`.standby`) is started before its arguments are known and
released with them. :meth:`ServerProcess.wait_ready` polls ``/ready`` (``/health`` on servers without it) until a
deadline, failing fast if the child exits or its log shows a child that failed (:meth:`ServerProcess.check_log`: a
traceback, or SGLang's SIGQUIT line, which comes 1-2 minutes before the server exits); :meth:`ServerProcess.stop`
sends SIGTERM to the whole group, then SIGKILL, and kills by pid any descendant that left the group. Every started
server is registered: :func:`stop_all` runs at exit and on SIGTERM/SIGHUP (the signal then goes on as before).
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..processes import group_alive, pid_alive
from . import standby
from .command import SERVER_MODULE
from .ports import PortInUse

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
