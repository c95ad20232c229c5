"""One pytest session's servers: checkpoints, capability probe, launch plan, baseline, teardown.

Servers start together (up to ``DDTREE_E2E_PARALLEL``, default 8, at once on the one GPU; each takes a
small slice: ``--mem-fraction-static`` 0.25 of the memory free at its start and ``--max-total-tokens``
16384) as soon as pytest's collection has selected their cells (the plugin starts them in the background
then), or else when the first e2e cell needs one, in the order of the selected cells (the target-only server first;
in the ``ddtree`` profile the field's budgets before it). The first ``DDTREE_E2E_PRIORITY`` (default 6) start
at normal CPU priority, every later one under ``nice`` (:data:`LATER_NICENESS`), so that on a host with fewer
cores than servers the first verdicts do not wait for every server's imports. The target-only server also answers the lossless baseline (every prompt of the plan,
once). The first ``DDTREE_E2E_PARALLEL`` servers of the plan start as standbys (:mod:`.standby`) when the plan
is known: their imports overlap the probe, and each launch hands its standby the argv.

In a session that plans its servers (not an xdist worker), each server is **driven in the background** once
started: a thread waits until it is ready, sends its selected phases in order, keeps each observation for
its cell, and stops the server after its last phase (after a failed child, the other phases get that fault).
The cells judge in pytest's order while servers serve together, so the session takes about as long as its
slowest servers, not the sum of every server's phases. Every server is started from one launcher thread
(a child's parent-death signal follows the thread that forked it); a driver whose server stopped asks it for
the next. ``<root>/timeline.jsonl`` says when each step happened (the session's plan, probe, checkpoints, each
server's launch, readiness, phases and stop), in seconds since pytest's configure under the plugin (the verdict
lines' zero).
:meth:`E2ESession.close` (a session finalizer) stops whatever is left; :mod:`.server` also stops them at exit
and on SIGTERM.

Environment: ``DDTREE_E2E_PARALLEL`` (servers starting or running at once), ``DDTREE_E2E_PRIORITY`` (servers
started at normal priority), ``DDTREE_E2E_READY_S`` (readiness deadline per server, default 360),
``DDTREE_E2E_REQUEST_S`` (per request, default 120), ``DDTREE_E2E_MEM_FRACTION``,
``DDTREE_E2E_MAX_TOTAL_TOKENS``, ``DDTREE_E2E_STANDBY`` (``0``: every server started directly).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..arch import Gpu
from . import checkpoints as ck
from . import logparse
from .drafts import write_draft
from .configs import Phase, ServerConfig, baseline_requests, drafts, e2e_profile, plan
from .expect import PhaseExpectation
from .runner import Judgement, Observation, judge, judge_negative_control, run_phase, save_capture
from .server import (DEFAULTS, SERVER_MODULE, Capabilities, PortInUse, ServerFault, ServerProcess, ServerStartError,
                     attention_reason, free_port, probe, resolve_attention, server_argv, server_env, stop_many,
                     unavailable_reason)

READY_S = float(os.environ.get("DDTREE_E2E_READY_S", "360"))
REQUEST_S = float(os.environ.get("DDTREE_E2E_REQUEST_S", "120"))
PARALLEL = int(os.environ.get("DDTREE_E2E_PARALLEL", "8"))
PRIORITY = int(os.environ.get("DDTREE_E2E_PRIORITY", "6"))
PORT_IN_USE = "port-in-use"
"""The class of a start that failed because the server's port was taken twice (the suite's error)."""
STANDBY = os.environ.get("DDTREE_E2E_STANDBY", "1") != "0"
"""Start the first :data:`PARALLEL` servers of a planned session as standbys (:mod:`.standby`) before the probe."""
LATER_NICENESS = 10
"""``nice`` increment of every server launched after the first :data:`PRIORITY` (CFS then gives a niced
process about a tenth of a normal one's share of a busy CPU)."""


@dataclass(frozen=True)
class E2ECell:
    """One pytest cell: a server configuration and one of its phases."""

    config: ServerConfig
    phase: Phase

    @property
    def id(self) -> str:
        return f"{self.config.id}-{self.phase.name}"


def cells(profile: str, attention=None) -> list[E2ECell]:
    """Every cell of ``profile`` (``DDTREE_E2E_PROFILE`` wins: :func:`.configs.e2e_profile`) on each attention
    backend of ``attention`` (:func:`.configs.parse_attention`), the target-only server's first."""
    return [E2ECell(c, p) for c in plan(e2e_profile(profile), attention=attention) for p in c.phases]


@dataclass
class CellRun:
    """The outcome of :meth:`E2ESession.run`: the judgement, or the reason the server is unusable."""

    judgement: Judgement
    observation: Observation | None
    capture: Path | None


class E2ESession:
    """The e2e tier's state for one pytest process (see the module docstring)."""

    def __init__(self, root: str | Path, profile: str, gpus: list[Gpu], shape: ck.TinyShape = ck.TinyShape(),
                 attention=None, started: float | None = None):
        """``started``: the timeline's zero (``time.time()``; default now; the plugin passes pytest's configure)."""
        self.root = Path(root)
        self.profile, self.gpus, self.shape = e2e_profile(profile), gpus, shape
        self.configs = {c.id: c for c in plan(self.profile, attention=attention)}
        self._attention: dict[str, dict] = {}
        self.pending: Counter = Counter()
        self.order: list[str] = []
        self.servers: dict[str, ServerProcess] = {}
        self.failed: dict[str, ServerFault] = {}
        self.used: set[str] = set()
        self.ports: set[int] = set()
        self._caps: Capabilities | None = None
        self._checkpoints: dict[str, Path] | None = None
        self._baseline: dict[tuple, list[int]] | None = None
        self._baseline_error: str | None = None
        self.env = server_env()
        self.planned = True
        self.wanted: dict[str, list[str]] = {}  # config id -> its selected phases, in run order
        self._observed: dict[tuple[str, str], Future] = {}  # (config id, phase) -> Observation or ServerFault
        self._baseline_future: Future = Future()  # resolved by the target-only server's driver
        self._drivers: ThreadPoolExecutor | None = None
        self._launcher: ThreadPoolExecutor | None = None  # planned: the one thread that starts servers
        self._driven: set[str] = set()
        self._launch_order: dict[str, int] = {}
        self.standbys: dict[str, ServerProcess] = {}  # config id -> its standby, until launched or dismissed
        self._lock = threading.RLock()  # the probe, SGLang's attention choice, the checkpoints: computed once
        self._t0 = time.time() if started is None else started
        self._closing = False
        self._closed = False

    # ------------------------------------------------------------------------------------ selection
    def select(self, selected: list[E2ECell], planned: bool = True) -> None:
        """Record the cells this process will run (from collection), in run order. ``planned=False``
        (an xdist worker, which collects every cell but runs some): no prefetch, and servers stop only
        at session end."""
        self.planned = planned
        if not self.host_reason():
            self.mark("session", cells=len(selected), planned=planned, wall=round(self._t0, 3))
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
        if STANDBY and self.order and not self.host_reason():
            self._in_launcher(self._stand_by_now).result()

    # ------------------------------------------------------------------------------------ availability
    def host_reason(self) -> str:
        """Why this host cannot run any server (``""`` when it can)."""
        if not self.gpus:
            return ("no GPU visible (NVML / torch.cuda): the e2e tier launches a real SGLang server "
                    "(python -m sglang.launch_server) on a CUDA GPU")
        if any(g.fake for g in self.gpus) and SERVER_MODULE == "sglang.launch_server":
            return "GPUs are faked (DDTREE_FAKE_GPUS): no device to launch a server on"
        return ""

    @property
    def caps(self) -> Capabilities:
        with self._lock:
            return self._probe()

    def _probe(self) -> Capabilities:
        if self._caps is None:
            t = time.time()
            self._caps = probe(self.env)
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / "capabilities.json").write_text(json.dumps(
                {"sglang": self._caps.sglang, "implementation": self._caps.implementation,
                 "algorithms": self._caps.algorithms, "modules": self._caps.modules,
                 "error": self._caps.error, "failure": self._caps.failure, "flags": sorted(self._caps.flags)},
                indent=1))
            self.mark("probed", seconds=round(time.time() - t, 1))
        return self._caps

    def implementation_name(self) -> str:
        """Short name of the SGLang the servers run (``""`` before the probe ran, or for a release named by
        its version only): :mod:`.implementation`."""
        return (self._caps.implementation or {}).get("name", "") if self._caps is not None else ""

    def probe_failure(self) -> str:
        """Why probing the installed SGLang failed other than by a missing module (``""`` when it did not, or
        when the host cannot run servers at all): the cells are errors of the setup, not skips."""
        return "" if self.host_reason() else (self.caps.failure or "")

    def reason(self, config: ServerConfig) -> str:
        """Why ``config`` cannot run here (``""`` when it can): host, probe, flags, algorithm, modules, and its
        attention backend (SGLang's choice for ``default``); an explicit backend that SGLang's default also
        picks for this configuration runs in the ``default`` cell (when that one is selected)."""
        why = self.host_reason() or unavailable_reason(config, self.caps)
        if why or config.id == "target" or not config.attention:
            return why
        if config.attention == "default":
            chosen = self.resolved(config)
            if chosen.get("error"):
                return ""  # an error of the setup (attention_failure), not a skip
            why = attention_reason(chosen["attention_backend"], self.caps)
            return f"SGLang chooses {chosen['attention_backend']} for this configuration here: {why}" if why else ""
        why = attention_reason(config.attention, self.caps)
        if why:
            return why
        twin = f"{config.shape_id}-attn-default"
        if twin in self.configs and (twin in self.order or not self.planned):
            chosen = self.resolved(self.configs[twin])
            if chosen.get("attention_backend") == config.attention:
                return (f"SGLang's own choice here is {config.attention}: the cell {twin} runs this server "
                        f"(one launch per backend)")
        return ""

    def attention_failure(self, config: ServerConfig) -> str:
        """Why asking SGLang for its attention choice failed (``""`` when it did not, or was not asked): the
        cell is an error of the setup, never a skip and never a verdict on the server."""
        if config.attention != "default" or self.host_reason() or self.caps.error or self.caps.failure:
            return ""
        return self.resolved(config).get("error") or ""

    def attention_name(self, config: ServerConfig) -> str:
        """The attention backend ``config`` runs on: SGLang's choice for ``default`` (``""`` while unknown).
        Where SGLang defers its choice to server start (its ``ServerArgs`` reads ``None`` until then, as in
        0.5.23), the choice is read from the server's own log once it has written its arguments."""
        if config.attention != "default":
            return config.attention
        if self.host_reason() or self.caps.error or self.caps.failure:
            return ""
        chosen = self.resolved(config).get("attention_backend")
        server = self.servers.get(config.id)
        return chosen or (logparse.attention_backend(server.read_log()) if server is not None else "")

    def resolved(self, config: ServerConfig) -> dict:
        """SGLang's attention choice for ``config`` (:func:`.server.resolve_attention`, asked once for every
        ``default`` configuration of the plan): ``{"attention_backend": name, ...}`` or ``{"error": why}``."""
        with self._lock:
            return self._resolve(config)

    def _resolve(self, config: ServerConfig) -> dict:
        if config.id not in self._attention:
            paths = self.checkpoints()
            asked = {c.id: server_argv(c, self.caps, paths["target"], paths[c.draft.name] if c.draft else None,
                                       30000, python="", attention=None)[3:]
                     for c in self.configs.values() if c.attention == "default" and c.id not in self._attention}
            self._attention.update(resolve_attention(asked, self.env))
            (self.root / "attention.json").write_text(json.dumps(self._attention, indent=1))
        return self._attention[config.id]

    # ------------------------------------------------------------------------------------ checkpoints
    def checkpoints(self) -> dict[str, Path]:
        """Write the target and every draft the plan needs (once per session); name -> folder."""
        with self._lock:
            if self._checkpoints is None:
                t, base = time.time(), self.root / "checkpoints"
                out = {"target": ck.write_target(base, self.shape)}
                for spec in drafts(list(self.configs.values())):
                    out[spec.name] = write_draft(base, spec, self.shape)
                self._checkpoints = out
                self.mark("checkpoints written", seconds=round(time.time() - t, 1))
            return self._checkpoints

    def mark(self, event: str, server: str = "", **fields) -> None:
        """One line of ``<root>/timeline.jsonl``: seconds since the session began, the event, its server and
        fields (where a run's time goes: probe, checkpoints, each server's launch, readiness, phases, stop)."""
        line = {"t": round(time.time() - self._t0, 2), "event": event, **({"server": server} if server else {}),
                **fields}
        with self._lock:
            self.root.mkdir(parents=True, exist_ok=True)
            with open(self.root / "timeline.jsonl", "a") as f:
                f.write(json.dumps(line) + "\n")

    # ------------------------------------------------------------------------------------ servers
    def _launch(self, config: ServerConfig, again: bool = False) -> None:
        """Start ``config``'s server (unless it was started, ``again`` aside, failed or cannot run here)."""
        if config.id in self.servers and not again or config.id in self.failed:
            return
        if self.reason(config):
            if config.id in self.standbys:
                self.standbys.pop(config.id).dismiss()
            return
        paths = self.checkpoints()
        port, nccl = free_port(self.ports), free_port(self.ports)
        argv = server_argv(config, self.caps, paths["target"], paths[config.draft.name] if config.draft else None,
                           port, nccl, attention=None if config.attention == "default" else config.attention)
        folder = self.root / "servers" / config.id
        folder.mkdir(parents=True, exist_ok=True)
        keep = ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK", "HF_HUB_OFFLINE",
                "DDTREE_E2E_IMPL", "FLASHINFER_WORKSPACE_BASE")
        order = self._launch_order.setdefault(config.id, len(self._launch_order))  # a relaunch keeps its place
        niceness = self._niceness(order)
        server = ServerProcess(config.id, argv, self.env, folder / "server.log", port, niceness=niceness)
        standby = self.standbys.pop(config.id, None)
        if standby is not None:
            standby.niceness = niceness
            if standby.release(argv):
                standby.port, server = port, standby
            else:  # gone, or standing by for another module: started anew
                standby.dismiss()
        (folder / "launch.json").write_text(json.dumps({
            "argv": argv, "env": {k: self.env.get(k) for k in keep}, "sglang": self.caps.sglang,
            "implementation": self.caps.implementation, "attention": self.attention_name(config),
            "attention_asked": config.attention, "defaults": DEFAULTS, "config": config.id,
            "order": order, "nice": niceness, "standby_s": round(server.standby_s, 1)}, indent=1))
        self.servers[config.id] = server if server.proc is not None else server.start()
        self.mark("launched", config.id, order=order, nice=niceness,
                  **({"standby_s": round(server.standby_s, 1)} if server.standby_s else {}))
        self._drive_in_background(config)

    @staticmethod
    def _niceness(order: int) -> int:
        return 0 if order < PRIORITY else LATER_NICENESS

    def _stand_by_now(self) -> None:
        """In the launcher thread, from :meth:`select` (once, when the plan is known, before the probe): a standby
        (:mod:`.standby`) for each of the first :data:`PARALLEL` servers of the plan, importing the server module
        while the probe runs, at normal priority; :meth:`_launch` releases it with its argv and its priority."""
        for cid in self.order[:PARALLEL]:
            self.standbys[cid] = ServerProcess(cid, [], self.env, self.root / "servers" / cid / "server.log",
                                               0).stand_by()
        self.mark("standing by", servers=len(self.standbys))

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
            if self.pending[cid] > 0 or cid == "target" and self._baseline is None:
                self._launch(self.configs[cid])

    def server(self, config: ServerConfig) -> ServerProcess:
        """The ready server of ``config`` (started now if it is not yet).

        Raises:
            ServerFault: it exited, missed the readiness deadline or its log showed a child that failed, now or in
                an earlier cell (remembered for its other cells).
        """
        if config.id in self.failed:
            raise self.failed[config.id]
        self.prefetch()
        self._launch(config)
        if config.id not in self.servers:
            raise ServerStartError(f"server {config.id} not launched: {self.reason(config)}", "other", "")
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
    def _drive(self, config: ServerConfig, server: ServerProcess) -> None:
        """A server's background thread: wait until it is ready, run its selected phases in order (each
        observation kept for its cell), take the baseline on the target-only server, then stop it. A start
        that failed, or a child that failed in a phase, ends the phases left with that fault."""
        phases = {p.name: p for p in config.phases}
        wanted = list(self.wanted.get(config.id, []))
        try:
            try:
                server = self._ready(config, server, relaunch=lambda: self._in_launcher(self._relaunch, config).result())
                self.mark("ready", config.id, after_s=round(server.ready_s, 1))
            except ServerStartError as e:
                self.failed[config.id] = e
                self.mark("failed before ready", config.id, fault_class=e.fault_class)
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
                self._remember(config, obs, f"cell {config.id}-{name}")
                self.mark("phase", config.id, phase=name, wall_s=round(obs.wall_s, 2),
                          **({"fault_class": obs.server_fault["fault_class"]} if obs.server_fault else {}))
                future.set_result(obs)
            if config.id == "target":
                self._take_baseline(server)
        except BaseException as e:  # the suite's own error: every cell still waiting gets it (an error, not a verdict)
            for name in wanted:
                if not self._observed[(config.id, name)].done():
                    self._observed[(config.id, name)].set_exception(e)
            if config.id == "target" and self._baseline is None and self._baseline_error is None:
                self._baseline_error = f"the target-only server's driver failed: {type(e).__name__}: {e}"
            raise
        finally:
            if config.id == "target" and not self._baseline_future.done():
                self._baseline_future.set_result(None)
            server.stop()
            self.mark("stopped", config.id)
            self.prefetch()  # its room goes to the next server

    def _ready(self, config: ServerConfig, server: ServerProcess, relaunch) -> ServerProcess:
        """``server`` once ready; started again (``relaunch()``, on another port) when its port was taken before it
        could bind it, once. Raises :class:`ServerStartError` (class ``port-in-use`` when the port was taken
        twice: the suite's own error, never a verdict on the server)."""
        try:
            server.wait_ready(READY_S)
            return server
        except PortInUse as e:
            self.mark("port taken", config.id, port=server.port)
            server = relaunch()
        try:
            server.wait_ready(READY_S)
            return server
        except PortInUse as again:
            raise ServerStartError(f"{e}; again on another port: {again}", PORT_IN_USE, "") from again

    def _relaunch(self, config: ServerConfig) -> ServerProcess:
        """In the launcher thread (or pytest's, unplanned): ``config``'s server started again on new ports (it
        replaces the old one in :attr:`servers` in one step)."""
        self._launch(config, again=True)
        return self.servers[config.id]

    def _wait(self, config: ServerConfig, future) -> object:
        """``future()``'s result (a driver's), ``config``'s server started first if it is not yet (with those that
        have room). Raises what the driver set (a :class:`ServerFault`)."""
        self._in_launcher(self._launch_now, config).result()
        if config.id not in self.servers:
            raise ServerStartError(f"server {config.id} not launched: {self.reason(config)}", "other", "")
        return future().result()

    # ------------------------------------------------------------------------------------ baseline
    def baseline(self) -> tuple[dict[tuple, list[int]] | None, str]:
        """Target-only outputs for every prompt of the plan (``(outputs, "")``), or ``(None, why not)``."""
        if self._baseline is None and self._baseline_error is None:
            target = self.configs["target"]
            why = self.reason(target)
            if why:
                self._baseline_error = why
            elif self.planned:  # the target-only server's driver takes it
                try:
                    self._wait(target, lambda: self._baseline_future)
                except ServerFault as e:
                    self._baseline_error = self._baseline_error or f"target-only server did not start: {e}"
            else:
                try:
                    self._take_baseline(self.server(target))
                except ServerStartError as e:
                    self._baseline_error = f"target-only server did not start: {e}"
                except ServerFault as e:
                    self._baseline_error = f"target-only server failed: {e}"
        return self._baseline, self._baseline_error or ""

    def _take_baseline(self, server: ServerProcess) -> None:
        """Send every prompt of the plan once to the (ready) target-only server and keep its outputs, or why not."""
        target = self.configs["target"]
        if "target" in self.failed:
            e = self.failed["target"]
            self._baseline_error = (f"target-only server did not start: {e}" if isinstance(e, ServerStartError)
                                    else f"target-only server failed: {e}")
            return
        reqs = list(baseline_requests(list(self.configs.values())))
        phase = Phase("baseline", len(reqs), tuple(reqs))
        obs = run_phase(server, phase, REQUEST_S, first=False)
        self._remember(target, obs, "the lossless baseline")
        verdict = judge(target, phase, target.expectation(phase, self.shape), obs).verdict
        if verdict.outcome != "pass":
            self._baseline_error = f"target-only baseline run: {verdict.outcome}: {verdict.message[:300]}"
        else:
            self._baseline = {r.prompt: list(resp["output_ids"]) for r, resp in zip(reqs, obs.responses)}

    # ------------------------------------------------------------------------------------ one cell
    def run(self, cell: E2ECell) -> CellRun:
        """Run and judge one cell on its (ready) server; save its capture. Server start failures become
        a ``fault`` judgement with the log excerpt."""
        from ..outcomes import Verdict

        config, phase = cell.config, cell.phase
        t0 = time.time()
        try:
            if self.planned:  # observed by the server's driver
                obs = self._wait(config, lambda: self._observed[(config.id, phase.name)])
            else:
                server = self.server(config)
                first = config.id not in self.used
                self.used.add(config.id)
                obs = run_phase(server, phase, REQUEST_S, first)
                self._remember(config, obs, f"cell {cell.id}")
        except ServerFault as e:  # a port taken twice is ours: an error, not a verdict on the server
            outcome, cls = ("error", None) if e.fault_class == PORT_IN_USE else ("fault", e.fault_class)
            return CellRun(Judgement(Verdict(outcome, str(e), duration_s=time.time() - t0, fault_class=cls),
                                     log_excerpt=e.excerpt), None, None)
        baseline, why = self.baseline() if config.id != "target" else (None, "")  # target: the designed chain only
        expect = config.expectation(phase, self.shape)
        twin: PhaseExpectation | None = None
        if config.negative_control:
            twin = config.agreeing_twin().expectation(phase, self.shape)
            judgement = judge_negative_control(config, phase, obs, expect, twin, baseline)
        else:
            judgement = judge(config, phase, expect, obs, baseline)
        if why and config.id != "target":
            judgement.verdict.message += f" (lossless check against the target-only run not made: {why})"
        capture = save_capture(self.root / "servers" / config.id / phase.name, config, phase, expect, obs, judgement,
                               baseline, twin)
        return CellRun(judgement, obs, capture)

    def _remember(self, config: ServerConfig, obs: Observation, where: str) -> None:
        """A phase whose server's child failed (the server is stopped): its other cells get the same fault."""
        if obs.server_fault:
            f = obs.server_fault
            self.failed[config.id] = ServerFault(f"server {config.id} failed in {where}: {f['message']}",
                                                 f["fault_class"], f["excerpt"], f.get("seen_s"))

    def close(self) -> list[int]:
        """Stop every server (together), then let their drivers end; pids left alive (should be none). A second
        call does nothing."""
        if self._closed:
            return []
        self._closed = self._closing = True
        if self._launcher is not None:  # a start in flight finishes; none begins
            self._launcher.shutdown(wait=True, cancel_futures=True)
        left = stop_many(list(self.servers.values()) + list(self.standbys.values()))
        if self._drivers is not None:
            self._drivers.shutdown(wait=False, cancel_futures=True)
        if not self.host_reason():  # a host that runs no server keeps no timeline (nor a folder for it)
            self.mark("closed")
        return left
