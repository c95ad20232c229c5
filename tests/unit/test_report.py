"""The reports from the real H200 results: the summary picture and table, bounded for the default and the full
profile, details per kernel and the static tier per arch in the HTML page, merged columns, worst-status
aggregation."""

import base64
import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from ddtree_compat import records
from ddtree_compat.cases import PLANTS
from ddtree_compat.families.verify.records import PROFILE_GRIDS
from ddtree_compat.report import render_html, render_markdown, render_summary
from ddtree_compat.report.summary import summarize, summary_table
from ddtree_compat.results import ResultRecord, Results, load

H200 = Path(__file__).resolve().parents[2] / "docs/results/2026-11-30-sm90-default.jsonl.gz"


def edited(src: Path, dst: Path, edit) -> Path:
    """A copy of a results file with ``edit(obj)`` applied to each line (returning ``None`` drops it)."""
    out = [edit(json.loads(line)) for line in (gzip.decompress(src.read_bytes()).decode() if src.suffix == ".gz" else src.read_text()).splitlines()]
    dst.write_text("".join(json.dumps(o) + "\n" for o in out if o is not None))
    return dst


def size(png: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(png)).size


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


def test_cli_writes_markdown_html_and_the_summary_picture_of_the_h200_run(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ddtree_compat", "report", str(H200), "-o", str(tmp_path / "m.md"),
                        "--html", str(tmp_path / "m.html")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "m.html").read_text()
    png = (tmp_path / "m.png").read_bytes()
    inlined = re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1)
    assert base64.b64decode(inlined) == png  # self-contained: the page carries the PNG it was written with
    assert "NVIDIA H200 (sm90, cc 9.0)" in html and "<td>0.5.23</td>" in html
    assert re.search(r"<td>sglang-cuda · sm90</td><td class=\"num\">1145</td>", html)
    width, height = size(png)
    assert 1000 < width < 2000 and 400 < height < 1000  # was 1029 x 9376: 33 panels stacked
    md = (tmp_path / "m.md").read_text()
    assert "| matrix | verify_tree_greedy | sglang-triton | ✅ 1145 |" in md  # grid + property cell
    assert "| matrix | move_kv | sglang-torch | ✅ 1144 |" in md and len(md) < 20_000
    assert "<details>" in md and "## Failures (0)" in md
    # the counts table says which kernel a column without ':kernel' holds, and that a static row holds them all
    header = "backend[:kernel] · arch (no kernel: verify_tree_greedy; · static / · e2e: the whole backend)"
    assert f"| {header} | pass |" in md and f"<th>{header}</th>" in html
    for kernel in ("verify_tree_greedy", "move_kv", "verify_commit@graph"):  # details per kernel in the page
        assert f"<summary>{kernel} <span" in html


def test_merged_runners_give_one_column_per_arch(tmp_path):
    sm120 = edited(H200, tmp_path / "sm120.jsonl", lambda o: {**o, "env_id": "other", **(
        {"gpus": [{**o["gpus"][0], "arch": "sm120", "cc": "12.0"}]} if o["kind"] == "env" else {"arch": "sm120"})})
    one, two = load([H200]), load([H200, sm120])
    assert [c for c in summarize(two).columns if ":" not in c] == ["oracle · sm120", "oracle · sm90", "sglang-cuda · sm120", "sglang-cuda · sm90",
                                      "sglang-triton · sm120", "sglang-triton · sm90"]
    arches, rows = summary_table(summarize(two))
    assert arches == ["sm90", "sm120"] and len(rows) == len(summary_table(summarize(one))[1])
    w1, h1 = size(render_summary(one))
    w2, h2 = size(render_summary(two))
    assert w2 == w1 and 1.6 * h1 < h2 < 2.2 * h1  # a second block of rows, same columns
    assert len(two.envs) == 2 and "(sm120, cc 12.0)" in render_html(two, png=b"")


