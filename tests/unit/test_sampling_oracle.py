"""The sampling family's oracle (decisions given the uniforms) and its exact laws: hand-worked trees, the
losslessness of every sampler at thresholds 1 (the completed law equals the target's joint law, exactly), the
planted skews not lossless, the law against the decision oracle, and the oracle against SGLang's real Triton
chain sampler under TRITON_INTERPRET."""

from __future__ import annotations

import os
import random

import pytest

from ddtree_compat.families.sampling import law as L
from ddtree_compat.families.sampling import oracle as O
from ddtree_compat.tree import DraftTree

TOP = 1.0 - 2.0 ** -24
EXACT = 1e-12  # laws are float64 sums of a few hundred products: equal to this


def fanout(tokens, root=9):
    """The root and its children, ``tokens`` in index order."""
    return DraftTree((-1,) + (0,) * len(tokens), (root, *tokens))


# --------------------------------------------------------------------------------------------------
# Hand-worked decisions: SGLang's tree sampler
# --------------------------------------------------------------------------------------------------


def test_siblings_share_one_coin_against_their_cumulative_mass():
    """Root children A=1 (1/4) then B=2 (1/2), the root's coin 1/2: A rejected (1/2 >= 1/4, its mass written
    into draft_probs), B accepted (1/2 < 3/4); B's coin is never read for B's own acceptance."""
    tree = O.links(fanout((1, 2)))
    target = [{1: 0.25, 2: 0.5, 3: 0.25}, {4: 1.0}, {5: 0.5, 6: 0.5}]
    r = O.tree_target_only(tree, target, [0.5, 0.0, 0.9], 0.75, 16, width=3)
    assert (r.path, r.drafts, r.rejected) == ((0, 2), (2,), ((0, 1),))
    assert r.bonus == 6  # node 2's full row (no children): u = 0.75, CDF 0.5 then 1.0
    assert (r.accepted_drafts, r.accept_length, r.emitted) == (1, 2, (2, 6))


def test_link_order_decides_which_sibling_is_tried_first():
    """The same tree and coin, children linked highest index first: B (1/2) first, 1/2 < 1/2 fails, then A
    (cumulative 3/4) is accepted: another path than ascending order gives."""
    tree = O.links(fanout((1, 2)), O.REVERSE)
    assert tree.children(0) == (2, 1)
    target = [{1: 0.25, 2: 0.5, 3: 0.25}, {4: 1.0}, {5: 0.5, 6: 0.5}]
    r = O.tree_target_only(tree, target, [0.5, 0.0, 0.9], 0.75, 16, width=3)
    assert (r.path, r.rejected, r.bonus) == ((0, 1), ((0, 2),), 4)


def test_rejecting_every_child_samples_the_residual():
    """Coin 0.8 >= 1/4 + 1/2: both children rejected; the bonus from the row without them: only token 3."""
    tree = O.links(fanout((1, 2)))
    target = [{1: 0.25, 2: 0.5, 3: 0.25}, {}, {}]
    r = O.tree_target_only(tree, target, [0.8, 0.0, 0.0], 0.999, 16, width=3)
    assert (r.path, r.rejected, r.bonus) == ((0,), ((0, 1), (0, 2)), 3)


def test_thresholds():
    """``p >= threshold_single`` accepts whatever the coin; ``coin < P / threshold_acc`` widens acceptance."""
    tree = O.links(fanout((1,)))
    target = [{1: 0.5, 2: 0.5}, {3: 1.0}]
    assert O.tree_target_only(tree, target, [0.99, 0.0], 0.0, 16, 2).path == (0,)
    assert O.tree_target_only(tree, target, [0.99, 0.0], 0.0, 16, 2, threshold_single=0.5).path == (0, 1)
    assert O.tree_target_only(tree, target, [0.99, 0.0], 0.0, 16, 2, threshold_single=0.75).path == (0,)
    assert O.tree_target_only(tree, target, [0.9, 0.0], 0.0, 16, 2, threshold_acc=0.5).path == (0, 1)
    assert O.tree_target_only(tree, target, [0.9, 0.0], 0.0, 16, 2, threshold_acc=0.75).path == (0,)


