"""Preflight on the CPU: a configuration (a stand-in for what SGLang's ServerArgs resolves) in, the plan's cells
out; the verdict from given outcomes; model shapes from the public config.json fields of real models."""

import json
import sys
from pathlib import Path

import pytest

from ddtree_compat.preflight import launch
from ddtree_compat.preflight.launch import Serving, from_file, read_launch
from ddtree_compat.preflight.model import shape_of
from ddtree_compat.preflight.plan import make_plan
from ddtree_compat.preflight.verdict import FAIL, NOT_CHECKED, PASS, answers, exit_status, render
from ddtree_compat.results import ResultRecord

FIXTURES = Path(__file__).parent / "fixtures" / "models"
# config.json fields as the models publish them (values from their public model cards' config.json); the field's
# model (Qwen3.6-27B, the Qwen3.5-27B architecture) is a file: `preflight --model-path` reads its folder
QWEN36_27B = json.loads((FIXTURES / "qwen3.6-27b" / "config.json").read_text())
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936, "hidden_size": 4096,
            "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "max_position_embeddings": 40960, "torch_dtype": "bfloat16"}
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "vocab_size": 128256, "hidden_size": 4096,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
QWEN3_NEXT_80B = {"architectures": ["Qwen3NextForCausalLM"], "vocab_size": 151936, "hidden_size": 2048,
                  "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                  "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                  "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
                  "max_position_embeddings": 262144}


def field_serving(budget=8, attention="flashinfer", **more):
    """The field's configuration: DDTREE at block 16, --max-running-requests 256."""
    return Serving(("--speculative-algorithm", "DDTREE"), {
        "speculative_algorithm": "DDTREE", "speculative_ddtree_budget": budget, "speculative_ddtree_block_size": 16,
        "max_running_requests": 256, "attention_backend": attention, "page_size": 1, **more})


def test_model_shapes_of_real_configs():
    q = shape_of(QWEN36_27B)
    assert (q.vocab, q.heads, q.kv_heads, q.head_dim, q.hybrid) == (248320, 24, 4, 256, True)
    assert q.layer_types.count("full_attention") == 16 and q.layer_types[3] == "full_attention"
    assert (q.linear_key_heads, q.linear_value_heads, q.linear_key_dim, q.conv_kernel) == (16, 48, 128, 4)
    assert q.context == 262144 and shape_of(QWEN3_8B).context == 40960
    assert shape_of(QWEN3_NEXT_80B).hybrid
    assert not shape_of(QWEN3_8B).hybrid and shape_of(QWEN3_8B).head_dim == 128
    assert shape_of(LLAMA3_8B).head_dim == 128 and shape_of(LLAMA3_8B).vocab == 128256


def test_the_field_configuration_plans_capacity_cells_and_the_two_changes():
    plan = make_plan(field_serving(8), shape_of(QWEN36_27B), "sm120", has_ddtree=True, ddtree_name="impl-x")
    deployed, block, budget = plan.variants
    assert (deployed.budget, deployed.block_size, deployed.layout) == (8, 16, "cap16")
    assert (block.budget, block.block_size, block.layout, block.change) == (8, 9, "exact",
                                                                             "--speculative-ddtree-block-size 9")
    assert (budget.budget, budget.layout, budget.change) == (15, "exact", "--speculative-ddtree-budget 15")
    names = {c.name: c for c in plan.concerns}
    assert {"verify", "commit", "attention", "linear", "sampling", "ddtree", "static"} <= set(names)
    assert names["attention"].backends == ("flashinfer",) and names["static"].keyword == "static-sm120-"
    assert names["linear"].keyword == "b8-" and not names["deployment"].unchecked == ""
    cases = plan.verify_cases()
    assert {(c.budget, c.block_size, c.layout) for c in cases} == {(8, 16, "cap16"), (8, 9, "exact"),
                                                                  (15, 16, "exact")}
    assert {c.batch for c in cases} == {1, 3}  # the interpreter's batches here; a GPU's 1 / 3 / 8
    on_gpu = make_plan(field_serving(8), shape_of(QWEN36_27B), "sm120", device=True)
    assert on_gpu.batches == (1, 3, 8)


@pytest.mark.parametrize("budget", [15, 16, 32, 64])
def test_a_budget_whose_live_width_reaches_the_block_has_one_variant(budget):
    plan = make_plan(field_serving(budget), shape_of(QWEN3_8B), None, sampling=("greedy",))
    assert len(plan.variants) == 1 and plan.deployed.layout == "exact"
    names = {c.name: c for c in plan.concerns}
    assert "linear" not in names and "sampling" not in names and names["static"].unchecked
    assert names["ddtree"].unchecked.startswith("no DDTree build")


