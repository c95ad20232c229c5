"""The main job end to end on the CPU: ``python -m ddtree_compat sweep`` writes results and a report."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from ddtree_compat.processes import group_alive
from tests.envs import own_env


def test_sweep_interpret_slice_writes_results_and_report(tmp_path):
    out = tmp_path / "results"
    r = subprocess.run([sys.executable, "-m", "ddtree_compat", "sweep", "--tier", "interpret", "--out-dir", str(out),
                        "--name", "slice", "-n", "1", "--", "-k",
                        "(b8-spine or b12-fanout) and not verify_attention or pre17-fp16-pg1-native"],
                       capture_output=True, text=True, env=own_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = [json.loads(x) for x in (out / "slice.jsonl").read_text().splitlines()]
    results = [x for x in lines if x["kind"] == "result"]
    envs = [x for x in lines if x["kind"] == "env"]
    assert envs and envs[0]["tier"] == "interpret" and envs[0]["triton_interpret"] is True
    cases = {x["case_id"] for x in results}
    assert "b8-spine-deep-bs3" in cases and "b12-fanout-sibling-bs8" in cases
    by_cell = {}
    for x in results:
        by_cell.setdefault((x["kernel"], x["backend"]), set()).add(x["outcome"])
    verify = {b: o for (k, b), o in by_cell.items() if k == "verify_tree_greedy"}
    assert verify == {"oracle": {"pass"}, "sglang-triton": {"pass"}, "sglang-cuda": {"skip"}}
    # commit kernels: SGLang's Triton ones really run interpreted; the memory-pool ones skip with a reason
    for kernel in ("accept_out_cache_loc", "commit_outputs", "bonus_tokens"):
        assert by_cell[(kernel, "sglang-triton")] == {"pass"} and by_cell[(kernel, "oracle")] == {"pass"}
    assert by_cell[("verify_tree_greedy@graph", "sglang-triton")] == {"skip"}
    # one verify-attention cell per backend: SGLang's extend_attention_fwd interpreted, its own tile choice
    assert by_cell[("verify_attention", "sglang-triton")] == {"pass"} and by_cell[("verify_attention", "oracle")] == {"pass"}
    report = (out / "slice.md").read_text()
    assert "| matrix | verify_tree_greedy | sglang-triton | ✅ 28 |" in report  # the summary table, one column
    assert "| matrix | verify_tree_greedy | sglang-cuda | ⏭ 28 skip |" in report
    assert "| sglang-triton · interpret | h4g2d64-pre17-fp16 | ✅ 1 |" in report  # verify attention, collapsed
    assert (out / "slice.png").read_bytes()[:4] == b"\x89PNG"
    assert "<td>sglang-triton · interpret</td>" in (out / "slice.html").read_text()
    # the start: a line per backend, what runs and what skips with the reason
    assert "sglang-cuda on interpret: skips" in r.stdout and "oracle on interpret: runs" in r.stdout, r.stdout[:3000]


def test_sweep_on_cpu_refuses_device_tier(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ddtree_compat", "sweep", "--tier", "device", "--out-dir", str(tmp_path)],
                       capture_output=True, text=True, env=own_env())
    assert r.returncode == 2 and "no GPU" in r.stderr


def test_a_sweep_pytest_refuses_keeps_the_earlier_results(tmp_path):
    """A usage error pytest finds (an option of the plugin with a bad value) ends the sweep with 2 and leaves
    the earlier results file it was to replace as it was."""
    out = tmp_path / "results"
    out.mkdir()
    earlier = out / "slice.jsonl"
    earlier.write_text('{"kind": "env", "env_id": "e1"}\n')
    r = subprocess.run([sys.executable, "-m", "ddtree_compat", "sweep", "--tier", "interpret", "--out-dir", str(out),
                        "--name", "slice", "--replace", "-n", "1", "--", "--ddtree-progress=soon"], capture_output=True,
                       text=True, env=own_env())
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "field '--ddtree-progress' = 'soon'" in r.stderr and "Traceback" not in r.stderr
    assert earlier.read_text() == '{"kind": "env", "env_id": "e1"}\n' and sorted(p.name for p in out.iterdir()) == ["slice.jsonl"]


TINY = ["--tier", "interpret", "--backend", "oracle", "-n", "0", "--tests",
        str(Path(__file__).resolve().parents[1] / "kernels" / "test_verify.py"), "--", "-k", "b8-spine-deep"]


def test_two_sweeps_on_one_day_keep_two_reports(tmp_path):
    """The second sweep of the day takes the next name: both runs keep their results and reports, and the
    ``latest-*`` links name the second."""
    out = tmp_path / "results"
    for _ in range(2):
        r = subprocess.run([sys.executable, "-m", "ddtree_compat", "sweep", "--out-dir", str(out), *TINY],
                           capture_output=True, text=True, env=own_env())
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    first, second = sorted(out.glob("2*-cpu-default.jsonl")), sorted(out.glob("2*-cpu-default-2.jsonl"))
    assert len(first) == len(second) == 1
    for run in (first[0], second[0]):
        for suffix in (".md", ".html", ".png"):
            assert run.with_suffix(suffix).is_file()
        assert f"Results: `{run.name}`" in run.with_suffix(".md").read_text()
    assert os.readlink(out / "latest-cpu-default.md") == second[0].with_suffix(".md").name
    assert "nothing left to run" in r.stdout and f"-> {second[0].stem}.*" in r.stdout


def test_an_interrupted_sweep_says_it_is_partial_and_how_to_go_on(tmp_path):
    """Ctrl-C mid-run (SIGINT to the sweep's process group, as a terminal sends it): exit 130, a report that says
    it is partial and how many cells it holds, the command that runs the rest, no pluggy teardown warnings, and no
    process of it left running."""
    out = tmp_path / "results"
    tests = str(Path(__file__).resolve().parents[1] / "kernels" / "test_commit.py")
    sweep = subprocess.Popen([sys.executable, "-m", "ddtree_compat", "sweep", "--out-dir", str(out), "--name", "run",
                              "--backend", "oracle", "-n", "2", "--tests", tests], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=own_env(), start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while time.time() < deadline and sweep.poll() is None and (
            not (out / "run.jsonl").exists() or (out / "run.jsonl").read_bytes().count(b'"kind":"result"') < 200):
        time.sleep(0.05)
    os.killpg(sweep.pid, signal.SIGINT)
    stdout, stderr = sweep.communicate(timeout=120)  # EOF: no process of the sweep holds its output open
    assert sweep.returncode == 130, stdout[-3000:] + stderr[-3000:]
    gone = time.time() + 15  # a process still exiting (a loaded box) has a few seconds; one left running has not
    while group_alive(sweep.pid) and time.time() < gone:
        time.sleep(0.1)
    assert not group_alive(sweep.pid), "a process of the sweep outlived it"  # an xdist worker lived --timeout on
    assert "nothing left to run" not in stdout and "PluggyTeardownRaisedWarning" not in stderr, stderr[-3000:]
    partial = re.search(r"run\.jsonl: partial, ([\d,]+) of ([\d,]+) cells", stdout)
    assert partial and int(partial[1].replace(",", "")) < int(partial[2].replace(",", "")), stdout[-3000:]
    assert f"continue: python -m ddtree_compat sweep --resume --out-dir {out} --name run" in stdout
    assert f"Partial run: {partial[1]} of {partial[2]} cells" in (out / "run.md").read_text()
