"""benchmarks/sweep_phases.py: reading a probed run back (synthetic probe and results lines), the marker lines
of the sweep's stdout, the command it runs in a checkout, and its probe in a real pytest session with xdist."""

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "sweep_phases.py"


@pytest.fixture(scope="module")
def phases():
    spec = importlib.util.spec_from_file_location("sweep_phases_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _test(nodeid: str, start: float, finish: float, setup: float, call: float, teardown: float) -> dict:
    return {"ev": "test", "nodeid": nodeid, "start": start, "finish": finish, "setup": setup, "call": call,
            "teardown": teardown, "outcome": "passed"}


@pytest.fixture
def run(tmp_path):
    """A synthetic sweep launched at t=1000: a controller (pid 10) and two workers (gw0, gw1), three tests,
    a results file with kernel seconds for two of them, and a killed worker's half line."""
    probe = tmp_path / "probe"
    probe.mkdir()
    _write(probe / "10.jsonl", [
        {"ev": "start", "role": "controller", "worker": "", "pid": 10, "ppid": 1, "created": 1002.0,
         "imported": 1002.5, "sessionstart": 1004.0},
        {"ev": "sessionfinish", "t": 1030.0, "exitstatus": 0}, {"ev": "unconfigure", "t": 1031.0},
        {"ev": "exit", "t": 1032.0, "own": 0.25}])
    _write(probe / "11.jsonl", [
        {"ev": "start", "role": "worker", "worker": "gw0", "pid": 11, "ppid": 10, "created": 1004.5,
         "imported": 1005.0, "sessionstart": 1007.0},
        {"ev": "collected", "t": 1017.0, "items": 3},
        _test("t.py::a", 1018.0, 1021.0, 1.0, 1.5, 0.25),  # first test: CUDA start
        _test("t.py::b", 1022.0, 1023.0, 0.1, 0.5, 0.1),
        {"ev": "sessionfinish", "t": 1025.0}, {"ev": "exit", "t": 1026.0, "own": 0.5}])
    _write(probe / "12.jsonl", [
        {"ev": "start", "role": "worker", "worker": "gw1", "pid": 12, "ppid": 10, "created": 1004.5,
         "imported": 1005.5, "sessionstart": 1008.0},
        {"ev": "collected", "t": 1019.0, "items": 3},
        _test("t.py::c", 1020.0, 1024.0, 2.0, 1.0, 0.5)])
    (probe / "12.jsonl").open("a").write('{"ev": "test", "nodeid": "t.py::d", "st')  # killed mid-line
    results = tmp_path / "results.jsonl"
    _write(results, [{"kind": "env", "env_id": "e"}, {"kind": "start", "nodeid": "t.py::a"},
                     {"kind": "result", "nodeid": "t.py::a", "duration_s": 0.5},
                     {"kind": "result", "nodeid": "t.py::b", "duration_s": 0.25},
                     {"kind": "result", "nodeid": "t.py::b", "duration_s": 0.125},  # a cell written twice
                     {"kind": "result", "nodeid": "elsewhere", "duration_s": 1.0}])
    marks = {"pytest": 1001.0, "tier": 1034.0, "results": 1037.0}
    return probe, results, marks


def test_the_wall_path_adds_up_to_the_wall_and_each_span_is_between_its_points(phases, run):
    probe, results, marks = run
    kernel, lines, total = phases.read_kernel_seconds(results)
    assert (kernel, lines, total) == ({"t.py::a": 0.5, "t.py::b": 0.375, "elsewhere": 1.0}, 4, 1.875)
    a = phases.aggregate(phases.read_probe(probe), kernel, 1000.0, 1040.0, marks)
    assert a["wall"] == 40.0
    spans = [s for _, s in a["path"]]
    assert spans == [2.0, 2.0, 14.0, 6.0, 6.0, 1.0, 1.0, 2.0, 3.0, 3.0]
    assert sum(spans) == a["wall"]
    assert (a["tests"], a["workers"], a["worker_processes"], a["sessions"], a["matched"]) == (3, 2, 2, 1, 2)
    assert a["probe_own"] == 0.75


def test_worker_time_splits_call_into_kernel_and_harness_and_counts_gaps_and_start_up(phases, run):
    probe, results, marks = run
    kernel = phases.read_kernel_seconds(results)[0]
    a = phases.aggregate(phases.read_probe(probe), kernel, 1000.0, 1040.0, marks)
    work = {name.split(" (")[0].split(":")[0].strip(): (s, m) for name, s, m in a["work"]}
    assert work["setup phase"] == pytest.approx((3.1, 1.0))
    assert work["call phase"] == (3.0, 1.0)
    assert work["of it kernel, as the suite recorded it"] == (0.875, 0.375)
    assert work["of it harness"] == (2.125, 1.0)  # call - kernel: 1.0, 0.125, 1.0
    assert work["teardown phase"] == pytest.approx((0.85, 0.25))
    assert work["in a test outside its phases"] == pytest.approx((0.3 + 0.25 + 0.5, 0.3))  # span - phases
    assert work["between tests on a worker"] == (1.0, 1.0)  # gw0: a ends 1021, b starts 1022
    assert work["worker start-up"] == (13.5 + 15.5, None)
    assert work["worker tail"] == (3.0 + 0.0, None)  # gw1 died after its test: no exit line, no tail
    assert a["startup"]["session start to collection finished (collection incl. grid build)"] == (10.5, 11.0)
    assert a["startup"]["collection finished to first test start (controller gathers collections, schedules)"] \
        == (1.0, 1.0)
    # floor: kernel 0.875 / 2 workers + the median first test's setup + call - kernel (2.0 and 3.0)
    assert a["floor_start"] == 2.5
    assert a["floor"] == pytest.approx(0.4375 + 2.5)
    # per test function (id less its parameters): tests, call s, kernel s, the largest harness first
    assert a["by_function"] == [("t.py::a", [1, 1.5, 0.5]), ("t.py::c", [1, 1.0, 0.0]), ("t.py::b", [1, 0.5, 0.375])]
    assert "| t.py::a | 1 | 1.50 | 0.50 | 1.00 | 1000.00 |" in phases.table("run", a, 4, 1.875)


def test_the_tables_name_each_run_and_compare_against_the_first(phases, run):
    probe, results, marks = run
    kernel = phases.read_kernel_seconds(results)[0]
    a = phases.aggregate(phases.read_probe(probe), kernel, 1000.0, 1040.0, marks)
    b = phases.aggregate(phases.read_probe(probe), kernel, 1000.0, 1050.0, {**marks, "results": 1047.0})
    text = phases.table("before", a, 4, 1.875)
    assert "| **wall total** | **40.00** | 100 % |" in text
    assert "| sweep CLI writes the report (.md, .html, .png) | 3.00 | 7.5 % |" in text
    side = phases.comparison(["before", "after"], [a, b])
    assert "| **wall total** | 40.00 | 50.00 | +10.00 |" in side
    assert "| wall: sweep CLI writes the report (.md, .html, .png) | 3.00 | 13.00 | +10.00 |" in side


def test_a_resume_pass_without_xdist_counts_its_tests_but_not_in_the_first_session_s_path(phases, tmp_path):
    """``-n 0`` and a resume pass: two solo sessions; the wall path is the first one's, the worker time both."""
    _write(tmp_path / "1.jsonl", [
        {"ev": "start", "role": "solo", "worker": "", "pid": 1, "ppid": 0, "created": 1.0, "imported": 1.5,
         "sessionstart": 2.0}, {"ev": "collected", "t": 3.0}, _test("t.py::a", 4.0, 5.0, 0.25, 0.5, 0.25),
        {"ev": "sessionfinish", "t": 6.0}, {"ev": "unconfigure", "t": 6.5}, {"ev": "exit", "t": 7.0}])
    _write(tmp_path / "2.jsonl", [
        {"ev": "start", "role": "solo", "worker": "", "pid": 2, "ppid": 0, "created": 8.0, "imported": 8.5,
         "sessionstart": 9.0}, {"ev": "collected", "t": 10.0}, _test("t.py::b", 11.0, 13.0, 0.5, 1.0, 0.5),
        {"ev": "exit", "t": 14.0}])
    a = phases.aggregate(phases.read_probe(tmp_path), {"t.py::b": 0.75}, 0.0, 16.0, {"tier": 15.0})
    assert [s for _, s in a["path"]] == [1.0, 1.0, 2.0, 1.0, 1.0, 0.5, 0.5, 8.0, 0.0, 1.0]
    assert (a["sessions"], a["tests"], a["workers"], a["later_sessions_s"]) == (2, 2, 1, 6.0)
    assert a["work"][1][1] == 1.5 and a["kernel_sum"] == 0.75
    assert a["floor"] == 0.75 + 0.75  # kernel / 1 worker + the first session's first test (0.25 + 0.5 - 0)
    assert "2 pytest session(s) (the later ones: 6.0 s)" in phases.table("x", a, 1, 0.75)


def test_without_a_session_there_is_nothing_to_read(phases, tmp_path):
    with pytest.raises(ValueError, match="no pytest session"):
        phases.aggregate(phases.read_probe(tmp_path), {}, 0.0, 1.0, {})


def test_marker_lines_are_taken_in_the_sweep_s_order(phases):
    """pytest's own summary prints a ``results:`` line before the sweep's tier line: not the report's."""
    lines = [(1.0, "+ /usr/bin/python -m pytest tests/kernels -q\n"), (2.0, "results: x.jsonl  ->  python -m ...\n"),
             (3.0, "tier device: resume pass 1: pytest exit 5\n"), (4.0, "tier device: ok (exit 0) in 80.2s\n"),
             (5.0, "results: x.jsonl\n"), (6.0, "results: again\n")]
    assert phases.markers(lines) == {"pytest": 1.0, "tier": 4.0, "results": 5.0}
    old = [(1.0, "+ python -m pytest x\n"), (2.0, "tier device: pytest exit 0 in 70.0s\n")]  # b1d9ac2's wording
    assert phases.markers(old) == {"pytest": 1.0, "tier": 2.0}


def test_kernel_test_paths_follow_the_checkout(phases, tmp_path):
    wheel = tmp_path / "wheel"
    (wheel / "ddtree_compat" / "kernel_tests").mkdir(parents=True)
    checkout = tmp_path / "checkout"
    (checkout / "tests" / "kernels").mkdir(parents=True)
    args = ["--tests", "tests/kernels/test_verify.py", "--", "--ignore=tests/kernels/test_ddtree.py", "-k", "b8"]
    assert phases.map_tests_paths(args, wheel) == [
        "--tests", "ddtree_compat/kernel_tests/test_verify.py", "--",
        "--ignore=ddtree_compat/kernel_tests/test_ddtree.py", "-k", "b8"]
    assert phases.map_tests_paths(args, checkout) == args


def test_the_sweep_command_gets_its_own_results_file_and_the_probe_last(phases, tmp_path):
    repo = tmp_path / "repo"
    cmd, results = phases.command(repo, ["--tier", "interpret", "--", "-k", "b8"], tmp_path / "run", False)
    assert cmd[1:] == ["-m", "ddtree_compat", "sweep", "--name", "sweep", "--out-dir",
                       str(tmp_path / "run" / "results"), "--tier", "interpret", "--", "-k", "b8", "-p", phases.PROBE_MODULE]
    assert results == tmp_path / "run" / "results" / "sweep.jsonl"
    cmd, results = phases.command(repo, ["--out-dir", "out", "--name", "x.jsonl"], tmp_path / "run", False)
    assert cmd[-3:] == ["--", "-p", phases.PROBE_MODULE] and results == repo / "out" / "x.jsonl"
    cmd, results = phases.command(repo, ["t.py", "--ddtree-results=r.jsonl"], tmp_path / "run", True)
    assert cmd[1:] == ["-m", "pytest", "t.py", "--ddtree-results=r.jsonl", "-p", phases.PROBE_MODULE]
    assert results == repo / "r.jsonl"


def test_the_probe_writes_a_file_per_process_under_xdist(phases, pytester, monkeypatch, tmp_path):
    """The probe loaded with -p in a real session with one xdist worker: a controller file and a worker file whose
    tests are the session's, read back into a wall path that adds up."""
    module = tmp_path / "module"
    module.mkdir()
    shutil.copyfile(SCRIPT, module / f"{phases.PROBE_MODULE}.py")
    probe = tmp_path / "probe"
    probe.mkdir()
    monkeypatch.setenv(phases.ENV_DIR, str(probe))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(module), os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(test_two="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", phases.PROBE_MODULE, "-n", "1", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    processes = phases.read_probe(probe)
    assert sorted(p["role"] for p in processes) == ["controller", "worker"]
    worker = next(p for p in processes if p["role"] == "worker")
    assert [t["nodeid"].split("::")[1] for t in worker["tests"]] == ["test_a", "test_b"]
    assert all({"setup", "call", "teardown"} <= set(t) for t in worker["tests"])
    assert worker["collected"] >= worker["sessionstart"] >= worker["imported"]
    controller = next(p for p in processes if p["role"] == "controller")
    assert worker["created"] >= controller["sessionstart"] - 0.02  # stamped before xdist starts the workers (tryfirst)
    a = phases.aggregate(processes, {}, min(p["created"] or p["imported"] for p in processes) - 0.1,
                         max(p["exit"] for p in processes) + 0.1, {})
    assert a["tests"] == 2 and a["workers"] == 1
    assert sum(s for _, s in a["path"]) == pytest.approx(a["wall"])


def test_the_e2e_budget_sweep_times_come_from_the_verdict_lines():
    """``suite_cost.py --from-e2e-log``: the first dead budget is the first ``fault`` of a cell with a budget; a
    target-only fault or a DFLASH pass is not one; the last verdict is the latest line."""
    spec = importlib.util.spec_from_file_location("suite_cost", ROOT / "benchmarks" / "suite_cost.py")
    cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cost)
    log = "\n".join(["e2e: target-bs1 at 0:41: fault (other): server target: ...",
                     "e2e: dflash-b16-always-eager-attn-triton-bs1 at 1:02: pass: 194 tokens",
                     "e2e: ddtree-b15-spine-always-graph-attn-triton-bs1 (B 15) at 1:05: pass: 194 tokens",
                     "e2e: ddtree-b8-spine-always-eager-attn-triton-bs1 (B 8) at 1:30: fault (other): scheduler raised",
                     "tests/e2e/test_serve.py F",
                     "e2e: ddtree-b12-spine-always-eager-attn-triton-c4 (B 12) at 2:59: fault (other): scheduler raised"])
    assert cost.e2e_verdict_times(log) == {"first_dead_s": 90, "last_s": 179, "verdicts": 5}
    assert cost.e2e_verdict_times("no verdicts") == {"first_dead_s": None, "last_s": None, "verdicts": 0}
    # the lines the plugin prints read back the same way
    from types import SimpleNamespace

    from ddtree_compat.outcomes import Verdict
    from ddtree_compat.plugin.e2e import verdict_line

    cell = SimpleNamespace(id="ddtree-b12-spine-always-eager-attn-fa3-bs1", config=SimpleNamespace(budget=12))
    line = verdict_line(cell, Verdict("fault", "scheduler raised at x.py:1", fault_class="other"), 75.9)
    assert line.startswith("e2e: ddtree-b12-spine-always-eager-attn-fa3-bs1 (B 12) at 1:15: fault (other): ")
    assert cost.e2e_verdict_times(line) == {"first_dead_s": 75, "last_s": 75, "verdicts": 1}


def test_the_e2e_start_table_times_each_server_from_its_launch(tmp_path):
    """``suite_cost.py --from-e2e-dir``: SGLang's log stamps (the host's clock, whole seconds) are placed on the
    timeline by its ``session`` line's ``wall``; each mark counts from the server's first launch; a standby's head
    start and the end (ready or dead) come from the timeline."""
    import time

    spec = importlib.util.spec_from_file_location("suite_cost", ROOT / "benchmarks" / "suite_cost.py")
    cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cost)
    zero = time.mktime(time.strptime("2026-12-03 09:00:00", "%Y-%m-%d %H:%M:%S"))
    events = [{"t": 0.1, "event": "session", "wall": zero}, {"t": 0.4, "event": "standing by", "servers": 1},
              {"t": 17.0, "event": "launched", "server": "b8", "order": 0, "nice": 0, "standby_s": 16.6},
              {"t": 18.0, "event": "launched", "server": "b16", "order": 1, "nice": 10},
              {"t": 51.0, "event": "failed before ready", "server": "b8"},
              {"t": 60.0, "event": "launched", "server": "b16", "order": 1, "nice": 10},  # a relaunch: not counted
              {"t": 70.0, "event": "ready", "server": "b16", "after_s": 10.0}]
    (tmp_path / "timeline.jsonl").write_text("\n".join(json.dumps(e) for e in events))
    logs = {"b8": ["09:00:18] server_args=ServerArgs(...)", "09:00:33] Init torch distributed begin.",
                   "09:00:36] INFO:     Uvicorn running on http://127.0.0.1:1"],
            "b16": ["09:00:30] server_args=ServerArgs(...)"]}
    for name, lines in logs.items():
        (tmp_path / "servers" / name).mkdir(parents=True)
        (tmp_path / "servers" / name / "server.log").write_text("warning: no stamp\n" + "\n".join(
            f"[2026-12-03 {x}" for x in lines))
    rows = cost.e2e_start_table(tmp_path).splitlines()
    assert rows[2] == "| b8 | 17.0 s | 16.6 s | 1 s | 16 s | 19 s | dead 34 s |"
    assert rows[3] == "| b16 | 18.0 s | 0.0 s | 12 s | n/a | n/a | ready 52 s |"