def test_eagle_plans_its_draft_tokens_and_top_k():
    s = Serving((), {"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 9,
                     "speculative_eagle_topk": 4, "max_running_requests": 2})
    plan = make_plan(s, shape_of(LLAMA3_8B), "sm90")
    assert plan.deployed.budget == 8 and plan.batches == (1, 2)
    assert "spine" in plan.topologies() and len(plan.topologies()) > 1
    assert all(c.topk_cap == 4 for c in plan.verify_cases())


def _row(test, kernel, budget, block, layout, outcome, backend="sglang-triton", case="c"):
    return ResultRecord(kernel, "interpret", backend, "interpret", case, outcome, budget=budget, block_size=block,
                        layout=layout, nodeid=f"tests/kernels/x.py::{test}[{case}]",
                        message="differs\nreplay: python -m ddtree_compat replay c" if outcome != "pass" else "")


def test_a_failure_suggests_only_the_changes_whose_cells_all_passed():
    plan = make_plan(field_serving(8), shape_of(QWEN3_8B), "sm120", sampling=("greedy",), has_ddtree=True)
    rows = [_row("test_verify_tree_greedy", "verify_tree_greedy", 8, 16, "cap16", "wrong"),
            _row("test_verify_tree_greedy", "verify_tree_greedy", 8, 16, "cap16", "pass"),
            _row("test_verify_tree_greedy", "verify_tree_greedy", 8, 9, "exact", "pass"),
            _row("test_verify_tree_greedy", "verify_tree_greedy", 15, 16, "exact", "pass"),
            _row("test_verify_tree_greedy", "verify_tree_greedy", 15, 16, "exact", "fault"),
            _row("test_commit_kernel", "move_kv", 8, 16, "cap16", "pass", case="b8-x-p1-kv"),
            _row("test_commit_kernel", "move_kv", 8, 16, "cap16", "wrong", case="b8-x-p16-kv"),
            _row("test_static", "verify_tree_greedy", None, None, "", "pass")]
    result = {a.concern.name: a for a in answers(plan, rows)}
    verify = result["verify"]
    assert verify.verdict == FAIL and "1 of 2 cells failed" in verify.why
    assert verify.replay == "python -m ddtree_compat replay c"
    assert verify.suggestions == ("--speculative-ddtree-block-size 9: 1 cells pass (budget 8, block size 9, live "
                                  "width 9 = capacity)",)  # budget 15 had a fault: not suggested
    assert result["commit"].verdict == PASS  # the page-16 failure is not this page size's
    assert result["static"].verdict == PASS
    assert result["attention"].verdict == NOT_CHECKED and result["deployment"].verdict == NOT_CHECKED
    assert exit_status(list(result.values())) == 1
    screen = render(plan, list(result.values()), ["configuration: ..."])
    assert "what would work: --speculative-ddtree-block-size 9" in screen and "FAIL" in screen


def test_nothing_checked_is_exit_3_and_skips_are_never_passes():
    plan = make_plan(field_serving(15), shape_of(QWEN3_8B), None, sampling=("greedy",))
    rows = [_row("test_verify_tree_greedy", "verify_tree_greedy", 15, 16, "exact", "skip")]
    result = answers(plan, rows)
    assert PASS not in {a.verdict for a in result} and exit_status(result) == 3


