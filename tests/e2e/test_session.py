"""The e2e tier end to end on the CPU: a real pytest session whose servers are ``fake_sglang.py`` (the tiny
checkpoints served by the reference forward, reporting like SGLang). Covers the session's launch plan,
readiness, phases, the judge, result lines (tier ``e2e``), captures, the report and teardown; the GPU run
replaces only the server (``docs/e2e.md``)."""

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST = (Path(__file__).with_name("test_serve.py")).read_text()
# draft checkpoint -> how its stand-in server misbehaves (the others are honest)
MODES = "eagle-always=zero-accept,standalone-always=fault,standalone-mod4=crash"
SELECT = "target or eagle-k1-s8-d9 or eagle-k4 or standalone or dflash"


def use_stand_in_servers(monkeypatch, ready_s: str = "60", **extra: str) -> None:
    """The environment of a session whose servers are ``fake_sglang.py`` on a faked sm90 (the outer run's
    ``DDTREE_*`` dropped: CI exports some)."""
    env = {"DDTREE_FAKE_GPUS": "sm90", "DDTREE_E2E_SERVER_MODULE": "tests.e2e.fake_sglang", "DDTREE_E2E_READY_S": ready_s,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **extra}
    for name in [n for n in os.environ if n.startswith("DDTREE_")]:
        monkeypatch.delenv(name)
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def test_one_session_of_stand_in_servers(pytester, monkeypatch):
    served = pytester.path / "served.txt"
    use_stand_in_servers(monkeypatch, "120", FAKE_SGLANG_MODES=MODES, FAKE_SGLANG_DELAY_S="0.5",
                         FAKE_SGLANG_REQUESTS=str(served), FAKE_SGLANG_PORT_TAKEN_ONCE=str(pytester.path / "port-taken"),
                         DDTREE_E2E_PRIORITY="2")
    pytester.makepyfile(test_serve=TEST)
    results = pytester.path / "e2e.jsonl"
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-static=off", "-m", "e2e", "-k", SELECT,
                                        "--ddtree-e2e-attention", "default,flashinfer",
                                        "--ddtree-results", str(results), "--ddtree-e2e-dir", str(pytester.path / "e2e"))
    every = [r for r in map(json.loads, results.read_text().splitlines()) if r["kind"] == "result"]
    assert all(r["tier"] == "e2e" and r["arch"] == "sm90" for r in every)
    # flashinfer does not import in the stand-in's probe: a skip saying so, for every configuration
    fi = [r for r in every if "-attn-flashinfer-" in r["case_id"]]
    assert len(fi) == 15 and all(r["outcome"] == "skip" and "flashinfer" in r["message"] for r in fi)
    # the default cells run on what the installed SGLang (here the stand-in) chooses, recorded as the attention field
    res = {r["case_id"].replace("-attn-default", ""): r for r in every if "-attn-flashinfer-" not in r["case_id"]}
    assert {r["attention"] for k, r in res.items() if not k.startswith("target")} == {"triton"}
    launch = json.loads((pytester.path / "e2e" / "servers" / "eagle-k4-s3-d9-mod2-eager-attn-default" /
                         "launch.json").read_text())
    assert "--attention-backend" not in launch["argv"] and launch["attention"] == "triton"
    # honest servers pass; the negative control measures 1.00 and the zero-accept check reports it
    for cid in ("target-bs1", "target-c4", "eagle-k4-s3-d9-mod2-eager-c4", "eagle-k1-s8-d9-never-eager-bs1",
                "eagle-k1-s8-d9-never-eager-c4"):
        assert res[cid]["outcome"] == "pass", res[cid]["message"]
    assert "zero-accept check reports it" in res["eagle-k1-s8-d9-never-eager-c4"]["message"]
    assert "expected 2.00" in res["eagle-k4-s3-d9-mod2-eager-bs1"]["message"]
    # the field symptom, a logged CUDA fault, a server that dies at start
    assert res["eagle-k1-s8-d9-always-eager-bs1"]["outcome"] == "zero-accept"
    fault = res["standalone-k1-s3-d4-always-eager-c4"]
    assert (fault["outcome"], fault["fault_class"]) == ("fault", "illegal-instruction")
    assert "illegal instruction" in fault["log_excerpt"] and "accept len 1.00" in fault["message"]
    for phase in ("bs1", "c3", "c4", "c5", "c6"):  # a CUDA-graph server: live batches 3, 5, 6 too
        crash = res[f"standalone-k1-s8-d9-mod4-graph-{phase}"]
        assert (crash["outcome"], crash["fault_class"]) == ("fault", "illegal-memory-access")
        assert "exited with code 1" in crash["message"] and "Scheduler hit an exception" in crash["log_excerpt"]
    assert "flashinfer" in res["dflash-b16-always-eager-bs1"]["message"]
    out.assert_outcomes(passed=6, failed=9, skipped=17)
    # each verdict printed as its cell finishes, not only in the summary
    out.stdout.fnmatch_lines(["e2e: target-bs1 at 0:*: pass: *",
                              "e2e: standalone-k1-s3-d4-always-eager-attn-default-c4 at *: fault (illegal-instruction): *"])
    # an e2e-only session names no kernel backend (resolving them imports SGLang's kernels and the implementations)
    out.stdout.fnmatch_lines(["ddtree-compat: e2e cells only (32): servers on sm90"])
    assert "backend(s)" not in out.stdout.str()
    # servers are driven in the background, so they serve at the same time (one after another before):
    # some request of one server overlaps some request of another
    spans = [(port, float(a), float(b)) for port, a, b in (x.split() for x in served.read_text().splitlines())]
    assert len({p for p, _, _ in spans}) >= 4
    assert any(p != q and a < d and c < b for p, a, b in spans for q, c, d in spans), "no two servers served at once"
    # the first DDTREE_E2E_PRIORITY servers launched at normal priority, every later one niced
    launched = sorted((json.loads(f.read_text()) for f in (pytester.path / "e2e" / "servers").glob("*/launch.json")),
                      key=lambda x: x["order"])
    assert [x["nice"] for x in launched[:2]] == [0, 0] and {x["nice"] for x in launched[2:]} == {10}
    # the timeline says where the run's time went
    timeline = [json.loads(x) for x in (pytester.path / "e2e" / "timeline.jsonl").read_text().splitlines()]
    events = {x["event"] for x in timeline}
    assert {"session", "probed", "checkpoints written", "launched", "ready", "phase", "stopped", "closed"} <= events
    assert timeline[0]["event"] == "session" and timeline[0]["t"] > 0  # its clock is pytest's, from configure
    # the first servers stood by (importing the server module) from before the probe, then got their argv
    events = [x["event"] for x in timeline]
    assert events.index("standing by") < events.index("probed")
    released = [x for x in timeline if x["event"] == "launched" and "standby_s" in x]
    assert 2 <= len(released) < next(x for x in timeline if x["event"] == "standing by")["servers"]
    # the standbys of configurations that cannot run here (flashinfer) were dismissed: no folder, no log
    assert not [p.name for p in (pytester.path / "e2e" / "servers").iterdir() if p.name.endswith("-attn-flashinfer")]
    # the first server found its port taken: started again on another port, its cells judged as if nothing happened
    taken = [x for x in timeline if x["event"] == "port taken"]
    assert len(taken) == 1 and [x["server"] for x in timeline if x["event"] == "launched"].count(taken[0]["server"]) == 2
    assert "e2e cells: 6 pass, 0 wrong, 2 zero-accept, 7 fault, 17 skip" in out.stdout.str()
    # captures for the parsing fixtures, and the report's e2e table
    from ddtree_compat.e2e.runner import rejudge

    for cid in ("eagle-k1-s8-d9-never-eager-bs1", "eagle-k1-s8-d9-always-eager-c4", "standalone-k1-s3-d4-always-eager-bs1"):
        cid = cid if cid.startswith("target") else cid
        cap = Path(res[cid]["case_path"])
        assert (cap / "capture.json").exists() and (cap.parent / "server.log").exists()
        assert rejudge(cap).verdict.outcome == res[cid]["outcome"]  # what tests/e2e/test_fixtures.py does
    from ddtree_compat.cli import main

    md = pytester.path / "r.md"
    assert main(["report", str(results), "-o", str(md), "--html", str(md.with_suffix(".html"))]) == 0
    text = md.read_text()
    assert "<summary>End to end" in text and "eagle-k1-s8-d9-never-eager-attn-default-bs1" in text
    assert "illegal instruction" in text


