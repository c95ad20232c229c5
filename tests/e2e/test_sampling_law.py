"""The e2e tier's law at temperature > 0 (:mod:`ddtree_compat.e2e.sampling`): the tiny target's categories, the test's
false-alarm rate and its power against the planted skew, and the judge's rules on made-up observations."""

import math
import random

import pytest

from ddtree_compat.e2e import checkpoints as ck
from ddtree_compat.e2e import sampling as S

SHAPE = ck.TinyShape()


def _softmax_categories(token: int, temperature: float) -> dict[str, float]:
    """The law from the target's real logits (the checkpoint's code and head), for comparison."""
    import torch

    logits = ck.norm_gain(SHAPE) * (ck.successor_head(SHAPE) @ ck.pure_code(SHAPE)[token])
    probs = torch.softmax(logits.double() / temperature, -1)
    out = dict.fromkeys(S.CATEGORIES, 0.0)
    for s in range(SHAPE.vocab):
        out[S.category(token, s, SHAPE)] += float(probs[s])
    return out


@pytest.mark.parametrize("token", [0, 7, 63, 200, SHAPE.vocab - 4, SHAPE.vocab - 3, SHAPE.vocab - 1])
@pytest.mark.parametrize("temperature", [1.0, 0.7, 2.0])
def test_category_law_is_the_targets_softmax(token, temperature):
    law = S.category_law(token, SHAPE, S.Sampling(temperature))
    want = _softmax_categories(token, temperature)
    assert math.isclose(sum(law.values()), 1.0, abs_tol=1e-12)
    for c in S.CATEGORIES:
        assert law[c] == pytest.approx(want[c], rel=1e-9, abs=1e-15), c


def test_top_k_71_cuts_the_far_tokens_and_top_p_half_leaves_the_successor():
    k71 = S.category_law(0, SHAPE, S.Sampling(1.0, top_k=71))
    assert k71["far"] == 0.0 and k71["successor"] == pytest.approx(0.97706, abs=1e-5)
    assert S.category_law(0, SHAPE, S.Sampling(1.0, top_p=0.5)) == {"successor": 1.0, "neighbour": 0.0, "far": 0.0,
                                                                   "padding": 0.0}
    assert S.Sampling(1.0, top_p=0.5).point_mass() and not S.Sampling(1.0).point_mass()
    assert [s.tag for s in (S.Sampling(), S.Sampling(1.0, 71), S.Sampling(1.0, top_p=0.5))] == ["t1", "t1-k71", "t1-p0.5"]


def _walk(n: int, skew_depth: int | None, seed: int) -> list[tuple[int, list[int]]]:
    """Requests drawn from the law (``skew_depth``: every ``skew_depth + 1``-th token drawn from the law, the others
    the successor: the accept-all skew of a chain of ``skew_depth`` agreeing drafts)."""
    rng, seqs = random.Random(seed), []
    law = S.category_law(0, SHAPE, S.Sampling())
    for j in range(8):
        last, out = 7 + 24 * j, []
        prev = last
        for i in range(n):
            forced = skew_depth is not None and i % (skew_depth + 1) != skew_depth
            u = rng.random()
            if forced or u < law["successor"]:
                tok = ck.succ(prev, SHAPE.vocab)
            else:  # a neighbour: same a digit, another b digit
                a, b = divmod(prev, SHAPE.digits_b)
                tok = (a * SHAPE.digits_b + (b + rng.randrange(1, SHAPE.digits_b)) % SHAPE.digits_b + 1) % SHAPE.vocab
            out.append(tok)
            prev = tok
        seqs.append((last, out))
    return seqs


def test_honest_draws_pass_and_the_accept_all_skew_fails_at_the_stated_n():
    n = S.TOKENS_PER_CELL // 8
    honest = [S.distribution_test(S.count_transitions(_walk(n, None, s), SHAPE, S.Sampling())) for s in range(20)]
    assert not any(t.rejects for t in honest), [t.p_value for t in honest]
    skewed = [S.distribution_test(S.count_transitions(_walk(n, 8, s), SHAPE, S.Sampling())) for s in range(20)]
    assert all(t.rejects for t in skewed), [t.p_value for t in skewed]


def test_power_against_the_accept_all_skew_is_stated():
    """At N = TOKENS_PER_CELL the accept-all skew of an 8-draft chain (successor share 1 - q/9) is rejected with
    power > 0.999: the largest neighbour count that still rejects, against its Poisson tail."""
    from scipy.stats import chi2, poisson

    q = 1 - S.category_law(0, SHAPE, S.Sampling())["successor"]
    n, bound = S.TOKENS_PER_CELL, chi2.isf(S.ALPHA, 1)
    expected = n * q
    rejecting = [k for k in range(int(expected)) if (k - expected) ** 2 / expected + (k - expected) ** 2 / (n - expected) > bound]
    power = poisson.cdf(max(rejecting), n * q / 9)
    assert power > 0.999


def test_impossible_tokens_reject_whatever_the_p_value():
    seqs = [(7, [8, 9, 10, 75])]  # 75 after 10: a neighbour, probability 0 at top-p 0.5
    t = S.distribution_test(S.count_transitions(seqs, SHAPE, S.Sampling(1.0, top_p=0.5)))
    assert t.impossible == 1 and t.rejects


def test_transitions_after_a_poison_token_are_dropped():
    p = ck.poison_token(SHAPE.vocab)
    t = S.count_transitions([(p - 2, [p - 1, p, 3, 4])], SHAPE, S.Sampling())
    assert (t.count, t.dropped) == (2, 2)


PADDED = ck.TinyShape(vocab_pad=ck.REAL_VOCAB - ck.TinyShape().vocab)


@pytest.mark.parametrize("token", [0, 7, 200, SHAPE.vocab - 1])
def test_the_padding_tokens_are_a_category_of_the_law_at_the_field_vocabulary(token):
    """The padded target's softmax over all 248320 logits (the padding rows' logits 0) per category: the law's."""
    import torch

    logits = ck.norm_gain(SHAPE) * (ck.successor_head(SHAPE) @ ck.pure_code(SHAPE)[token])
    full = torch.cat([logits.double(), torch.zeros(PADDED.vocab_pad, dtype=torch.float64)])
    probs = torch.softmax(full, -1)
    want = dict.fromkeys(S.CATEGORIES, 0.0)
    for s in range(SHAPE.vocab):
        want[S.category(token, s, PADDED)] += float(probs[s])
    want["padding"] = float(probs[SHAPE.vocab:].sum())
    law = S.category_law(token, PADDED, S.Sampling())
    for c in S.CATEGORIES:
        assert law[c] == pytest.approx(want[c], rel=1e-9, abs=1e-15), c
    assert 0.02 < law["padding"] < 0.035 and S.category_law(token, SHAPE, S.Sampling())["padding"] == 0.0
    assert S.category_law(token, PADDED, S.Sampling(1.0, top_p=0.5))["padding"] == 0.0


def test_a_padding_token_is_counted_then_the_rest_of_its_request_dropped():
    pad = SHAPE.vocab + 1000
    t = S.count_transitions([(6, [7, pad, 3, 4])], PADDED, S.Sampling())
    assert (t.count, t.dropped, t.observed["padding"], t.observed["successor"]) == (2, 2, 1, 1)
    honest = S.distribution_test(S.count_transitions([(6, [7, 8, pad])] * 40, SHAPE, S.Sampling()))
    assert honest.impossible == 40  # a padding token where the law has none (the unpadded target)