def test_launch_flags_go_through_a_stand_in_server_args(tmp_path):
    pkg = tmp_path / "sglang" / "srt"
    pkg.mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "server_args.py").write_text(
        "import argparse\n"
        "class ServerArgs:\n"
        "    def resolve_once(self):\n"
        "        self.attention_backend = self.attention_backend or 'triton'\n"
        "        self.page_size = self.page_size or 1\n"
        "def prepare_server_args(argv):\n"
        "    p = argparse.ArgumentParser()\n"
        "    p.add_argument('--model-path'); p.add_argument('--speculative-algorithm')\n"
        "    p.add_argument('--speculative-ddtree-budget', type=int)\n"
        "    p.add_argument('--attention-backend'); p.add_argument('--page-size', type=int)\n"
        "    sa = ServerArgs(); sa.__dict__.update(vars(p.parse_args(argv))); return sa\n")
    env = {"PYTHONPATH": str(tmp_path)}
    s = read_launch(["--model-path", "m", "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "12"],
                    python=sys.executable, env=env)
    assert (s.algorithm, s.budget, s.attention_backend, s.page_size, s.resolved) == ("DDTREE", 12, "triton", 1, True)
    with pytest.raises(launch.LaunchError, match="unrecognized arguments: --nope"):
        read_launch(["--nope"], env=env)
    (tmp_path / "sglang" / "srt" / "server_args.py").write_text(
        "def prepare_server_args(argv):\n    from sgl_kernel import fp8_blockwise_scaled_mm\n")
    with pytest.raises(launch.LaunchError, match=r"could not read the launch flags in this Python \((ModuleNotFound|"
                                                 r"Import)Error.*sgl_kernel.*the flags themselves were not judged"):
        read_launch(["--model-path", "m"], env=env)  # SGLang's own import, not a flag: never "rejected"
    (tmp_path / "sglang" / "srt" / "server_args.py").write_text("import torchvision_not_here\n")
    given = read_launch(["--model-path", "m", "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget=12",
                         "--disable-cuda-graph", "--cuda-graph-bs", "1", "2", "4", "--tp", "2"], env=env)
    assert (given.parsed, given.resolved, given.algorithm, given.budget, given.graphs) == (False, False, "DDTREE", 12,
                                                                                           False)
    assert given.fields["cuda_graph_bs"] == [1, 2, 4] and "tp" not in given.fields and given.page_size is None
    assert "torchvision_not_here" in given.unresolved and "no flag was judged" in given.unresolved
    (tmp_path / "sglang" / "srt" / "server_args.py").write_text("import sglang.srt.not_a_module\n")
    with pytest.raises(launch.LaunchError, match="no SGLang to read the launch flags with here"):
        read_launch(["--model-path", "m"], env=env)  # SGLang's own module missing: no SGLang to read them
    script = tmp_path / "serve.sh"
    script.write_text("python -m sglang.launch_server --model-path m \\\n  --speculative-ddtree-budget 8  # field\n")
    assert from_file(script) == ["--model-path", "m", "--speculative-ddtree-budget", "8"]


def test_a_model_config_file_is_read(tmp_path):
    from ddtree_compat.preflight.model import read_model

    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN36_27B))
    assert read_model("Qwen/Qwen3.6-27B", str(path)).vocab == 248320
    assert read_model(str(tmp_path)).hybrid
    with pytest.raises(launch.LaunchError, match="no local folder"):
        read_model("Qwen/Qwen3.6-27B")


def _by_kernel(plan):
    out = {}
    for c in plan.cells:
        if c.concern == "deployment":
            out.setdefault(c.case.kernel, []).append(c)
    return out


def test_deployment_cells_sit_at_the_configuration_s_batch_and_around_each_limit():
    from ddtree_compat.families.scale import boundaries as bd

    plan = make_plan(field_serving(8), shape_of(QWEN36_27B), "sm120", has_ddtree=True, ddtree_name="impl-x",
                     device=True)
    cells = _by_kernel(plan)
    # flashinfer serves: no FlashAttention metadata kernels; T = 1 samples: DDTree's own sampler
    assert set(cells) == {"verify_tree_greedy", "assign_req_to_token", "move_kv", "ddtree_sample", "ddtree_build",
                          "ddtree_prune", "ddtree_follow", "ddtree_compile"}
    for kernel, cs in cells.items():
        deployed = [c.case for c in cs if c.case.boundary == "deployed"]
        assert len(deployed) == 1 and deployed[0].batch == 256, kernel
        axes = bd.KERNELS[kernel].axes
        assert all(c.case.vocab == (248320 if "vocab" in axes else 0) for c in cs)
        assert all(c.case.context == (262144 if "context" in axes else 0) for c in cs)  # max_position_embeddings
        assert all(c.case.budget == (8 if "budget" in axes else 0) for c in cs)
    sample = sorted(c.case.batch for c in cells["ddtree_sample"])
    per = 9 * 248320  # target_probs [bs, B + 1, V]
    below31, above31 = (c.case.batch for c in cells["ddtree_sample"] if "2^31" in c.why)
    assert per * below31 - 1 < 2 ** 31 <= per * above31 - 1 and above31 == below31 + 1
    assert sample[0] == 256 and len(sample) == 5  # the deployed batch and both sides of 2^31 and 2^32
    deployment = {c.name: c for c in plan.concerns}["deployment"]
    assert deployment.unchecked == "" and {c.concern for c in plan.own_cells()} == {"geometry", "deployment"}


