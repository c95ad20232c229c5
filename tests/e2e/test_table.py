"""The DDTree sweep table from the committed H200 results (:mod:`ddtree_compat.e2e.table`)."""

from pathlib import Path

import pytest

from ddtree_compat.e2e.table import main, rows

RESULTS = Path(__file__).resolve().parents[2] / "docs/results"
SWEEP = RESULTS / "2026-12-01-sm90-e2e-ddtree.jsonl.gz"


@pytest.mark.skipif(not SWEEP.exists(), reason="no committed DDTree sweep results")
def test_sweep_table_rows(tmp_path):
    header, body = rows([SWEEP])
    assert "rancy-ddtree-v2: verdict" in header
    by = {(r[0], r[1]): dict(zip(header, r)) for r in body}
    ok = by[("ddtree-b15-spine-always-graph", "bs1")]
    assert (ok["B"], ok["mode"], ok["expected"], ok["rancy-ddtree-v2: verdict"]) == ("15", "spine", "16.00", "pass")
    assert ok["rancy-ddtree-v2: measured (log / meta_info)"].startswith("16.00 /")
    dead = by[("ddtree-b8-spine-always-eager", "c4")]
    assert dead["expected"] == "9.00" and "RuntimeError: The size of tensor a (15)" in dead["rancy-ddtree-v2: verdict"]
    assert by[("ddtree-b16-tree-never-eager", "bs1")]["expected"] == "1.00"
    out = tmp_path / "t.md"
    assert main([str(SWEEP), "-o", str(out)]) == 0 and out.read_text().count("\n") == len(body) + 2