def test_worst_status_per_square_and_known_issues_shown(planted):
    s = summarize(load([planted]))
    squares = s.grouped(lambda r: (r.budget, r.topology))
    col = "sglang-triton · sm90"
    assert squares[(64, "random", col)] == {"fault": 3, "pass": 12}
    assert squares[(8, "spine", col)] == {"xfail": 16} and squares[(12, "spine", col)] == {"xpass": 16}
    assert squares[(64, "random", "sglang-cuda · sm90")] == {"pass": 15}
    assert [r.outcome for r in s.failures if r.kernel == "verify_tree_greedy"] == ["fault"] * 3
    assert len(s.xpassed) == 16
    md = render_markdown(load([planted]))
    assert ("| matrix | verify_tree_greedy | sglang-triton | ❌ 3 fault, 16 xpass, 16 xfail, 1110 pass · fault: random "
            "b64; xpass: spine b12; xfail: spine b8 |") in md
    details = md.split("verify_tree_greedy: its ", 1)[1].split("</details>", 1)[0]
    assert "row(s) with failures or known issues (xfail, xpass)" in details
    assert "| 64 | random |" in details and "| 8 | spine |" in details and "| 12 | spine |" in details  # xfail rows too
    html = render_html(load([planted]), png=b"")
    assert "&lt;script&gt;boom&lt;/script&gt;" in html and "<script>boom" not in html  # autoescaped
    assert "planted &lt;b&gt;known&lt;/b&gt;" in html and '<a href="https://example.org/1">' in html
    assert '<span class="badge st-xpass">xpass</span>' in html and f"Failures ({len(s.failures)})" in html
    assert "fault: random b64; xpass: spine b12; xfail: spine b8" in html


def test_a_non_strict_entrys_pass_asks_for_no_manifest_change(planted, tmp_path):
    """A non-strict entry (its bug depends on the draw or the build) that a cell passes is counted as xpass in the
    known-issue table, marked not strict, and the report does not call it fixed; a strict one's pass it does."""
    loose = edited(planted, tmp_path / "loose.jsonl", lambda o: {**o, "known_issues": {
        "kn-1": {**o["known_issues"]["kn-1"], "strict": False}}} if o["kind"] == "env" else o)
    s = summarize(load([loose]))
    assert s.xpassed == [] and s.known[("kn-1", "sglang-triton · sm90", "xpass")] == 16
    md, strict_md = render_markdown(load([loose])), render_markdown(load([planted]))
    assert "| kn-1 | sglang-triton · sm90 | xpass | no | 16 |" in md and "narrow or remove the entry." not in md
    assert "| kn-1 | sglang-triton · sm90 | xpass | yes | 16 |" in strict_md
    assert "16 cell(s) passed although a strict known issue covers them" in strict_md
    assert "<td>no</td>" in render_html(load([loose]), png=b"")


def test_the_picture_marks_the_failing_squares(planted):
    """The fault square (random, B = 64) in the sglang-triton row is drawn in the fault colour, and the same
    square of sglang-cuda's row in the pass colour."""
    from ddtree_compat.report.picture import STYLE

    image = Image.open(io.BytesIO(render_summary(load([planted])))).convert("RGB")
    colours = {c for _, c in image.getcolors(maxcolors=1 << 16)}
    fault = tuple(int(STYLE["fault"][0][i:i + 2], 16) for i in (1, 3, 5))
    xpass = tuple(int(STYLE["xpass"][0][i:i + 2], 16) for i in (1, 3, 5))
    assert fault in colours and xpass in colours
    clean = Image.open(io.BytesIO(render_summary(load([H200])))).convert("RGB")
    assert fault not in {c for _, c in clean.getcolors(maxcolors=1 << 16)}


