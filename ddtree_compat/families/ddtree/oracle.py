"""The oracle for DDTree implementations' own kernels: pure Python, written from the rules those
implementations document (tree build, prune, verify-input compile, packed mask, FlashAttention metadata,
greedy follow, sampling verify, CUDA-graph buckets), not from their code.

Conventions (the implementations' docstrings and code; ``docs/ddtree-impls.md`` names each by repository and commit):
per request,
``L = block_size - 1`` depth positions with top-``K`` log-probabilities ``lp[d][r]`` (descending) and
token ids ``ids[d][r]``; budget ``B``; node 0 is the root (the previous bonus token, not in the node
arrays), node ``n >= 1`` is the ``n``-th popped heap entry (insertion order); ``parents[0] = -1``; depth 1
is a child of the root; ``tokens[n - 1]`` / ``depths[n - 1]`` describe node ``n``. Scores are float64 sums
of the float32 log-probs: a first child scores ``s + lp[d][0]``, a next sibling ``s - lp[d][r] + lp[d][r + 1]``
(that expression, in that order).

Two tie rules exist and differ on tied sums (bf16 or quantised log-probs; never on random float32):
the CPU builders break ties by the rank path (lexicographic), the Triton heap kernel by push order
(the lowest heap slot, a node's sibling pushed before its child). When the heap empties the CPU builder
stops (fewer than ``B + 1`` nodes); the kernel always makes ``B`` pops and, with no live entry left,
re-emits its first slot (parent 0, depth 1, rank 0) with score ``-inf``.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Sequence

CPU_RULE = "rank-path"
KERNEL_RULE = "push-order"


@dataclass(frozen=True)
class BuiltTree:
    """One request's built tree.

    Attributes:
        tokens: token of node ``n`` at index ``n - 1`` (length ``size - 1``).
        depths: depth of node ``n`` at index ``n - 1``.
        parents: ``parents[n]`` (length ``size``; ``parents[0] = -1``).
    """

    tokens: tuple[int, ...]
    depths: tuple[int, ...]
    parents: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.parents)

    def visibility(self) -> list[list[bool]]:
        """``[size][size]``: ``vis[i][j]`` iff ``j`` is ``i`` or an ancestor of ``i``."""
        n = self.size
        vis = [[False] * n for _ in range(n)]
        for i in range(n):
            j = i
            while j != -1:
                vis[i][j] = True
                j = self.parents[j]
        return vis


def build(lp: Sequence[Sequence[float]], ids: Sequence[Sequence[int]], budget: int, rule: str) -> BuiltTree:
    """Best-first build of one request (``rule``: :data:`CPU_RULE` or :data:`KERNEL_RULE`).

    Raises:
        ValueError: ``budget < 1``, empty top-k, or an unknown rule.
    """
    depth_limit, k = len(lp), len(lp[0]) if lp else 0
    if budget < 1 or k < 1 or depth_limit < 1:
        raise ValueError(f"budget {budget}, top-k {k}, depth limit {depth_limit}: each must be >= 1")
    if rule == CPU_RULE:
        return _build_rank_path(lp, ids, budget, depth_limit, k)
    if rule == KERNEL_RULE:
        return _build_push_order(lp, ids, budget, depth_limit, k)
    raise ValueError(f"unknown tie rule {rule!r}")


def _build_rank_path(lp, ids, budget, depth_limit, k) -> BuiltTree:
    tokens, depths, parents = [], [], [-1]
    heap = [(-lp[0][0], (0,), 0, 1, 0, lp[0][0])]  # (-score, rank path, parent, depth, rank, score)
    while heap and len(tokens) < budget:
        _, path, parent, depth, rank, score = heapq.heappop(heap)
        node = len(tokens) + 1
        tokens.append(ids[depth - 1][rank])
        depths.append(depth)
        parents.append(parent)
        if rank + 1 < k:  # the next sibling, then the first child
            sibling = score - lp[depth - 1][rank] + lp[depth - 1][rank + 1]
            heapq.heappush(heap, (-sibling, path[:-1] + (rank + 1,), parent, depth, rank + 1, sibling))
        if depth < depth_limit:
            child = score + lp[depth][0]
            heapq.heappush(heap, (-child, path + (0,), node, depth + 1, 0, child))
    return BuiltTree(tuple(tokens), tuple(depths), tuple(parents))


def _build_push_order(lp, ids, budget, depth_limit, k) -> BuiltTree:
    slots: dict[int, tuple[float, int, int, int]] = {0: (lp[0][0], 0, 1, 0)}  # slot -> (score, parent, depth, rank)
    tokens, depths, parents = [], [], [-1]
    for i in range(budget):
        live = [s for s, entry in slots.items() if entry[0] != -math.inf]
        if live:
            best = max(slots[s][0] for s in live)
            pos = min(s for s in live if slots[s][0] == best)
        else:  # every slot is -inf: the lowest one, slot 0, is taken again
            pos = 0
        score, parent, depth, rank = slots[pos]
        slots[pos] = (-math.inf, parent, depth, rank)
        node = i + 1
        tokens.append(ids[depth - 1][rank])
        depths.append(depth)
        parents.append(parent)
        if k > 1 and rank + 1 < k:
            slots[2 * i + 1] = (score - lp[depth - 1][rank] + lp[depth - 1][rank + 1], parent, depth, rank + 1)
        if depth < depth_limit:
            slots[2 * i + 2] = (score + lp[depth][0], node, depth + 1, 0)
    return BuiltTree(tuple(tokens), tuple(depths), tuple(parents))


def prune_deepest_chains(tree: BuiltTree) -> tuple[BuiltTree, list[int]]:
    """Keep the root and every node whose subtree reaches the tree's deepest depth, in their old order;
    returns the pruned tree and the kept old indices."""
    depth = [0, *tree.depths]
    deepest = list(depth)
    for n in range(tree.size - 1, 0, -1):
        p = tree.parents[n]
        deepest[p] = max(deepest[p], deepest[n])
    top = max(depth)
    kept = [n for n in range(tree.size) if n == 0 or deepest[n] == top]
    new = {old: i for i, old in enumerate(kept)}
    return BuiltTree(tuple(tree.tokens[n - 1] for n in kept[1:]), tuple(tree.depths[n - 1] for n in kept[1:]),
                     tuple(-1 if n == 0 else new[tree.parents[n]] for n in kept)), kept


@dataclass(frozen=True)
class TreeArrays:
    """One request's build outputs as the implementations lay them out (budget ``B``).

    Attributes:
        tokens, depths: length ``B``, zero past the tree.
        parents: length ``B + 1``, ``-1`` past the tree.
        visibility: ``[B + 1][B + 1]``; rows and columns past the tree all False (``padding="empty"``,
            the CPU builders) or the identity (``padding="identity"``: the Triton prune).
        size: the tree's node count (``B + 1`` for the Triton builder, which always pops ``B`` times).
    """

    tokens: tuple[int, ...]
    depths: tuple[int, ...]
    parents: tuple[int, ...]
    visibility: tuple[tuple[bool, ...], ...]
    size: int


def arrays(tree: BuiltTree, budget: int, padding: str = "empty") -> TreeArrays:
    n = tree.size
    vis = [[False] * (budget + 1) for _ in range(budget + 1)]
    for i, row in enumerate(tree.visibility()):
        vis[i][:n] = row
    if padding == "identity":
        for i in range(n, budget + 1):
            vis[i][i] = True
    return TreeArrays(tuple(tree.tokens) + (0,) * (budget - n + 1), tuple(tree.depths) + (0,) * (budget - n + 1),
                      tuple(tree.parents) + (-1,) * (budget + 1 - n), tuple(tuple(r) for r in vis), n)


def compile_inputs(root: int, arrays_: TreeArrays, start: int, q: int) -> tuple[list[int], list[int]]:
    """Verify ids and positions of one request, ``q`` columns: ``[root] + tokens[0 : q - 1]`` and
    ``[start] + [start + depth]`` (the node arrays' zeros past the tree give token 0, position ``start``)."""
    return [root, *arrays_.tokens[:q - 1]], [start, *(start + d for d in arrays_.depths[:q - 1])]


def packed_mask(visibility: Sequence[Sequence[bool]], size: int, past: int, q: int) -> list[bool]:
    """One request's block of the packed tree mask, row-major ``[q, past + q]``: a live row (``i < size``)
    sees the whole prefix and its visible tree columns (``j < size``); a padding row sees only itself."""
    out = []
    for i in range(q):
        if i < size:
            out += [True] * past + [j < size and bool(visibility[i][j]) for j in range(q)]
        else:
            out += [False] * past + [j == i for j in range(q)]
    return out


def padded_visibility(visibility: Sequence[Sequence[bool]], size: int, q: int) -> list[list[bool]]:
    """The ``[q][q]`` visibility after padding rows ``size..q-1`` to the identity (live rows unchanged)."""
    return [[bool(visibility[i][j]) if i < size else i == j for j in range(q)] for i in range(q)]


def fa_suffix_row(visibility_row: Sequence[bool], slots: Sequence[int], q: int) -> tuple[list[int], int]:
    """One FA suffix-metadata row: the visible tree columns' KV slots (``slots[j]`` = the request's
    ``req_to_token`` entry at position ``seq_len + j``) in column order, zero-filled to ``q``, and its length."""
    visible = [slots[j] for j in range(q) if visibility_row[j]]
    return visible + [0] * (q - len(visible)), len(visible)


def fa_full_row(visibility_row: Sequence[bool], prefix_slots: Sequence[int], slots: Sequence[int],
                q: int) -> tuple[list[int], int]:
    """One FA full-metadata row (entries up to its length): the prefix's slots then the visible tree
    columns' slots, and ``seq_len + #visible``."""
    suffix, n = fa_suffix_row(visibility_row, slots, q)
    return [*prefix_slots, *suffix[:n]], len(prefix_slots) + n


@dataclass(frozen=True)
class Followed:
    """Greedy follow of one request: accepted node indices (root first), their tokens, the next token."""

    indices: tuple[int, ...]
    tokens: tuple[int, ...]
    next_token: int


def follow(draft: Sequence[int], target: Sequence[int], parents: Sequence[int], size: int, q: int,
           cap: bool = True) -> Followed:
    """Walk from the root: at node ``cur`` take the lowest-index child ``j < size`` with
    ``parents[j] == cur`` and ``draft[j] == target[cur]``; stop when none (or after ``q - 1`` steps when
    ``cap``). ``draft[0]`` is the root token; ``size`` is clamped to ``1..q``."""
    live = max(1, min(size, q))
    path, nxt = [0], target[0]
    while not cap or len(path) < q:
        child = next((j for j in range(1, live) if parents[j] == path[-1] and draft[j] == nxt), None)
        if child is None:
            break
        path.append(child)
        nxt = target[child]
    return Followed(tuple(path), tuple(draft[j] for j in path), int(nxt))


def eagle_links_reverse(parents: Sequence[int]) -> tuple[list[int], list[int]]:
    """EAGLE links with children in reverse insertion order (DFlash's DDTree builder): ``next_token[p]`` =
    the highest-index child of ``p``, ``next_sibling[c]`` = the next lower-index child of the same parent."""
    n = len(parents)
    first, sibling = [-1] * n, [-1] * n
    for c in range(1, n):
        p = parents[c]
        sibling[c] = first[p]
        first[p] = c
    return first, sibling


def graph_buckets(budget: int, prune: bool, configured: Sequence[int] = ()) -> list[int]:
    """CUDA-graph verify widths an implementation captures: ``M = B + 1``; the configured widths if any,
    else ``[M]`` without prune, else a ladder by ``M`` (to 33: 8, 12, ..., 28; to 65: 8, 12, 16, 24, ..., 56;
    to 129: 8, 16, 24, 32, 48, 64, 80, 96, 112; above: 8, 16, 24, 32, 48, 64, 96, 128); then those in
    ``1..M``, sorted, unique, with ``M`` last.

    Raises:
        ValueError: ``B + 1 <= 0``.
    """
    top = budget + 1
    if top <= 0:
        raise ValueError(f"tree_budget must be non-negative, got {budget}")
    if configured:
        widths = list(configured)
    elif not prune:
        widths = [top]
    elif top <= 33:
        widths = [8, 12, 16, 20, 24, 28]
    elif top <= 65:
        widths = [8, 12, 16, 24, 32, 40, 48, 56]
    elif top <= 129:
        widths = [8, 16, 24, 32, 48, 64, 80, 96, 112]
    else:
        widths = [8, 16, 24, 32, 48, 64, 96, 128]
    kept = sorted({w for w in widths if 0 < w <= top})
    return kept if kept and kept[-1] == top else [*kept, top]


def select_bucket(size: int, buckets: Sequence[int]) -> int:
    """The first bucket ``>= max(1, size)``, else the last."""
    return next((b for b in buckets if b >= max(1, size)), buckets[-1])


def sample_walk(draft: Sequence[int], parents: Sequence[int], size: int, q: int, probs: Sequence[dict],
                uniforms: Sequence[float], uniform_final: float) -> Followed:
    """Sampling verify of one request, given its uniforms (the implementations' documented rule): from the
    root, at node ``cur`` its children ``j < size`` (``parents[j] == cur``) in index order, each with the
    target's mass ``probs[cur][draft[j]]``; accept the first child whose cumulative mass exceeds
    ``uniforms[cur]`` (strictly: ``u < prefix``; the uniform of the node, not of the step), else stop (after at
    most ``q - 1`` steps). The bonus token: the target's distribution at the last accepted node with its
    children's tokens removed, inverted at ``uniform_final * total`` (the first token whose cumulative mass
    reaches it). ``probs[i]``: ``{token: float32 mass}`` (tokens absent have mass 0); sums are exact when
    the masses are dyadic (as the cases draw them). ``size`` is clamped to ``1..q``."""
    import numpy as np

    live = max(1, min(size, q))
    path = [0]
    for _ in range(q - 1):
        cur = path[-1]
        prefix, chosen = np.float32(0), None
        for j in range(1, live):
            if parents[j] == cur:
                prefix = np.float32(prefix + np.float32(probs[cur].get(draft[j], 0.0)))
                if np.float32(uniforms[cur]) < prefix:
                    chosen = j
                    break
        if chosen is None:
            break
        path.append(chosen)
    cur = path[-1]
    removed = {draft[j] for j in range(1, live) if parents[j] == cur}
    masses = sorted((t, np.float32(m)) for t, m in probs[cur].items() if t not in removed and m > 0)
    total = np.float32(sum(m for _, m in masses)) if masses else np.float32(0)
    threshold = np.float32(np.float32(uniform_final) * max(total, np.float32(0)))
    cdf, bonus = np.float32(0), None
    for t, m in masses:
        cdf = np.float32(cdf + m)
        if cdf >= threshold:
            bonus = t
            break
    if bonus is None:  # threshold 0 with no mass before it, or past the total: the first / the last token
        bonus = 0 if threshold <= 0 else (masses[-1][0] if masses else 0)
    return Followed(tuple(path), tuple(draft[j] for j in path), int(bonus))
