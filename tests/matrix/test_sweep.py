"""The main job end to end on the CPU: ``python -m ddtree_compat sweep`` writes results and a report."""

import json
import subprocess
import sys

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
    the day's earlier results file as it was."""
    out = tmp_path / "results"
    out.mkdir()
    earlier = out / "slice.jsonl"
    earlier.write_text('{"kind": "env", "env_id": "e1"}\n')
    r = subprocess.run([sys.executable, "-m", "ddtree_compat", "sweep", "--tier", "interpret", "--out-dir", str(out),
                        "--name", "slice", "-n", "1", "--", "--ddtree-progress=soon"], capture_output=True, text=True,
                       env=own_env())
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "field '--ddtree-progress' = 'soon'" in r.stderr and "Traceback" not in r.stderr
    assert earlier.read_text() == '{"kind": "env", "env_id": "e1"}\n' and sorted(p.name for p in out.iterdir()) == ["slice.jsonl"]
