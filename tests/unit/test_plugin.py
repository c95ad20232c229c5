"""The plugin in real pytest sessions: results lines, skips counted, replayable failures, usage errors."""

import json
import subprocess
import sys

import pytest


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-tier=interpret", *args)


def test_cells_land_in_results_with_skip_reasons(pytester, verify_suite):
    result = run(pytester, "--ddtree-case", str(verify_suite), "--ddtree-results=out/r.jsonl", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*cells: 2 pass, 0 wrong, 0 zero-accept, 0 fault, 1 skip*"])
    lines = [json.loads(x) for x in (pytester.path / "out/r.jsonl").read_text().splitlines()]
    results = [x for x in lines if x["kind"] == "result"]
    assert {(r["backend"], r["outcome"]) for r in results} == {
        ("oracle", "pass"), ("sglang-triton", "pass"), ("sglang-cuda", "skip")}
    skip = next(r for r in results if r["outcome"] == "skip")
    assert "device tier only" in skip["message"] and skip["case_id"] == "b8-spine-deep-bs3"
    result.stdout.fnmatch_lines(["results: out/r.jsonl  ->  python -m ddtree_compat report out/r.jsonl"])


def test_under_the_sweep_the_summary_leaves_the_report_to_the_sweep(pytester, verify_suite, monkeypatch):
    """The sweep (:func:`ddtree_compat.cli._run_with_resume_passes`) sets ``REPORT_BY_SWEEP`` for its pytest
    processes and writes the report itself once every tier has run: their summary names the results file and
    offers no ``report`` command."""
    from ddtree_compat.results import REPORT_BY_SWEEP

    monkeypatch.setenv(REPORT_BY_SWEEP, "1")
    result = run(pytester, "--ddtree-case", str(verify_suite), "--ddtree-results=r.jsonl")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["results: r.jsonl (the sweep writes its report when every tier has run)"])
    assert "ddtree_compat report" not in result.stdout.str()


def test_zero_accept_fails_with_replay_line_that_replays(pytester, verify_suite):
    result = run(pytester, "--ddtree-case", str(verify_suite), "--ddtree-backend=ddtree_compat.families.verify.variants:ZeroAccept",
                 "--ddtree-results=r.jsonl", "--ddtree-cases-dir=failed")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*zero-accept*accept length 1.00*",
                                 "*replay: python -m ddtree_compat replay failed/b8-spine-deep-bs3.json "
                                 "--backend ddtree_compat.families.verify.variants:ZeroAccept --tier interpret*|*pytest*"
                                 "--ddtree-case failed/b8-spine-deep-bs3.json --ddtree-backend "
                                 "ddtree_compat.families.verify.variants:ZeroAccept --ddtree-tier interpret",
                                 "env: no GPU; *torch*triton*sglang*tier interpret*"])
    line = next(x for x in result.outlines if x.startswith("replay: "))
    cli, again = line.removeprefix("replay: ").split("   |   ")
    replay = subprocess.run(cli, shell=True, cwd=pytester.path, capture_output=True, text=True)
    assert replay.returncode == 1 and replay.stdout.startswith("zero-accept"), replay.stdout + replay.stderr
    rerun = subprocess.run(f"{sys.executable} -m {again} --ddtree-results=", shell=True, cwd=pytester.path,
                           capture_output=True, text=True)
    assert rerun.returncode == 1 and "1 failed" in rerun.stdout and "zero-accept" in rerun.stdout, rerun.stdout
    rec = [json.loads(x) for x in (pytester.path / "r.jsonl").read_text().splitlines()][-1]
    assert rec["outcome"] == "zero-accept" and rec["case_path"] == "failed/b8-spine-deep-bs3.json"


