"""Fault containment's hooks (the mechanism: :mod:`ddtree_compat.isolation`): the xdist controller
records a cell whose worker died, hands every worker the same resume snapshot, and ``--ddtree-resume``
deselects the cells already recorded. On Ctrl-C the controller answers for the run: a worker does not
warn that it could not report to a controller that had already left, nor outlive it."""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import pytest

from ..tiers import in_xdist_worker
from ..outcomes import Verdict
from .cells import OUTCOME_PROPERTY, TIER_PROPERTY, Cell, record_of
from .session import active, suite

START_FIELDS = ("kernel", "tier", "backend", "arch", "case_id", "budget", "topology", "plant", "batch", "block_size",
                "mode", "layout", "nodeid")


WORKER_LEFT_BEHIND = r"(?s).*Hook: pytest_sessionfinish\nOSError: cannot send"
"""pluggy's warning when xdist's worker cannot send ``workerfinished`` to a controller that closed the channel
(Ctrl-C reaches every process of the run; the controller leaves first)."""


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """xdist worker of a session of ours: no ``PluggyTeardownRaisedWarning`` for the report that a controller
    interrupted by Ctrl-C (the terminal signals every process of the run) can no longer take."""
    if in_xdist_worker(config) and active(config) is not None:
        from pluggy import PluggyTeardownRaisedWarning

        warnings.filterwarnings("ignore", message=WORKER_LEFT_BEHIND, category=PluggyTeardownRaisedWarning)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A session of ours ends (Ctrl-C included): cancel pytest-timeout's timer thread of a cell the interrupt cut
    short. It is not a daemon thread, so the interpreter waited for it at exit: an interrupted xdist worker,
    its controller gone, lived on for ``--timeout`` seconds (300 in a sweep). Runs inside xdist's
    hookwrapper, whose report to a controller that has left raises."""
    if active(session.config) is None:
        return
    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer) and getattr(thread.function, "__module__", "") == "pytest_timeout":
            thread.cancel()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist controller: hand every worker the same resume snapshot (bytes of the results file)."""
    sess = active(node.config)
    if sess is not None:
        node.workerinput["ddtree_resume_limit"] = sess.resume_limit


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched) -> None:
    """xdist controller: a worker died inside ``crashitem``. Attach the verdict it recorded before exiting
    (sticky fault), or record one from its ``start`` line: ``hang`` past the timeout, else a crash. An item
    with neither line is no cell of ours."""
    config = report.node.config if hasattr(report, "node") else None
    if config is None:
        return
    sess = active(config)
    path = sess.results if sess is not None else config.getoption("ddtree_results")
    if not path or not Path(path).exists():
        return
    from ..isolation import scan

    results, starts = scan(path)
    line = results.get(crashitem)
    if line is None:
        start = starts.get(crashitem)
        if start is None:
            return
        sess = suite(config)
        timeout = float(config.getoption("timeout", None) or 0)
        elapsed = time.time() - start["time"]
        if timeout and elapsed >= 0.9 * timeout:
            verdict = Verdict("fault", f"hang: no result after {elapsed:.0f}s (timeout {timeout:.0f}s); worker killed",
                              fault_class="hang")
        else:
            verdict = Verdict("fault", f"worker process died after {elapsed:.1f}s with no result (crash)",
                              fault_class="other")
        coords = {k: start[k] for k in START_FIELDS}
        coords["shape"] = start.get("shape", "")
        record = record_of(Cell(coords, verdict))
        record.env_id = start.get("env_id", "")
        sess.writer.write(record)
        line = asdict(record)
    report.longrepr = (f"{line['outcome']} ({line.get('fault_class')}): {line['backend']}, case {line['case_id']}: "
                       f"{line['message']}\n{report.longrepr}; xdist replaces the worker and the run goes on")
    report.user_properties += [(OUTCOME_PROPERTY, line["outcome"]), (TIER_PROPERTY, line["tier"])]


@pytest.hookimpl(trylast=True)  # after -k and -m: the cells left out here are the selection's (Suite.resumed)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--ddtree-resume``: deselect the cells with a result line in the resume snapshot."""
    sess = active(config)
    if sess is None or not sess.resume or sess.writer is None:
        return
    from ..isolation import scan

    finished, _ = scan(sess.writer.path, sess.resume_limit)
    keep = [i for i in items if i.nodeid not in finished]
    done = [i for i in items if i.nodeid in finished]
    sess.resumed = len(done)
    if done:
        config.hook.pytest_deselected(items=done)
        items[:] = keep