def test_boundaries_strict_and_inclusive():
    """A coin equal to the cumulative mass: rejected by ``<`` (0.5.22+), accepted by ``<=`` (the earlier
    source). A zero-mass child at threshold_single 0: never accepted with the guard, accepted without."""
    tree = O.links(fanout((1, 2)))
    target = [{1: 0.25, 2: 0.25, 3: 0.5}, {}, {}]
    assert O.tree_target_only(tree, target, [0.25, 0, 0], 0.0, 16, 2).path == (0, 2)
    assert O.tree_target_only(tree, target, [0.25, 0, 0], 0.0, 16, 2, compare=O.INCLUSIVE).path == (0, 1)
    zero = [{2: 0.25, 3: 0.75}, {}, {}]
    r = O.tree_target_only(tree, zero, [0.5, 0, 0], 0.0, 16, 2, threshold_single=0.0)
    assert r.path == (0, 2) and r.rejected == ((0, 1),)
    assert O.tree_target_only(tree, zero, [0.5, 0, 0], 0.0, 16, 2, threshold_single=0.0,
                              compare=O.INCLUSIVE).path == (0, 1)


def test_saturated_children_emit_a_zero_mass_token():
    """All the root's mass on its children, float32 sum 1 - 2^-24, root coin 1 - 2^-24 (SGLang's largest
    seeded coin): every child rejected, the residual empty: the CUDA kernel's fallback is vocab - 1, the
    DDTree sampler's is token 0; neither has target mass there (a real, probability-2^-24 edge)."""
    tree = fanout((3, 4))
    target = [{3: 0.5, 4: 0.5 - 2.0 ** -24}, {}, {}]
    r = O.tree_target_only(O.links(tree), target, [TOP, 0, 0], 0.3, 16, 3)
    assert (r.path, r.bonus) == ((0,), 15)
    d = O.ddtree_native(tree.tokens, tree.parents, 3, 3, target, [TOP, 0, 0], 0.3, 16)
    assert (d.path, d.bonus) == ((0,), 0)
    assert O.tree_target_only(O.links(tree), target, [TOP - 2.0 ** -24, 0, 0], 0.3, 16, 3).path == (0, 2)


def test_width_limits_accepted_drafts_and_bonus_reads_the_full_row():
    """A chain whose node 1 has a child of mass 1: width 3 accepts it; width 2 stops at node 1 and draws the
    bonus from node 1's full row, the child's token included."""
    tree = O.links(DraftTree((-1, 0, 1), (9, 1, 2)))
    target = [{1: 1.0}, {2: 1.0}, {7: 1.0}]
    assert O.tree_target_only(tree, target, [0.5, 0.5, 0.5], 0.5, 16, 3).emitted == (1, 2, 7)
    assert O.tree_target_only(tree, target, [0.5, 0.5, 0.5], 0.5, 16, 2).emitted == (1, 2)


def test_bonus_rules():
    """``u`` on a CDF step: strict ``>`` takes the next token, ``searchsorted`` (>=) this one; ``u = 0`` gives
    searchsorted token 0 even without mass; nothing above ``u``: the CUDA fallback is the last positive token,
    Triton's ``vocab - 1``."""
    masses = {2: 0.25, 5: 0.75}
    assert O.pick(masses, 8, 0.25, O.BONUS_CUDA) == 5
    assert O.pick(masses, 8, 0.25, O.BONUS_TRITON) == 5
    assert O.pick(masses, 8, 0.25, O.BONUS_SEARCHSORTED) == 2
    assert O.pick(masses, 8, 0.0, O.BONUS_SEARCHSORTED) == 0
    assert O.pick(masses, 8, 0.0, O.BONUS_CUDA) == 2
    assert O.pick({}, 8, 0.5, O.BONUS_CUDA) == 7 and O.pick({}, 8, 0.5, O.BONUS_SEARCHSORTED) == 0
    assert O.pick(masses, 8, 0.5, O.BONUS_CUDA, total=0.4) == 2  # a given normaliser: u = 0.2
    assert O.pick(masses, 8, 0.5, O.BONUS_CUDA, total=2.0) == 5  # u = 1.0: past the CDF, the fallbacks
    assert O.pick(masses, 8, 0.5, O.BONUS_TRITON, total=2.0) == 7
    with pytest.raises(ValueError):
        O.pick(masses, 8, 0.5, "nearest")


def test_f32_rounds_like_float32():
    assert O.f32(0.1) == 0.10000000149011612
    assert O.f32(1.0 - 2.0 ** -25) == 1.0  # a tie, to even
    assert O.f32(0.5 + (0.5 - 2.0 ** -24)) == TOP


