"""Results file round trip, bad results files, the Markdown report and the CLI's bad-input exits."""

import json
import subprocess
import sys

import pytest

from ddtree_compat.errors import ResultsFileError
from ddtree_compat.report import render_markdown
from ddtree_compat.results import ResultRecord, ResultsWriter, environment, load


def record(outcome="pass", backend="sglang-triton", budget=8, **kw):
    base = dict(kernel="verify_tree_greedy", tier="interpret", backend=backend, arch="interpret",
                case_id=f"b{budget}-spine-deep-bs3", budget=budget, topology="spine", plant="deep", batch=3,
                block_size=16, mode="spine", outcome=outcome)
    return ResultRecord(**{**base, **kw})


def test_round_trip_and_report(tmp_path):
    path = tmp_path / "r.jsonl"
    w = ResultsWriter(path, environment("interpret", "default"))
    w.write(record())
    w.write(record("zero-accept", case_id="b8-spine-first-bs3", message="accepted drafts 0 where the oracle accepts [3]"))
    w.write(record("skip", backend="sglang-cuda", message="tvm-ffi JIT CUDA kernel runs on the device tier only"))
    w.write(record("fault", budget=12, fault_class="illegal-instruction"))
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "env" and len(lines) == 5
    res = load([path])
    assert len(res.records) == 4 and len(res.envs) == 1
    md = render_markdown(res)
    assert "| sglang-triton · interpret | 1 | 0 | 1 | 1 | 0 | 3 |" in md
    assert "tvm-ffi JIT CUDA kernel runs on the device tier only" in md  # skips counted by reason
    assert "illegal-instruction" in md and "❌" in md and "## Failures (2)" in md


