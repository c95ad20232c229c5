"""The oracle against hand-worked trees."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ddtree_compat.families.verify import oracle

from ddtree_compat.families.commit import oracle as commit_oracle
from ddtree_compat.errors import CaseError
from ddtree_compat.families.verify.strategies import draft_logits
from ddtree_compat.tree import DraftTree


def probs_as_logits(rows):
    """Log-probabilities: log_softmax leaves them unchanged, so hand-computed path scores hold."""
    return torch.tensor([[math.log(p) for p in row] for row in rows], dtype=torch.float64)


def chain(budget, tokens):
    return DraftTree(tuple(range(-1, budget)), tuple(tokens))


def test_spine_b8_accepts_five_and_commits_six():
    # B = 8, block_size 16: spine mode, D = 9 nodes 0-1-2-...-8.
    tree = chain(8, [50, 11, 12, 13, 14, 15, 16, 17, 18])
    target = [11, 12, 13, 14, 15, 99, 0, 0, 0]  # node 5's target (99) matches no child: stop there
    res = oracle.verify_greedy(tree, target, max_accepted=8)
    assert res.path == (0, 1, 2, 3, 4, 5)
    assert res.accepted_drafts == 5 and res.accept_length == 6 and res.bonus_token == 99
    plan = commit_oracle.commit_plan(res, out_cache_loc=list(range(200, 209)), seq_len=40)
    assert plan.kept_slots == (200, 201, 202, 203, 204, 205)
    assert plan.freed_slots == (206, 207, 208)
    assert plan.commit_len == 6 and plan.new_seq_len == 46
    assert plan.req_to_token == tuple((40 + i, 200 + i) for i in range(6))
    eagle = oracle.to_eagle(tree)
    assert eagle.retrive_next_token == (1, 2, 3, 4, 5, 6, 7, 8, -1)
    assert eagle.retrive_next_sibling == (-1,) * 9


def test_spine_b12_zero_acceptance_commits_root_only():
    tree = chain(12, [7] + list(range(100, 112)))
    target = [5] + [0] * 12  # the target disagrees with the first draft (100)
    res = oracle.verify_greedy(tree, target)
    assert res.path == (0,) and res.accepted_drafts == 0 and res.accept_length == 1 and res.bonus_token == 5
    plan = commit_oracle.commit_plan(res, list(range(13)), seq_len=3)
    assert plan.kept_slots == (0,) and plan.freed_slots == tuple(range(1, 13)) and plan.commit_len == 1


def test_spine_mode_is_the_argmax_chain():
    logits = torch.zeros(15, 8)
    logits[torch.arange(15), torch.tensor([3, 1, 4, 1, 5, 2, 6, 5, 3, 5, 0, 7, 2, 6, 4])] = 5.0
    tree = oracle.build_sglang_ddtree(logits, budget=8, root_token=9)
    assert tree.parents == tuple(range(-1, 8))
    assert tree.tokens == (9, 3, 1, 4, 1, 5, 2, 6, 5)
    with pytest.raises(CaseError, match="budget"):
        oracle.build_spine(logits, budget=16, root_token=9)


def test_best_first_hand_worked():
    # Depth probabilities: d1 [.6 .3 .1], d2 [.6 .3 .1], d3 [.9 .05 .05]; B = 4, k = min(4, 3) = 3.
    # Pops: d1r0 .6 -> node1; d2r0 .36 -> node2 (child of 1); d3r0 .324 -> node3 (child of 2);
    # d1r1 .3 -> node4 (child of root). Stop at B = 4.
    logits = probs_as_logits([[0.6, 0.3, 0.1], [0.6, 0.3, 0.1], [0.9, 0.05, 0.05]])
    tree = oracle.build_best_first(logits, budget=4, root_token=2)
    assert tree.parents == (-1, 0, 1, 2, 0)
    assert tree.tokens == (2, 0, 0, 0, 1)
    # A top-k cap of 1 leaves the chain only: three depths, so three nodes however large B is.
    capped = oracle.build_best_first(logits, budget=4, root_token=2, topk_cap=1)
    assert capped.parents == (-1, 0, 1, 2)


def test_full_tree_b16_is_bfs_ordered_with_width_two():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(15, 32, generator=gen)
    tree = oracle.build_sglang_ddtree(logits, budget=16, root_token=1)
    assert tree.num_nodes == 17
    assert all(tree.parents[i] < i for i in range(1, 17))
    assert list(tree.depths) == sorted(tree.depths)  # depth-major
    assert max(len(c) for c in tree.children) <= 2  # width min(max(16 // 15 + 1, 2), 32, 6) = 2
    top2 = torch.topk(logits, 2, dim=-1).indices
    for i in range(1, 17):
        assert tree.tokens[i] in top2[tree.depths[i] - 1].tolist()


def test_bfs_relabel_hand_worked():
    # Insertion order 0:root 1:(0) 2:(1) 3:(0) 4:(2) 5:(3)  ->  BFS 0, 1, 3, 2, 5, 4
    tree = DraftTree((-1, 0, 1, 0, 2, 3), (0, 10, 20, 30, 40, 50))
    bfs = oracle.bfs_relabel(tree)
    assert bfs.tokens == (0, 10, 30, 20, 50, 40)
    assert bfs.parents == (-1, 0, 0, 1, 2, 3)


def test_flat_fanout_accepts_a_later_sibling():
    tree = DraftTree((-1, 0, 0, 0, 0), (9, 3, 5, 7, 2))
    eagle = oracle.to_eagle(tree)
    assert eagle.retrive_next_token == (1, -1, -1, -1, -1)
    assert eagle.retrive_next_sibling == (-1, 2, 3, 4, -1)
    res = oracle.verify_greedy(tree, [7, 0, 0, 4, 0])
    assert res.path == (0, 3) and res.bonus_token == 4
    plan = commit_oracle.commit_plan(res, [100, 101, 102, 103, 104], seq_len=0)
    assert plan.kept_slots == (100, 103) and plan.freed_slots == (101, 102, 104)


def test_walk_limit_and_duplicate_sibling_tokens():
    tree = DraftTree((-1, 0, 0, 1), (0, 5, 5, 6))  # two siblings hold 5: the lower index wins
    assert oracle.verify_greedy(tree, [5, 6, 0, 1]).path == (0, 1, 3)
    assert oracle.verify_greedy(tree, [5, 6, 0, 1], max_accepted=1).path == (0, 1)


def test_mask_and_positions():
    tree = DraftTree((-1, 0, 0, 1), (0, 1, 2, 3))
    assert oracle.ancestor_mask(tree).astype(int).tolist() == [
        [1, 0, 0, 0],
        [1, 1, 0, 0],
        [1, 0, 1, 0],
        [1, 1, 0, 1],
    ]
    assert oracle.positions(tree, start=10) == [10, 11, 11, 12]


def test_eagle_walk_matches_tree_walk_on_hand_tree():
    tree = DraftTree((-1, 0, 0, 1, 2, 2), (1, 2, 3, 4, 5, 6))
    target = [3, 0, 6, 0, 0, 8]
    e = oracle.to_eagle(tree)
    out = oracle.verify_greedy_eagle([e.candidates], [e.retrive_index], [e.retrive_next_token],
                                     [e.retrive_next_sibling], [target], accept_width=4)
    res = oracle.verify_greedy(tree, target, max_accepted=3)
    assert res.path == (0, 2, 5)
    assert out.accept_index == ((0, 2, 5, None),)
    assert out.accept_token_num == (2,)
    assert out.predicts == (3, None, 6, None, None, 8)


@pytest.mark.parametrize("parents, field", [
    ((0, 0), "parents[0]"),
    ((-1, 1), "parents[1]"),
    ((-1, 0, 3, 0), "parents[2]"),  # parent index after its child
])
def test_malformed_trees_name_the_field(parents, field):
    with pytest.raises(CaseError, match=field.replace("[", r"\[").replace("]", r"\]")):
        DraftTree(parents, tuple(range(len(parents))))


@given(logits=draft_logits(block_size=6, vocab=5), budget=st.integers(0, 30), cap=st.one_of(st.none(), st.integers(1, 4)))
def test_best_first_pops_paths_in_score_order(logits, budget, cap):
    """Best-first invariants: parent before child, depth <= L, tokens from the per-depth top-k, and path
    scores non-increasing in insertion order (each pop is the best remaining path)."""
    tree = oracle.build_best_first(logits, budget, root_token=0, topk_cap=cap)
    k = oracle.topk_width(budget, logits.shape[1], cap)
    assert tree.budget <= budget
    assert all(tree.parents[i] < i for i in range(1, tree.num_nodes))
    assert tree.max_depth <= logits.shape[0]
    logp = torch.log_softmax(logits, dim=-1)
    kth = torch.topk(logp, k, dim=-1).values[:, -1] if k else None  # the k-th best value per depth (ties allowed)
    scores = [0.0]
    for i in range(1, tree.num_nodes):
        d = tree.depths[i]
        assert float(logp[d - 1, tree.tokens[i]]) >= float(kth[d - 1]) - 1e-12
        scores.append(scores[tree.parents[i]] + float(logp[d - 1, tree.tokens[i]]))
    assert all(a >= b - 1e-9 for a, b in zip(scores[1:], scores[2:]))
    if budget <= logits.shape[0] and k:
        # enough depth for a chain, so the budget is always filled
        assert tree.budget == budget


def test_commit_plan_in_place_at_page_1_and_compacting_above():
    res = oracle.VerifyResult(path=(0, 2, 5), bonus_token=7)
    block = list(range(40, 49)) + [-1] * 7  # D = 9 slots in a capacity-16 row; position = slot (seq_len 40)
    flat = commit_oracle.commit_plan(res, block, seq_len=40)
    assert flat.kept_slots == flat.committed_slots == (40, 42, 45) and flat.front_slots == (40, 41, 42)
    assert flat.freed_slots == flat.released_slots == (41, 43, 44, 46, 47, 48) and flat.retained_slots == ()
    paged = commit_oracle.commit_plan(res, block, seq_len=40, page_size=4)
    assert paged.kept_slots == (40, 42, 45) and paged.committed_slots == (40, 41, 42)
    assert paged.freed_slots == (43, 44, 45, 46, 47, 48)
    assert paged.retained_slots == (43,) and paged.released_slots == (44, 45, 46, 47, 48)  # from ceil_align(43, 4)
    assert paged.req_to_token == ((40, 40), (41, 41), (42, 42)) and paged.new_seq_len == 43
    assert commit_oracle.release_boundary(43, 4) == 44 and commit_oracle.release_boundary(44, 4) == 44
    with pytest.raises(CaseError, match="padding"):
        commit_oracle.commit_plan(oracle.VerifyResult(path=(0, 9), bonus_token=1), block, seq_len=40)


@given(rows=st.integers(1, 6), vocab=st.integers(1, 40), k=st.integers(1, 45),
       values=st.lists(st.integers(-3, 3), min_size=6 * 40, max_size=6 * 40))
def test_top_k_is_the_stable_sorts_first_k_ties_included(rows, vocab, k, values):
    """``top_k`` takes the k largest by partition: the same ids and values, in the same order, as a stable sort of
    every row (ties: lower index first), here with few distinct values so that ties cross the k-th place."""
    import numpy as np

    logp = np.array(values[:rows * vocab], dtype=np.float64).reshape(rows, vocab)
    ids = np.argsort(-logp, axis=-1, kind="stable")[:, :k]
    assert oracle.top_k(logp, k) == (np.take_along_axis(logp, ids, axis=-1).tolist(), ids.tolist())