def test_batch_outputs_layout():
    """predicts at the accepted nodes' flat indices (next token, then the bonus), accept_index padded with
    None (left as it was), the tree kernel's draft_probs writes per request."""
    tree = fanout((1, 2))
    target = [{1: 0.25, 2: 0.5, 3: 0.25}, {4: 1.0}, {5: 0.5, 6: 0.5}]
    r = O.tree_target_only(O.links(tree), target, [0.5, 0.0, 0.9], 0.75, 16, 3)
    out = O.batch_outputs([r, r], 3, 3, [target, target])
    assert out.predicts == (2, None, 6, 2, None, 6)
    assert out.accept_index == ((0, 2, None), (3, 5, None))
    assert out.accept_token_num == (1, 1)
    assert out.draft_probs == ({(0, 1): 0.25}, {(0, 1): 0.25})


# --------------------------------------------------------------------------------------------------
# Hand-worked decisions: the chain sampler and the DDTree sampler
# --------------------------------------------------------------------------------------------------


def test_chain_accepts_when_coin_times_q_is_below_p():
    """p = 1/4, q = 1/2: coin 0.49 accepts (0.245 < 0.25), coin 1/2 rejects (0.25 < 0.25 fails) and the bonus
    comes from relu(p - q): the row {3: 1/4, 4: 3/4} minus q {3: 1/2, 5: 1/2} leaves only token 4."""
    cand = (9, 3, 1)
    target = [{3: 0.25, 4: 0.75}, {1: 1.0}, {6: 1.0}]
    draft = [{3: 0.5, 5: 0.5}, {1: 1.0}]
    assert O.chain_rejection(cand, target, draft, [0.49, 0.3, 0.0], 0.5, 8).emitted == (3, 1, 6)
    r = O.chain_rejection(cand, target, draft, [0.5, 0.3, 0.0], 0.0, 8)
    assert (r.path, r.bonus) == ((0,), 4)


def test_chain_draft_guard():
    """A draft of zero draft mass and positive target mass: rejected with the guard (0.5.22+), accepted by
    0.5.15-0.5.20's ``coin * q < p``."""
    cand, target, draft = (9, 3), [{3: 0.5, 4: 0.5}, {2: 1.0}], [{4: 1.0}]
    assert O.chain_rejection(cand, target, draft, [0.3, 0], 0.5, 8).path == (0,)
    assert O.chain_rejection(cand, target, draft, [0.3, 0], 0.5, 8, draft_guard=False).path == (0, 1)


def test_block_verification_by_hand():
    """Two drafts, 3 then 1. Row 0: p = {3: 1/4, 4: 3/4}, q = {3: 1/2, 5: 1/2}: h1 = 1/2.

    * Row 1 p = {1: 1}, q = {1: 1/2, 7: 1/2}: h2 = min(1/2 * 2, 1) = 1: step 2 (coin u[1] = 0.99 < 1) accepts
      both drafts; the bonus from row 2's full target.
    * Row 1 p = {1: 1/4, 6: 3/4}: h2 = 1/2 * 1/2 = 1/4; coin 0.3 rejects step 2. Step 1: the residual mass at
      row 1, S = sum relu(h1 * p - q) = 3/8 (token 6), accept probability S / (S + 1 - h1) = 3/7: coin 0.2
      accepts draft 3 and the bonus is token 6; coin 0.44 rejects and the bonus comes from relu(p - q) at row
      0: token 4."""
    cand = (9, 3, 1)
    target = [{3: 0.25, 4: 0.75}, {1: 1.0}, {6: 1.0}]
    draft = [{3: 0.5, 5: 0.5}, {1: 0.5, 7: 0.5}]
    assert O.chain_rejection(cand, target, draft, [0.9, 0.99, 0], 0.5, 8, block=True).emitted == (3, 1, 6)
    assert O.chain_rejection(cand, target, draft, [0.9, 0.99, 0], 0.5, 8).emitted == (4,)  # token-wise: 0.9 * 1/2 >= 1/4
    target = [{3: 0.25, 4: 0.75}, {1: 0.25, 6: 0.75}, {6: 1.0}]
    r = O.chain_rejection(cand, target, draft, [0.2, 0.3, 0], 0.5, 8, block=True)
    assert (r.path, r.emitted) == ((0, 1), (3, 6))
    assert O.chain_rejection(cand, target, draft, [0.44, 0.3, 0], 0.5, 8, block=True).emitted == (4,)
    assert O.chain_rejection(cand, target, draft, [0.42, 0.3, 0], 0.5, 8, block=True).emitted == (3, 6)