def test_gzipped_archive_reads_like_the_plain_file(tmp_path):
    import gzip
    path = tmp_path / "r.jsonl"
    w = ResultsWriter(path, environment("interpret", "default"))
    w.write(record())
    w.write(record("wrong", budget=12))
    gz = tmp_path / "r.jsonl.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert load([gz]).records == load([path]).records
    (tmp_path / "broken.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(ResultsFileError, match="field 'path'"):
        load([tmp_path / "broken.jsonl.gz"])


def _append_many(path, worker, n, fsync):
    env = {**environment("interpret", "default"), "env_id": f"w{worker}"}
    w = ResultsWriter(path, env, fsync=fsync)
    for i in range(n):  # ~8 KB lines from 4 processes at once: each must land whole, none lost
        w.write(record(case_id=f"w{worker}-{i}", message=str(worker) * 8000))


@pytest.mark.parametrize("fsync", [False, True])
def test_concurrent_writers_never_tear_or_lose_a_line(tmp_path, fsync):
    import multiprocessing

    path = tmp_path / "r.jsonl"
    procs = [multiprocessing.get_context("spawn").Process(target=_append_many, args=(path, k, 60, fsync))
             for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = [json.loads(x) for x in path.read_text().splitlines()]  # a torn line would not parse
    results = [x for x in lines if x["kind"] == "result"]
    assert sorted(x["case_id"] for x in results) == sorted(f"w{k}-{i}" for k in range(4) for i in range(60))
    assert all(x["message"] == x["env_id"][1] * 8000 for x in results)
    assert sum(x["kind"] == "env" for x in lines) == 4


def test_merge_of_two_runners(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    ResultsWriter(a, environment("interpret", "default")).write(record())
    ResultsWriter(b, {**environment("device", "default"), "env_id": "other"}).write(record(arch="sm90", tier="device"))
    md = render_markdown(load([a, b]))
    assert "sglang-triton · interpret" in md and "sglang-triton · sm90" in md


@pytest.mark.parametrize("text, field, problem", [
    ("not json\n", "line", "not JSON"),
    ('{"kind": "weird"}\n', "kind", "unknown line kind"),
    ('{"kind": "result", "backend": "x"}\n', "arch", "missing"),
    ('[1, 2]\n', "kind", "unknown line kind"),
])
def test_bad_results_files_are_neither_read_nor_appended_to(tmp_path, text, field, problem):
    from ddtree_compat.results import check_appendable

    p = tmp_path / "bad.jsonl"
    p.write_text(text)
    with pytest.raises(ResultsFileError, match=f"bad.jsonl:1: field '{field}'"):
        load([p])
    with pytest.raises(ResultsFileError, match=f"line 1: {problem}"):
        check_appendable(p)
    assert p.read_text() == text


def test_unknown_outcome(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"kind": "result", **record().__dict__, "outcome": "great"}) + "\n")
    with pytest.raises(ResultsFileError, match="outcome.*allowed: pass, wrong, zero-accept, fault, error, skip"):
        load([p])


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "ddtree_compat", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("args, words", [
    (["report", "MISSING.jsonl"], "field 'path'"),
    (["replay", "MISSING.json", "--backend", "oracle"], "field 'path'"),
    (["cases", "--profile", "huge"], "field 'profile' = 'huge'"),
    (["replay", "b8-spine-nowhere-bs3", "--backend", "oracle", "--tier", "interpret"],
     "field 'case' = 'b8-spine-nowhere-bs3': not found"),
])
def test_cli_bad_input_exits_2_with_one_line(args, words):
    r = run_cli(*args)
    assert r.returncode == 2, r.stderr
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_cli_report_of_non_jsonl(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text("hello\n")
    r = run_cli("report", str(p))
    assert r.returncode == 2 and "not JSON" in r.stderr and "Traceback" not in r.stderr


def test_cli_replay_unknown_backend(tmp_path):
    from ddtree_compat.families.verify.records import make_case

    path = make_case(8, "spine", "deep", 1).save(tmp_path)
    r = run_cli("replay", str(path), "--backend", "nope")
    assert r.returncode == 2 and "field '--backend' = 'nope'" in r.stderr


@pytest.mark.parametrize("case_id, kernel", [("b8-spine-deep-bs3", "verify_tree_greedy"),
                                             ("b1-spine-none-bs3-p64-pool-end-kv1x64fp16", "move_kv")])
def test_cli_replays_a_grid_case_by_its_id(case_id, kernel):
    r = run_cli("replay", case_id, "--backend", "oracle", "--tier", "interpret", "--kernel", kernel)
    assert r.returncode == 0 and r.stdout.startswith(f"pass: oracle {kernel} on interpret, case {case_id}"), r.stdout + r.stderr


def test_cli_output_into_a_closed_pipe_stops_quietly():
    """`cases | head`: the reader closes the pipe early; no BrokenPipeError traceback."""
    r = subprocess.run(f"{sys.executable} -m ddtree_compat cases | head -2", shell=True, capture_output=True, text=True)
    assert len(r.stdout.splitlines()) == 2 and "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("0", False), ("", False), ("no", False)])
def test_fsync_env_is_read_as_a_switch(pytester, value, on, monkeypatch):
    monkeypatch.setenv("DDTREE_FSYNC", value)
    config = pytester.parseconfig()  # the plugin loads through its entry point
    assert config.getoption("ddtree_fsync") is on


def _rerun_file(tmp_path, outcomes, envs=None):
    """One cell written once per outcome, by the same host and device unless ``envs`` says otherwise."""
    path = tmp_path / "r.jsonl"
    for n, outcome in enumerate(outcomes):
        env = {**environment("interpret", "default"), **((envs or [{}] * len(outcomes))[n])}
        env["env_id"] = f"e{n}"
        ResultsWriter(path, env).write(record(outcome, time=1000.0 + n))
    return path


def test_a_rerun_cell_counts_once_with_its_latest_verdict(tmp_path):
    res = load([_rerun_file(tmp_path, ["wrong", "fault", "pass"])])
    assert [r.outcome for r in res.records] == ["pass"] and res.superseded == 2
    md = render_markdown(res)
    assert "| sglang-triton · interpret | 1 | 0 | 0 | 0 | 0 | 1 |" in md  # one cell, the re-run's pass


def test_the_same_cell_on_two_gpus_or_two_hosts_keeps_both_verdicts(tmp_path):
    gpus = _rerun_file(tmp_path, ["wrong", "pass"], [{"cuda_visible_devices": "0"}, {"cuda_visible_devices": "1"}])
    assert sorted(r.outcome for r in load([gpus]).records) == ["pass", "wrong"]
    gpus.unlink()
    hosts = _rerun_file(tmp_path, ["wrong", "pass"], [{"host": "runner-a"}, {"host": "runner-b"}])
    assert load([hosts]).superseded == 0 and len(load([hosts]).records) == 2


def test_latest_is_by_finish_time_across_merged_files(tmp_path):
    from ddtree_compat.results import latest

    later, earlier = record("pass", time=20.0), record("wrong", time=10.0)
    kept, dropped = latest({}, [later, earlier])  # files merged in any order: the later finish wins
    assert kept == [later] and dropped == 1


def test_ours_with_a_torn_last_line_can_be_appended_to(tmp_path):
    from ddtree_compat.results import check_appendable

    path = tmp_path / "r.jsonl"
    ResultsWriter(path, environment("interpret", "default")).write(record())
    with open(path, "a") as f:
        f.write('{"kind": "resu')  # a writer killed mid-line
    check_appendable(path)
    check_appendable(tmp_path / "new.jsonl")
    with pytest.raises(ResultsFileError, match="gzipped"):
        check_appendable(tmp_path / "r.jsonl.gz")


def test_a_result_line_with_a_wrong_type_is_rejected(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"kind": "result", **record().__dict__, "budget": "eight"}) + "\n")
    with pytest.raises(ResultsFileError, match="field 'budget' = 'eight': wrong type"):
        load([p])
