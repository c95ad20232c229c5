"""The static tier's cells (:mod:`ddtree_compat.static`): a test asking for ``ddtree_static_cell`` is
parametrized over arch x backend x the static entries of the kernels it implements x their
specializations over the cases, marked ``static`` plus the arch and family markers, and judged by
``ddtree_check_static``."""

from __future__ import annotations

import shlex
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from ..outcomes import Verdict
from ..tiers import STATIC
from .cells import CELL, Cell, item_params
from .markers import arch_marks
from .session import suite

if TYPE_CHECKING:
    from ..static.claims import Claims
    from ..static.runner import StaticCell


def static_params(sess) -> list:
    """One parameter per static cell; none in this session: one skip saying why, whose value ``None`` is no cell
    (pytest's own empty parameter set would count as a planned cell that never writes a result line, and every
    report of such a run read "partial: 1 cell short")."""
    cells = [pytest.param(cell, id=cell.id, marks=[getattr(pytest.mark, STATIC), *arch_marks(cell.arch)])
             for cell in sess.static_cells()]
    if cells:
        return cells
    why = ("--ddtree-static off" if not sess.static else "the scale profile runs the deployment-shape cells alone"
           if sess.profile == "scale" else "no kernel with a static build among this session's backends")
    return [pytest.param(None, id="none", marks=[getattr(pytest.mark, STATIC),
                                                 pytest.mark.skip(reason=f"no static cell in this session: {why}")])]


def static_coordinates(cell, nodeid: str) -> dict:
    """A static cell's fixed fields: kernel, tier ``static``, backend, compile-target arch, the
    specialization as ``case_id``; no case coordinates."""
    return dict(kernel=cell.entry.kernel, tier=STATIC, backend=cell.backend, arch=cell.arch, case_id=cell.spec.id,
                budget=None, topology="", plant="", batch=None, block_size=None, mode="", layout="", nodeid=nodeid,
                shape="")


@dataclass
class StaticRun:
    """What the static cells of one pytest process share: the test run's claims (every xdist worker of the run
    sees the same folder, :class:`~ddtree_compat.static.claims.Claims`), the session's cells by group
    (:func:`group_key`: all specializations of one kernel entry on one arch in one backend's column), and the
    groups this process has warmed."""

    claims: Claims
    groups: dict[tuple, list[StaticCell]]
    warmed: set[tuple] = field(default_factory=set)

    def first_of_group(self, cell: StaticCell) -> list[StaticCell]:
        """The cell's group, the first time this process asks for it (it then warms it), else ``[]``; also
        ``[]`` for a group of one (nothing to batch)."""
        key = group_key(cell)
        if key in self.warmed:
            return []
        self.warmed.add(key)
        group = self.groups.get(key, [])
        return group if len(group) > 1 else []


STATIC_RUN = pytest.StashKey[StaticRun]()


def group_key(cell: StaticCell) -> tuple:
    """``(arch, backend, entry)``: the cells one warm builds together."""
    return cell.arch, cell.backend, cell.entry


def static_run(session: pytest.Session) -> StaticRun:
    """The session's :class:`StaticRun`, made on first use from the collected items."""
    config = session.config
    if STATIC_RUN not in config.stash:
        from ..static.claims import Claims
        from ..static.runner import prebuilt

        run_id = getattr(config, "workerinput", {}).get("testrunuid") or uuid.uuid4().hex
        groups: dict = {}
        for item in session.items:
            cell = item_params(item).get("ddtree_static_cell")
            if cell is not None and not prebuilt(cell):  # a prebuilt library has nothing to build
                groups.setdefault(group_key(cell), []).append(cell)
        config.stash[STATIC_RUN] = StaticRun(Claims.for_run(suite(config).static_cache, run_id), groups)
    return config.stash[STATIC_RUN]


@pytest.fixture
def ddtree_static_cache(request: pytest.FixtureRequest) -> str:
    """The static tier's build cache directory (``--ddtree-static-cache``)."""
    return suite(request.config).static_cache


@pytest.fixture
def ddtree_check_static(request: pytest.FixtureRequest, ddtree_static_cache: str):
    """``check(cell)``: compile one static cell for its arch and judge it; fail or skip with the reason.

    ``out of resources`` / ``illegal instruction`` / compile errors fail, naming kernel, config and arch; a
    cell a known issue covers (by arch, backend and kernel) is an xfail.
    """
    from ..static.runner import run_static

    def check(static_cell) -> Verdict:
        issue = suite(request.config).known.match(static_cell.arch, static_cell.backend, None, "",
                                                  static_cell.entry.kernel)
        cell = request.node.stash[CELL] = Cell(static_coordinates(static_cell, request.node.nodeid), known_issue=issue)
        if issue is not None:  # a binary known not to fit (known_issues.toml): xfail, strict as the entry says
            request.applymarker(pytest.mark.xfail(strict=issue.strict, reason=issue.describe(static_cell.backend)))
        run = static_run(request.session)
        verdict = cell.verdict = run_static(static_cell, ddtree_static_cache, group=run.first_of_group(static_cell),
                                            claims=run.claims)
        if verdict.outcome == "skip":
            pytest.skip(verdict.message)  # the cell is the node id: equal reasons group in -ra
        if verdict.outcome != "pass":
            pytest.fail(f"{verdict.message}\nreplay: pytest {shlex.quote(request.node.nodeid)}", pytrace=False)
        return verdict

    return check
