"""What a session says while it runs: a line per backend at the start (runs here / skips and why), progress
lines with the static tier's compiles left and the test running longest; nothing in a foreign session."""

import pytest

from ddtree_compat.plugin.progress import REASON_CHARS, Progress, backend_line
from ddtree_compat.tiers import Target


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-tier=interpret", "--ddtree-results=",
                                         *args)


def test_the_start_says_which_backends_run_and_which_skip_and_why_then_progress_every_interval(pytester, verify_suite):
    """Under xdist, the controller speaks: the start lines once, then a progress line at every interval."""
    result = run(pytester, "--ddtree-case", str(verify_suite), "-n", "1", "--ddtree-progress=0.000001")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*progress: * of 3 tests done (*%), *elapsed*"])
    result.stdout.fnmatch_lines(["ddtree-compat: tier interpret, profile default, * backend(s)",
                                 "  oracle on interpret: runs all * kernels",
                                 "  sglang-cuda on interpret: skips all 2 kernels (verify_tree_greedy: tvm-ffi JIT CUDA kernel runs "
                                 "on the device tier only (a CUDA GPU; this target is interpret); tree_speculative_sampling: *",
                                 "  no DDTree implementation found (--ddtree-impl PATH or DDTREE_IMPLS=PATH*",
                                 "  CUDA-graph cells (kernel@graph) skip on interpret: CUDA graphs need the device tier"])


def test_an_interval_of_zero_means_no_progress_lines(pytester, verify_suite):
    quiet = run(pytester, "--ddtree-case", str(verify_suite), "--ddtree-progress=0")
    quiet.assert_outcomes(passed=2, skipped=1)
    assert "progress: " not in quiet.stdout.str()


def test_a_bad_interval_is_a_usage_error(pytester, verify_suite):
    result = run(pytester, "--ddtree-case", str(verify_suite), "--ddtree-progress=-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*field '--ddtree-progress' = '-1': not a number of seconds*"])


def test_the_progress_line_counts_static_compiles_and_names_the_longest_running_test(pytestconfig):
    p = Progress(pytestconfig)
    static = [f"k/test_static.py::test_static[static-sm{a}-sglang-triton-verify_tree_greedy-bs3-w16-c16]"
              for a in (80, 90, 120)]
    p.collected.update(["k/test_verify.py::test_v[a]", *static])
    p.finished.update(["k/test_verify.py::test_v[a]", static[0]])
    p.running = {static[1]: 100.0, static[2]: 130.0}
    p.started = 40.0
    assert p.line(now=141.0) == ("progress: 2 of 4 tests done (50 %), 1:41 elapsed; static: 1 of 3 cells judged, 2 left; "
                                 "running longest: test_static[static-sm90-sglang-triton-verify_tree_greedy-bs3-w16-c16] "
                                 "(0:41)")
    p.finished.discard(static[0])
    p.running = {}
    assert p.line(now=141.0) == "progress: 1 of 4 tests done (25 %), 1:41 elapsed; static: 3 cells queued behind the other cells, none started"
    p.running = {static[0]: 141.0}
    assert p.line(now=141.0) == "progress: 1 of 4 tests done (25 %), 1:41 elapsed; static: 0 of 3 cells judged, 3 left"


def test_the_static_compiles_left_get_a_time_at_the_rate_of_those_done_once_a_tenth_is_done(pytestconfig, monkeypatch):
    """The first static test to start sets the clock; 5 of 20 done 50 s after it: 15 left at 10 s each."""
    p = Progress(pytestconfig)
    static = [f"k/test_static.py::test_static[static-sm{a}-sglang-triton-move_kv-t128-w4-n{n}]"
              for a in (80, 90, 100, 120) for n in range(5)]
    p.collected.update(["k/test_verify.py::test_v[a]", *static])
    p.started = 0.0
    monkeypatch.setattr("ddtree_compat.plugin.progress.time.monotonic", lambda: 100.0)
    p.pytest_runtest_logstart("k/test_verify.py::test_v[a]", None)
    assert p.static_started is None  # not a static test
    monkeypatch.setattr("ddtree_compat.plugin.progress.time.monotonic", lambda: 120.0)
    p.pytest_runtest_logstart(static[0], None)
    assert p.static_started == 120.0
    p.running = {}
    p.finished.update(["k/test_verify.py::test_v[a]", static[0]])
    assert p.line(now=130.0).endswith("; static: 1 of 20 cells judged, 19 left")  # under a tenth: no rate yet
    p.finished.update(static[1:5])
    assert p.line(now=140.0).endswith("; static: 5 of 20 cells judged, 15 left")  # 20 s in: too early for a rate
    assert p.line(now=170.0).endswith("; static: 5 of 20 cells judged, 15 left, about 2:30 to go at this rate")
    p.finished.update(static[5:19])
    assert p.line(now=170.0).endswith("; static: 19 of 20 cells judged, 1 left, about 0:02 to go at this rate")
    assert p.line(now=129.0).endswith("; static: 19 of 20 cells judged, 1 left")  # 9 s in: no rate yet
    p.finished.update(static)
    assert "static" not in p.line(now=200.0)
    many = [f"k/test_static.py::test_static[static-sm90-sglang-triton-move_kv-t128-w4-n{n}]" for n in range(100)]
    p.collected.update(many)
    p.finished.update(many[:99])
    assert p.line(now=160.0).endswith("; static: 114 of 115 cells judged, 1 left")  # 0.35 s left: not "about 0:00"


