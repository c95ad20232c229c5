"""Hypothesis strategies: drawn draft trees (parent arrays or built from drawn drafter logits), budgets,
tokens and planted paths.

:func:`verify_cases` draws whole :class:`~ddtree_compat.families.verify.records.VerifyCase` objects (``origin="hypothesis"``)
that shrink toward small trees, small batches and few distinct tokens; a failing draw is written as a
case JSON by the plugin's check, so the shrunk minimal tree replays with one command.
"""

from __future__ import annotations

import zlib

from hypothesis import strategies as st

import torch

from . import oracle
from .records import Request, VerifyCase
from ...tree import DraftTree


@st.composite
def draft_trees(draw, max_budget: int = 40, block_size: int = 16, vocab: int = 64) -> DraftTree:
    """A tree of ``1..max_budget+1`` nodes, depth <= ``block_size - 1``, parents before children.

    Tokens may repeat among siblings (the walk then takes the lowest-index match, as the kernels do).
    """
    budget = draw(st.integers(0, max_budget))
    parents, depths = [-1], [0]
    for _ in range(budget):
        eligible = [n for n, d in enumerate(depths) if d < block_size - 1]
        p = draw(st.sampled_from(eligible))
        parents.append(p)
        depths.append(depths[p] + 1)
    tokens = draw(st.lists(st.integers(0, vocab - 1), min_size=budget + 1, max_size=budget + 1))
    return DraftTree(tuple(parents), tuple(tokens))


@st.composite
def draft_logits(draw, block_size: int = 16, vocab: int = 64) -> torch.Tensor:
    """Drafter logits ``float64 [block_size - 1, vocab]``: small integers (ties included) or a peaked row."""
    rows = block_size - 1
    values = draw(st.lists(st.integers(-4, 4), min_size=rows * vocab, max_size=rows * vocab))
    return torch.tensor(values, dtype=torch.float64).view(rows, vocab)


@st.composite
def logit_trees(draw, max_budget: int = 40, block_size: int = 16, vocab: int = 64) -> DraftTree:
    """A tree built by the oracle from drawn logits: best-first (optional top-k cap) or SGLang's mode choice."""
    logits = draw(draft_logits(block_size, min(vocab, 16)))
    budget = draw(st.integers(0, max_budget))
    root = draw(st.integers(0, min(vocab, 16) - 1))
    if draw(st.booleans()):
        return oracle.build_sglang_ddtree(logits, budget, root)
    return oracle.build_best_first(logits, budget, root, topk_cap=draw(st.one_of(st.none(), st.integers(1, 6))))


@st.composite
def planted_target(draw, tree: DraftTree, vocab: int) -> tuple[int, ...]:
    """``target_predict`` steering the walk down to a drawn node (then a drawn bonus token)."""
    target = draw(st.lists(st.integers(0, vocab - 1), min_size=tree.num_nodes, max_size=tree.num_nodes))
    end = draw(st.integers(0, tree.num_nodes - 1))
    path = tree.path_to(end)
    for u, v in zip(path, path[1:]):
        target[u] = tree.tokens[v]
    return tuple(target)


@st.composite
def verify_cases(draw, max_budget: int = 40, block_sizes=(4, 8, 16), max_batch: int = 3,
                 vocabs=(2, 8, 1024)) -> VerifyCase:
    """A batch of drawn trees sharing one budget, optionally padded to a larger capacity."""
    block_size = draw(st.sampled_from(block_sizes))
    vocab = draw(st.sampled_from(vocabs))
    first = draw(st.one_of(draft_trees(max_budget, block_size, vocab), logit_trees(max_budget, block_size, vocab)))
    budget = first.budget
    trees = [first]
    for _ in range(draw(st.integers(1, max_batch)) - 1):
        trees.append(draw(draft_trees(budget, block_size, vocab).filter(lambda t: t.budget == budget)))
    requests = tuple(Request(t.parents, t.tokens, draw(planted_target(t, vocab))) for t in trees)
    pad = draw(st.integers(0, 3))
    width = draw(st.one_of(st.none(), st.integers(1, block_size)))
    case = VerifyCase(budget, block_size, "custom", "custom", 0, vocab, requests,
                      capacity=budget + 1 + pad if pad else None, accept_width=width, origin="hypothesis")
    seed = zlib.crc32(case.to_json().encode())
    return VerifyCase(budget, block_size, "custom", "custom", seed, vocab, requests, case.capacity, width,
                      origin="hypothesis").check()
