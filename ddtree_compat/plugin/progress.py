"""What a session says while it runs (the controller process only; a session with no cell of ours hears nothing):

* when the first cell reports, one line per backend: what runs here, what skips and why (from the backends'
  declarations, :func:`ddtree_compat.contract.unavailable`), and a line when no DDTree implementation was found
  (a session whose cells are all e2e cells, the test command's among them: one line, the kernel backends are
  not resolved for it). Under xdist the first worker (``gw0``), which imports SGLang for its own cells anyway,
  writes them and sends them with its first cell's report: the controller imports no backend (that import held
  the controller while every worker's reports, and then the workers, waited on it: ``docs/benchmarks.md``);
  it writes them itself only when no worker sent them by the session's end;
* every ``--ddtree-progress`` seconds (default 30; ``0``: never), one line: tests done of collected, elapsed,
  the static tier's cells judged and left, and the test running longest (which kernel x arch compiles,
  in a static cell's id: ``static-sm120-sglang-triton-verify_tree_greedy-bs3-w16-c16``).

Under xdist the controller hears every worker's test starts and reports, so the lines cover all workers.
"""

from __future__ import annotations

import time

import pytest

from ..tiers import E2E, STATIC, in_xdist_worker
from .cells import OUTCOME_PROPERTY, TIER_PROPERTY, is_cell_item, is_e2e_item, report_property
from .session import GRAPH_NEEDS_DEVICE, NO_IMPLEMENTATION, active, suite

REASON_CHARS = 120
LONG_RUNNING_S = 2.0
"""A test running at least this long is named in the progress line."""
RATE_AFTER_S = 30.0
"""Seconds of static compiles before a time-left estimate: the first ones are often cache hits or small kernels
(a trial's first estimate said 0:09 for 514 compiles that took 2.5 min)."""
STATIC_ID = f"[{STATIC}-"  # in the node id of every static-tier test (``StaticCell.id`` starts with its tier)


def _names(kernels: list[str], limit: int = 3) -> str:
    shown = ", ".join(kernels[:limit])
    return shown if len(kernels) <= limit else f"{shown} +{len(kernels) - limit} more"


def _short(reason: str) -> str:
    """``reason``, or its words that fit in :data:`REASON_CHARS` and `` ...`` (never a word cut in two), with the
    parentheses the cut left open closed after it."""
    if len(reason) <= REASON_CHARS:
        return reason
    head = reason[:REASON_CHARS - 3]
    while True:
        cut = (head.rsplit(" ", 1)[0] if " " in head else head).rstrip(" ,;:(")
        closing = ")" * max(0, cut.count("(") - cut.count(")"))
        if len(cut) + 4 + len(closing) <= REASON_CHARS or " " not in cut:
            return cut + " ..." + closing
        head = cut


def backend_line(backend, target) -> str:
    """What a backend runs on a target, in one line: ``sglang-triton on interpret: runs 6 of 8 kernels; skips
    front_out_cache_loc, assign_req_to_token (front_out_cache_loc: <why>; assign_req_to_token: <why>)``, or ``skips
    all 2 kernels``, ``skips its one kernel, verify_tree_greedy: <why>`` where none runs; at most two reasons spelled
    out (from :func:`ddtree_compat.contract.unavailable`)."""
    from ..contract import kernels_of, unavailable

    names = list(kernels_of(backend))
    reasons: dict[str, list[str]] = {}
    runs = []
    for kernel in names:
        reason = unavailable(backend, kernel, target)
        if reason is None:
            runs.append(kernel)
        else:
            reasons.setdefault(_short(reason), []).append(kernel)
    head = f"{backend.name} on {target.id}: "
    if not reasons:
        return head + (f"runs all {len(names)} kernels" if len(names) > 1 else f"runs {names[0]}")
    skipped = [k for ks in reasons.values() for k in ks]
    if len(reasons) == 1:
        (reason,) = reasons
        what = (_names(skipped) if runs else f"all {len(names)} kernels" if len(names) > 1
                else f"its one kernel, {names[0]}")  # nothing runs: say so, as for several
        return head + (f"runs {len(runs)} of {len(names)} kernels; " if runs else "") + f"skips {what}: {reason}"
    why = "; ".join(f"{ks[0] if len(ks) == 1 else _names(ks, 2)}: {reason}" for reason, ks in list(reasons.items())[:2])
    if len(reasons) > 2:
        why += f"; +{len(reasons) - 2} other reasons"
    if not runs:
        return head + f"skips all {len(names)} kernels ({why})"
    return head + f"runs {len(runs)} of {len(names)} kernels; skips {_names(skipped)} ({why})"


