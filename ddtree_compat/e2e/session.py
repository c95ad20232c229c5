"""One pytest session's e2e tier: the host, the installed SGLang, the checkpoints, each configuration's launch plan,
and the cell runner; the servers themselves are the scheduler's (:mod:`.scheduler`), the lossless baseline is
:mod:`.baseline`'s, where the time goes is :mod:`.timeline`'s.

A cell (:class:`E2ECell`: a configuration and one of its request phases) is run by :meth:`E2ESession.run`: its
observation (its server's driver's, in a planned session), judged against the configuration's expectation and the
baseline (:mod:`.judge`), its capture saved. :meth:`E2ESession.close` (a session finalizer) stops whatever is left;
:mod:`.process` also stops servers at exit and on SIGTERM.

Environment: those of :mod:`.scheduler`, and ``DDTREE_E2E_MEM_FRACTION``, ``DDTREE_E2E_MAX_TOTAL_TOKENS``
(:data:`.command.DEFAULTS`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..arch import Gpu
from . import checkpoints as ck, hybrid
from . import logparse
from .baseline import Baseline
from .command import SERVER_MODULE
from .configs import Phase, ServerConfig, drafts
from .drafts import write_draft
from .expect import PhaseExpectation
from .judge import Judgement, judge_cell, shared_gpu
from .launch import LaunchPlan, launch_plans
from .probe import Capabilities, probe, resolve_attention, server_env
from .process import ServerFault
from .runner import Observation, save_capture
from .scheduler import GPU_SESSIONS, PARALLEL, PORT_IN_USE, REQUEST_S, Scheduler
from .timeline import Timeline


@dataclass(frozen=True)
class E2ECell:
    """One pytest cell: a server configuration and one of its phases."""

    config: ServerConfig
    phase: Phase

    @property
    def id(self) -> str:
        return f"{self.config.id}-{self.phase.name}"


def cells(configs: list[ServerConfig]) -> list[E2ECell]:
    """Every cell of the configurations (:func:`.configs.plan`: the target-only server's first), in order."""
    return [E2ECell(c, p) for c in configs for p in c.phases]


@dataclass
class CellRun:
    """The outcome of :meth:`E2ESession.run`: the judgement, or the reason the server is unusable."""

    judgement: Judgement
    observation: Observation | None
    capture: Path | None


class E2ESession:
    """The e2e tier's state for one pytest process (see the module docstring).

    Args:
        root: the session's folder (checkpoints, ``servers/<config id>/``, ``timeline.jsonl``).
        configs: the configurations of the plan (:func:`.configs.plan`, computed once per process by the plugin).
        gpus: this host's GPUs (none: no server runs here).
        shape: the tiny checkpoints' shape.
        started: the timeline's zero (``time.time()``; default now; the plugin passes pytest's configure).
    """

    def __init__(self, root: str | Path, configs: list[ServerConfig], gpus: list[Gpu],
                 shape: ck.TinyShape = ck.TinyShape(), started: float | None = None):
        self.root = Path(root)
        self.gpus, self.shape = gpus, shape
        self.configs = {c.id: c for c in configs}
        self.env = server_env()
        self.timeline = Timeline(self.root, started)
        self.baseline = Baseline(self.configs["target"], configs, shape, REQUEST_S)
        self.scheduler = Scheduler(self.root, self.env, self.configs, self.plan, self._launch_facts, self.baseline,
                                   self.timeline)
        self._caps: Capabilities | None = None
        self._checkpoints: dict[str, Path] | None = None
        self._plans: dict[str, LaunchPlan] | None = None
        self._lock = threading.RLock()  # the probe, the launch plans, the checkpoints: computed once
        self._closed = False

    # ------------------------------------------------------------------------------------ selection
    def select(self, selected: list[E2ECell], planned: bool = True) -> None:
        """Record the cells this process will run (from collection), in run order. ``planned=False`` (an xdist
        worker, which collects every cell but runs some): no prefetch, and servers stop only at session end."""
        if not self.host_reason():
            self.timeline.mark("session", cells=len(selected), planned=planned, wall=round(self.timeline.t0, 3))
        self.scheduler.select(selected, planned, stand_by=not self.host_reason())

    @property
    def planned(self) -> bool:
        return self.scheduler.planned

    def prefetch(self) -> None:
        """Start the servers of the selected cells in the background (:meth:`.scheduler.Scheduler.prefetch`)."""
        self.scheduler.prefetch()

    # ------------------------------------------------------------------------------------ the host, SGLang
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
        """What the installed SGLang offers (probed once, in a child; written to ``capabilities.json``)."""
        with self._lock:
            if self._caps is None:
                t = time.time()
                self._caps = probe(self.env)
                self.root.mkdir(parents=True, exist_ok=True)
                (self.root / "capabilities.json").write_text(json.dumps(
                    {"sglang": self._caps.sglang, "implementation": self._caps.implementation,
                     "algorithms": self._caps.algorithms, "modules": self._caps.modules,
                     "error": self._caps.error, "failure": self._caps.failure, "flags": sorted(self._caps.flags)},
                    indent=1))
                self.timeline.mark("probed", seconds=round(time.time() - t, 1))
            return self._caps

    def _launch_facts(self) -> dict:
        return {"sglang": self.caps.sglang, "implementation": self.caps.implementation}

    def implementation_name(self) -> str:
        """Short name of the SGLang the servers run (``""`` before the probe ran, or for a release named by
        its version only): :mod:`ddtree_compat.identity`."""
        return (self._caps.implementation or {}).get("name", "") if self._caps is not None else ""

    def checkpoints(self) -> dict[str, Path]:
        """Write the target and every draft the plan needs (once per session); name -> folder."""
        with self._lock:
            if self._checkpoints is None:
                t, base = time.time(), self.root / "checkpoints"
                write_target = hybrid.write_target if self.shape.hybrid else ck.write_target
                out = {"target": write_target(base, self.shape)}
                for spec in drafts(list(self.configs.values())):
                    out[spec.name] = write_draft(base, spec, self.shape)
                self._checkpoints = out
                self.timeline.mark("checkpoints written", seconds=round(time.time() - t, 1))
            return self._checkpoints

    def plan(self, config: ServerConfig) -> LaunchPlan:
        """``config``'s launch plan (every configuration's is computed once, at the first ask, :mod:`.launch`);
        on a host that runs no server, a plan whose reason says so."""
        why = self.host_reason()
        if why:
            return LaunchPlan(config, reason=why)
        with self._lock:
            if self._plans is None:
                caps = self.caps
                paths = self.checkpoints() if not caps.failure else {}
                selected = set(self.scheduler.order) if self.planned else None
                self._plans = launch_plans(list(self.configs.values()), caps, paths,
                                           lambda asked: self._resolve(asked), selected)
            return self._plans[config.id]

    def _resolve(self, asked: dict[str, list[str]]) -> dict[str, dict]:
        """SGLang's own attention choice for the ``default`` configurations (one child for all of them), kept in
        ``attention.json``."""
        chosen = resolve_attention(asked, self.env)
        (self.root / "attention.json").write_text(json.dumps(chosen, indent=1))
        return chosen

    def attention_name(self, config: ServerConfig) -> str:
        """The attention backend ``config`` runs on: its plan's (SGLang's choice for ``default``), else, where SGLang
        defers its choice to server start (0.5.23), the one the server's log names once it has written its
        arguments (``""`` while unknown)."""
        plan = self.plan(config)
        if plan.attention or plan.reason or plan.failure:
            return plan.attention
        server = self.scheduler.servers.get(config.id)
        return logparse.attention_backend(server.read_log()) if server is not None else ""

    # ------------------------------------------------------------------------------------ one cell
    def run(self, cell: E2ECell) -> CellRun:
        """Run and judge one cell on its (ready) server; save its capture. Server start failures become a ``fault``
        judgement with the log excerpt (a port taken twice: an ``error``, ours)."""
        from ..outcomes import Verdict

        config, phase = cell.config, cell.phase
        t0 = time.time()
        try:
            obs = self.scheduler.observation(config, phase.name)
        except ServerFault as e:  # a port taken twice is ours: an error, not a verdict on the server
            outcome, cls = ("error", None) if e.fault_class == PORT_IN_USE else ("fault", e.fault_class)
            verdict = shared_gpu(Verdict(outcome, str(e), duration_s=time.time() - t0, fault_class=cls),
                                 PARALLEL * GPU_SESSIONS)
            return CellRun(Judgement(verdict, log_excerpt=e.excerpt), None, None)
        compared = config.id != "target" and not config.distribution  # target: the designed chain; the law: no baseline
        baseline, why = self._baseline() if compared else (None, "")
        expect = config.expectation(phase, self.shape)
        twin: PhaseExpectation | None = None
        if config.negative_control and not config.distribution:
            twin = config.agreeing_twin().expectation(phase, self.shape)
        judgement = judge_cell(config, phase, obs, expect, twin, baseline, self.shape)
        judgement.verdict = shared_gpu(judgement.verdict, PARALLEL * GPU_SESSIONS)
        if why and compared:
            judgement.verdict.message += f" (lossless check against the target-only run not made: {why})"
        capture = save_capture(self.root / "servers" / config.id / phase.name, config, phase, expect, obs, judgement,
                               baseline, twin)
        return CellRun(judgement, obs, capture)

    def done(self, config: ServerConfig) -> None:
        """A cell of ``config`` finished (:meth:`.scheduler.Scheduler.done`)."""
        self.scheduler.done(config)

    def _baseline(self) -> tuple[dict[tuple, list[int]] | None, str]:
        """Target-only outputs for every prompt of the plan (``(outputs, "")``), or ``(None, why not)``; in a planned
        session the target-only server's driver takes them, else they are taken now."""
        if self.baseline.outputs is None and self.baseline.error is None:
            target = self.configs["target"]
            plan = self.plan(target)
            if plan.reason or plan.failure:
                self.baseline.fail(plan.reason or plan.failure)
            elif self.planned:
                try:
                    self.scheduler.wait(target, lambda: self.baseline.settled)
                except ServerFault as e:
                    self.baseline.fail(f"target-only server did not start: {e}")
            else:
                try:
                    obs = self.baseline.take(self.scheduler.server(target))
                    if obs is not None:
                        self.scheduler.remember(target, obs, "the lossless baseline")
                except ServerFault as e:
                    self.baseline.take(None, e)
        return self.baseline.result()

    def close(self) -> list[int]:
        """Stop every server (together), then let their drivers end; pids left alive (should be none). A second
        call does nothing."""
        if self._closed:
            return []
        self._closed = True
        left = self.scheduler.close()
        if not self.host_reason():  # a host that runs no server keeps no timeline (nor a folder for it)
            self.timeline.mark("closed")
        return left
