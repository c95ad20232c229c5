"""Cell recording: each session's ``plan`` line (how many cells it selected), each cell's ``result`` line,
written once its verdict is known, and the outcome carried on its report (``user_properties`` travel from xdist
workers to the controller's summary).

A cell that never reached its check (a setup error, a skip raised before it) is recorded too: a skip
with pytest's reason, or an ``error`` of the suite (never a kernel ``fault``).
"""

from __future__ import annotations

import pytest

from ..outcomes import Verdict
from .cells import (CELL, OUTCOME_PROPERTY, TIER_PROPERTY, Cell, coordinates, is_cell_item, item_params, kernel_parts,
                    known_issue, record_of)
from .session import active


def collect_error_of(report: pytest.CollectReport) -> str:
    """Why a test file could not be collected, in one line: the exception's own last line
    (``ModuleNotFoundError: No module named 'covertable'``)."""
    text = getattr(report, "longreprtext", "") or str(report.longrepr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raised = [line[1:].strip() for line in lines if line.startswith("E ")]
    return (raised or lines or ["no reason given"])[-1][:300]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A test file that failed to collect is recorded (a ``collect_error`` line): none of its cells ran, and the
    reports and preflight say why instead of "no cell"."""
    report = (yield).get_result()
    if not report.failed or not isinstance(collector, pytest.File):
        return
    sess = active(collector.config)
    if sess is not None and sess.writer is not None and not collector.config.option.collectonly:
        sess.writer.collect_error(report.nodeid or str(collector.path), collect_error_of(report))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """The ``plan`` line of a process that collected (an xdist worker, or a run without xdist): the cells selected,
    those ``--ddtree-resume`` left out included, so a report can tell a partial run (killed, interrupted)."""
    sess = active(session.config)
    if sess is None or sess.writer is None or session.config.option.collectonly:
        return
    cells = sum(map(is_cell_item, session.items)) + sess.resumed
    if cells:
        sess.writer.plan(cells)


def cell_from_params(item: pytest.Item) -> Cell | None:
    """The cell a parametrized item stands for, from its parameters (for an item that never reached its
    check), or ``None`` for an item that is no cell of ours."""
    params = item_params(item)
    sess = active(item.config)
    if sess is None:
        return None
    from ..static.runner import StaticCell

    if isinstance(params.get("ddtree_static_cell"), StaticCell):  # (None: the session has no static cell)
        from .static import static_coordinates

        return Cell(static_coordinates(params["ddtree_static_cell"], item.nodeid))
    if hasattr(params.get("ddtree_e2e_cell"), "config"):
        from .e2e import e2e_coordinates

        return Cell(e2e_coordinates(params["ddtree_e2e_cell"], sess.e2e_arch(), item.nodeid))
    parts = kernel_parts(item)
    if parts is None:
        return None  # not a cell of ours, or an empty parametrization (pytest's NOTSET: nothing to run here)
    target, backend, record, case = parts
    kernel = record.label_of(case)
    return Cell(coordinates(target, backend, case, item.nodeid, kernel),
                known_issue=known_issue(sess, target, backend, kernel, case))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = (yield).get_result()
    if not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    cell = item.stash.get(CELL, None) or cell_from_params(item)
    if cell is None:
        return
    if cell.verdict is None:  # the test never reached its check: a skip, or an error of ours
        skipped = report.skipped and not hasattr(report, "wasxfail")  # an xfailed error is still an error
        cell.verdict = Verdict("skip" if skipped else "error", str(report.longrepr)[:500])
    report.user_properties += [(OUTCOME_PROPERTY, cell.verdict.outcome), (TIER_PROPERTY, cell.tier),
                               ("ddtree_backend", cell.coords.get("backend")),
                               ("ddtree_kernel", cell.coords.get("kernel"))]
    if getattr(report, "wasxfail", None) is not None and cell.replay:  # its XFAIL line: how to rerun it
        report.wasxfail = f"{report.wasxfail} | {cell.replay}"
    if cell.known_issue is not None and cell.verdict.outcome != "skip":
        from ..known_issues import status

        report.user_properties.append(("ddtree_known_issue", status(cell.verdict.outcome, cell.known_issue.id)))
    sess = active(item.config)
    if sess is not None and sess.writer is not None:
        sess.writer.write(record_of(cell))