FIRST = """
import json, time
from pathlib import Path


def test_servers_started_before_the_first_e2e_cell():
    timeline = Path("e2e") / "timeline.jsonl"
    for _ in range(300):
        if timeline.exists() and any(json.loads(x)["event"] == "launched" for x in timeline.read_text().splitlines()):
            return
        time.sleep(0.1)
    raise AssertionError("no server launched while an earlier test ran")
"""


def test_servers_start_at_collection_end_and_not_for_collect_only(pytester, monkeypatch):
    use_stand_in_servers(monkeypatch)
    pytester.makepyfile(test_serve=TEST, test_aaa_first=FIRST)
    args = ("-p", "no:cacheprovider", "--ddtree-static=off", "-k", "first or target-bs1", "--ddtree-e2e-dir", "e2e")
    pytester.runpytest_subprocess(*args, "--collect-only").assert_outcomes()
    assert not (pytester.path / "e2e").exists()  # collecting starts no server
    # the servers of the selected e2e cells start when collection ends: a test before the first e2e cell sees them
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=2)


def test_xdist_workers_serve_the_cells_they_run(pytester, monkeypatch):
    """Under xdist each worker collects every e2e cell and runs some: its session is unplanned (it starts a
    server when it runs the server's first cell, stops it at its own end) and lives in a folder of its own
    (checkpoints, server logs, timeline: two workers running one server's cells each start one); the cells
    pass as in one process, and the controller starts no server."""
    use_stand_in_servers(monkeypatch)
    pytester.makepyfile(test_serve=TEST)
    results = pytester.path / "e2e.jsonl"
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-static=off", "-m", "e2e", "-k", "target",
                                        "-n", "2", "--ddtree-results", str(results), "--ddtree-e2e-dir", "e2e")
    out.assert_outcomes(passed=2)
    every = [r for r in map(json.loads, results.read_text().splitlines()) if r["kind"] == "result"]
    assert sorted(r["case_id"] for r in every) == ["target-bs1", "target-c4"]
    assert all(r["tier"] == "e2e" and r["outcome"] == "pass" for r in every)
    e2e = pytester.path / "e2e"
    assert not (e2e / "timeline.jsonl").exists() and not (e2e / "servers").exists()  # nothing of the controller's
    workers = sorted(p.parent.name for p in e2e.glob("gw*/timeline.jsonl"))
    assert workers and set(workers) <= {"gw0", "gw1"}
    for worker in workers:
        timeline = [json.loads(x) for x in (e2e / worker / "timeline.jsonl").read_text().splitlines()]
        assert timeline[0]["event"] == "session" and timeline[0]["planned"] is False
        assert [x.get("server") for x in timeline if x["event"] == "launched"] == ["target"]
        assert timeline[-1]["event"] == "closed"
        assert (e2e / worker / "servers" / "target" / "server.log").stat().st_size > 0


