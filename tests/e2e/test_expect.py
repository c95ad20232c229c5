"""The acceptance simulation and the profiles' plans (pure functions; CPU)."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddtree_compat.e2e import checkpoints as ck
from ddtree_compat.e2e.configs import DDTREE, SWEEP_BUDGETS, baseline_requests, chain_prompt, plan, prompt
from ddtree_compat.e2e.expect import RequestPlan, aligned_accept, chain_accepts, expect_request
from ddtree_compat.e2e.session import cells

V = 512


def test_always_accepts_the_whole_chain():
    e = expect_request(RequestPlan((3, 7), 1 + 6 * 9), V, chain_accepts(ck.ALWAYS, 8, V), 8)
    assert e.output_ids == list(range(8, 8 + 55))
    assert e.round_accepts == [9] * 6 and e.phantom_accept == 9 and e.overshoot == 0
    assert (e.verify_ct, e.correct_drafts, e.accept_length, e.accept_rate) == (6, 48, Fraction(55, 6), 1)


def test_never_accepts_nothing():
    e = expect_request(RequestPlan((7,), 25), V, chain_accepts(ck.NEVER, 8, V), 8)
    assert e.round_accepts == [1] * 24 and e.correct_drafts == 0 and e.accept_rate == 0
    assert e.accept_length == Fraction(25, 24)


def test_mod4_aligned_and_unaligned():
    acc = chain_accepts(ck.agreement("mod4"), 8, V)
    aligned = expect_request(RequestPlan((7,), 25), V, acc, 8)  # first root 8 = 0 mod 4
    assert aligned.round_accepts == [4] * 6 and aligned.phantom_accept == 4
    shifted = expect_request(RequestPlan((9,), 25), V, acc, 8)  # first root 10 = 2 mod 4: one short round
    assert shifted.round_accepts[:2] == [2, 4] and shifted.overshoot == 2


def test_depth_caps_the_accept_length():
    e = expect_request(RequestPlan((7,), 1 + 6 * 4), V, chain_accepts(ck.ALWAYS, 3, V), 3)
    assert e.round_accepts == [4] * 6 and aligned_accept(ck.ALWAYS, 3) == 4
    assert aligned_accept(ck.agreement("mod8"), 3) == 4 and aligned_accept(ck.agreement("mod2"), 3) == 2


def test_no_speculation_has_no_rounds():
    e = expect_request(RequestPlan((10, 11, 12), 8), V, None)
    assert e.output_ids == list(range(13, 21)) and e.verify_ct == 0 and e.accept_length is None


@given(last=st.integers(0, V - 1), tokens=st.integers(1, 120), depth=st.integers(1, 16),
       period=st.sampled_from([None, 1, 2, 4, 8, 16]))
def test_simulation_invariants(last, tokens, depth, period):
    agree = ck.ALWAYS if period is None else (ck.NEVER if period == 1 else ck.agreement(f"mod{period}"))
    e = expect_request(RequestPlan((last,), tokens), V, chain_accepts(agree, depth, V), depth)
    assert e.output_ids == [(last + i) % V for i in range(1, tokens + 1)]
    assert all(1 <= a <= depth + 1 for a in e.round_accepts)
    assert 1 + sum(e.round_accepts) == tokens + e.overshoot and 0 <= e.overshoot <= depth
    if period is None:
        assert set(e.round_accepts) <= {depth + 1} | ({e.round_accepts[-1]} if e.round_accepts else set())
    if period == 1:
        assert e.correct_drafts == 0


@pytest.mark.parametrize("profile", ["default", "full", "ddtree", "ddtree-boundary", "ddtree-smoke", "dflash-ddtree"])
def test_every_request_ends_on_a_round_boundary_and_stays_below_the_mask_token(profile):
    from ddtree_compat.e2e.dflash import LOOKBACK, MAX_CONTEXT

    for cfg in plan(profile):
        for p in cfg.phases:
            e = cfg.expectation(p, ck.TinyShape())
            assert all(r.overshoot == 0 for r in e.requests), (cfg.id, p.name)
            assert all(max(r.output_ids) < V - 1 for r in e.requests), (cfg.id, p.name)
            # no correct run holds the poison token or the token before it (the poison target's premise)
            assert all(max(r.output_ids) < ck.poison_output(V) for r in e.requests), (cfg.id, p.name)
            assert all(ck.poison_token(V) not in r.prompt for r in p.requests), (cfg.id, p.name)
            if cfg.speculative:
                assert e.uniform is not None, (cfg.id, p.name)  # every Decode batch line has one value
            if cfg.algorithm in ("DFLASH", DDTREE):  # the positional draft's context: a run, long enough
                for r in p.requests:
                    assert len(r.prompt) >= LOOKBACK and all((b - a) % V == 1 for a, b in zip(r.prompt, r.prompt[1:]))
                    assert len(r.prompt) + r.max_new_tokens + cfg.block_size <= MAX_CONTEXT


def test_every_configuration_runs_on_every_attention_backend_asked():
    from ddtree_compat.e2e.attention import ATTENTION_BACKENDS, parse_attention

    one = plan("default", attention="triton")
    every = plan("default")
    assert [c.id for c in every if c.speculative] == [f"{c.shape_id}-attn-{a}" for c in one if c.speculative
                                                      for a in ATTENTION_BACKENDS]
    assert next(c for c in every if not c.speculative).attention == "triton"  # the baseline server: once
    assert parse_attention(["flashinfer,triton", "default"]) == ("flashinfer", "triton", "default")
    assert parse_attention([]) == ATTENTION_BACKENDS
    with pytest.raises(ValueError, match="unknown attention backend 'fa4'"):
        parse_attention("triton,fa4")


def test_graph_servers_get_padded_batches():
    from ddtree_compat.e2e.configs import CAPTURED_BS, PADDED_BS

    for c in plan("ddtree", attention="triton"):
        sizes = {p.concurrency for p in c.phases}
        if c.cuda_graph:
            assert sizes >= set(PADDED_BS) and all(b < max(CAPTURED_BS) and b not in CAPTURED_BS for b in PADDED_BS)
        else:
            assert sizes == {1, 4}


def test_default_plan_shape():
    configs = plan("default", attention="triton")
    ids = [c.id for c in configs]
    assert ids[0] == "target" and len(ids) == len(set(ids))
    runnable = [c for c in configs if c.algorithm not in ("DFLASH", DDTREE)]
    assert len(runnable) <= 8  # one device call: launches are about a minute each, started together
    assert {c.draft_tokens for c in runnable if c.speculative} >= {9, 13}
    assert {c.topk for c in runnable if c.speculative} >= {1, 2, 4}
    assert {c.cuda_graph for c in runnable} == {True, False}
    assert any(c.negative_control for c in configs)
    assert {p.concurrency for c in configs for p in c.phases} == {1, 3, 4, 5, 6}
    # the target-only server's baseline covers every prompt with the most tokens anyone asks for
    covered = {r.prompt: r.max_new_tokens for r in baseline_requests(configs)}
    for c in configs:
        for p in c.phases:
            for r in p.requests:
                assert covered[r.prompt] >= r.max_new_tokens
    assert len(cells(plan("default", attention="triton"))) == sum(len(c.phases) for c in configs)


def test_prompts_end_aligned():
    from ddtree_compat.e2e.configs import PROMPT_SLOTS

    assert all(prompt(j)[-1] % 8 == 7 for j in range(20))
    assert len({prompt(j) for j in range(20)}) == PROMPT_SLOTS
    assert all(chain_prompt(j)[-1] % 8 == 7 and chain_prompt(j)[0] > 0 for j in range(10))


def test_ddtree_profile_covers_the_sweep():
    configs = plan("ddtree", attention="triton")
    dd = [c for c in configs if c.algorithm == DDTREE]
    always = {(c.budget, c.cuda_graph) for c in dd if c.draft.agree is ck.ALWAYS and not c.flags}
    assert always == {(b, g) for b in SWEEP_BUDGETS for g in (True, False)}
    assert {c.budget for c in dd if c.negative_control} == {8, 12, 16}
    assert any(c.draft.agree.period in (4, 8) for c in dd) and any("--is-ddtree-prune" in c.flags for c in dd)
    assert {c.cuda_graph for c in configs if c.algorithm == "DFLASH"} == {True, False}
    assert all(c.block_size == 16 for c in dd)
    by_id = {c.shape_id: c for c in configs}
    # expectations: spine mode below the block's depths, the whole block above; the accept-rate denominator
    # is the block's 15 drafts whatever the budget
    for b, want, mode in ((8, 9, "spine"), (12, 13, "spine"), (13, 14, "spine"), (15, 16, "spine"), (16, 16, "tree"),
                          (32, 16, "tree"), (64, 16, "tree")):
        c = by_id[f"ddtree-b{b}-{mode}-always-graph"]
        assert (c.mode, c.chain_depth + 1, c.drafts_per_round) == (mode, want, 15)
        assert c.expectation(c.phases[0], ck.TinyShape()).uniform == want
    assert by_id["ddtree-b12-spine-mod4-graph"].expectation(by_id["ddtree-b12-spine-mod4-graph"].phases[1],
                                                             ck.TinyShape()).uniform == 4
    assert by_id["ddtree-b8-spine-never-graph"].negative_control
    assert len(configs) <= 26  # two waves of 13 servers in one 10-minute device call
    # the field's failing budgets start first (before the target-only server), eager
    assert [(c.budget, c.cuda_graph) for c in configs[:2]] == [(8, False), (12, False)] and configs[2].id == "target"


def test_negative_control_twin_expects_acceptance():
    nc = next(c for c in plan("default") if c.negative_control)
    twin = nc.agreeing_twin()
    assert twin.draft.agree is ck.ALWAYS and "-always-" in twin.id
    e = twin.expectation(nc.phases[0], ck.TinyShape())
    assert e.uniform == nc.chain_depth + 1


def test_unknown_profile():
    with pytest.raises(ValueError):
        plan("huge")
