"""The e2e ``scale`` profile's checkpoints and plan: the tiny target padded to the field's vocabulary (248320 rows of
embedding and ``lm_head``, the padding zero) keeps its greedy function and its drafts their agreement, and the plan
serves a few hundred requests at once with ``--max-running-requests`` raised to them."""

from __future__ import annotations

import pytest
import torch

from ddtree_compat.e2e import checkpoints as ck
from ddtree_compat.e2e.configs import PROFILES, SCALE_CONCURRENCY, SCALE_SHAPE, plan, prompt, shape_for
from ddtree_compat.e2e.forward import CausalLM


def test_the_scale_shape_serves_the_field_vocabulary_with_the_same_code():
    assert SCALE_SHAPE.served_vocab == ck.REAL_VOCAB == 248320
    assert SCALE_SHAPE.vocab == ck.TinyShape().vocab and shape_for("scale") is SCALE_SHAPE
    assert shape_for("default") == ck.TinyShape() and "scale" in PROFILES


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale-ckpt")
    target = ck.write_target(root, SCALE_SHAPE)
    from ddtree_compat.e2e.drafts import write_draft

    eagle = write_draft(root, ck.DraftSpec(ck.EAGLE, ck.ALWAYS), SCALE_SHAPE)
    return target, eagle


def test_the_padded_checkpoint_has_zero_rows_past_the_code(written):
    target, _ = written
    cfg, t = ck.load_checkpoint(target)
    assert cfg["vocab_size"] == 248320
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        assert t[name].shape[0] == 248320
        assert not t[name][SCALE_SHAPE.vocab:].any()
    small = ck.target_tensors(ck.TinyShape())
    assert torch.equal(t["lm_head.weight"][:SCALE_SHAPE.vocab], small["lm_head.weight"].to(t["lm_head.weight"].dtype))


def test_greedy_is_still_the_successor_and_no_padding_token_ever_wins(written):
    target, _ = written
    lm = CausalLM(target, torch.float32)
    for j in (0, 5, 13):
        p = list(prompt(j, SCALE_SHAPE.vocab))
        out = lm.greedy(p, 3)
        assert out == [ck.succ(p[-1] + i, SCALE_SHAPE.vocab) for i in range(3)]
        logits = lm.logits(p)[-1]
        assert float(logits[SCALE_SHAPE.vocab:].abs().max()) == 0.0 < float(logits.max())


def test_the_plan_raises_concurrency_to_a_few_hundred_requests():
    configs = plan("scale", SCALE_SHAPE)
    assert configs[0].id == "target"
    assert {c.max_batch for c in configs} == {max(SCALE_CONCURRENCY)} == {512}
    algos = {(c.algorithm, c.budget, c.sampling is not None) for c in configs[1:]}
    assert ("DDTREE", 16, False) in algos and ("DDTREE", 64, False) in algos and ("DDTREE", 16, True) in algos
    from ddtree_compat.e2e.configs import DFLASH_ENABLE_DDTREE

    assert any(DFLASH_ENABLE_DDTREE in c.flags for c in configs)  # dbguo-ddtree-dev's DDTree (session z)
    assert all(c.attention == "default" for c in configs[1:])  # SGLang's own attention choice
    greedy_judged = [c for c in configs if c.sampling is None or c.sampling.top_p < 1.0]
    assert all(not c.distribution for c in greedy_judged)  # top-p 0.5 leaves the successor alone: judged as greedy


def test_the_servers_hold_every_request_of_their_largest_phase_and_capture_graphs_up_to_the_cap():
    """Without a pool large enough the scheduler would queue the phase (a few requests at a time, not hundreds);
    the captured decode batches reach the cap (past it, eager) and the other profiles' servers are unchanged."""
    from ddtree_compat.e2e.command import server_args
    from ddtree_compat.e2e.configs import CAPTURED_BS, GRAPH_BS_CAP, graph_batch_sizes, kv_tokens
    from ddtree_compat.e2e.probe import Capabilities

    for c in plan("scale", SCALE_SHAPE)[1:]:
        longest = max(len(r.prompt) + r.max_new_tokens for p in c.phases for r in p.requests)
        assert kv_tokens(c) >= 512 * (longest + (c.budget or c.draft_tokens) + 1)
        if c.cuda_graph:
            assert graph_batch_sizes(c) == (1, 2, 4, 8, 16, 32, 64, 128, 256) and max(graph_batch_sizes(c)) == GRAPH_BS_CAP
    for profile in ("default", "ddtree", "sampling"):
        for c in plan(profile):
            assert kv_tokens(c) <= 16384 and graph_batch_sizes(c) == CAPTURED_BS
    c = next(c for c in plan("scale", SCALE_SHAPE) if c.budget == 64)
    caps = Capabilities("0.5.23", ("--max-running-requests", "--cuda-graph-max-bs", "--cuda-graph-bs",
                                   "--max-total-tokens"), ("DDTREE",), {})
    args = server_args(c, caps, "/t", "/d")
    assert args[args.index("--max-total-tokens") + 1] == str(kv_tokens(c))
    assert args[args.index("--max-running-requests") + 1] == "512"
    assert args[args.index("--cuda-graph-max-bs") + 1] == "256"


def test_the_scale_profile_samples_at_temperature_1_with_as_many_clients_as_its_largest_phase():
    from ddtree_compat.e2e.configs import LAW_MIN_TOKENS

    law = [c for c in plan("scale", SCALE_SHAPE) if c.distribution]
    assert {(c.algorithm, c.sampling.tag) for c in law} == {("DDTREE", "t1"), ("DFLASH", "t1")}
    for c in law:
        (phase,) = c.phases
        assert phase.concurrency == len(phase.requests) == 512
        assert all(r.max_new_tokens >= LAW_MIN_TOKENS for r in phase.requests)
    small = [c for c in plan("sampling") if c.distribution]
    assert {len(c.phases[0].requests) for c in small} == {8}  # the other profiles' law cells are unchanged