def _synthetic(profile: str) -> Results:
    """Every verify and commit cell a profile's grid could have (its coordinates, no case data) for three
    backends on two arches, plus DDTree cells over that profile's budgets: 10^4 to 10^5 cells."""
    spec = PROFILE_GRIDS[profile]
    commit = [r.name for r in records.registry().values() if r.case_param == "ddtree_commit_case"]
    ddtree = [r.name for r in records.registry().values() if r.table == "ddtree"][:4]
    from ddtree_compat.families.ddtree.records import BUDGETS

    rows = []
    for arch in ("sm90", "sm120"):
        for b in spec.budgets:
            for blk in spec.block_sizes:
                for t in spec.topologies:
                    for plant in PLANTS[:2]:
                        for bs in spec.batches:
                            mode = "spine" if b <= blk - 1 else "tree"
                            base = dict(tier="device", arch=arch, case_id=f"b{b}-{t}-{plant}-bs{bs}-blk{blk}", budget=b,
                                        topology=t, plant=plant, batch=bs, block_size=blk, mode=mode, outcome="pass")
                            for backend in ("oracle", "sglang-triton", "sglang-cuda"):
                                rows.append(ResultRecord(kernel="verify_tree_greedy", backend=backend, **base))
                            rows += [ResultRecord(kernel=k, backend="sglang-triton", **base) for k in commit]
        for b in BUDGETS[profile]:
            for lg in ("peaked", "flat", "ties"):
                rows += [ResultRecord(kernel=k, tier="device", backend="impl-a", arch=arch, case_id=f"b{b}-{lg}",
                                         budget=b, topology=f"ddtree-{lg}", mode="tree", outcome="pass") for k in ddtree]
    rows[7] = ResultRecord(**{**rows[7].__dict__, "outcome": "zero-accept"})
    return Results({}, rows)


def test_picture_and_summary_table_stay_bounded_for_the_full_profile():
    default, full = _synthetic("default"), _synthetic("full")
    assert len(full.records) > 5 * len(default.records)
    (wd, hd), (wf, hf) = size(render_summary(default)), size(render_summary(full))
    assert hf == hd and wf < 1.5 * wd and wf < 2200 and hf < 1400
    md_default, md_full = render_markdown(default), render_markdown(full)
    summary = [ln for ln in md_full.split("<details>")[0].splitlines() if ln.startswith("| ")]
    assert len(summary) == 1 + 3 + 6 + 4  # header, verify x 3 backends, 6 commit kernels, 4 DDTree kernels
    assert len(md_full) < 2 * len(md_default) < 60_000


@pytest.mark.parametrize("kernel, starts", [
    ("move_kv", "python -m ddtree_compat replay c.json --backend b --kernel move_kv"),
    ("verify_tree_greedy", "python -m ddtree_compat replay c.json --backend b"),
    ("ddtree_sample_chain@graph", "pytest 'k/test_d.py::test_round[x]' --ddtree-tier device"),  # no record: the cell
    ("verify_commit@graph", "pytest 'k/test_d.py::test_round[x]' --ddtree-tier device"),
    # the verify record's own run would not capture a CUDA graph: the graph cell replays as itself
    ("verify_tree_greedy@graph", "pytest 'k/test_d.py::test_round[x]' --ddtree-tier device"),
    # the attention case feeds three records (eager, graph, cascade): the label says which; its case says sm120
    ("verify_attention@emulated-sm120",
     "python -m ddtree_compat replay c.json --backend b --kernel verify_attention@emulated-sm120"),
])
def test_a_failed_cell_replays_through_what_can_replay_it(kernel, starts):
    from ddtree_compat.report.summary import replay_command
    from ddtree_compat.results import ResultRecord

    r = ResultRecord(kernel=kernel, tier="device", backend="b", arch="sm90", case_id="c", outcome="fault",
                     case_path="c.json", nodeid="k/test_d.py::test_round[x]")
    assert replay_command(r) == starts


@pytest.mark.parametrize("kernel, cli", [
    ("verify_tree_greedy", "python -m ddtree_compat replay c.json --backend oracle --tier device"),
    ("move_kv", "python -m ddtree_compat replay c.json --backend oracle --kernel move_kv --tier device"),
    ("verify_tree_greedy@graph", None),  # the CUDA-graph round: only its pytest cell replays it
    ("ddtree_sample_chain@graph", None),
])
def test_a_failing_cell_s_replay_line_names_what_can_replay_it(kernel, cli):
    """The failure message's line, beside the report's (above): the CLI part only where a record replays the label."""
    from ddtree_compat.backends.oracle_column import OracleBackend
    from ddtree_compat.plugin.cells import replay_line
    from ddtree_compat.tiers import Target

    line = replay_line("c.json", OracleBackend(), Target("device", "cuda:0", "sm90"), "k/t.py::t[x]", kernel)
    given = "--ddtree-case c.json --ddtree-backend oracle " if kernel == "verify_tree_greedy" else ""
    again = f"pytest 'k/t.py::t[x]' {given}--ddtree-tier device"
    assert line == (f"replay: {again}" if cli is None else f"replay: {cli}   |   {again}")