def test_without_a_gpu_the_summary_says_no_server_started(pytester, monkeypatch):
    """No GPU visible (``CUDA_VISIBLE_DEVICES=""`` hides any): every e2e cell skips with that reason alone (so
    ``-ra`` prints it once, counted), and the summary says no server started, naming no log folder, and offers
    no report of a results file whose cells all skipped."""
    for name in [n for n in os.environ if n.startswith("DDTREE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    pytester.makepyfile(test_serve=TEST)
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-static=off", "-rs", "-k",
                                        "target-bs1 or target-c4", "--ddtree-e2e-dir", "e2e", "--ddtree-results", "r.jsonl")
    out.assert_outcomes(skipped=2)
    out.stdout.fnmatch_lines(["ddtree-compat: e2e cells only (2): no GPU visible, so no server starts",
                              "e2e cells: 0 pass, * 2 skip  (real SGLang servers: no GPU visible here, so none started)",
                              "results: r.jsonl (2 e2e cells, every one skipped: pytest's skip lines say why)",
                              "SKIPPED [[]2[]] *: no GPU visible (NVML / torch.cuda)*"])
    assert "ddtree_compat report" not in out.stdout.str()
    assert "logs and captures in" not in out.stdout.str() and not (pytester.path / "e2e").exists()


def test_tests_of_our_own_beside_e2e_cells_get_the_e2e_start_line(pytester, monkeypatch):
    """The test command's shape: tests of the suite's own (no cell) beside e2e cells that skip without a GPU. The
    start line is the e2e one, counting the e2e cells only; no kernel backend is named (the controller would import
    SGLang's kernels and every implementation to say what they run, and none runs)."""
    for name in [n for n in os.environ if n.startswith("DDTREE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    pytester.makepyfile(test_serve=TEST, test_own="def test_own():\n    assert 1 + 1 == 2\n")
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-static=off", "-k",
                                        "target-bs1 or target-c4 or test_own", "--ddtree-e2e-dir", "e2e",
                                        "--ddtree-results", "r.jsonl")
    out.assert_outcomes(passed=1, skipped=2)
    out.stdout.fnmatch_lines(["ddtree-compat: e2e cells only (2): no GPU visible, so no server starts"])
    assert " on interpret: " not in out.stdout.str() and "backend(s)" not in out.stdout.str()


def test_an_xdist_controller_writing_the_start_lines_itself_tells_an_e2e_only_session(pytester, monkeypatch):
    """Under xdist the controller writes the start lines itself when no worker sent them (``gw0`` ran no cell:
    the e2e cells all went to other workers, or it crashed first). Blocking the sender by its plugin name makes
    that happen every time. The controller collected nothing, so it tells an e2e-only session from the cells'
    reports."""
    for name in [n for n in os.environ if n.startswith("DDTREE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    pytester.makepyfile(test_a_own="def test_own():\n    assert 1 + 1 == 2\n", test_serve=TEST)
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:ddtree-start-lines-sender",
                                        "--ddtree-static=off", "-n", "2", "-k", "target-bs1 or target-c4 or test_own",
                                        "--ddtree-e2e-dir", "e2e", "--ddtree-results", "r.jsonl")
    out.assert_outcomes(passed=1, skipped=2)
    out.stdout.fnmatch_lines(["ddtree-compat: e2e cells only (2): no GPU visible, so no server starts"])
    assert " on interpret: " not in out.stdout.str() and "backend(s)" not in out.stdout.str()