def test_deployment_cells_need_a_gpu_and_say_what_would_run():
    plan = make_plan(field_serving(8), shape_of(QWEN36_27B), "sm120", has_ddtree=True)
    deployment = {c.name: c for c in plan.concerns}["deployment"]
    assert deployment.unchecked.startswith("needs a GPU: would run ")
    assert "--max-running-requests 256 x vocabulary 248320 x context 262144" in deployment.unchecked
    assert {c.concern for c in plan.own_cells()} == {"geometry"}  # the deployment cells are planned, not run


@pytest.mark.parametrize("algorithm,more,sampling,expected", [
    ("EAGLE", {"speculative_num_draft_tokens": 9, "speculative_eagle_topk": 4}, ("T=1",), "tree_speculative_sampling"),
    ("DFLASH", {"speculative_dflash_block_size": 16}, ("T=1",), "chain_speculative_sampling"),
    ("EAGLE", {"speculative_num_draft_tokens": 9}, ("greedy",), None),
])
def test_the_samplers_deployment_shapes_follow_the_drafter_and_the_sampling(algorithm, more, sampling, expected):
    s = Serving((), {"speculative_algorithm": algorithm, "max_running_requests": 64, **more})
    kernels = set(_by_kernel(make_plan(s, shape_of(QWEN3_8B), "sm90", sampling=sampling, device=True)))
    samplers = kernels & {"tree_speculative_sampling", "chain_speculative_sampling", "ddtree_sample"}
    assert samplers == ({expected} if expected else set())
    assert {"verify_tree_greedy", "assign_req_to_token", "move_kv"} <= kernels


def test_context_length_and_a_large_batch_shape_the_deployment_cells():
    s = field_serving(15, attention="fa3", context_length=32768, max_running_requests=6000)
    cells = _by_kernel(make_plan(s, shape_of(QWEN36_27B), "sm120", sampling=("greedy",), has_ddtree=True,
                                 device=True))
    assert {"ddtree_fa_full", "ddtree_fa_suffix"} <= set(cells)  # FA3 serves: its metadata kernels
    r2t = sorted(c.case.batch for c in cells["assign_req_to_token"])
    assert all(c.case.context == 32768 for c in cells["assign_req_to_token"])
    assert 6000 in r2t and max(r2t) > 4096  # boundaries up to --max-running-requests past the family's range
    none = Serving((), {"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 8,
                        "speculative_ddtree_block_size": 16})
    cells = _by_kernel(make_plan(none, shape_of(QWEN3_8B), "sm90", sampling=("greedy",), device=True))
    assert not any(c.case.boundary == "deployed" for cs in cells.values() for c in cs)
    assert {c.case.context for c in cells["move_kv"]} == {40960}


@pytest.mark.parametrize("config,heads,group,head_dim", [(QWEN36_27B, 24, 6, 256), (QWEN3_8B, 32, 4, 128),
                                                         (LLAMA3_8B, 32, 4, 128), (QWEN3_NEXT_80B, 16, 8, 256)])
def test_geometry_cells_carry_the_model_s_heads_on_every_variant(config, heads, group, head_dim):
    plan = make_plan(field_serving(8), shape_of(config), "sm120", sampling=("greedy",), has_ddtree=True)
    geometry = [c.case for c in plan.cells if c.concern == "geometry"]
    assert {(c.heads, c.group, c.head_dim) for c in geometry} == {(heads, group, head_dim)}
    assert {(c.verify.budget, c.verify.block_size, c.verify.layout) for c in geometry} == {
        (8, 16, "cap16"), (8, 9, "exact"), (15, 16, "exact")}
    assert {c.tiles for c in geometry} == {"native", "sm120"} and {c.page_size for c in geometry} == {1}
    assert {(c.dtype, c.prefix) for c in geometry} == {("fp16", 17)}  # the interpreter here: no bf16
    assert all(c.padding == ("nodes" if c.verify.layout == "cap16" else "") for c in geometry)
    assert len(geometry) == 3 * 2 and {c.verify.topology for c in geometry} == {"random"}  # one tree here
    on_gpu = make_plan(field_serving(8), shape_of(config), "sm120", sampling=("greedy",), device=True)
    gpu_cells = [c.case for c in on_gpu.cells if c.concern == "geometry"]
    assert {(c.dtype, c.prefix) for c in gpu_cells} == {("bf16", 1000)}
    assert len(gpu_cells) == 3 * 2 * 2 and {c.verify.topology for c in gpu_cells} == {"spine", "random"}
    names = {c.name: c for c in plan.concerns}
    assert names["geometry"].backends == ("flashinfer",) and f"{heads} query" in names["geometry"].title


