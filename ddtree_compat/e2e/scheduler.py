"""Which server starts when, and each server's background driver.

Servers start together (up to ``DDTREE_E2E_PARALLEL``, default 8, at once on the one GPU; each takes a small slice of
it, :data:`.command.DEFAULTS`) as soon as pytest's collection has selected their cells, in the order of the selected
cells (the target-only server first; in the ``ddtree`` profile the field's budgets before it). The first
``DDTREE_E2E_PRIORITY`` (default 6) start at normal CPU priority, every later one under ``nice``
(:data:`LATER_NICENESS`), so that on a host with fewer cores than servers the first verdicts do not wait for every
server's imports. The first ``DDTREE_E2E_PARALLEL`` servers of the plan start as standbys (:mod:`.standby`) when the
plan is known: their imports overlap the probe, and each launch hands its standby the argv.

In a session that plans its servers (not an xdist worker), each server is **driven in the background** once started:
a thread waits until it is ready, sends its selected phases in order, keeps each observation for its cell, takes the
baseline on the target-only server (:mod:`.baseline`), and stops the server after its last phase (after a failed
child, the other phases get that fault). The cells judge in pytest's order while servers serve together, so the
session takes about as long as its slowest servers, not the sum of every server's phases. Every server is started
from one launcher thread (a child's parent-death signal follows the thread that forked it); a driver whose server
stopped asks it for the next.

Environment: ``DDTREE_E2E_PARALLEL``, ``DDTREE_E2E_GPU_SESSIONS``, ``DDTREE_E2E_PRIORITY``, ``DDTREE_E2E_READY_S`` (readiness deadline per server,
default 360), ``DDTREE_E2E_REQUEST_S`` (per request, default 120), ``DDTREE_E2E_STANDBY`` (``0``: every server started
directly).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from .command import DEFAULTS, server_argv
from .configs import ServerConfig
from .launch import LaunchPlan
from .ports import PortInUse, free_port
from .process import ServerFault, ServerProcess, ServerStartError, stop_many
from .runner import Observation, run_phase, warm_up
from .timeline import Timeline

READY_S = float(os.environ.get("DDTREE_E2E_READY_S", "360"))
REQUEST_S = float(os.environ.get("DDTREE_E2E_REQUEST_S", "120"))
PARALLEL = int(os.environ.get("DDTREE_E2E_PARALLEL", "8"))
GPU_SESSIONS = int(os.environ.get("DDTREE_E2E_GPU_SESSIONS", "1"))
"""e2e sessions (pytest processes) sharing the one GPU at once (``scripts/e2e-ddtree-device.sh`` sets it): with
:data:`PARALLEL`, how many servers may hold GPU memory beside a server (:func:`.judge.shared_gpu`)."""
PRIORITY = int(os.environ.get("DDTREE_E2E_PRIORITY", "6"))
PORT_IN_USE = "port-in-use"
"""The class of a start that failed because the server's port was taken twice (the suite's error)."""
STANDBY = os.environ.get("DDTREE_E2E_STANDBY", "1") != "0"
"""Start the first :data:`PARALLEL` servers of a planned session as standbys (:mod:`.standby`) before the probe."""
LATER_NICENESS = 10
"""``nice`` increment of every server launched after the first :data:`PRIORITY` (CFS then gives a niced
process about a tenth of a normal one's share of a busy CPU)."""
KEPT_ENV = ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK", "HF_HUB_OFFLINE",
            "DDTREE_E2E_IMPL", "FLASHINFER_WORKSPACE_BASE")
"""The environment variables each server's ``launch.json`` records."""