def test_ddtree_sampler_by_hand():
    """Children in index order, the first whose cumulative mass exceeds the node's coin; the bonus from the
    row with the last node's children zeroed, first token whose CDF reaches u."""
    draft, parents = (9, 1, 2, 3), (-1, 0, 0, 1)
    target = [{1: 0.25, 2: 0.5, 7: 0.25}, {3: 0.5, 4: 0.5}, {}, {}]
    r = O.ddtree_native(draft, parents, 4, 4, target, [0.5, 0.75, 0, 0], 0.5, 8)
    assert (r.path, r.bonus) == ((0, 2), 0)  # node 2 has an empty row: total 0, u = 0: token 0
    r = O.ddtree_native(draft, parents, 4, 4, target, [0.1, 0.75, 0, 0], 0.5, 8)
    assert (r.path, r.bonus) == ((0, 1), 4)  # 0.75 >= 1/2: node 3 rejected; {4: 1/2}, u = 1/4: token 4
    assert O.ddtree_native(draft, parents, 2, 4, target, [0.6, 0, 0, 0], 0.5, 8).path == (0,)  # node 2 is past size


def test_ddtree_sampler_agrees_with_the_ddtree_familys_statement():
    """A second statement of ``ddtree_sample`` (:func:`families.ddtree.oracle.sample_walk`), on random dyadic
    trees with a positive final coin (at ``uniform_final == 0`` the two part: docs/sampling-kernels.md)."""
    from ddtree_compat.families.ddtree.oracle import sample_walk

    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(2, 9)
        parents = [-1] + [rng.randrange(i) for i in range(1, n)]
        draft = [rng.randrange(8) for _ in range(n)]
        probs = [_row(rng, 8) for _ in range(n)]
        u = [rng.randrange(1, 256) / 256 for _ in range(n)]
        uf = rng.randrange(1, 256) / 256
        size = rng.randint(1, n)
        mine = O.ddtree_native(draft, parents, size, n, probs, u, uf, 8)
        theirs = sample_walk(draft, parents, size, n, probs, u, uf)
        assert (mine.path, mine.bonus) == (theirs.indices, theirs.next_token)


# --------------------------------------------------------------------------------------------------
# Losslessness and the skews
# --------------------------------------------------------------------------------------------------


def _row(rng: random.Random, vocab: int, units: int = 64) -> dict:
    k = rng.randint(1, min(vocab, 5))
    toks = rng.sample(range(vocab), k)
    cuts = sorted(rng.randint(0, units) for _ in range(k - 1))
    return {t: (b - a) / units for t, a, b in zip(toks, [0, *cuts], [*cuts, units]) if b > a}


class Table:
    """A seeded row per context (a target or draft model over a small vocabulary)."""

    def __init__(self, seed: int, vocab: int):
        self.seed, self.vocab, self.memo = seed, vocab, {}

    def __call__(self, context: tuple) -> dict:
        if context not in self.memo:
            self.memo[context] = _row(random.Random(repr((self.seed, context))), self.vocab)
        return self.memo[context]


def _random_tree(rng: random.Random, vocab: int) -> DraftTree:
    n = rng.randint(1, 8)
    parents, tokens = [-1], [rng.randrange(vocab)]
    for i in range(1, n):
        p = rng.randrange(i)
        taken = {tokens[c] for c in range(1, i) if parents[c] == p}
        free = [t for t in range(vocab) if t not in taken]
        if not free:
            break
        parents.append(p)
        tokens.append(rng.choice(free))
    return DraftTree(tuple(parents), tuple(tokens))


def _rows(tree: DraftTree, target) -> list:
    return [target(tuple(tree.tokens[m] for m in tree.path_to(n)[1:])) for n in range(tree.num_nodes)]


