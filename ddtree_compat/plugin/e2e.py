"""The e2e tier's cells (:mod:`ddtree_compat.e2e`): a test asking for ``ddtree_e2e_cell`` is parametrized
over the profile's server configurations x request phases, marked ``e2e`` (plus the arch markers of the
GPU the servers run on), and judged by ``ddtree_check_e2e`` against one session's servers
(``ddtree_e2e_session``: started together, stopped after their last cell and at session end)."""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path

import pytest

from ..outcomes import Verdict
from ..tiers import E2E, in_xdist_worker
from .cells import CELL, Cell, is_e2e_item, item_params
from .markers import arch_marks
from .progress import clock
from .session import active, suite

def pytest_configure(config: pytest.Config) -> None:
    """Check ``--ddtree-e2e-attention`` before anything runs: the option asks for the suite, whose creation parses it
    (an unknown name is a one-line usage error there: :func:`.session.e2e_attention_of`); where servers can start
    (a GPU, or a stand-in server), a name the installed SGLang's ``--attention-backend`` lacks is one too."""
    config.pluginmanager.register(VerdictLines(config), "ddtree-e2e-verdict-lines")
    given = config.getoption("ddtree_e2e_attention", None) or []
    sess = active(config)
    if not given or sess is None:  # not given: every backend, nothing to check, nothing imported here
        return
    from ..e2e.attention import SGLANG_CHOICE

    explicit = [n for n in sess.e2e_attention if n != SGLANG_CHOICE]
    if explicit and not getattr(config, "workerinput", None):
        _check_installed(explicit, given)


def _check_installed(names: list[str], given: list[str]) -> None:
    """Usage error when the installed SGLang (probed as the servers will run it) has no ``--attention-backend``
    value for one of ``names``; nothing is checked where no server could start or the probe cannot tell."""
    from ..arch import detect_gpus
    from ..e2e.command import SERVER_MODULE
    from ..e2e.probe import missing_attention, probe

    try:
        gpus = detect_gpus()
    except Exception:  # noqa: BLE001 - a bad DDTREE_FAKE_GPUS is the suite's usage error, reported there
        return
    real = gpus and not any(g.fake for g in gpus)
    if not (real or (gpus and SERVER_MODULE != "sglang.launch_server")):
        return
    caps = probe()
    lacking = missing_attention(names, caps)
    if lacking:
        raise pytest.UsageError(
            f"field '--ddtree-e2e-attention' = {','.join(given)!r}: the installed SGLang ({caps.sglang}) has no "
            f"attention backend {lacking[0]!r}; its --attention-backend takes: {', '.join(caps.attention_choices)}")


def e2e_params(sess) -> list:
    """One param per (server configuration, phase) of the profile: marked ``e2e``, with the arch markers of
    the GPU the servers run on, an ``xdist_group`` per server (``--dist loadgroup`` keeps a server's cells in
    one worker) and a timeout covering the server's start."""
    from ..e2e.scheduler import READY_S, REQUEST_S
    from ..e2e.session import cells

    arch = sess.e2e_arch()
    marks = [getattr(pytest.mark, E2E), pytest.mark.timeout(READY_S + 2 * REQUEST_S)]
    if sess.gpus and not any(g.fake for g in sess.gpus):
        marks += arch_marks(arch)
    return [pytest.param(c, id=f"{arch}-{c.id}", marks=[*marks, pytest.mark.xdist_group(c.config.id)])
            for c in cells(sess.e2e_configs)]