class Scheduler:
    """The session's servers: started in order, at most :data:`PARALLEL` at once, each driven in the background.

    Args:
        root: the session's folder (``servers/<config id>/`` per server).
        env: the servers' environment (:func:`.probe.server_env`).
        configs: the plan's configurations, by id.
        plan_of: a configuration's launch plan (computed once, :mod:`.launch`).
        launch_facts: the installed SGLang's version and implementation, for each ``launch.json``.
        baseline: the lossless baseline the target-only server's driver takes (:mod:`.baseline`).
        timeline: where each launch, readiness, phase and stop is marked.

    Attributes:
        servers: config id -> its server (the relaunched one after a port was taken).
        failed: config id -> the fault that made its server unusable (remembered for its other cells).
        planned: this process plans its servers (``False`` in an xdist worker: no prefetch, servers stop at session
            end).
    """

    def __init__(self, root: Path, env: dict[str, str], configs: dict[str, ServerConfig],
                 plan_of: Callable[[ServerConfig], LaunchPlan], launch_facts: Callable[[], dict], baseline,
                 timeline: Timeline):
        self.root, self.env, self.configs = Path(root), env, configs
        self.plan_of, self.launch_facts, self.baseline, self.timeline = plan_of, launch_facts, baseline, timeline
        self.planned = True
        self.pending: Counter = Counter()
        self.order: list[str] = []
        self.wanted: dict[str, list[str]] = {}  # config id -> its selected phases, in run order
        self.servers: dict[str, ServerProcess] = {}
        self.failed: dict[str, ServerFault] = {}
        self.standbys: dict[str, ServerProcess] = {}  # config id -> its standby, until launched or dismissed
        self.ports: set[int] = set()
        self.used: set[str] = set()  # unplanned: configurations whose first phase ran
        self._observed: dict[tuple[str, str], Future] = {}  # (config id, phase) -> Observation or ServerFault
        self._drivers: ThreadPoolExecutor | None = None
        self._launcher: ThreadPoolExecutor | None = None  # planned: the one thread that starts servers
        self._driven: set[str] = set()
        self._launch_order: dict[str, int] = {}
        self._closing = False

    # ------------------------------------------------------------------------------------ selection
    def select(self, selected: list, planned: bool, stand_by: bool) -> None:
        """The cells this process runs (``E2ECell`` s, in run order); ``stand_by``: start the first servers of the
        plan as standbys now (in the launcher thread, waiting for it)."""
        self.planned = planned
        if not planned:
            return
        for c in selected:
            self.pending[c.config.id] += 1
            if c.config.id not in self.order:
                self.order.append(c.config.id)
            if c.phase.name not in self.wanted.setdefault(c.config.id, []):
                self.wanted[c.config.id].append(c.phase.name)
        if any(c.config.speculative for c in selected) and "target" not in self.order:
            self.order.insert(0, "target")  # the lossless baseline
        if STANDBY and self.order and stand_by:
            self._in_launcher(self._stand_by_now).result()

    # ------------------------------------------------------------------------------------ launching
    def _launch(self, config: ServerConfig, again: bool = False) -> None:
        """Start ``config``'s server (unless it was started, ``again`` aside, failed or cannot run here)."""
        if config.id in self.servers and not again or config.id in self.failed:
            return
        plan = self.plan_of(config)
        if not plan.runs:
            if config.id in self.standbys:
                self.standbys.pop(config.id).dismiss()
            return
        port = free_port(self.ports)
        nccl = free_port(self.ports) if plan.nccl_port else None
        argv = server_argv(plan.args, port, nccl)
        folder = self.root / "servers" / config.id
        folder.mkdir(parents=True, exist_ok=True)
        order = self._launch_order.setdefault(config.id, len(self._launch_order))  # a relaunch keeps its place
        niceness = 0 if order < PRIORITY else LATER_NICENESS
        server = ServerProcess(config.id, argv, self.env, folder / "server.log", port, niceness=niceness)
        standby = self.standbys.pop(config.id, None)
        if standby is not None:
            standby.niceness = niceness
            if standby.release(argv):
                standby.port, server = port, standby
            else:  # gone, or standing by for another module: started anew
                standby.dismiss()
        facts = self.launch_facts()
        (folder / "launch.json").write_text(json.dumps({
            "argv": argv, "env": {k: self.env.get(k) for k in KEPT_ENV}, "sglang": facts.get("sglang"),
            "implementation": facts.get("implementation"), "attention": plan.attention,
            "attention_asked": plan.asked, "defaults": DEFAULTS, "config": config.id,
            "order": order, "nice": niceness, "standby_s": round(server.standby_s, 1)}, indent=1))
        self.servers[config.id] = server if server.proc is not None else server.start()
        self.timeline.mark("launched", config.id, order=order, nice=niceness,
                           **({"standby_s": round(server.standby_s, 1)} if server.standby_s else {}))
        self._drive_in_background(config)

    def _stand_by_now(self) -> None:
        """In the launcher thread, once, when the plan is known and before the probe: a standby for each of the first
        :data:`PARALLEL` servers of the plan, importing the server module while the probe runs, at normal priority;
        :meth:`_launch` releases it with its argv and its priority."""
        for cid in self.order[:PARALLEL]:
            self.standbys[cid] = ServerProcess(cid, [], self.env, self.root / "servers" / cid / "server.log",
                                               0).stand_by()
        self.timeline.mark("standing by", servers=len(self.standbys))

    def prefetch(self) -> None:
        """Start the servers of the selected cells, in order, while fewer than ``PARALLEL`` run: in the launcher
        thread, without waiting for it."""
        if not self.planned or self._closing:
            return
        self._in_launcher(self._prefetch_now)

    def _in_launcher(self, fn, *args) -> Future:
        """``fn(*args)`` in the launcher thread: every server of a planned session is started from that one
        long-lived thread (a child's parent-death signal follows the thread that forked it), so neither pytest's
        thread nor a driver waits for a start."""
        if self._launcher is None:
            self._launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="e2e-launch")
        return self._launcher.submit(fn, *args)

    def _launch_now(self, config: ServerConfig) -> None:
        """In the launcher thread: the servers that have room, then ``config``'s (and its driver) if not yet."""
        self._prefetch_now()
        self._launch(config)
        self._drive_in_background(config)

    def _prefetch_now(self) -> None:
        if self._closing:
            return
        for cid in self.order:
            running = sum(1 for s in self.servers.values() if s.alive())
            if running >= PARALLEL:
                break
            if self.pending[cid] > 0 or cid == "target" and self.baseline.outputs is None:
                self._launch(self.configs[cid])

    def server(self, config: ServerConfig) -> ServerProcess:
        """The ready server of ``config`` (started now if it is not yet; an unplanned session's way).

        Raises:
            ServerFault: it exited, missed the readiness deadline or its log showed a child that failed, now or in
                an earlier cell (remembered for its other cells).
        """
        if config.id in self.failed:
            raise self.failed[config.id]
        self.prefetch()
        self._launch(config)
        if config.id not in self.servers:
            raise ServerStartError(f"server {config.id} not launched: {self.plan_of(config).reason}", "other", "")
        s = self.servers[config.id]
        if s.ready_s is None:
            try:
                s = self._ready(config, s, relaunch=lambda: self._relaunch(config))
            except ServerStartError as e:
                self.failed[config.id] = e
                self.servers[config.id].stop()
                raise
        return s

    def done(self, config: ServerConfig) -> None:
        """A cell of ``config`` finished: start the next servers (its driver stops its server after its last
        phase, and the target-only server after the baseline too)."""
        if not self.planned:
            return
        self.pending[config.id] -= 1
        self.prefetch()

    # ------------------------------------------------------------------------------------ background driving
    def _drive_in_background(self, config: ServerConfig) -> None:
        """Start ``config``'s server's driver (:meth:`_drive`) once, in a planned session."""
        if not self.planned or config.id not in self.servers or config.id in self._driven:
            return
        self._driven.add(config.id)
        if self._drivers is None:
            self._drivers = ThreadPoolExecutor(max_workers=len(self.configs) + 1, thread_name_prefix="e2e-server")
        for name in self.wanted.get(config.id, []):
            self._observed.setdefault((config.id, name), Future())
        self._drivers.submit(self._drive, config, self.servers[config.id])

    def _drive(self, config: ServerConfig, server: ServerProcess) -> None:
        """A server's background thread: wait until it is ready, run its selected phases in order (each
        observation kept for its cell), take the baseline on the target-only server, then stop it. A start
        that failed, or a child that failed in a phase, ends the phases left with that fault."""
        phases = {p.name: p for p in config.phases}
        wanted = list(self.wanted.get(config.id, []))
        try:
            try:
                server = self._ready(config, server,
                                     relaunch=lambda: self._in_launcher(self._relaunch, config).result())
                self.timeline.mark("ready", config.id, after_s=round(server.ready_s, 1))
            except ServerStartError as e:
                self.failed[config.id] = e
                self.timeline.mark("failed before ready", config.id, fault_class=e.fault_class)
                server = self.servers.get(config.id, server)  # a relaunched one, if any
                server.stop()
            first = True
            for name in wanted:
                future = self._observed[(config.id, name)]
                if config.id in self.failed:
                    future.set_exception(self.failed[config.id])
                    continue
                obs = run_phase(server, phases[name], REQUEST_S, first)
                first = False
                self.remember(config, obs, f"cell {config.id}-{name}")
                self.timeline.mark("phase", config.id, phase=name, wall_s=round(obs.wall_s, 2),
                                   **({"fault_class": obs.server_fault["fault_class"]} if obs.server_fault else {}))
                future.set_result(obs)
            if config.id == "target":
                obs = self.baseline.take(server, self.failed.get("target"))
                if obs is not None:
                    self.remember(config, obs, "the lossless baseline")
        except BaseException as e:  # the suite's own error: every cell still waiting gets it (an error, not a verdict)
            for name in wanted:
                if not self._observed[(config.id, name)].done():
                    self._observed[(config.id, name)].set_exception(e)
            if config.id == "target":
                self.baseline.fail(f"the target-only server's driver failed: {type(e).__name__}: {e}")
            raise
        finally:
            if config.id == "target":
                self.baseline.done()
            server.stop()
            self.timeline.mark("stopped", config.id)
            self.prefetch()  # its room goes to the next server

    def _ready(self, config: ServerConfig, server: ServerProcess, relaunch) -> ServerProcess:
        """``server`` once ready; started again (``relaunch()``, on another port) when its port was taken before it
        could bind it, once. Raises :class:`ServerStartError` (class ``port-in-use`` when the port was taken
        twice: the suite's own error, never a verdict on the server)."""
        try:
            server.wait_ready(READY_S)
            return self._warm(config, server)
        except PortInUse as e:
            self.timeline.mark("port taken", config.id, port=server.port)
            server = relaunch()
            first = e
        try:
            server.wait_ready(READY_S)
            return self._warm(config, server)
        except PortInUse as again:
            raise ServerStartError(f"{first}; again on another port: {again}", PORT_IN_USE, "") from again

    def _warm(self, config: ServerConfig, server: ServerProcess) -> ServerProcess:
        """``server`` after the warm-up request of a sampled server (:func:`.runner.warm_up`), its seconds in the
        timeline."""
        warmed = warm_up(server, config, READY_S)
        if warmed is not None:
            seconds, error = warmed
            self.timeline.mark("warm-up", config.id, wall_s=round(seconds, 2), **({"error": error} if error else {}))
        return server

    def _relaunch(self, config: ServerConfig) -> ServerProcess:
        """In the launcher thread (or pytest's, unplanned): ``config``'s server started again on new ports (it
        replaces the old one in :attr:`servers` in one step)."""
        self._launch(config, again=True)
        return self.servers[config.id]

    def wait(self, config: ServerConfig, future: Callable[[], Future]) -> object:
        """``future()``'s result (a driver's), ``config``'s server started first if it is not yet (with those that
        have room). Raises what the driver set (a :class:`ServerFault`)."""
        self._in_launcher(self._launch_now, config).result()
        if config.id not in self.servers:
            raise ServerStartError(f"server {config.id} not launched: {self.plan_of(config).reason}", "other", "")
        return future().result()

    def observation(self, config: ServerConfig, phase_name: str) -> Observation:
        """A phase's observation: in a planned session its server's driver's (waiting for it), else run now.

        Raises:
            ServerFault: the server could not serve the phase (a start that failed, a child that failed).
        """
        if self.planned:
            return self.wait(config, lambda: self._observed[(config.id, phase_name)])
        server = self.server(config)
        first = config.id not in self.used
        self.used.add(config.id)
        phase = next(p for p in config.phases if p.name == phase_name)
        obs = run_phase(server, phase, REQUEST_S, first)
        self.remember(config, obs, f"cell {config.id}-{phase_name}")
        return obs

    def remember(self, config: ServerConfig, obs: Observation, where: str) -> None:
        """A phase whose server's child failed (the server is stopped): its other cells get the same fault."""
        if obs.server_fault:
            f = obs.server_fault
            self.failed[config.id] = ServerFault(f"server {config.id} failed in {where}: {f['message']}",
                                                 f["fault_class"], f["excerpt"], f.get("seen_s"))

    def close(self) -> list[int]:
        """Stop every server and standby (together), then let their drivers end; pids left alive (should be none)."""
        self._closing = True
        if self._launcher is not None:  # a start in flight finishes; none begins
            self._launcher.shutdown(wait=True, cancel_futures=True)
        left = stop_many(list(self.servers.values()) + list(self.standbys.values()))
        if self._drivers is not None:
            self._drivers.shutdown(wait=False, cancel_futures=True)
        return left

