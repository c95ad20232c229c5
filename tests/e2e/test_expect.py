"""The acceptance simulation and the profiles' plans (pure functions; CPU)."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddtree_compat.e2e import checkpoints as ck
from ddtree_compat.e2e.configs import DDTREE, plan, prompt
from ddtree_compat.e2e.expect import RequestPlan, aligned_accept, chain_accepts, expect_request, mask_draft_accepts
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


def test_dflash_mask_draft_accepts_only_across_the_mask_token():
    k = mask_draft_accepts(V - 1, 15, V)
    assert [k(r) for r in (0, 7, 510, 511)] == [0, 0, 0, 1]


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


def test_every_default_request_ends_on_a_round_boundary_and_stays_below_the_mask_token():
    for cfg in plan("full"):
        for p in cfg.phases:
            e = cfg.expectation(p, ck.TinyShape())
            assert all(r.overshoot == 0 for r in e.requests), (cfg.id, p.name)
            assert all(max(r.output_ids) < V - 1 for r in e.requests), (cfg.id, p.name)
            if cfg.speculative:
                assert e.uniform is not None, (cfg.id, p.name)  # every Decode batch line has one value


def test_default_plan_shape():
    configs = plan("default")
    ids = [c.id for c in configs]
    assert ids[0] == "target" and len(ids) == len(set(ids))
    runnable = [c for c in configs if c.algorithm not in ("DFLASH", DDTREE)]
    assert len(runnable) <= 8  # one device call: launches are about a minute each, started together
    assert {c.draft_tokens for c in runnable if c.speculative} >= {9, 13}
    assert {c.topk for c in runnable if c.speculative} >= {1, 2, 4}
    assert {c.cuda_graph for c in runnable} == {True, False}
    assert any(c.negative_control for c in configs)
    assert {p.concurrency for c in configs for p in c.phases} == {1, 4}
    # the target-only server covers every prompt with the most tokens anyone asks for
    target = configs[0]
    covered = {r.prompt: r.max_new_tokens for p in target.phases for r in p.requests}
    for c in configs[1:]:
        for p in c.phases:
            for r in p.requests:
                assert covered[r.prompt] >= r.max_new_tokens
    assert len(cells("default")) == 2 * len(configs)


def test_prompts_end_aligned():
    assert all(prompt(j)[-1] % 8 == 7 for j in range(20))
    assert len({prompt(j) for j in range(20)}) == 20


def test_negative_control_twin_expects_acceptance():
    nc = next(c for c in plan("default") if c.negative_control)
    twin = nc.agreeing_twin()
    assert twin.draft.agree is ck.ALWAYS and "-always-" in twin.id
    e = twin.expectation(nc.phases[0], ck.TinyShape())
    assert e.uniform == nc.chain_depth + 1


def test_unknown_profile():
    with pytest.raises(ValueError):
        plan("huge")