START_LINES = "ddtree_start_lines"
"""The report property carrying the start lines from the first xdist worker to the controller."""


def xdist_session(config: pytest.Config) -> bool:
    """The controller of an xdist session (its cells run in workers, which send the start lines)."""
    return bool(getattr(config.option, "numprocesses", None)) or bool(getattr(config.option, "tx", None))


def start_lines(sess) -> list[str]:
    """The start of a session: tier and profile, a line per backend and target arch, DDTree implementations."""
    lines = [f"ddtree-compat: tier {sess.tier}, profile {sess.profile}, {len(sess.backends)} backend(s)"
             + ("" if sess.static else "; static tier off")]
    targets = list({t.column: t for t in sess.targets}.values())  # one per arch
    for backend in sess.backends:
        for target in targets:
            lines.append("  " + backend_line(backend, target))
    if not sess.implementations:
        lines.append(f"  {NO_IMPLEMENTATION}: the DDTree kernels' tests skip")
    off_device = sorted({t.id for t in targets if t.tier != "device"})
    if off_device:  # per cell, not per kernel: the backend lines above cannot say it
        lines.append(f"  CUDA-graph cells (kernel@graph) skip on {', '.join(off_device)}: {GRAPH_NEEDS_DEVICE}")
    return lines


class Progress:
    """Registered in every session; speaks only in a controller whose session has the suite."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.collected: set[str] = set()
        self.finished: set[str] = set()
        self.running: dict[str, float] = {}
        self.cells_seen = False
        self.collected_here = False  # this process collected the session's tests (an xdist controller does not)
        self.e2e_cells = 0  # how many cells were collected here when all are e2e cells (no kernel backend to speak of)
        self.cell_tiers: dict[str, str] = {}  # node id -> tier, of the cells reported here (an xdist controller's view)
        self.started_lines = False  # the start lines are written (or sent, by a worker)
        self.started = self.last = time.monotonic()
        self.static_started: float | None = None  # when the first static compile started (its rate gives the time left)

    def _speaks(self) -> bool:
        """In the controller (or a run without xdist), once the suite exists or a worker reported a cell of
        ours (an xdist controller that collects nothing itself, in a run that asked for nothing by option)."""
        return not in_xdist_worker(self.config) and (active(self.config) is not None or self.cells_seen)

    def _interval(self) -> float:
        from .session import progress_seconds

        sess = active(self.config)
        return sess.progress_s if sess is not None else progress_seconds(self.config.getoption("ddtree_progress"))

    def _write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            if reporter._tw.width_of_current_line:  # after a row of progress dots
                reporter.write("\n")
            reporter.write_line(line, flush=True)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The start lines after all where cells ran but no worker sent them (``gw0`` crashed before its first)."""
        if self.cells_seen and not self.started_lines and not in_xdist_worker(self.config):
            self._start()

    def _start(self) -> None:
        """Write the start lines, once, when the first cell of ours reports: a session that runs none (a unit-test
        session with ``DDTREE_*`` in its environment) never imports SGLang or an implementation for them."""
        self.started_lines = True
        if not in_xdist_worker(self.config):
            for line in self.lines():
                self._write(line)

    def lines(self) -> list[str]:
        """The start lines of this session (none where it has no suite: the workers' cells report why)."""
        sess = active(self.config)
        if sess is None:  # an xdist controller whose session asked only by environment or fixture
            try:
                sess = suite(self.config)
            except pytest.UsageError:
                return []
        e2e_cells = self._e2e_cells()
        if e2e_cells:  # the kernel backends' lines would import SGLang's kernels and the implementations
            where = f"servers on {sess.e2e_arch()}" if sess.gpus else "no GPU visible, so no server starts"
            return [f"ddtree-compat: e2e cells only ({e2e_cells}): {where}"]
        return start_lines(sess)

    def _e2e_cells(self) -> int:
        """How many cells this session has when all of them are e2e cells, else 0: from the collection where this
        process collected (no xdist, or a worker), else from the cells reported (an xdist controller collects
        nothing; it writes the start lines itself when no worker sent them, the e2e cells all in other workers
        than ``gw0``)."""
        if self.collected_here:
            return self.e2e_cells
        tiers = set(self.cell_tiers.values())
        return len(self.cell_tiers) if tiers == {E2E} else 0

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected.update(item.nodeid for item in session.items)
        self.collected_here = bool(session.items)
        cells = [item for item in session.items if is_cell_item(item)]
        self.e2e_cells = len(cells) if all(is_e2e_item(item) for item in cells) else 0

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:
        self.collected.update(ids)

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        now = self.running.setdefault(nodeid, time.monotonic())
        if self.static_started is None and STATIC_ID in nodeid:
            self.static_started = now
        self._tick()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        ours = not self.cells_seen and report_property(report, OUTCOME_PROPERTY) is not None
        if ours:
            self.cells_seen = True
        tier = report_property(report, TIER_PROPERTY)
        if tier is not None:
            self.cell_tiers[report.nodeid] = tier
        if in_xdist_worker(self.config):
            return
        if not self.started_lines:
            sent = next((v for k, v in report.user_properties if k == START_LINES), None)
            if sent is not None:
                self.started_lines = True
                report.user_properties.remove((START_LINES, sent))  # the terminal's, not a property of the test
                for line in sent:
                    self._write(line)
            elif ours and not xdist_session(self.config):
                self._start()
        if report.when in ("teardown", "???"):  # "???": xdist's report of a crashed worker's test
            self.running.pop(report.nodeid, None)
            self.finished.add(report.nodeid)
        self._tick()

    def _tick(self) -> None:
        now = time.monotonic()
        if self._speaks() and 0 < self._interval() <= now - self.last:
            self.last = now
            self._write(self.line(now))

    def line(self, now: float | None = None) -> str:
        """``progress: 14210 of 14924 tests done (95 %), 7:52 elapsed; static: 42 of 210 cells judged, 168 left, about
        2:10 to go at this rate; running longest: <test id> (0:41)``; before the first static cell starts (they
        wait behind the cells ahead of them), ``static: 210 cells queued behind the other cells, none started``. A
        static cell is judged from a build of its own, one another cell of its group made, or the build cache: the
        line counts cells, not compiles."""
        now = time.monotonic() if now is None else now
        total = max(len(self.collected), len(self.finished))
        done = len(self.finished)
        out = f"progress: {done} of {total} tests done ({100 * done // max(total, 1)} %), {clock(now - self.started)} elapsed"
        static = [n for n in self.collected if STATIC_ID in n]
        if static:
            left = len([n for n in static if n not in self.finished])
            if left == len(static) and not any(n in self.running for n in static):
                out += f"; static: {left} cells queued behind the other cells, none started"
            elif left:
                out += f"; static: {len(static) - left} of {len(static)} cells judged, {left} left"
                out += self._static_time_left(now, len(static) - left, left)
        if self.running:
            nodeid, since = min(self.running.items(), key=lambda kv: kv[1])
            if now - since >= LONG_RUNNING_S:
                out += f"; running longest: {nodeid.rpartition('::')[2]} ({clock(now - since)})"
        return out

    def _static_time_left(self, now: float, done: int, left: int) -> str:
        """``, about 2:10 to go at this rate``: the static compiles left at the rate of those done since the first
        started (every pytest process compiles beside the others), once a tenth of them is done (a rate from the
        first few, a slow kernel's or a cold cache's, says little) and :data:`RATE_AFTER_S` have passed, and a second or
        more is left; else nothing."""
        if (self.static_started is None or done < max(1, (done + left) // 10)
                or now - self.static_started < RATE_AFTER_S):
            return ""
        to_go = left * (now - self.static_started) / done
        return f", about {clock(to_go)} to go at this rate" if to_go >= 1 else ""  # not "about 0:00" with some left


def clock(seconds: float) -> str:
    """``m:ss`` of a duration in seconds (``125.3`` -> ``2:05``)."""
    m, s = divmod(int(seconds), 60)
    return f"{m}:{s:02d}"


class StartLinesSender:
    """In the first xdist worker (``gw0``): the start lines ride on its first cell's report to the controller."""

    def __init__(self, progress: Progress):
        self.progress, self.sent = progress, False

    @pytest.hookimpl(tryfirst=True)  # before xdist's worker sends the report to the controller
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.sent and report_property(report, OUTCOME_PROPERTY) is not None:
            self.sent = True
            report.user_properties.append((START_LINES, self.progress.lines()))


def pytest_configure(config: pytest.Config) -> None:
    progress = Progress(config)
    config.pluginmanager.register(progress, "ddtree-progress")
    if in_xdist_worker(config) and config.workerinput.get("workerid") == "gw0":
        config.pluginmanager.register(StartLinesSender(progress), "ddtree-start-lines-sender")