@pytest.mark.parametrize("seed", range(12))
def test_tree_sampler_is_lossless(seed):
    """Random trees (distinct sibling tokens), both link orders, every width: the round's law completed by the
    target equals the target's joint law of the next three tokens; the law sums to 1."""
    rng = random.Random(seed)
    vocab = rng.choice([3, 4, 5])
    tree, target = _random_tree(rng, vocab), Table(seed, vocab)
    for order in O.ORDERS:
        for width in range(1, tree.max_depth + 2):
            law = L.tree_law(O.links(tree, order), _rows(tree, target), vocab, width)
            assert abs(sum(law.values()) - 1.0) < EXACT
            assert L.distance(L.completed(law, target, 3), L.target_joint(target, 3)) < EXACT


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block", [False, True])
def test_chain_sampler_is_lossless(seed, block):
    """Drafts drawn from a draft model, rejection sampling and block verification: lossless."""
    rng = random.Random(100 + seed)
    vocab, steps = rng.choice([3, 4]), rng.randint(1, 3)
    target, draft = Table(seed, vocab), Table(1000 + seed, vocab)
    law = L.chain_law(steps, target, draft, vocab, block)
    assert abs(sum(law.values()) - 1.0) < EXACT
    assert L.distance(L.completed(law, target, steps + 1), L.target_joint(target, steps + 1)) < EXACT


def test_thresholds_below_one_are_not_lossless():
    """The acceptance thresholds trade exactness for acceptance: a root child of mass 1/2 at threshold_single
    1/2 is always accepted."""
    tree, target = fanout((1,)), Table(3, 4)
    rows = [{1: 0.5, 2: 0.5}, target((1,))]
    law = L.tree_law(O.links(tree), rows, 4, 2, threshold_single=0.5)
    assert L.marginal(law, 1) == {(1,): 1.0}


SKEW_TREES = [(seed, order) for seed in (1, 2, 5) for order in O.ORDERS]


@pytest.mark.parametrize("skew", L.TREE_SKEWS)
def test_every_tree_skew_breaks_losslessness(skew):
    """Each planted skew of the tree sampler changes the completed law on some small tree: it is a real
    alternative, not the oracle restated."""
    tree = DraftTree((-1, 0, 0, 1, 1, 2), (9, 0, 1, 2, 3, 0))
    worst = 0.0
    for seed, order in SKEW_TREES:
        target = Table(seed, 4)
        law = L.tree_law(O.links(tree, order), _rows(tree, target), 4, 3, skew=skew)
        assert abs(sum(law.values()) - 1.0) < EXACT
        worst = max(worst, L.distance(L.completed(law, target, 2), L.target_joint(target, 2)))
    assert worst > 1e-3


@pytest.mark.parametrize("skew", L.CHAIN_SKEWS)
def test_every_chain_skew_changes_the_law(skew):
    worst = 0.0
    for seed in (1, 2, 3):
        target, draft = Table(seed, 4), Table(50 + seed, 4)
        law = L.chain_law(2, target, draft, 4, skew=skew)
        worst = max(worst, L.distance(law, L.chain_law(2, target, draft, 4)))
    assert worst > 1e-3


@pytest.mark.parametrize("skew", L.BLOCK_SKEWS)
def test_every_block_skew_changes_the_law(skew):
    worst = 0.0
    for seed in (1, 2, 3, 4):
        target, draft = Table(seed, 4), Table(50 + seed, 4)
        law = L.chain_law(2, target, draft, 4, block=True, skew=skew)
        worst = max(worst, L.distance(law, L.chain_law(2, target, draft, 4, block=True)))
    assert worst > 1e-3


def test_unknown_skews_are_refused():
    with pytest.raises(ValueError):
        L.tree_law(O.links(fanout((1,))), [{1: 1.0}, {2: 1.0}], 4, 2, skew=L.INVERTED_RATIO)
    with pytest.raises(ValueError):
        L.chain_law(1, Table(1, 4), Table(2, 4), 4, block=True, skew=L.STALE_COIN)


# --------------------------------------------------------------------------------------------------
# The law against the decision oracle
# --------------------------------------------------------------------------------------------------


LAW_TREE = DraftTree((-1, 0, 0, 1, 1, 2), (9, 0, 1, 2, 3, 0))


def _rich_target(vocab: int) -> int:
    """A table seed whose rows on LAW_TREE give at least 8 categories (a test with some degrees of freedom)."""
    return next(s for s in range(100) if len(L.marginal(L.tree_law(O.links(LAW_TREE), _rows(LAW_TREE, Table(s, vocab)),
                                                                  vocab, 3), 2)) >= 8)


