"""The lossless baseline: the target-only server's output for every prompt of the session's plan, sent once, which
every speculative server's output must equal (a speculative server is lossless when its tokens are the target's).

:class:`Baseline` holds it, or why it could not be taken; the target-only server's driver (:mod:`.scheduler`) takes
it after that server's own phases (:meth:`Baseline.take`), and a cell waits for it (:meth:`Baseline.wait`).
"""

from __future__ import annotations

from concurrent.futures import Future

from . import checkpoints as ck
from .configs import Phase, ServerConfig, baseline_requests
from .judge import judge
from .runner import run_phase


class Baseline:
    """The target-only outputs, by prompt (``outputs``), or why not (``error``).

    Args:
        target: the target-only configuration.
        configs: every configuration of the plan (whose prompts the baseline covers).
        shape: the tiny checkpoints' shape (the target's expectation).
        request_s: seconds per request.
    """

    def __init__(self, target: ServerConfig, configs: list[ServerConfig], shape: ck.TinyShape, request_s: float):
        self.target, self.configs, self.shape, self.request_s = target, configs, shape, request_s
        self.outputs: dict[tuple, list[int]] | None = None
        self.error: str | None = None
        self.settled: Future = Future()  # resolved once the target-only server's driver is done with it

    def fail(self, why: str) -> None:
        """Record why there is no baseline (the first reason wins)."""
        if self.outputs is None and self.error is None:
            self.error = why

    def take(self, server, failure=None) -> None:
        """Send every prompt of the plan once to the (ready) target-only ``server`` and keep its outputs; with
        ``failure`` (that server's :class:`~.process.ServerFault`), record it instead. Returns the phase's
        observation (or ``None``), so the caller can note a child that failed during it."""
        from .process import ServerStartError

        if failure is not None:
            self.fail(f"target-only server did not start: {failure}" if isinstance(failure, ServerStartError)
                      else f"target-only server failed: {failure}")
            return None
        reqs = list(baseline_requests(self.configs))
        phase = Phase("baseline", len(reqs), tuple(reqs))
        obs = run_phase(server, phase, self.request_s, first=False)
        verdict = judge(self.target, phase, self.target.expectation(phase, self.shape), obs).verdict
        if verdict.outcome != "pass":
            self.fail(f"target-only baseline run: {verdict.outcome}: {verdict.message[:300]}")
        else:
            self.outputs = {r.prompt: list(resp["output_ids"]) for r, resp in zip(reqs, obs.responses)}
        return obs

    def done(self) -> None:
        """The target-only server's driver is done: whoever waits stops waiting."""
        if not self.settled.done():
            self.settled.set_result(None)

    def result(self) -> tuple[dict[tuple, list[int]] | None, str]:
        """``(outputs, "")`` or ``(None, why not)``."""
        return self.outputs, self.error or ""