def test_the_sweep_expression_narrows_attention_and_static_to_what_serves():
    plan = make_plan(field_serving(8), shape_of(QWEN3_8B), "sm120", sampling=("greedy",), has_ddtree=True)
    k = plan.keyword_expression()
    assert k.endswith("and not -oracle-") and "geometry" not in k and "deployment" not in k
    assert "((test_verify_attention) and -none-bs and (native or emulated-sm120) and (-flashinfer-))" in k
    assert "not -sglang-triton-verify_attention-" in k and "not -flashinfer-verify_attention-" not in k
    assert "not -tree_speculative_sampling-" in k and "not -gdn_verify_tree-" in k  # greedy; no linear layers
    hybrid = make_plan(field_serving(8, attention=None), shape_of(QWEN36_27B), "sm120", sampling=("T=1",))
    k = hybrid.keyword_expression()
    assert "-verify_attention-" not in k and "-gdn_verify_tree-" not in k  # backend not known: every one's
    assert "not -gdn_verify_chain-ring-" in k  # SGLang's CuTe DSL fold: ReplaySSM is off here


def _scale_row(kernel, batch, outcome, backend="sglang-triton"):
    return ResultRecord(kernel + "@scale", "device", backend, "sm120", f"{kernel}-bs{batch}", outcome, batch=batch,
                        shape="ctx262144", nodeid=f"preflight::deployment[{kernel}-bs{batch}]",
                        message="" if outcome == "pass" else "row 1 differs")


def test_a_deployment_failure_suggests_the_largest_batch_every_failing_kernel_passed():
    plan = make_plan(field_serving(8), shape_of(QWEN36_27B), "sm120", sampling=("greedy",), device=True)
    rows = [_scale_row("move_kv", 1, "pass"), _scale_row("move_kv", 2, "pass"), _scale_row("move_kv", 256, "fault"),
            _scale_row("assign_req_to_token", 256, "pass"), _scale_row("assign_req_to_token", 2047, "pass"),
            _scale_row("verify_tree_greedy", 256, "skip")]
    deployment = {a.concern.name: a for a in answers(plan, rows)}["deployment"]
    assert deployment.verdict == FAIL and "1 of 5 cells failed" in deployment.why
    assert deployment.suggestions == ("--max-running-requests 2: every failing kernel passed there (move_kv on "
                                      "sglang-triton: 2 passes, 256 fails)",)
    unsafe = [_scale_row("move_kv", 256, "wrong"), _scale_row("move_kv", 512, "pass")]
    assert {a.concern.name: a for a in answers(plan, unsafe)}["deployment"].suggestions == ()


def test_a_failure_above_the_configured_batch_is_a_limit_not_a_failure():
    """The field's configuration serves at most 256 requests at once: a boundary batch of 1921 that faults (H100,
    2026-12-07: a DDTree tree's sampler past 2^32 elements) says how far the setting may be raised; the line passes."""
    plan = make_plan(field_serving(8), shape_of(QWEN36_27B), "sm120", sampling=("greedy",), device=True)
    assert plan.max_running_requests == 256
    rows = [_scale_row("ddtree_sample", 256, "pass"), _scale_row("ddtree_sample", 961, "pass"),
            _scale_row("ddtree_sample", 1921, "fault"), _scale_row("move_kv", 256, "pass")]
    deployment = {a.concern.name: a for a in answers(plan, rows)}["deployment"]
    assert deployment.verdict == PASS and deployment.why.startswith("3 cells pass")
    assert deployment.limits[0].startswith("raise --max-running-requests no further than 961 (ddtree_sample on "
                                           "sglang-triton: 961 passes, 1921 fails); first failure above 256: ")
    assert "limit: raise --max-running-requests no further than 961" in render(plan, answers(plan, rows), [])
    within = rows + [_scale_row("move_kv", 255, "wrong")]
    assert {a.concern.name: a for a in answers(plan, within)}["deployment"].verdict == FAIL


def test_geometry_cells_are_judged_per_variant_layout():
    plan = make_plan(field_serving(8), shape_of(QWEN36_27B), "sm120", sampling=("greedy",))

    def row(cell, outcome):
        c = cell.case
        return ResultRecord(c.kernel, "interpret", "flashinfer", "interpret", c.id, outcome, **c.coordinates(),
                            nodeid=f"preflight::geometry[{c.id}]")

    cells = [c for c in plan.cells if c.concern == "geometry"]
    rows = [row(c, "wrong" if c.case.verify.layout == "cap16" else "pass") for c in cells]
    geometry = {a.concern.name: a for a in answers(plan, rows)}["geometry"]
    assert geometry.verdict == FAIL and len(geometry.suggestions) == 2
    assert geometry.suggestions[0].startswith("--speculative-ddtree-block-size 9: ")


