"""scripts/gen_results_index.py: docs/results/README.md is what the results files give (a stale index fails), and a
run added to a results folder shows as a row with its GPU, versions, counts, report and picture."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_results_index.py"


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT)


def test_the_committed_results_index_is_up_to_date():
    done = run_script("--check")
    assert done.returncode == 0, done.stderr + "\n(rewrite it: python scripts/gen_results_index.py)"


def _env(env_id: str) -> dict:
    return {"kind": "env", "env_id": env_id, "host": "box", "gpus": [
        {"index": 0, "name": "NVIDIA RTX PRO 6000", "arch": "sm120", "cc": "12.0", "fake": False}],
        "sglang": "0.5.23", "tier": "device", "profile": "default", "command": "python -m ddtree_compat sweep",
        "implementations": {"mytree": {"name": "mytree", "repo": "example/sglang", "commit": "0123456789abcdef"}}}


def _result(case_id: str, outcome: str, env_id: str) -> dict:
    return {"kind": "result", "kernel": "verify_tree_greedy", "tier": "device", "backend": "sglang-triton",
            "arch": "sm120", "case_id": case_id, "outcome": outcome, "env_id": env_id,
            "nodeid": f"tests/kernels/test_verify.py::test_verify_tree_greedy[{case_id}]"}


def test_a_run_added_to_the_folder_is_a_row_and_a_stale_index_fails(tmp_path):
    out = tmp_path / "README.md"
    lines = [_env("e1"), _result("b8-spine-deep-bs3", "zero-accept", "e1"), _result("b16-tree-none-bs1", "pass", "e1")]
    (tmp_path / "2026-12-08-sm120-default.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "2026-12-08-sm120-default.md").write_text("# DDTree compatibility matrix\n")
    (tmp_path / "2026-12-08-sm120-default.png").write_bytes(b"\x89PNG")
    (tmp_path / "notes.txt").write_text("no run's file")

    assert run_script("--results-dir", str(tmp_path), "--out", str(out), "--check").returncode == 1
    assert run_script("--results-dir", str(tmp_path), "--out", str(out)).returncode == 0
    rows = [line for line in out.read_text().splitlines() if line.startswith("| 2026-12-08 ")]
    assert len(rows) == 1
    row = rows[0]
    for part in ("[2026-12-08-sm120-default.jsonl](2026-12-08-sm120-default.jsonl)", "RTX PRO 6000 (sm120)",
                 "sglang 0.5.23; mytree 01234567", "`python -m ddtree_compat sweep`", "device · test_verify",
                 "2: 1 zero-accept, 1 pass", "[report](2026-12-08-sm120-default.md)",
                 "[picture](2026-12-08-sm120-default.png)"):
        assert part in row, (part, row)
    assert "[notes.txt](notes.txt)" in out.read_text()  # a file of no run is listed, not lost
    assert run_script("--results-dir", str(tmp_path), "--out", str(out), "--check").returncode == 0

    (tmp_path / "2026-12-09-sm120-default.jsonl").write_text(
        json.dumps({**_env("e2"), "command": None}) + "\n" + json.dumps(_result("b8-spine-deep-bs3", "pass", "e2")) + "\n")
    stale = run_script("--results-dir", str(tmp_path), "--out", str(out), "--check")
    assert stale.returncode == 1 and "out of date" in stale.stderr and len(stale.stderr.strip().splitlines()) == 1
    run_script("--results-dir", str(tmp_path), "--out", str(out))
    added = next(line for line in out.read_text().splitlines() if line.startswith("| 2026-12-09 "))
    assert "| not recorded |" in added  # no command in its env line, no report quoting one


def test_a_report_whose_results_file_was_not_kept_is_a_row_read_from_the_report(tmp_path):
    (tmp_path / "2026-12-08-h100-default.md").write_text(
        "# SGLang kernel matrix (DDTree kernels not tested): verify kernels on sm90\n\n"
        "Results: `default.jsonl` (too large to come back)\n\n3 cells from 1 environment(s): 1 skip, 2 pass.\n\n"
        "| env | tier | GPUs | sglang |\n|---|---|---|---|\n| abc | device | NVIDIA H100 80GB HBM3 (sm90, cc 9.0) | 0.5.23 |\n")
    out = tmp_path / "README.md"
    assert run_script("--results-dir", str(tmp_path), "--out", str(out)).returncode == 0
    row = next(line for line in out.read_text().splitlines() if line.startswith("| 2026-12-08 "))
    for part in ("results file not kept", "H100 80GB HBM3 (sm90)", "sglang 0.5.23", "verify kernels on sm90",
                 "3: 1 skip, 2 pass", "[report](2026-12-08-h100-default.md)"):
        assert part in row, (part, row)