def e2e_coordinates(cell, arch: str, nodeid: str, implementation: str = "", attention: str = "") -> dict:
    """A cell's fixed fields (tier ``e2e``): backend ``sglang-<algorithm>`` (``sglang-target`` without
    speculation; ``@<implementation>`` appended when the SGLang under test is named by repository and
    commit, :mod:`ddtree_compat.identity`), budget = draft tokens - 1 (DDTREE: the tree budget),
    topology ``chain`` / ``tree-k<topk>`` / ``block`` / ``ddtree-spine`` / ``ddtree-tree`` (``-prune``,
    ``-cpu`` when set), plant = the draft's agreement, batch = concurrency, mode ``graph`` / ``eager``,
    attention = the attention backend the server runs on (``attention``: SGLang's choice for an
    ``-attn-default`` cell, ``default`` while unknown; the case id names what was asked)."""
    c, p = cell.config, cell.phase
    if c.algorithm in ("EAGLE", "STANDALONE"):
        topology = "chain" if c.topk == 1 else f"tree-k{c.topk}"
    else:
        topology = {"DFLASH": "block-ddtree" if c.dflash_ddtree else "block",
                    "DDTREE": f"ddtree-{c.mode}"}.get(c.algorithm, "")
        topology += "".join(t for f, t in (("--is-ddtree-prune", "-prune"), ("--speculative-ddtree-cpu-build", "-cpu"))
                            if f in c.flags)
    budget = c.budget if c.budget is not None else (c.draft_tokens - 1 if c.draft_tokens else None)
    from ..e2e.configs import TARGET_ONLY

    backend = f"sglang-{c.algorithm.lower()}" if c.speculative else TARGET_ONLY
    backend += f"@{implementation}" if implementation else ""
    return dict(kernel="generate", tier=E2E, backend=backend, arch=arch, case_id=cell.id,
                budget=budget, topology=topology, plant=c.draft.agree.name if c.draft else "",
                batch=p.concurrency, block_size=c.draft.block_size if c.algorithm in ("DFLASH", "DDTREE") else None,
                mode="graph" if c.cuda_graph else "eager", layout="", attention=attention or c.attention, nodeid=nodeid,
                shape="")


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """The e2e cells this process will run, in order (after every deselection), for the server plan; where it
    plans its own servers (not an xdist worker, not ``--collect-only``), they start now, in the background: the
    probe of SGLang and the first servers' imports overlap whatever runs before the first e2e cell."""
    sess = active(session.config)
    if sess is None:
        return
    sess.e2e_selected = [item_params(i)["ddtree_e2e_cell"] for i in session.items if is_e2e_item(i)]
    if sess.e2e_selected and not session.config.option.collectonly and not in_xdist_worker(session.config):
        servers = e2e_session(session.config)
        if not servers.host_reason():
            servers.prefetch()


def e2e_session(config: pytest.Config):
    """This process's :class:`ddtree_compat.e2e.session.E2ESession`, created once (at collection's end, or by
    the first cell's fixture), its timeline's clock started at pytest's configure (the verdict lines' zero);
    stopped at the latest when pytest unconfigures. Its folder is ``--ddtree-e2e-dir``, an xdist worker's a
    subfolder named by the worker (``e2e/gw0``): workers that run cells of one server each start their own."""
    from ..e2e.session import E2ESession

    sess = suite(config)
    if sess.e2e_session is None:
        progress = config.pluginmanager.get_plugin("ddtree-progress")
        started = None if progress is None else time.time() - (time.monotonic() - progress.started)
        root = Path(sess.e2e_dir)
        if in_xdist_worker(config):  # each worker starts its own servers: its own checkpoints, logs, timeline
            root = root / config.workerinput["workerid"]
        from ..e2e.configs import e2e_profile, shape_for

        sess.e2e_session = E2ESession(root, sess.e2e_configs, sess.gpus, shape_for(e2e_profile(sess.profile)),
                                      started=started)
        sess.e2e_session.select(sess.e2e_selected, planned=not in_xdist_worker(config))
        config.add_cleanup(sess.e2e_session.close)
    return sess.e2e_session


@pytest.fixture(scope="session")
def ddtree_e2e_session(request: pytest.FixtureRequest):
    """The session's :class:`ddtree_compat.e2e.session.E2ESession` (servers stopped at session end)."""
    session = e2e_session(request.config)
    request.addfinalizer(session.close)
    return session


def verdict_line(e2e_cell, verdict, elapsed_s: float | None = None) -> str:
    """One line per finished e2e cell, printed as it finishes (the budget sweep's table builds up while servers
    still run), with the time since the run started: ``e2e: ddtree-b8-spine-always-graph-attn-fa3-bs1 (B 8) at
    0:41: fault (other): scheduler raised at ...``."""
    budget = getattr(e2e_cell.config, "budget", None)
    kind = verdict.outcome + (f" ({verdict.fault_class})" if verdict.fault_class else "")
    first = verdict.message.splitlines()[0] if verdict.message else ""
    at = "" if elapsed_s is None else f" at {clock(elapsed_s)}"
    return f"e2e: {e2e_cell.id}{f' (B {budget})' if budget else ''}{at}: {kind}: {first[:200]}"


