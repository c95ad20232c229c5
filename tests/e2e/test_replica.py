"""Preflight's ``e2e`` line end to end on the CPU: the ``replica`` profile (``ddtree_compat/e2e/replica.py``) served
by stand-in servers (``fake_sglang.py``) in a real pytest session, and the line's verdict read from its result lines:
an honest server passes, one that accepts no draft (the field symptom) is the line's FAIL with its replay."""

import json

from ddtree_compat.e2e.replica import Replica
from ddtree_compat.preflight.launch import Serving
from ddtree_compat.preflight.model import ModelShape
from ddtree_compat.preflight.plan import make_plan
from ddtree_compat.preflight.verdict import FAIL, PASS, answers
from ddtree_compat.results import load
from tests.e2e.test_session import TEST, use_stand_in_servers

FIELD = Serving(("--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "8", "--disable-cuda-graph"), {
    "speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 8, "speculative_ddtree_block_size": 16,
    "attention_backend": "triton", "max_running_requests": 4, "page_size": 1, "disable_cuda_graph": True})
MODEL = ModelShape("Qwen3ForCausalLM", vocab=512, heads=2, kv_heads=2, head_dim=64, layer_types=("full_attention",) * 4)


def _serve(pytester, monkeypatch, replica: Replica, modes: str = ""):
    use_stand_in_servers(monkeypatch, "120", DDTREE_E2E_PROFILE="replica",
                         DDTREE_E2E_REPLICA=str(replica.save(pytester.path / "replica.json")),
                         **({"FAKE_SGLANG_MODES": modes} if modes else {}))
    pytester.makepyfile(test_serve=TEST)
    results = pytester.path / "e2e.jsonl"
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-static=off", "-m", "e2e",
                                  "--ddtree-results", str(results), "--ddtree-e2e-dir", str(pytester.path / "e2e"))
    return results


def test_the_replica_serves_the_configuration_and_the_e2e_line_reads_it(pytester, monkeypatch):
    plan = make_plan(FIELD, MODEL, "sm90", sampling=("greedy",), device=True)
    assert plan.replica.concurrency == (1, 4) and not plan.replica.cuda_graph
    results = _serve(pytester, monkeypatch, plan.replica)
    records = load([results]).records
    ids = sorted(r.case_id for r in records)
    assert ids == ["replica-ddtree-b8-spine-always-eager-attn-triton-bs1",
                   "replica-ddtree-b8-spine-always-eager-attn-triton-c4", "target-bs1", "target-c4"], ids
    e2e = {a.concern.name: a for a in answers(plan, records)}["e2e"]
    assert e2e.verdict == PASS and e2e.why.startswith("4 cells pass"), e2e.why


def test_a_replica_that_accepts_no_draft_is_the_e2e_line_s_fail(pytester, monkeypatch):
    plan = make_plan(FIELD, MODEL, "sm90", sampling=("greedy",), device=True)
    results = _serve(pytester, monkeypatch, plan.replica, "dflash-b16-always=zero-accept")
    env = f"DDTREE_E2E_PROFILE=replica DDTREE_E2E_REPLICA={pytester.path / 'replica.json'}"
    e2e = {a.concern.name: a for a in answers(plan, load([results]).records, env)}["e2e"]
    assert e2e.verdict == FAIL and "2 of 4 cells failed" in e2e.why, e2e.why
    assert ": zero-accept" in e2e.first_failure
    assert e2e.replay.startswith(env + " ") and "replica-ddtree-b8-spine-always-eager" in e2e.replay
    assert json.loads((pytester.path / "replica.json").read_text())["algorithm"] == "DDTREE"