def test_a_backend_line_groups_its_kernels_by_reason():
    class Two:
        name = "two"
        from ddtree_compat.contract import KernelImpl

        implements = (KernelImpl("verify_tree_greedy", "host"), KernelImpl("move_kv", "cuda", what="a CUDA move"))

    assert backend_line(Two(), Target("interpret", "cpu")) == (
        "two on interpret: runs 1 of 2 kernels; skips move_kv: a CUDA move runs on the device tier only (a CUDA GPU; "
        "this target is interpret)")


def test_a_long_reason_is_cut_between_words():
    class One:
        name = "one"
        from ddtree_compat.contract import KernelImpl

        implements = (KernelImpl("move_kv", "cuda", what="a CUDA move " + "with a very long description " * 4),)

    line = backend_line(One(), Target("interpret", "cpu"))
    reason = line.split("skips its one kernel, move_kv: ", 1)[1]
    assert reason.endswith(" ...") and len(reason) <= REASON_CHARS
    assert reason[:-4].split()[-1] in {"a", "CUDA", "move", "with", "very", "long", "description"}


def test_a_cut_reason_closes_the_parentheses_it_leaves_open():
    class One:
        name = "one"
        from ddtree_compat.contract import KernelImpl

        implements = (KernelImpl("move_kv", "cuda", what="a CUDA move (" + "with a very long description " * 4),)

    reason = backend_line(One(), Target("interpret", "cpu")).split("skips its one kernel, move_kv: ", 1)[1]
    assert reason.endswith(" ...)") and len(reason) <= REASON_CHARS, reason
    assert reason.count("(") == reason.count(")"), reason


def test_under_xdist_the_controller_writes_the_lines_a_worker_sent_and_resolves_no_backend(pytestconfig, monkeypatch):
    """The first worker sends the start lines with its first cell's report; the controller writes them as sent and
    never imports a backend for them (that import held the controller while every worker waited on it)."""
    import ddtree_compat.plugin.progress as progress

    written = []
    monkeypatch.setattr(progress, "start_lines", lambda sess: pytest.fail("the controller resolved the backends"))
    monkeypatch.setattr(progress, "xdist_session", lambda config: True)
    monkeypatch.setattr(progress, "in_xdist_worker", lambda config: False)  # the controller, whatever runs this test
    p = Progress(pytestconfig)
    monkeypatch.setattr(p, "_write", written.append)

    class Report:
        when, nodeid = "call", "k/test_verify.py::test_v[a]"

        def __init__(self, *props):
            self.user_properties = [("ddtree_outcome", "pass"), *props]

    p.pytest_runtest_logreport(Report())  # another worker's first cell: no lines yet, none resolved
    assert written == [] and not p.started_lines
    first = Report((progress.START_LINES, ["ddtree-compat: tier device, profile default, 2 backend(s)", "  a line"]))
    p.pytest_runtest_logreport(first)
    assert written == ["ddtree-compat: tier device, profile default, 2 backend(s)", "  a line"]
    assert first.user_properties == [("ddtree_outcome", "pass")]  # not left on the test's report (JUnit)


def test_an_e2e_only_session_is_told_from_the_collection_where_there_is_one_else_from_the_reports(pytestconfig):
    """A process that collected the tests decides from its collection, whatever has reported so far: a first e2e
    cell in a session with kernel cells too does not make it e2e-only. An xdist controller, which collects nothing,
    decides from the tiers of the cells reported."""
    class Report:
        when = "call"

        def __init__(self, nodeid, tier):
            self.nodeid, self.user_properties = nodeid, [("ddtree_outcome", "skip"), ("ddtree_tier", tier)]

    collected = Progress(pytestconfig)
    collected.collected_here, collected.e2e_cells = True, 0  # kernel cells collected too
    collected.cell_tiers = {"e/test_serve.py::test_serve[a]": "e2e"}  # only an e2e cell reported so far
    assert collected._e2e_cells() == 0
    controller = Progress(pytestconfig)
    controller.cell_tiers = {f"e/test_serve.py::test_serve[{c}]": "e2e" for c in "ab"}
    assert controller._e2e_cells() == 2
    controller.cell_tiers["k/test_verify.py::test_v[a]"] = "interpret"
    assert controller._e2e_cells() == 0