def _run_file(path: Path, rows: list[dict], not_tested: dict | None = None, implementations: dict | None = None):
    from ddtree_compat.results import ResultsWriter, environment

    w = ResultsWriter(path, environment("interpret", "default", implementations=implementations,
                                        not_tested=not_tested))
    for row in rows:
        w.write(ResultRecord(**{**dict(kernel="verify_tree_greedy", tier="interpret", backend="oracle",
                                       arch="interpret", case_id="b8-spine-deep-bs3", budget=8, topology="spine",
                                       plant="deep", batch=3, block_size=16, mode="spine", outcome="pass"), **row}))
    return path


CUDA_SKIP = "tvm-ffi JIT CUDA kernel runs on the device tier only (a CUDA GPU; this target is interpret)"


def test_a_run_without_a_ddtree_implementation_says_so_on_its_first_screen(tmp_path):
    """No DDTree implementation (its tests skip before any cell exists): the title says what was tested, and the
    top of the Markdown, the page and the picture's title say what was not and why, naming the results file."""
    from ddtree_compat.plugin.session import NO_IMPLEMENTATION
    from ddtree_compat.report.picture import _title

    path = _run_file(tmp_path / "2026-12-04-cpu-default.jsonl",
                     [{}, {"backend": "sglang-cuda", "outcome": "skip", "message": CUDA_SKIP}],
                     not_tested={"ddtree": NO_IMPLEMENTATION})
    r = subprocess.run([sys.executable, "-m", "ddtree_compat", "report", str(path), "-o", str(tmp_path / "m.md"),
                        "--html", str(tmp_path / "m.html")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    top = (tmp_path / "m.md").read_text().split("## Summary")[0]
    assert top.startswith("# SGLang kernel matrix (DDTree kernels not tested): verify kernels on interpret\n")
    assert "Results: `2026-12-04-cpu-default.jsonl`" in top
    assert f"- DDTree kernels: not tested — {NO_IMPLEMENTATION}" in top
    assert f"- sglang-cuda: not tested — all 1 cells skipped: {CUDA_SKIP}" in top
    assert "- KV-cache commit kernels: not tested — no cell (left out of the selection" in top
    html = (tmp_path / "m.html").read_text()
    assert "<h1>SGLang kernel matrix (DDTree kernels not tested): verify kernels on interpret</h1>" in html
    assert "<code>2026-12-04-cpu-default.jsonl</code>" in html and "<li>DDTree kernels: not tested — no DDTree" in html
    title = _title(load([path]))
    assert title.startswith("SGLang kernel matrix (DDTree kernels not tested)") and "2026-12-04-cpu-default.jsonl" in title
    assert "not tested: " in title and "DDTree kernels" in title.split("not tested: ")[1]


def test_a_run_with_a_ddtree_implementation_is_titled_by_it_and_lists_an_untested_one(tmp_path):
    impls = {"impl-a": {"name": "impl-a", "repo": "r/a", "commit": "abcdef0123"},
             "impl-b": {"name": "impl-b", "repo": "r/b", "commit": "0123456789"}}
    path = _run_file(tmp_path / "r.jsonl", [{}, {"kernel": "ddtree_follow", "backend": "impl-a",
                                                 "topology": "ddtree-peaked", "case_id": "b8-peaked"},
                                            {"kernel": "ddtree_follow", "backend": "impl-b", "outcome": "skip",
                                             "topology": "ddtree-peaked", "case_id": "b8-peaked",
                                             "message": "no ddtree_follow here"}], implementations=impls)
    md = render_markdown(load([path]))
    assert md.startswith("# DDTree compatibility matrix: verify kernels, DDTree kernels on interpret\n")
    assert ("- impl-b (DDTree implementation, r/b@01234567): not tested — all 1 cells skipped: no ddtree_follow "
            "here") in md
    assert "impl-a (DDTree" not in md and "- DDTree kernels: not tested" not in md


def test_a_deployment_shape_run_of_a_ddtree_implementations_kernels_is_titled_by_ddtree(tmp_path):
    """Scale cells alone (the FA3 cascade through a tree's own FA suffix kernel): DDTree kernels ran, whatever the
    family; SGLang's own kernels at the same shapes do not make it DDTree's."""
    impls = {"impl-a": {"name": "impl-a", "repo": "r/a", "commit": "abcdef0123"}}
    scale = dict(kernel="verify_attention_cascade@scale", tier="device", arch="sm90", case_id="cascade-b8-ctx32768-bs1",
                 budget=8, topology="chain", plant="all-accepted", batch=1, block_size=None, mode="scale")
    path = _run_file(tmp_path / "r.jsonl", [{**scale, "backend": "impl-a"}], implementations=impls)
    assert render_markdown(load([path])).startswith("# DDTree compatibility matrix: deployment shapes on sm90\n")
    sglang = _run_file(tmp_path / "s.jsonl", [{**scale, "kernel": "verify_attention@scale", "backend": "sglang-triton"}],
                       implementations=impls)
    assert render_markdown(load([sglang])).startswith("# SGLang kernel matrix (DDTree kernels not tested): deployment "
                                                      "shapes on sm90\n")


def test_a_static_kernel_that_built_nothing_is_named_among_the_untested(tmp_path):
    """A static tier that built some kernels lists each backend's kernel that built none (sgl-kernel's prebuilt
    libraries without sglang-kernel installed); a kernel with one build is not listed."""
    static = dict(tier="static", arch="sm120", case_id="bs3-w16-c16", budget=None, topology="", mode="")
    missing = "sgl-kernel is not installed"
    path = _run_file(tmp_path / "r.jsonl", [{}, static, {**static, "backend": "sglang-cuda", "kernel": "sgl_kernel_ops",
                                                         "outcome": "skip", "message": missing},
                                            {**static, "arch": "sm90", "backend": "sglang-cuda",
                                             "kernel": "sgl_kernel_ops", "outcome": "skip", "message": missing}])
    md = render_markdown(load([path]))
    assert f"- Static builds of sglang-cuda sgl_kernel_ops: not tested — all 2 cells skipped: {missing}" in md
    assert "Static builds of oracle" not in md and "- Static builds: not tested" not in md


def test_an_e2e_run_of_a_ddtree_implementations_servers_counts_as_testing_it(tmp_path):
    """e2e cells only: an implementation whose DDTREE servers ran is not listed as untested, and the title is
    DDTree's; one whose servers all skipped is listed, and a run of target servers alone is not DDTree's."""
    impls = {"impl-a": {"name": "impl-a", "repo": "r/a", "commit": "abcdef0123"},
             "impl-b": {"name": "impl-b", "repo": "r/b", "commit": "0123456789"}}
    e2e = dict(kernel="generate", tier="e2e", arch="sm90", case_id="ddtree-b16-c512", budget=16,
               topology="ddtree-tree-always", plant="", batch=512, block_size=16, mode="graph")
    path = _run_file(tmp_path / "r.jsonl", [{**e2e, "backend": "sglang-ddtree@impl-a"},
                                            {**e2e, "backend": "sglang-ddtree@impl-b", "outcome": "skip",
                                             "message": "no GPU"}], implementations=impls)
    md = render_markdown(load([path]))
    assert md.startswith("# DDTree compatibility matrix: end to end\n")
    assert "impl-a (DDTree" not in md and "- impl-b (DDTree implementation, r/b@01234567): not tested" in md
    target = _run_file(tmp_path / "t.jsonl", [{**e2e, "backend": "sglang-target", "topology": "", "budget": None}])
    assert render_markdown(load([target])).startswith("# SGLang kernel matrix (DDTree kernels not tested): end to end")


def test_the_deployment_concurrency_table_gives_each_servers_largest_lossless_phase_and_first_fault(tmp_path):
    """Per e2e server configuration: the largest phase that passed below the first that did not, that phase's
    outcome, and the first phase whose server faulted even past a zero-accept phase (its replay line); a skipped
    phase is left out. In the Markdown and the page."""
    e2e = dict(kernel="generate", tier="e2e", arch="sm90", budget=16, topology="ddtree-tree-always", plant="",
               block_size=16, mode="graph", attention="fa3", nodeid="tests/e2e/test_serve.py::test_serve[x]")

    def phase(config, backend, n, outcome="pass"):
        return {**e2e, "backend": backend, "case_id": f"{config}-{'bs1' if n == 1 else f'c{n}'}", "batch": n,
                "outcome": outcome, "message": "" if outcome == "pass" else outcome}

    rows = [phase("ddtree-b16", "sglang-ddtree@a", n, "fault" if n == 512 else "pass") for n in (1, 3, 64, 256, 512)]
    rows += [phase("ddtree-b16", "sglang-ddtree@b", n, {1: "zero-accept", 64: "skip", 512: "fault"}.get(n, "zero-accept"))
             for n in (1, 64, 256, 512)]
    rows += [phase("dflash-b16", "sglang-dflash@a", n) for n in (1, 512)]
    results = load([_run_file(tmp_path / "r.jsonl", rows)])
    md = render_markdown(results)
    table = md.split("## Deployment concurrency")[1].split("## Failures")[0]
    assert ("| sglang-ddtree@a | fa3 | ddtree-b16 | sm90 | 1, 3, 64, 256, 512 | 256 | 512 (fault) | 512 | "
            "pytest 'tests/e2e/test_serve.py::test_serve[x]' |") in table
    assert "| sglang-ddtree@b | fa3 | ddtree-b16 | sm90 | 1, 256, 512 | none | 1 (zero-accept) | 512 |" in table
    assert "| sglang-dflash@a | fa3 | dflash-b16 | sm90 | 1, 512 | 512 |  |  |  |" in table
    html = render_html(results, png=b"")
    assert "<h2>Deployment concurrency" in html and "<td>1 (zero-accept)</td><td>512</td>" in html
    kernels_only = load([_run_file(tmp_path / "k.jsonl", [{}])])
    assert "Deployment concurrency" not in render_markdown(kernels_only)


def test_kernel_cells_that_never_ran_are_named_below_the_families(tmp_path):
    """A backend whose kernel cells all skipped while its static builds ran, a kernel of a backend that ran others,
    and the CUDA-graph cells when none ran: each a Not tested line; a kernel with one cell run is not listed."""
    static = dict(tier="static", arch="sm120", case_id="bs3-w16-c16", budget=None, topology="", mode="")
    torchvision = "cannot import sglang.srt.mem_cache.allocation: ModuleNotFoundError: No module named 'torchvision'"
    path = _run_file(tmp_path / "r.jsonl", [
        {}, {"backend": "sglang-triton"}, {**static, "backend": "sglang-cuda"},
        {"backend": "sglang-cuda", "outcome": "skip", "message": CUDA_SKIP},
        {"backend": "sglang-triton", "kernel": "assign_req_to_token", "outcome": "skip", "message": torchvision},
        {"backend": "sglang-triton", "kernel": "move_kv"},
        {"backend": "sglang-triton", "kernel": "move_kv", "case_id": "b12-spine-deep-bs3", "outcome": "skip",
         "message": "other"},
        {"kernel": "verify_tree_greedy@graph", "outcome": "skip", "message": "CUDA graphs need the device tier"},
        {"backend": "sglang-cuda", "kernel": "verify_tree_greedy@graph", "outcome": "skip",
         "message": "CUDA graphs need the device tier"}])
    top = render_markdown(load([path])).split("## Summary")[0]
    assert (f"- sglang-cuda's kernel cells on interpret: none ran (only its static builds did) — all 1 cells skipped: "
            f"{CUDA_SKIP} (its other 1 kernel cells are counted in the CUDA-graph line or their family's line)" in top)
    from ddtree_compat.report.picture import _title

    title = _title(load([path]))  # the picture names what was not tested, never the reasons
    assert "not tested: " in title and " — " not in title and "CUDA-graph line" not in title
    assert "sglang-cuda's kernel cells on interpret: none ran (only its static builds did)" in title
    assert f"- sglang-triton assign_req_to_token on interpret: not tested — all 1 cells skipped: {torchvision}" in top
    assert ("- CUDA-graph cells (kernel@graph): not tested — all 2 cells skipped: CUDA graphs need the device tier"
            in top)
    assert "move_kv" not in top and "oracle" not in top


def test_a_long_skip_reason_is_cut_at_a_word():
    from ddtree_compat.report.coverage import REASON_CHARS, _skipped

    reason = "word " * 100
    line = _skipped([ResultRecord(kernel="k", tier="interpret", backend="b", arch="interpret", case_id="c",
                                  budget=8, topology="spine", plant="deep", batch=1, block_size=16, mode="spine",
                                  outcome="skip", message=reason)])
    cut = line.split("skipped: ", 1)[1]
    assert cut.endswith("word ...") and len(cut) <= REASON_CHARS + 1


def test_the_three_files_of_a_report_come_from_one_results_file(tmp_path):
    """A report without a picture (static cells only) removes the picture an earlier report left beside it."""
    path = _run_file(tmp_path / "r.jsonl", [{"tier": "static", "arch": "sm120", "case_id": "bs3-w16-c16",
                                             "budget": None, "topology": "", "mode": ""}])
    (tmp_path / "m.png").write_bytes(b"\x89PNG an earlier run's")
    r = subprocess.run([sys.executable, "-m", "ddtree_compat", "report", str(path), "-o", str(tmp_path / "m.md"),
                        "--html", str(tmp_path / "m.html")], capture_output=True, text=True)
    assert r.returncode == 0 and not (tmp_path / "m.png").exists(), r.stderr
    assert "Results: `r.jsonl`" in (tmp_path / "m.md").read_text()
    assert "<code>r.jsonl</code>" in (tmp_path / "m.html").read_text()


def test_distribution_cells_get_their_law_test_table_only_when_a_cell_measured_one(tmp_path):
    """A sampling distribution cell's ``measured`` (statistic, dof, p-value, N, alpha) becomes a row of the collapsed
    *Distribution cells* section, in the Markdown and the page; results without one have no such section."""
    law = {"kernel": "tree_speculative_sampling@distribution", "backend": "sglang-cuda", "tier": "device",
           "arch": "sm90", "case_id": "tree-distribution-eagle-topk-b6-flat-bs65536-v8-rev", "mode": "distribution",
           "outcome": "wrong", "measured": {"statistic": 91.2345, "p_value": 1.23456e-9, "dof": 21, "rows": 65536,
                                            "alpha": 1e-6}}
    with_law = load([_run_file(tmp_path / "law.jsonl", [{}, law])])
    md = render_markdown(with_law)
    assert "<summary>Distribution cells (1: the law test of N rows; wrong when the p-value is below alpha)</summary>" in md
    assert ("| tree_speculative_sampling@distribution · sglang-cuda · sm90 | "
            "tree-distribution-eagle-topk-b6-flat-bs65536-v8-rev | wrong | 91.23 | 21 | 1.23e-09 | 65,536 | 1e-06 |") in md
    html = render_html(with_law, png=b"")
    assert "Distribution cells (1:" in html and '<td class="num">1.23e-09</td><td class="num">65,536</td>' in html
    without = load([_run_file(tmp_path / "plain.jsonl", [{}, {**law, "outcome": "pass", "measured": {}}])])
    assert "Distribution cells" not in render_markdown(without)
    assert "Distribution cells" not in render_html(without, png=b"")


def test_the_pictures_caption_names_only_the_kinds_of_cell_it_leaves_out(tmp_path):
    """The H200 run's graph cells have no budget: a picture of it names only what it lacks, never e2e tables a
    CPU or kernel-only report does not have."""
    from ddtree_compat.report.picture import pictured, undrawn_kinds

    def plant(tier):
        def edit(o):
            if o["kind"] == "result" and o["kernel"] == "move_kv" and o["backend"] == "sglang-torch":
                return {**o, "tier": tier, "budget": None, "topology": None}
            return o
        return edit
    whole = load([H200])
    assert undrawn_kinds(whole, pictured(whole)) == ""
    with_static = load([edited(H200, tmp_path / "s.jsonl", plant("static"))])
    assert undrawn_kinds(with_static, pictured(with_static)) == "static"
    e2e = {"tier": "e2e", "budget": None, "topology": None}
    both = load([edited(tmp_path / "s.jsonl", tmp_path / "b.jsonl",
                        lambda o: {**o, **e2e} if o.get("kernel") == "bonus_tokens" else o)])
    assert undrawn_kinds(both, pictured(both)) == "static and e2e"