def test_own_cells_run_in_a_child_and_append_their_lines(tmp_path):
    from ddtree_compat.preflight.cells import run_cells
    from ddtree_compat.results import load

    tiny = {"architectures": ["LlamaForCausalLM"], "vocab_size": 1000, "hidden_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16}
    s = Serving((), {"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 4, "max_running_requests": 1,
                     "attention_backend": "triton", "page_size": 1})
    plan = make_plan(s, shape_of(tiny), None, sampling=("greedy",))
    (cell,) = [c for c in plan.own_cells()]
    results = tmp_path / "r.jsonl"
    with open(tmp_path / "log", "w") as log:
        assert run_cells([(cell, ("sglang-triton",))], results, log, str(tmp_path)) == 1
    (record,) = load([results]).records
    assert record.nodeid == f"preflight::geometry[{cell.case.id}]" and record.backend == "sglang-triton"
    assert record.outcome == "pass", record.message
    geometry = {a.concern.name: a for a in answers(plan, [record])}["geometry"]
    assert geometry.verdict == PASS


def test_the_preflight_benchmark_reads_its_runs_back(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("preflight_bench", Path(__file__).resolve().parents[2]
                                                  / "benchmarks" / "preflight.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(row) + "\n" for row in [
        {"kind": "env"}, {"kind": "result", "outcome": "pass"}, {"kind": "result", "outcome": "skip"}]))
    assert bench.cells(results) == (2, 1) and bench.cells(None) == (0, 0)
    assert bench.summary(0, ["PASS", "NOT CHECKED", "PASS"], "") == "exit 0: 2 PASS, 1 NOT CHECKED"
    assert bench.summary(2, [], "error: SGLang rejected the launch flags") == \
        "exit 2: error: SGLang rejected the launch flags"
    assert bench.MODEL.joinpath("config.json").exists() and set(bench.CONFIGS) >= {"eagle-flashinfer", "ddtree-b8"}


def test_the_replica_mirrors_the_speculative_flags_and_says_what_it_cannot(monkeypatch, tmp_path):
    from ddtree_compat.e2e import configs
    from ddtree_compat.e2e.replica import ENV, Replica

    argv = ("--model-path", "m", "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "8",
            "--is-ddtree-prune", "--page-size", "1", "--speculative-ddtree-cuda-graph-buckets", "16", "32",
            "--tp", "2", "--mem-fraction-static", "0.8")
    serving = Serving(argv, {**field_serving().fields, "tp_size": 2})
    plan = make_plan(serving, shape_of(QWEN36_27B), "sm90", device=True)
    rep = plan.replica
    assert (rep.algorithm, rep.budget, rep.block_size, rep.attention, rep.cuda_graph) == ("DDTREE", 8, 16,
                                                                                        "flashinfer", True)
    assert rep.flags == ("--is-ddtree-prune", "--page-size=1")  # the server's own sizes (memory, ports) are not passed
    assert (rep.vocab, rep.hybrid, rep.concurrency, rep.temperatures) == (248320, True, (1, 4, 256), (0.0, 1.0))
    said = " | ".join(rep.not_mirrored)
    for part in ("head geometry", "24 / 4 x 256", "draft checkpoint", "--tp 2",
                 "--speculative-ddtree-cuda-graph-buckets 16 32 (a flag of several values)"):
        assert part in said, said
    monkeypatch.setenv(ENV, str(rep.save(tmp_path / "replica.json")))
    assert Replica.load(tmp_path / "replica.json") == rep
    servers = configs.plan("replica", configs.shape_for("replica"))
    assert [c.id for c in servers] == ["target", "replica-ddtree-b8-spine-always-graph-attn-flashinfer",
                                       "replica-ddtree-b8-spine-always-graph-t1-attn-flashinfer"]
    assert configs.shape_for("replica").served_vocab == 248320 and configs.shape_for("replica").hybrid
    greedy, sampled = servers[1:]
    assert max(p.concurrency for p in greedy.phases) == 256 and sampled.distribution
    assert "--page-size=1" in greedy.flags and greedy.budget == 8