def _rounds(sampler: str, skew, rounds: int, seed: int) -> tuple[list, dict]:
    """``rounds`` draws of the decision oracle (seeded float32 coins; the chain's drafts drawn from the draft
    table) cut to two tokens, and the exact law of the same (``skew`` in both)."""
    import numpy as np

    gen = np.random.default_rng(seed)
    vocab = 4
    target_seed = _rich_target(vocab)
    target, draft = Table(target_seed, vocab), Table(1000 + target_seed, vocab)
    rows = _rows(LAW_TREE, target)
    seen = []
    if sampler in ("tree", "ddtree"):
        width = 3 if sampler == "tree" else 6  # the DDTree sampler walks the whole tree (q = D)
        law = L.tree_law(O.links(LAW_TREE), rows, vocab, width, skew=skew, fallback="last" if sampler == "tree" else "vocab-1")
        for _ in range(rounds):
            u = [float(x) for x in gen.random(6, dtype=np.float32)]
            uf = float(gen.random(dtype=np.float32))
            r = (O.tree_target_only(O.links(LAW_TREE), rows, u, uf, vocab, 3, skew=skew) if sampler == "tree"
                 else O.ddtree_native(LAW_TREE.tokens, LAW_TREE.parents, 6, 6, rows, u, uf, vocab, skew=skew))
            seen.append(r.emitted[:2])
    else:
        steps, block = 2, sampler == "block"
        law = L.chain_law(steps, target, draft, vocab, block, skew=skew)
        for _ in range(rounds):
            cand, context = [9], ()
            for _s in range(steps):
                q = draft(context)
                toks = sorted(q)
                x = int(gen.choice(toks, p=[q[t] for t in toks]))
                cand.append(x)
                context = (*context, x)
            tgt = [target(tuple(cand[1:i + 1])) for i in range(steps + 1)]
            drf = [draft(tuple(cand[1:i + 1])) for i in range(steps)]
            u = [float(x) for x in gen.random(steps + 1, dtype=np.float32)]
            r = O.chain_rejection(cand, tgt, drf, u, float(gen.random(dtype=np.float32)), vocab, block, skew=skew)
            seen.append(r.emitted[:2])
    return seen, L.marginal(law, 2)


SAMPLERS_AND_SKEWS = ([(s, None) for s in ("tree", "ddtree", "chain", "block")]
                      + [("tree", k) for k in L.TREE_SKEWS] + [("ddtree", k) for k in L.TREE_SKEWS]
                      + [("chain", k) for k in L.CHAIN_SKEWS] + [("block", k) for k in L.BLOCK_SKEWS])


@pytest.mark.parametrize("sampler, skew", SAMPLERS_AND_SKEWS, ids=str)
def test_law_agrees_with_the_decision_oracle(sampler, skew):
    """3000 rounds of the decision oracle (the sampler's rule, or a planted skew: what a broken backend runs),
    tested against the exact law of the same by the family's own goodness-of-fit test at alpha 1e-6 (fixed
    seeds: the verdict is the same every run). A skew's rounds are also tested against the sampler's law and
    rejected wherever the power calculation says 3000 rows catch it."""
    from ddtree_compat.families.sampling.distribution import counts, gof_test, power

    seen, law = _rounds(sampler, skew, 3000, 11)
    result = gof_test(counts(seen), law)
    assert not result.reject, result.describe()
    assert result.dof >= 2
    if skew is not None:
        _, null = _rounds(sampler, None, 0, 11)
        if power(null, law, 3000) > 0.999:
            assert gof_test(counts(seen), null).reject


# --------------------------------------------------------------------------------------------------
# The oracle against SGLang's real Triton chain sampler (TRITON_INTERPRET on the CPU)
# --------------------------------------------------------------------------------------------------


def _chain_kernel():
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the Triton cross-check runs on the interpret tier (TRITON_INTERPRET=1, no GPU)")
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from ddtree_compat.contract import import_module

    try:
        return import_module("sglang.kernels.ops.speculative.reject_sampling").chain_speculative_sampling_triton
    except ImportError as e:  # SGLang not installed, or a release keeping it elsewhere
        pytest.skip(f"SGLang's chain sampler not importable here: {e}")