def test_import_cost_times_each_run_and_names_a_failed_import(capsys):
    """``benchmarks/import_cost.py``: a row per run (alone, again, N at once), with bytecode and source only;
    a module that does not import reads ``failed``, never a time."""
    spec = importlib.util.spec_from_file_location("import_cost", ROOT / "benchmarks" / "import_cost.py")
    cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cost)
    assert cost.main(["json", "--at-once", "2", "--source-only"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and " s |" in line]
    assert [r.split(" | ")[:2] for r in rows] == [["| bytecode as installed", "alone"],
                                                  ["| bytecode as installed", "alone, again"],
                                                  ["| bytecode as installed", "2 at once, each"],
                                                  ["| source only", "alone"], ["| source only", "alone, again"],
                                                  ["| source only", "2 at once, each"]]
    assert cost.measure("no_such_module_here", 2, dict(__import__("os").environ)) == [
        ("alone", "failed"), ("alone, again", "failed"), ("2 at once, each", "failed")]


def test_scale_cost_reads_a_committed_h200_run():
    """benchmarks/scale_cost.py on ``docs/results/2026-12-04-sm90-scale-run4.jsonl.gz`` (the tree sampler, 75 cells,
    one worker): the figures docs/benchmarks.md quotes."""
    spec = importlib.util.spec_from_file_location("scale_cost_under_test", ROOT / "benchmarks" / "scale_cost.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.table([str(ROOT / "docs/results/2026-12-04-sm90-scale-run4.jsonl.gz")])
    assert "| tree_speculative_sampling | sglang-cuda | 75 | 0 | 27.7 | 32.8 |" in text
    assert "| 75 | 40 |" in text


CACHE_REPORT = """
import json
import os
import pathlib


def test_caches():
    pathlib.Path(os.environ["CACHES_OUT"]).write_text(json.dumps({{v: os.environ.get(v) for v in {names!r}}}))
"""


@pytest.mark.parametrize("fresh", [True, False])
def test_each_run_gets_fresh_triton_and_jit_caches_unless_shared(phases, tmp_path, monkeypatch, fresh):
    """A run's compile caches (Triton, tvm-ffi, SGLang's JIT, FlashInfer's) are fresh folders, as on a fresh machine
    (a JIT build paid by the first run would otherwise make the second look faster); ``--shared-caches`` keeps the
    environment's."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_caches.py").write_text(CACHE_REPORT.format(names=sorted(phases.FRESH_CACHES)))
    out = tmp_path / "caches.json"
    monkeypatch.setenv("CACHES_OUT", str(out))
    for var in phases.FRESH_CACHES:
        monkeypatch.setenv(var, f"/shared/{var}")
    run = phases.run_once("x", repo, ["test_caches.py", "-p", "no:cacheprovider", "-p", "no:randomly"],
                          tmp_path / "run", True, fresh)
    assert run["exit"] == 0, run
    seen = json.loads(out.read_text())
    if fresh:
        assert all(not seen[v].startswith("/shared/") for v in phases.FRESH_CACHES), seen
        assert len({str(Path(p).parent) for p in seen.values()}) == 1, "one fresh folder per run"
    else:
        assert seen == {v: f"/shared/{v}" for v in phases.FRESH_CACHES}


def test_report_only_reads_back_the_runs_a_cut_call_left_and_prefers_a_whole_run(phases, run, tmp_path, capsys):
    """``--report-only``: the tables of the runs already in the work folder; a run the interrupt cut short (20 s,
    lower than the whole run's 40 s) is not chosen over a whole run of the same checkout."""
    probe, results, marks = run
    kernel = phases.read_kernel_seconds(results)[0]
    whole = phases.aggregate(phases.read_probe(probe), kernel, 1000.0, 1040.0, marks)
    cut = {**whole, "wall": 20.0, "path": whole["path"][:3]}
    work = tmp_path / "work"
    for name, summary, interrupted in (("a-0", whole, False), ("b-0", whole, False), ("b-1", cut, True)):
        (work / name).mkdir(parents=True)
        (work / name / "summary.json").write_text(json.dumps({
            **summary, "label": name[0], "repo": "/r", "exit": 130 if interrupted else 0, "interrupted": interrupted,
            "result_lines": 4, "result_kernel": 1.875}))
    assert phases.main(["--report-only", "--work-dir", str(work), "--repo", "a=/r", "--repo", "b=/r"]) == 0
    out = capsys.readouterr().out
    assert "re-read" in out and "### b (/r, exit 0; runs: 40.0, 20.0 s): 40.0 s wall" in out
    assert "| **wall total** | 40.00 | 40.00 | +0.00 |" in out