def test_the_e2e_line_needs_a_gpu_and_a_drafter_the_replica_has():
    cpu = {c.name: c for c in make_plan(field_serving(), shape_of(QWEN36_27B), "sm120").concerns}["e2e"]
    assert cpu.unchecked.startswith("needs a GPU: would serve DDTREE on a hybrid target of vocabulary 248320")
    gpu = {c.name: c for c in make_plan(field_serving(), shape_of(QWEN36_27B), "sm90", device=True).concerns}["e2e"]
    assert not gpu.unchecked and gpu.tests == ("test_serve",) and "not mirrored: head geometry" in gpu.note
    wheel = {c.name: c for c in make_plan(field_serving(), shape_of(QWEN36_27B), "sm90", device=True,
                                          e2e_tests=False).concerns}["e2e"]
    assert "tests/e2e/test_serve.py" in wheel.unchecked
    eagle3 = Serving(("x",), {"speculative_algorithm": "EAGLE3", "speculative_num_draft_tokens": 4})
    other = {c.name: c for c in make_plan(eagle3, shape_of(QWEN3_8B), "sm90", device=True).concerns}["e2e"]
    assert other.unchecked.startswith("no replica: --speculative-algorithm EAGLE3")


def test_a_replica_cell_that_fails_is_the_e2e_line_s_fail_with_its_replay():
    plan = make_plan(field_serving(), shape_of(QWEN36_27B), "sm90", device=True)
    node = "tests/e2e/test_serve.py::test_serve[sm90-replica-ddtree-b8-spine-always-graph-attn-flashinfer-c4]"
    records = [ResultRecord(nodeid=node.replace("-c4]", "-bs1]"), kernel="e2e", backend="sglang", case_id="bs1", tier="e2e", arch="sm90",
                            outcome="pass"),
               ResultRecord(nodeid=node, kernel="e2e", backend="sglang", case_id="c4", tier="e2e", arch="sm90", outcome="zero-accept",
                            message="accept length 1.00, expected 9.00")]
    env = "DDTREE_E2E_PROFILE=replica DDTREE_E2E_REPLICA=/r/replica.json"
    e2e = {a.concern.name: a for a in answers(plan, records, env)}["e2e"]
    assert e2e.verdict == FAIL and "1 of 2 cells failed" in e2e.why
    assert e2e.first_failure.startswith("e2e · sglang · c4: zero-accept: accept length 1.00")
    assert e2e.replay == f"{env} python -m pytest '{node}'"


def test_a_linear_deployment_case_beyond_the_configured_batch_is_a_limit():
    plan = make_plan(field_serving(budget=15, max_running_requests=128), shape_of(QWEN36_27B), "sm90", device=True)
    node = "tests/kernels/test_linear_attention.py::test_linear_attention[sm90-t-gdn_verify_tree-{}]"
    case = "b15-spine-deep-bs2-h16v48d128w4-sfp32-iobf16-rows{}"

    def rec(rows, outcome):
        return ResultRecord(nodeid=node.format(case.format(rows)), kernel="gdn_verify_tree", backend="t",
                            case_id=case.format(rows), tier="device", arch="sm90", outcome=outcome, budget=15)

    linear = {a.concern.name: a for a in answers(plan, [rec(170, "pass"), rec(172, "fault")])}["linear"]
    assert linear.verdict == PASS and linear.limits[0].startswith(
        "1 cells of verifies of more than --max-running-requests 128 requests fail; first: gdn_verify_tree · t · "), linear
    wide = make_plan(field_serving(budget=15, max_running_requests=256), shape_of(QWEN36_27B), "sm90", device=True)
    assert {a.concern.name: a for a in answers(wide, [rec(170, "pass"), rec(172, "fault")])}["linear"].verdict == FAIL


def test_ddtree_inside_the_dflash_worker_is_its_own_replica(monkeypatch, tmp_path):
    from ddtree_compat.e2e import configs
    from ddtree_compat.e2e.replica import ENV

    serving = Serving(("--speculative-algorithm", "DFLASH", "--speculative-dflash-enable-ddtree",
                       "--speculative-dflash-block-size", "16"),
                      {"speculative_algorithm": "DFLASH", "speculative_dflash_enable_ddtree": True,
                       "speculative_dflash_block_size": 16, "max_running_requests": 4, "disable_cuda_graph": True})
    rep = make_plan(serving, shape_of(QWEN3_8B), "sm90", sampling=("greedy",), device=True).replica
    assert (rep.algorithm, rep.ddtree_in_dflash, rep.flags, rep.block_size) == ("DFLASH", True, (), 16)
    monkeypatch.setenv(ENV, str(rep.save(tmp_path / "r.json")))
    servers = configs.plan("replica", configs.shape_for("replica"))
    assert [c.id for c in servers] == ["target", "replica-dflash-ddtree-n16-always-eager-attn-default"]
    assert servers[1].dflash_ddtree and servers[1].flags == ("--speculative-dflash-enable-ddtree",)