VERDICT_LINE = re.compile(r"^e2e: (?P<cell>\S+)(?: \(B (?P<budget>\d+)\))?(?: at (?P<m>\d+):(?P<s>\d\d))?: "
                          r"(?P<outcome>[\w-]+)", re.M)
""":func:`verdict_line`'s lines read back (``benchmarks/suite_cost.py --from-e2e-log``): cell, budget, minutes and
seconds since the run started, outcome."""


LINE = "ddtree_e2e_line"  # the report property carrying a cell's verdict line to the terminal


def _announce(node: pytest.Item, e2e_cell, verdict) -> None:
    progress = node.config.pluginmanager.get_plugin("ddtree-progress")  # its clock started at configure
    elapsed = None if progress is None else time.monotonic() - progress.started
    node.user_properties.append((LINE, verdict_line(e2e_cell, verdict, elapsed)))


class VerdictLines:
    """Prints an e2e cell's verdict line when its report arrives: outside the test's output capture, and on the
    controller under xdist (which receives the reports). Does nothing for a report without the line."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        line = next((v for k, v in report.user_properties if k == LINE), None) if report.when == "call" else None
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if line is not None and reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(line, flush=True)


@pytest.fixture
def ddtree_check_e2e(request: pytest.FixtureRequest, ddtree_e2e_session):
    """``check(cell) -> Judgement``: run one e2e cell on its server, record it (tier ``e2e``), and skip
    (no GPU, SGLang or a module it needs not installed, unsupported configuration: with the reason), fail as
    an ``error`` (the probe of the installed SGLang broke otherwise) or fail with the verdict's message, the
    log excerpt and the server's launch command."""

    def check(e2e_cell):
        sess = suite(request.config)
        node = request.node
        cell = node.stash[CELL] = Cell(e2e_coordinates(e2e_cell, sess.e2e_arch(), node.nodeid))
        plan = ddtree_e2e_session.plan(e2e_cell.config)  # computed once per configuration (e2e/launch.py)
        attention = ddtree_e2e_session.attention_name(e2e_cell.config) if not ddtree_e2e_session.host_reason() else ""
        cell = node.stash[CELL] = Cell(e2e_coordinates(e2e_cell, sess.e2e_arch(), node.nodeid,
                                                       ddtree_e2e_session.implementation_name(), attention))
        if plan.failure:  # asking the installed SGLang failed: an error of the setup, never a skip or a verdict
            cell.verdict = Verdict("error", plan.failure)
            pytest.fail(f"error: {e2e_cell.id}: {cell.verdict.message}", pytrace=False)
        if plan.reason:
            cell.verdict = Verdict("skip", plan.reason)
            pytest.skip(plan.reason)  # the cell is the node id: equal reasons group in -ra
        if sess.writer is not None:
            sess.writer.start(cell.coords)
        try:
            run = ddtree_e2e_session.run(e2e_cell)
        finally:
            ddtree_e2e_session.done(e2e_cell.config)
        if not attention:  # SGLang chose at server start (0.5.23): the server's log says what it runs on
            cell.coords["attention"] = ddtree_e2e_session.attention_name(e2e_cell.config)
        verdict = cell.verdict = run.judgement.verdict
        _announce(request.node, e2e_cell, verdict)
        cell.log_excerpt = run.judgement.log_excerpt
        if run.capture is not None:
            cell.case_path = str(run.capture)
        if verdict.outcome == "pass":
            return run.judgement
        launch = ddtree_e2e_session.root / "servers" / e2e_cell.config.id / "launch.json"
        kind = verdict.outcome + (f" ({verdict.fault_class})" if verdict.fault_class else "")
        excerpt = f"\nserver log excerpt:\n{run.judgement.log_excerpt}" if run.judgement.log_excerpt else ""
        pytest.fail(f"{kind}: {e2e_cell.id} on {sess.e2e_arch()}: {verdict.message}{excerpt}\n"
                    f"server: {launch} (argv, env), log {launch.with_name('server.log')}\n"
                    f"replay: pytest {shlex.quote(node.nodeid)}", pytrace=False)

    return check