@pytest.mark.parametrize("args, words", [
    (["--ddtree-backend=trtllm-mha"], "*field '--ddtree-backend' = 'trtllm-mha'*allowed: oracle, sglang-triton*"),
    (["--ddtree-tier=gpu"], "*field '--ddtree-tier' = 'gpu'*allowed: auto, interpret, device*"),
    (["--ddtree-tier=device"], "*field '--ddtree-tier' = 'device'*no GPU visible*"),
    (["--ddtree-profile=huge"], "*field 'profile' = 'huge'*allowed: default, full*"),
])
def test_bad_options_are_usage_errors(pytester, verify_suite, args, words):
    result = pytester.runpytest_subprocess("--ddtree-case", str(verify_suite), *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([words])
    assert "Traceback" not in result.stderr.str()


def test_bad_case_file_is_a_usage_error(pytester, verify_suite):
    bad = pytester.path / "bad.json"
    bad.write_text(verify_suite.read_text().replace('"budget":8', '"budget":-1'))
    result = pytester.runpytest_subprocess("--ddtree-case", str(bad))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*field 'budget' = -1*allowed: integer >= 0*"])


def test_property_failure_prints_a_shrunk_replayable_case(pytester):
    pytester.makepyfile(test_prop="""
from hypothesis import given
from ddtree_compat.families.verify.strategies import verify_cases

@given(case=verify_cases())
def test_p(ddtree_target, ddtree_backend, ddtree_check_verify, case):
    ddtree_check_verify(ddtree_target, ddtree_backend, case)
""")
    result = run(pytester, "--ddtree-backend=ddtree_compat.families.verify.variants:OffByOne", "--ddtree-cases-dir=failed")
    result.assert_outcomes(failed=1)
    # Shrinking ends on the smallest tree: the bare root (budget 0), batch of one.
    result.stdout.fnmatch_lines(["*wrong*case b0-custom-custom-bs1-*hypothesis*",
                                 "*replay: python -m ddtree_compat replay failed/b0-custom-custom-bs1-*hypothesis*"])


def test_a_test_no_backend_can_run_skips_saying_why(pytester, monkeypatch):
    """No DDTree implementation given: the DDTree kernels' test is one skip naming the kernels and how to point
    the suite at an implementation, never pytest's bare empty parameter set; it is no cell (nothing recorded)."""
    monkeypatch.delenv("DDTREE_IMPLS", raising=False)
    pytester.makepyfile(test_dd="""
def test_k(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_ddtree_case):
    raise AssertionError("never called")
""")
    result = run(pytester, "--ddtree-backend=oracle", "--ddtree-static=off", "--ddtree-results=r.jsonl", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no backend in this session has ddtree_build*no DDTree implementation found (--ddtree-impl PATH*"])
    assert "empty parameter set" not in result.stdout.str()
    out = pytester.path / "r.jsonl"
    lines = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    assert not [x for x in lines if x["kind"] == "result"]
    # nor is it planned: a main job with no implementation is whole, not "partial, N of N + 25 cells"
    assert not [x for x in lines if x["kind"] == "plan" and x["cells"]]


def test_an_arch_selected_without_its_gpu_says_what_the_answer_leaves_out(pytester):
    """``-m sm120`` on a CPU box: the summary says no device cell ran and which binaries were not checked (so a
    CPU box's passing cells are not read as "sm120 is fine")."""
    pytester.makepyfile(test_any="def test_any():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-m", "sm120", "--ddtree-static=off")
    out = result.stdout.str()
    assert "no sm120 GPU on this host" in out and "not run: every sm120 device cell" in out
    assert "FlashInfer's verify kernel: not checked" in out and "sgl-kernel's prebuilt libraries: not checked" in out
    assert "ran here: nothing for sm120" in out  # the static tier is off: no cell ran for sm120
    assert "the rest, on a host with an sm120 GPU: python -m ddtree_compat sweep -- -m sm120" in out
    # the command for the rest names the arch's marker, not this expression (which would rerun the same cells)
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-m", "sm120 and static", "--ddtree-static=off").stdout.str()
    assert "sweep -- -m sm120\n" in out and "sweep -- -m 'sm120 and static'" not in out
    # collecting is not running: the summary says so and claims nothing about what was checked
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-m", "sm120", "--co", "--ddtree-static=off").stdout.str()
    assert "collected only (--collect-only): nothing ran" in out and "not checked" not in out


def test_an_environment_variable_alone_asks_nothing(pytester, verify_suite, monkeypatch):
    """A ``DDTREE_*`` variable sets the defaults, it does not ask for the suite: a session of plain tests with
    ``DDTREE_REQUIRE_BACKENDS`` naming no backend passes untouched (no GPU detection, no SGLang imported for it);
    a session whose tests ask (a kernel test's ddtree fixtures) takes the variable and fails on it."""
    monkeypatch.setenv("DDTREE_REQUIRE_BACKENDS", "no-such-backend")
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    plain = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_plain.py")
    assert plain.ret == 0 and "no-such-backend" not in plain.stdout.str() + plain.stderr.str()
    assert not (pytester.path / ".ddtree").exists()  # no suite: no results folder either
    kernel = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_kernel.py")
    assert kernel.ret != 0
    assert "'DDTREE_REQUIRE_BACKENDS' = 'no-such-backend'" in kernel.stdout.str() + kernel.stderr.str()  # as set


GARBAGE_WITH_A_RAISING_DEL = """
import gc


class Loud:
    def __del__(self):
        raise RuntimeError("raised in __del__ of garbage left at the session's end")


def test_leaves_a_cycle():
    gc.disable()  # so that only the session's end collects it
    a, b = Loud(), Loud()
    a.other, b.other = b, a
"""


def test_the_session_end_collection_still_reports_what_garbage_raises_and_freezes_the_rest(pytester, verify_suite):
    """Our unconfigure collects once, then freezes what is left (the exit's five collections were seconds):
    an exception raised in ``__del__`` of garbage still reaches pytest's unraisable report."""
    pytester.makepyfile(test_garbage=GARBAGE_WITH_A_RAISING_DEL)
    pytester.makeconftest("""
import atexit
import gc

atexit.register(lambda: print(f"frozen objects at exit: {gc.get_freeze_count()}"))
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-tier=interpret", "--ddtree-results=",
                                           "--ddtree-static=off", "--ddtree-case", str(verify_suite), "-s")
    out = "\n".join(result.outlines + result.errlines)
    assert "raised in __del__ of garbage left at the session's end" in out
    frozen = [int(line.rsplit(" ", 1)[1]) for line in result.outlines if line.startswith("frozen objects at exit")]
    assert frozen and frozen[0] > 10000, frozen


def test_a_test_file_that_fails_to_collect_is_recorded_and_reported_as_the_suites_own_error(pytester, verify_suite):
    """A test file whose import fails (a dependency missing on the host) leaves a ``collect_error`` line; the report
    says the file was not collected and why, never that its family was "left out of the selection"."""
    from ddtree_compat.report.coverage import not_tested
    from ddtree_compat.report.summary import summarize
    from ddtree_compat.results import load

    pytester.makepyfile(test_broken="import a_module_this_host_lacks\n\ndef test_never():\n    pass\n")
    run(pytester, "--ddtree-case", str(verify_suite), "--ddtree-results=r.jsonl", "--continue-on-collection-errors")
    loaded = load([pytester.path / "r.jsonl"])
    assert loaded.collect_errors == [("test_broken.py", "ModuleNotFoundError: No module named "
                                                        "'a_module_this_host_lacks'")]
    lines = not_tested(summarize(loaded))
    assert lines[0] == ("test_broken.py: not collected — ModuleNotFoundError: No module named "
                        "'a_module_this_host_lacks' (the suite's own error: none of its cells ran)")
    assert any("the suite could not collect test_broken.py" in line for line in lines[1:]), lines
