"""scripts/release_table.py over two archived CPU runs: a kernel a release lacks reads absent, one it has
reads present with its counts, one it has but cannot import here reads not run with the import error."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "docs" / "results"


def test_release_table_tells_absent_from_present_from_not_run():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "release_table.py"),
                          f"0.5.12={RUNS / '2026-12-01-cpu-sglang-0.5.12.jsonl.gz'}",
                          f"0.5.23={RUNS / '2026-12-01-cpu-sglang-0.5.23.jsonl.gz'}"],
                         capture_output=True, text=True, check=True).stdout
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:4]]
            for line in out.splitlines() if line.startswith("| `")}
    assert rows["`verify_tree_greedy`"] == ["absent (32 skip)", "present: 32 pass"]
    assert rows["`front_out_cache_loc`"] == ["absent (32 skip)", "present: 32 pass"]
    assert rows["`move_kv`"][0] == "not run (32 skip)"
    assert "- 0.5.12 `move_kv`: cannot import sglang.srt.mem_cache.memory_pool" in out
    assert "looked for sglang.kernels.ops.speculative.spec_tree.verify_tree_greedy_triton" in out
