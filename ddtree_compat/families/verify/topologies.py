"""Draft-tree topologies: one function each, registered in :data:`TOPOLOGIES`.

To add a topology, write ``def my_shape(budget, block_size, rng, vocab, topk_cap) -> DraftTree`` and add it
to :data:`TOPOLOGIES` (and, if it cannot exist for some budgets, to :func:`supports_budget`).
Every function returns ``B + 1`` nodes with depth <= ``block_size - 1`` and distinct sibling tokens.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from . import oracle
from ...tree import DraftTree

TopologyFn = Callable[[int, int, np.random.Generator, int, "int | None"], DraftTree]


def _root(rng: np.random.Generator, vocab: int) -> int:
    return int(rng.integers(vocab))


def _distinct_sibling_tokens(parents: list[int], rng: np.random.Generator, vocab: int) -> DraftTree:
    """Random tokens, distinct among the children of each node (DDTree siblings are distinct top-k ids)."""
    tokens = [_root(rng, vocab)] + [0] * (len(parents) - 1)
    kids: dict[int, list[int]] = {}
    for i in range(1, len(parents)):
        kids.setdefault(parents[i], []).append(i)
    for group in kids.values():
        for node, tok in zip(group, rng.choice(vocab, size=len(group), replace=False)):
            tokens[node] = int(tok)
    return DraftTree(tuple(parents), tuple(tokens))


def spine(budget: int, block_size: int, rng: np.random.Generator, vocab: int, topk_cap: int | None) -> DraftTree:
    """SGLang spine mode: argmax chain of ``B`` nodes (needs ``B <= block_size - 1``)."""
    logits = rng.standard_normal((block_size - 1, vocab))
    return oracle.build_spine(logits, budget, _root(rng, vocab))


def fanout(budget: int, block_size: int, rng: np.random.Generator, vocab: int, topk_cap: int | None) -> DraftTree:
    """Flat fan-out: all ``B`` nodes children of the root (what best-first gives when ``B <= top-k cap``
    and depth 1 dominates)."""
    return _distinct_sibling_tokens([-1] + [0] * budget, rng, vocab)


def _best_first(peak: float, budget: int, block_size: int, rng: np.random.Generator, vocab: int, topk_cap):
    logits = rng.standard_normal((block_size - 1, vocab)) * (0.1 if peak == 0 else 1.0)
    if peak:
        logits[np.arange(block_size - 1), rng.integers(vocab, size=block_size - 1)] += peak
    return oracle.build_best_first(logits, budget, _root(rng, vocab), topk_cap)


def bf_peaked(budget: int, block_size: int, rng: np.random.Generator, vocab: int, topk_cap: int | None) -> DraftTree:
    """Best-first build from peaked draft logits (one dominant token per depth): deep, spine-like trees."""
    return _best_first(6.0, budget, block_size, rng, vocab, topk_cap)


def bf_flat(budget: int, block_size: int, rng: np.random.Generator, vocab: int, topk_cap: int | None) -> DraftTree:
    """Best-first build from near-uniform draft logits: wide, shallow trees."""
    return _best_first(0.0, budget, block_size, rng, vocab, topk_cap)


def balanced_arity(budget: int, block_size: int) -> int:
    """Smallest arity ``k >= 2`` whose level-order fill of ``B`` nodes stays within depth ``block_size - 1``."""
    k = 2
    while True:
        level, total, depth = 1, 0, 0
        while total < budget:
            level *= k
            total += level
            depth += 1
        if depth <= block_size - 1:
            return k
        k += 1


def balanced(budget: int, block_size: int, rng: np.random.Generator, vocab: int, topk_cap: int | None) -> DraftTree:
    """Balanced k-ary tree filled level by level (``k`` from :func:`balanced_arity`)."""
    k = balanced_arity(budget, block_size)
    return _distinct_sibling_tokens([-1] + [(i - 1) // k for i in range(1, budget + 1)], rng, vocab)


def random_tree(budget: int, block_size: int, rng: np.random.Generator, vocab: int, topk_cap: int | None) -> DraftTree:
    """Random tree: each node's parent drawn uniformly among earlier nodes above the depth limit."""
    parents, depths = [-1], [0]
    for _ in range(budget):
        eligible = [n for n, d in enumerate(depths) if d < block_size - 1]
        p = int(eligible[rng.integers(len(eligible))])
        parents.append(p)
        depths.append(depths[p] + 1)
    return _distinct_sibling_tokens(parents, rng, vocab)


TOPOLOGIES: dict[str, TopologyFn] = {
    "spine": spine,
    "fanout": fanout,
    "bf-peaked": bf_peaked,
    "bf-flat": bf_flat,
    "balanced": balanced,
    "random": random_tree,
}


def supports_budget(topology: str, budget: int, block_size: int, vocab: int, topk_cap: int | None) -> bool:
    """Whether ``topology`` exists for this budget (the grid generates only these combinations)."""
    if budget == 0:
        return topology == "spine"  # every topology is the bare root; keep one
    if topology == "spine":
        return budget <= block_size - 1
    if topology == "fanout":
        return budget <= vocab and (topk_cap is None or budget <= topk_cap)
    return True