def _run_chain(kernel, candidates, target, draft, uniforms, finals, vocab, block):
    """One call of the kernel as SGLang calls it; returns (accept_token_num, accept_index rows, predicts)."""
    import torch

    from ddtree_compat._triton_env import interpreter_scalar_index

    bs, s = len(candidates), len(candidates[0])
    tp = torch.zeros(bs, s, vocab)
    dp = torch.zeros(bs, s - 1, vocab)
    for b in range(bs):
        for i, row in enumerate(target[b]):
            for t, m in row.items():
                tp[b, i, t] = m
        for i, row in enumerate(draft[b]):
            for t, m in row.items():
                dp[b, i, t] = m
    predicts = torch.full((bs * s,), -7, dtype=torch.int32)
    accept_index = torch.full((bs, s), -7, dtype=torch.int32)
    accept_num = torch.full((bs,), -7, dtype=torch.int32)
    retrive = torch.arange(bs * s, dtype=torch.int64).view(bs, s)
    nxt = torch.tensor([[i + 1 for i in range(s - 1)] + [-1]] * bs, dtype=torch.int64)
    with interpreter_scalar_index():
        kernel(predicts, accept_index, accept_num, torch.tensor(candidates, dtype=torch.int64), retrive, nxt,
               torch.full((bs, s), -1, dtype=torch.int64), torch.tensor(uniforms, dtype=torch.float32),
               torch.tensor(finals, dtype=torch.float32), tp, dp, 1.0, 1.0, True, block_verification=block)
    return accept_num.tolist(), accept_index.tolist(), predicts.tolist()


def test_triton_chain_sampler_matches_the_oracle_on_the_exact_cases():
    """Every exact case of the chain record (rejection sampling and block verification; vocabularies 16 .. 4100;
    boundary coins): accept_token_num, accept_index and predicts exactly the oracle's."""
    from ddtree_compat.families.sampling.records import chain_exact_cases

    kernel = _chain_kernel()
    for case in chain_exact_cases():
        reqs = case.exact
        got = _run_chain(kernel, [r.candidates for r in reqs], [r.target for r in reqs], [r.draft for r in reqs],
                         [r.uniforms for r in reqs], [r.uniform_final for r in reqs], case.vocab, case.block)
        want = case.expected_outputs()
        assert got[0] == list(want.accept_token_num), case.id
        for b, row in enumerate(want.accept_index):
            assert got[1][b][:want.accept_token_num[b] + 1] == [x for x in row if x is not None], case.id
        assert [g for g, w in zip(got[2], want.predicts) if w is not None] == [w for w in want.predicts
                                                                                  if w is not None], case.id
        assert all(g == -7 for g, w in zip(got[2], want.predicts) if w is None), case.id


@pytest.mark.parametrize("block", [False, True])
def test_triton_chain_sampler_matches_the_oracle_on_random_dyadic_chains(block):
    """120 random chains with dyadic masses and coins (with block verification, target/draft ratios powers of
    two on the drafts: every float32 operation exact): the kernel's decisions and bonus exactly the oracle's."""
    kernel = _chain_kernel()
    rng = random.Random(5 + block)
    for _ in range(120):
        s, vocab = rng.randint(1, 5), rng.choice([4, 8, 17])
        target = [_row(rng, vocab, 256) for _ in range(s)]
        draft = [_row(rng, vocab, 256) for _ in range(s - 1)]
        cand = [rng.randrange(vocab)]
        for i in range(s - 1):
            x = rng.choice(sorted(draft[i])) if rng.random() < 0.85 else rng.randrange(vocab)
            cand.append(x)
            q = draft[i].get(x, 0.0)
            if block and q > 0:
                p = q * rng.choice([0.5, 1.0] + ([2.0] if q <= 0.5 else []))
                rest = {t: m for t, m in target[i].items() if t != x}
                spare = next(iter(rest), (x + 1) % vocab)
                target[i] = {x: p, **({spare: 1.0 - p} if p < 1.0 else {})}
        u = [rng.randrange(1 << 16) / (1 << 16) for _ in range(s)]
        uf = rng.randrange(1 << 16) / (1 << 16)
        want = O.chain_rejection(cand, target, draft, u, uf, vocab, block)
        num, _, predicts = _run_chain(kernel, [cand], [target], [draft], [u], [uf], vocab, block)
        assert (num[0], predicts[num[0]]) == (want.accepted_drafts, want.bonus), (cand, target, draft, u, uf)
