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


def _torn_file(tmp_path, cut_into_last_line=20):
    """Three whole result lines, then the first bytes of a fourth (a writer killed mid-line)."""
    path = tmp_path / "r.jsonl"
    w = ResultsWriter(path, environment("interpret", "default"))
    for budget in (8, 12, 16):
        w.write(record(budget=budget))
    whole = path.read_bytes()
    w.write(record("wrong", budget=32))
    path.write_bytes(path.read_bytes()[:len(whole) + cut_into_last_line])
    return path, whole


def test_report_and_diff_read_a_torn_file_and_say_so(tmp_path):
    """A torn last line is left out, said in one line on stderr; every whole line is used (report exits 0, diff
    compares the three whole cells)."""
    path, whole = _torn_file(tmp_path)
    res = load([path])
    assert [r.budget for r in res.records] == [8, 12, 16]
    (torn,) = res.torn
    assert (torn.line, torn.at_byte, torn.size, torn.glued) == (5, len(whole), 20, False)
    assert "a torn last line (20 bytes at byte" in str(torn)
    r = run_cli("report", str(path), "-o", str(tmp_path / "r.md"))
    assert r.returncode == 0 and r.stderr.count("\n") == 1 and "r.jsonl:5: a torn last line" in r.stderr, r.stderr
    assert "a torn last line (20 bytes" in (tmp_path / "r.md").read_text()
    other = tmp_path / "other.jsonl"
    other.write_bytes(whole)
    r = run_cli("diff", str(other), str(path))
    assert r.returncode == 0 and "torn last line" in r.stderr and "3 cell(s) compared" in r.stdout, r.stdout + r.stderr


def test_appending_to_a_torn_file_cuts_the_torn_line_first_and_records_it(tmp_path):
    path, whole = _torn_file(tmp_path)
    ResultsWriter(path, {**environment("interpret", "default"), "env_id": "later"}).write(record(budget=64))
    lines = [json.loads(x) for x in path.read_text().splitlines()]  # every line whole: nothing glued on
    repair = next(x for x in lines if x["kind"] == "repair")
    assert (repair["at_byte"], repair["cut_bytes"]) == (len(whole), 20) and repair["torn"].startswith('{"kind":')
    assert path.read_bytes().startswith(whole)
    res = load([path])
    assert [r.budget for r in res.records] == [8, 12, 16, 64] and not res.torn and len(res.repairs) == 1


def test_cut_torn_tail_before_appending(tmp_path):
    from ddtree_compat.results import cut_torn_tail

    path, whole = _torn_file(tmp_path, cut_into_last_line=1)
    assert cut_torn_tail(path)["cut_bytes"] == 1
    assert path.read_bytes().startswith(whole) and path.read_bytes().endswith(b"\n")
    assert cut_torn_tail(path) is None and cut_torn_tail(tmp_path / "none.jsonl") is None
    path.write_bytes(b'{"kind":"env"')  # torn from the first byte: all of it goes
    assert cut_torn_tail(path)["at_byte"] == 0 and json.loads(path.read_text())["kind"] == "repair"


def test_a_line_glued_onto_torn_bytes_by_an_older_resume_is_read(tmp_path):
    """Files an older version resumed after a torn line (``...case_pa{"kind":"env",...``) read again: the torn bytes
    are left out and said, the whole line after them is used."""
    path, whole = _torn_file(tmp_path)
    glued = path.read_bytes()
    ResultsWriter(tmp_path / "later.jsonl", {**environment("interpret", "default"), "env_id": "e2"}).write(
        record(budget=64))
    path.write_bytes(glued + (tmp_path / "later.jsonl").read_bytes())
    res = load([path])
    assert [r.budget for r in res.records] == [8, 12, 16, 64] and [t.glued for t in res.torn] == [True]
    assert "20 torn bytes (a writer killed mid-line) before a whole line" in str(res.torn[0])
    from ddtree_compat.results import check_appendable

    check_appendable(path)  # ours: it may be resumed


def test_plan_lines_tell_a_partial_run(tmp_path):
    path = tmp_path / "r.jsonl"
    w = ResultsWriter(path, environment("interpret", "default"))
    w.plan(3)
    w.write(record(budget=8, nodeid="t::a"))
    w.write(record(budget=12, nodeid="t::b"))
    res = load([path])
    assert (res.planned, res.done, res.partial) == (3, 2, True)
    md = render_markdown(res)
    assert "Partial run: 2 of 3 cells; continue with python -m ddtree_compat sweep --resume" in md
    w.plan(3)  # the resumed session selected the same cells (two of them left out as done)
    w.write(record(budget=16, nodeid="t::c"))
    assert not load([path]).partial and "Partial" not in render_markdown(load([path]))


def test_a_file_and_a_link_to_it_are_read_once(tmp_path):
    path = tmp_path / "r.jsonl"
    ResultsWriter(path, environment("interpret", "default")).write(record())
    (tmp_path / "latest.jsonl").symlink_to("r.jsonl")
    res = load([path, tmp_path / "latest.jsonl"])
    assert len(res.records) == 1 and res.superseded == 0 and res.sources == [str(path)]


def test_check_writable_names_the_option_and_writes_nothing(tmp_path):
    from ddtree_compat.results import check_writable

    (tmp_path / "afile").write_text("x")
    check_writable(tmp_path / "new" / "deeper" / "r.jsonl", "--ddtree-results")
    check_writable(tmp_path, "--out-dir", folder=True)
    with pytest.raises(ResultsFileError, match="field '--out-dir' = .*afile.*is a file"):
        check_writable(tmp_path / "afile", "--out-dir", folder=True)
    with pytest.raises(ResultsFileError, match="field '--ddtree-results' = .*afile/r.jsonl.*is a file, not a folder"):
        check_writable(tmp_path / "afile" / "r.jsonl", "--ddtree-results")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # no probe left, no folder made


def test_a_package_without_metadata_is_named_by_its_own_version_file(tmp_path, monkeypatch):
    """The lent GPU host's SGLang is a folder on PYTHONPATH without dist-info: the env line still names its version."""
    from ddtree_compat.results import _version

    pkg = tmp_path / "carried_pkg_v"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_version.py").write_text("__version__ = version = '0.5.23'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _version("carried_pkg_v") == "0.5.23"
    assert _version("no_such_package_here") is None
