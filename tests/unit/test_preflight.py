"""Preflight on the CPU: a configuration (a stand-in for what SGLang's ServerArgs resolves) in, the plan's cells
out; the verdict from given outcomes; model shapes from the public config.json fields of real models."""

import json
import sys

import pytest

from ddtree_compat.preflight import launch
from ddtree_compat.preflight.launch import Serving, from_file, read_launch
from ddtree_compat.preflight.model import shape_of
from ddtree_compat.preflight.plan import make_plan
from ddtree_compat.preflight.verdict import FAIL, NOT_CHECKED, PASS, answers, exit_status, render
from ddtree_compat.results import ResultRecord

# config.json fields as the models publish them (values from their public model cards' config.json)
QWEN36_27B = {"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": {
    "vocab_size": 248320, "hidden_size": 5120, "num_hidden_layers": 64, "num_attention_heads": 24,
    "num_key_value_heads": 4, "head_dim": 256, "full_attention_interval": 4, "linear_num_key_heads": 16,
    "linear_num_value_heads": 48, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4, "torch_dtype": "bfloat16"}}
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936, "hidden_size": 4096,
            "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "torch_dtype": "bfloat16"}
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "vocab_size": 128256, "hidden_size": 4096,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "torch_dtype": "bfloat16"}
QWEN3_NEXT_80B = {"architectures": ["Qwen3NextForCausalLM"], "vocab_size": 151936, "hidden_size": 2048,
                  "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                  "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                  "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}


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
    assert {c.batch for c in cases} == {1, 3, 8}


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
