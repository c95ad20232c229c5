"""The HTML page and heatmap from the real H200 results, merged columns, and worst-status aggregation."""

import base64
import io
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from ddtree_compat.report import render_heatmap, render_html
from ddtree_compat.report.summary import summarize
from ddtree_compat.results import load

H200 = Path(__file__).resolve().parents[2] / "docs/results/2026-11-30-sm90-default.jsonl.gz"


def edited(src: Path, dst: Path, edit) -> Path:
    """A copy of a results file with ``edit(obj)`` applied to each line (returning ``None`` drops it)."""
    out = [edit(json.loads(line)) for line in (gzip.decompress(src.read_bytes()).decode() if src.suffix == ".gz" else src.read_text()).splitlines()]
    dst.write_text("".join(json.dumps(o) + "\n" for o in out if o is not None))
    return dst


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """H200 results with a fault, a known-issue xfail and an xpass planted in sglang-triton."""
    def edit(o):
        if o["kind"] == "env":
            return {**o, "known_issues": {"kn-1": {"reason": "planted <b>known</b>", "source": "https://example.org/1"}}}
        if o["kind"] != "result" or o["kernel"] != "verify_tree_greedy":
            return o
        if o["backend"] == "sglang-triton" and o["budget"] == 64 and o["topology"] == "random" and o["plant"] == "deep":
            return {**o, "outcome": "fault", "fault_class": "illegal-instruction", "message": "<script>boom</script>"}
        if o["backend"] == "sglang-triton" and o["budget"] in (8, 12) and o["topology"] == "spine":
            return {**o, "outcome": "zero-accept" if o["budget"] == 8 else "pass", "known_issue": "kn-1"}
        return o
    return edited(H200, tmp_path_factory.mktemp("rep") / "planted.jsonl", edit)


def test_cli_writes_markdown_html_and_png_of_the_h200_run(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ddtree_compat", "report", str(H200), "-o", str(tmp_path / "m.md"),
                        "--html", str(tmp_path / "m.html")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "m.html").read_text()
    png = (tmp_path / "m.png").read_bytes()
    inlined = re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1)
    assert base64.b64decode(inlined) == png  # self-contained: the page carries the PNG it was written with
    assert "NVIDIA H200 (sm90, cc 9.0)" in html and "<td>0.5.23</td>" in html
    assert re.search(r"<td>sglang-cuda · sm90</td><td class=\"num\">1145</td>", html)
    width, height = Image.open(io.BytesIO(png)).size
    assert height > width > 600  # three backends stacked, one arch column
    md = (tmp_path / "m.md").read_text()
    assert "| sglang-triton · sm90 | 1145 | 0 | 0 | 0 | 0 | 1145 | 0 | 0 |" in md  # grid + property record


def test_merged_runners_give_one_column_per_arch(tmp_path):
    sm120 = edited(H200, tmp_path / "sm120.jsonl", lambda o: {**o, "env_id": "other", **(
        {"gpus": [{**o["gpus"][0], "arch": "sm120", "cc": "12.0"}]} if o["kind"] == "env" else {"arch": "sm120"})})
    one, two = load([H200]), load([H200, sm120])
    assert [c for c in summarize(two).columns if ":" not in c] == ["oracle · sm120", "oracle · sm90", "sglang-cuda · sm120", "sglang-cuda · sm90",
                                      "sglang-triton · sm120", "sglang-triton · sm90"]
    w1, h1 = Image.open(io.BytesIO(render_heatmap(one))).size
    w2, h2 = Image.open(io.BytesIO(render_heatmap(two))).size
    assert h2 == h1 and w2 > 1.8 * w1  # a second column of panels, same rows
    assert len(two.envs) == 2 and "(sm120, cc 12.0)" in render_html(two, png=b"")


def test_worst_status_per_square_and_known_issues_shown(planted):
    s = summarize(load([planted]))
    squares = s.grouped(lambda r: (r.budget, r.topology))
    col = "sglang-triton · sm90"
    assert squares[(64, "random", col)] == {"fault": 3, "pass": 12}
    assert squares[(8, "spine", col)] == {"xfail": 16} and squares[(12, "spine", col)] == {"xpass": 16}
    assert squares[(64, "random", "sglang-cuda · sm90")] == {"pass": 15}
    # the H200 file also holds 20 real faults: the oracle backend cannot be captured in a CUDA graph
    assert [r.outcome for r in s.failures if r.kernel == "verify_tree_greedy"] == ["fault"] * 3
    assert len(s.xpassed) == 16
    html = render_html(load([planted]), png=b"")
    assert "&lt;script&gt;boom&lt;/script&gt;" in html and "<script>boom" not in html  # autoescaped
    assert "planted &lt;b&gt;known&lt;/b&gt;" in html and '<a href="https://example.org/1">' in html
    assert '<span class="badge st-xpass">xpass</span>' in html and f"Failures ({len(s.failures)})" in html