def test_a_test_file_the_sweep_could_not_collect_is_named_on_the_lines_it_empties():
    """On a host lacking one of the suite's own dependencies, the DDTree and sampling test files failed to collect:
    their lines name the file and the import error, not "no cell of it exists"; lines of other files are untouched."""
    plan = make_plan(field_serving(8), shape_of(QWEN36_27B), "sm90", sampling=("greedy", "temperature=1"),
                     has_ddtree=True, ddtree_name="rancy-ddtree-v2")
    rows = [_row("test_verify_tree_greedy", "verify_tree_greedy", 8, 16, "cap16", "pass")]
    error = "ModuleNotFoundError: No module named 'covertable'"
    lost = [("tests/kernels/test_ddtree.py", error), ("tests/kernels/test_sampling.py", error)]
    result = {a.concern.name: a for a in answers(plan, rows, collect_errors=lost)}
    assert result["ddtree"].verdict == NOT_CHECKED
    assert result["ddtree"].why == (f"the suite could not collect tests/kernels/test_ddtree.py ({error}): none of its "
                                    "cells ran")
    assert result["sampling"].verdict == NOT_CHECKED and "tests/kernels/test_sampling.py" in result["sampling"].why
    assert result["verify"].verdict == PASS
    assert "could not collect" not in result["attention"].why  # its file was collected: its own reason stands


def test_the_e2e_line_passes_only_when_the_configuration_s_own_servers_answered():
    """On the H100 the DFLASH replica of dbguo-ddtree-dev was stopped at its time limit after the target-only
    reference had passed 3 cells: that is NOT CHECKED, never PASS. A finished replica whose speculative servers
    passed is a PASS."""
    plan = make_plan(field_serving(), shape_of(QWEN36_27B), "sm90", device=True)
    node = "tests/e2e/test_serve.py::test_serve[sm90-{}]"

    def cell(name, backend):
        return ResultRecord(nodeid=node.format(name), kernel="generate", backend=backend, case_id=name, tier="e2e",
                            arch="sm90", outcome="pass")

    reference = [cell(f"target-{c}", "sglang-target@dbguo-ddtree-dev") for c in ("bs1", "c4", "c256")]
    stop = "the replica stopped after 100 s (DDTREE_PREFLIGHT_E2E_S) before every cell ran"
    stopped = {a.concern.name: a for a in answers(plan, reference, replica_stop=stop)}["e2e"]
    assert stopped.verdict == NOT_CHECKED
    assert stopped.why == f"{stop}: 0 cells of its speculative servers and 3 of the target-only reference passed"
    alone = {a.concern.name: a for a in answers(plan, reference)}["e2e"]
    assert alone.verdict == NOT_CHECKED and alone.why.startswith("no cell of the configuration's speculative servers")
    served = reference + [cell("replica-ddtree-b8-spine-always-graph-attn-flashinfer-bs1", "sglang-ddtree@x")]
    assert {a.concern.name: a for a in answers(plan, served)}["e2e"].verdict == PASS


def test_the_ddtree_line_reads_only_the_build_s_kernels_this_configuration_runs():
    """On the H100 rancy-ddtree-v2's DDTree line failed at budget 12 on its prune buckets and FA-metadata kernel
    (known issues): neither runs under FlashInfer attention without pruning. The line reads what serves."""
    greedy = make_plan(field_serving(12, is_ddtree_prune=False), shape_of(QWEN36_27B), "sm90", sampling=("greedy",),
                       has_ddtree=True, ddtree_name="rancy-ddtree-v2", device=True)
    expr = {c.name: c for c in greedy.concerns}["ddtree"].expression()
    assert expr == ("((test_ddtree_kernel or test_ddtree_round_in_one_cuda_graph) and b12 and not ddtree_fa_ and "
                    "not -ddtree_prune- and not -prune- and not ddtree_sample)")
    sampled = make_plan(field_serving(12, attention="fa3", is_ddtree_prune=True), shape_of(QWEN36_27B), "sm90",
                        sampling=("temperature=1",), has_ddtree=True, ddtree_name="rancy-ddtree-v2")
    assert {c.name: c for c in sampled.concerns}["ddtree"].expression() == (
        "((test_ddtree_kernel or test_ddtree_round_in_one_cuda_graph) and b12)")
    deployed = {c.record.split("@")[0] for c in greedy.own_cells()}
    assert "ddtree_build" in deployed and "ddtree_prune" not in deployed
