"""The verify family's oracle: pure-Python (and NumPy) reference of DDTree's tree build, tree compile and
greedy verify (the commit rules: :mod:`ddtree_compat.families.commit.oracle`). No torch: it runs wherever
cases are made or read.

Every function here is pure (no device, no global state) and written for reading, not speed. Sources:

* DDTree paper (arXiv 2604.12989), Sec. 3: best-first tree construction over per-depth top-k
  log-probabilities under a node budget; ancestor-only verification; greedy acceptance walk.
* SGLang DDTree PR #29907: spine mode for ``B <= block_size - 1``, full-tree width
  ``min(max(B // L + 1, 2), V, max_topk)``, BFS relabelling, EAGLE-format retrieve arrays.
* SGLang ``verify_tree_greedy`` (``sglang.kernels.ops.speculative.tree`` /
  ``spec_tree.verify_tree_greedy_triton``): the kernel contract :func:`verify_greedy_eagle` models.
* The ancestor-only mask (:func:`ancestor_mask`) the verify attention is judged under; its float
  reference: :func:`ddtree_compat.families.attention.oracle.verify_attention_reference`.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...errors import CaseError
from ...tree import AcceptedPath, DraftTree

# --------------------------------------------------------------------------------------------------
# Tree build
# --------------------------------------------------------------------------------------------------


def topk_width(budget: int, vocab: int, topk_cap: int | None = None) -> int:
    """Per-depth top-k width of the paper's build: ``k = min(budget, vocab[, topk_cap])``."""
    k = min(budget, vocab)
    return k if topk_cap is None else min(k, topk_cap)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise ``log_softmax`` in float64: ``x - max - log(sum(exp(x - max)))``."""
    x = np.asarray(logits, dtype=np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def top_k(logp: np.ndarray, k: int) -> tuple[list[list[float]], list[list[int]]]:
    """Per row, the ``k`` largest values and their indices, descending (ties: lower index first).

    Args:
        logp: ``[L, V]`` floats (a drafter's log-probabilities, one row per depth).
        k: ``>= 1``; more than ``V`` gives all ``V``.

    Returns:
        ``(values, ids)``: nested lists ``[L][min(k, V)]`` of floats and of int vocabulary ids, the same as the
        first ``k`` of a stable descending sort of each row (the best-first build's order, paper Sec. 3).
    """
    logp = np.asarray(logp)
    if k >= logp.shape[-1]:
        ids = np.argsort(-logp, axis=-1, kind="stable")
    else:
        # The k largest of each row, sorted by (value descending, index): the stable full sort's first k, in
        # O(V) per row. A row whose k-th value ties with an entry left out takes the full sort.
        ids = np.argpartition(-logp, k - 1, axis=-1)[:, :k]
        picked = np.take_along_axis(logp, ids, axis=-1)
        ids = np.take_along_axis(ids, np.lexsort((ids, -picked), axis=-1), axis=-1)
        tied = (logp >= picked.min(axis=-1, keepdims=True)).sum(axis=-1) > k
        for row in np.flatnonzero(tied):
            ids[row] = np.argsort(-logp[row], kind="stable")[:k]
    ids = ids[:, :k]
    return np.take_along_axis(logp, ids, axis=-1).tolist(), ids.tolist()


def build_best_first(draft_logits, budget: int, root_token: int, topk_cap: int | None = None) -> DraftTree:
    """Best-first DDTree build (paper Sec. 3) from one drafted block.

    Args:
        draft_logits: ``[L, V]`` float logits of the drafter (anything ``numpy.asarray`` reads), one
            row per depth 1..L
            (``L = block_size - 1`` is the depth limit).
        budget: ``B >= 0`` drafted nodes to add (the root is extra).
        root_token: token id of node 0 (the previous bonus token).
        topk_cap: optional cap on the per-depth width ``k`` (see :func:`topk_width`).

    Returns:
        A tree of ``min(B, reachable) + 1`` nodes in insertion order. A heap entry is a partial path
        keyed by its summed log-probability; popping one adds it as a node, then pushes its next
        sibling (same depth, rank + 1) and its first child (depth + 1, rank 0). Ties break on
        (depth, rank, parent) so the result is deterministic.

    Raises:
        CaseError: budget < 0, or logits not 2-D.
    """
    if budget < 0:
        raise CaseError("budget", budget, "integer >= 0", "negative")
    draft_logits = np.asarray(draft_logits, dtype=np.float64)
    if draft_logits.ndim != 2:
        raise CaseError("draft_logits", tuple(draft_logits.shape), "[L, V]", "not 2-D")
    depth_limit, vocab = draft_logits.shape
    parents, tokens, scores = [-1], [int(root_token)], [0.0]
    k = topk_width(budget, vocab, topk_cap)
    if budget == 0 or depth_limit == 0 or k == 0:
        return DraftTree(tuple(parents), tuple(tokens))
    lp, ids = top_k(log_softmax(draft_logits), k)  # [L, k], sorted descending
    # entry: (-score, depth (1-based), rank, parent node)
    heap = [(-lp[0][0], 1, 0, 0)]
    while heap and len(parents) - 1 < budget:
        neg_score, depth, rank, parent = heapq.heappop(heap)
        node = len(parents)
        parents.append(parent)
        tokens.append(ids[depth - 1][rank])
        scores.append(-neg_score)
        if rank + 1 < k:
            heapq.heappush(heap, (-(scores[parent] + lp[depth - 1][rank + 1]), depth, rank + 1, parent))
        if depth < depth_limit:
            heapq.heappush(heap, (-(scores[node] + lp[depth][0]), depth + 1, 0, node))
    return DraftTree(tuple(parents), tuple(tokens))


def build_spine(draft_logits, budget: int, root_token: int) -> DraftTree:
    """SGLang DDTree *spine mode*: the argmax chain of the first ``B`` depths (``D = B + 1`` nodes).

    Raises:
        CaseError: ``B`` larger than the depth limit ``L`` (spine mode needs ``B <= block_size - 1``).
    """
    draft_logits = np.asarray(draft_logits)
    depth_limit = draft_logits.shape[0]
    if not 0 <= budget <= depth_limit:
        raise CaseError("budget", budget, f"0..{depth_limit} (spine mode: B <= block_size - 1)", "out of range")
    chain = draft_logits[:budget].argmax(axis=-1).tolist()
    return DraftTree(tuple(range(-1, budget)), (int(root_token), *chain))


def bfs_relabel(tree: DraftTree) -> DraftTree:
    """Relabel nodes in BFS order (depth-major, children in index order), as SGLang's full-tree mode does."""
    order, queue = [], deque([0])
    while queue:
        n = queue.popleft()
        order.append(n)
        queue.extend(tree.children[n])
    new_index = {old: new for new, old in enumerate(order)}
    parents = tuple(-1 if old == 0 else new_index[tree.parents[old]] for old in order)
    return DraftTree(parents, tuple(tree.tokens[old] for old in order))


def build_sglang_ddtree(draft_logits, budget: int, root_token: int, max_topk: int = 6) -> DraftTree:
    """The tree SGLang's DDTree PR would verify: spine when ``B <= L``, else a BFS-ordered best-first
    tree with width ``min(max(B // L + 1, 2), V, max_topk)`` (``SGLANG_DDTREE_MAX_TOPK``)."""
    depth_limit, vocab = np.shape(draft_logits)
    if budget <= depth_limit:
        return build_spine(draft_logits, budget, root_token)
    width = min(max(budget // depth_limit + 1, 2), vocab, max_topk)
    return bfs_relabel(build_best_first(draft_logits, budget, root_token, topk_cap=width))


# --------------------------------------------------------------------------------------------------
# Tree compile
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EagleTree:
    """One request's tree in SGLang's EAGLE retrieve format (all length ``D``, int; padding is -1).

    Attributes:
        retrive_index: ``k`` for node ``k`` (the batch layout adds the request's row offset).
        retrive_next_token: first (lowest-index) child of node ``k``, or -1.
        retrive_next_sibling: next higher-index child of ``k``'s parent, or -1.
        candidates: token of node ``k``.
    """

    retrive_index: tuple[int, ...]
    retrive_next_token: tuple[int, ...]
    retrive_next_sibling: tuple[int, ...]
    candidates: tuple[int, ...]


def to_eagle(tree: DraftTree) -> EagleTree:
    """Compile a tree to EAGLE format: children linked in ascending index order."""
    first_child = [-1] * tree.num_nodes
    next_sibling = [-1] * tree.num_nodes
    for kids in tree.children:
        if kids:
            first_child[tree.parents[kids[0]]] = kids[0]
        for a, b in zip(kids, kids[1:]):
            next_sibling[a] = b
    return EagleTree(tuple(range(tree.num_nodes)), tuple(first_child), tuple(next_sibling), tree.tokens)


def ancestor_mask(tree: DraftTree) -> np.ndarray:
    """Ancestor-only visibility: ``bool [D, D]``, ``mask[i, j]`` iff ``j`` is ``i`` or an ancestor of ``i``."""
    d = tree.num_nodes
    mask = np.zeros((d, d), dtype=bool)
    for i in range(d):
        mask[i, list(tree.path_to(i))] = True
    return mask


def positions(tree: DraftTree, start: int) -> list[int]:
    """Position ids ``[D]``: ``start + depth`` (the root sits at ``start``, the current seq_len)."""
    return [start + depth for depth in tree.depths]


# --------------------------------------------------------------------------------------------------
# Verify
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyResult(AcceptedPath):
    """Outcome of one request's greedy verify.

    Attributes:
        path: accepted node indices from the root (``path[0] == 0``), in tree order.
        bonus_token: the target's token at the last accepted node (emitted after the accepted drafts).
    """

    path: tuple[int, ...]
    bonus_token: int


def verify_greedy(tree: DraftTree, target_predict: Sequence[int], max_accepted: int | None = None) -> VerifyResult:
    """Greedy verify walk on the tree (paper Sec. 3; SGLang ``verify_tree_greedy``).

    From the root, look up the target's argmax ``target_predict[node]``; move to the lowest-index child
    holding that token; stop when none does or ``max_accepted`` drafts were accepted
    (``accept_index.shape[1] - 1`` in the kernels).

    Args:
        target_predict: length ``D`` target argmax token per node.
    """
    if len(target_predict) != tree.num_nodes:
        raise CaseError("target_predict", len(target_predict), f"{tree.num_nodes} (one per node)", "length mismatch")
    limit = tree.budget if max_accepted is None else max_accepted
    path = [0]
    while len(path) - 1 < limit:
        want = int(target_predict[path[-1]])
        nxt = next((c for c in tree.children[path[-1]] if tree.tokens[c] == want), None)
        if nxt is None:
            break
        path.append(nxt)
    return VerifyResult(tuple(path), int(target_predict[path[-1]]))


@dataclass(frozen=True)
class KernelVerifyOutputs:
    """What ``verify_tree_greedy`` writes for a batch, with ``None`` where it must not write.

    Attributes:
        predicts: length ``bs * C``; the target token at each accepted node's flat index.
        accept_index: ``bs`` rows of ``accept_width``; flat indices ``b * C + node`` of the accepted path.
        accept_token_num: accepted drafts per request.
    """

    predicts: tuple[int | None, ...]
    accept_index: tuple[tuple[int | None, ...], ...]
    accept_token_num: tuple[int, ...]


def verify_greedy_eagle(
    candidates: Sequence[Sequence[int]],
    retrive_index: Sequence[Sequence[int]],
    retrive_next_token: Sequence[Sequence[int]],
    retrive_next_sibling: Sequence[Sequence[int]],
    target_predict: Sequence[Sequence[int]],
    accept_width: int,
) -> KernelVerifyOutputs:
    """The kernel contract of SGLang's ``verify_tree_greedy`` over EAGLE-format ``[bs, C]`` rows.

    A second, independent statement of :func:`verify_greedy`: it follows the retrieve links instead
    of the parent array, and reads ``target_predict`` at flat index ``retrive_index`` (as the kernels
    do), so comparing the two checks the layout as well as the walk.
    """
    bs = len(candidates)
    cap = len(candidates[0]) if bs else 0
    predicts: list[int | None] = [None] * (bs * cap)
    accept_index = [[None] * accept_width for _ in range(bs)]
    accept_num = [0] * bs
    flat_target = [t for row in target_predict for t in row]
    for b in range(bs):
        last = retrive_index[b][0]
        accept_index[b][0] = last
        cur = 0
        for _ in range(1, accept_width):
            cur = retrive_next_token[b][cur]
            while cur != -1 and candidates[b][cur] != flat_target[last]:
                cur = retrive_next_sibling[b][cur]
            if cur == -1:
                break
            predicts[last] = flat_target[last]
            accept_num[b] += 1
            last = retrive_index[b][cur]
            accept_index[b][accept_num[b]] = last
        predicts[last] = flat_target[last]
    return KernelVerifyOutputs(tuple(predicts), tuple(tuple(r) for r in accept_index), tuple(accept_num))


PADDING_SLOT = -1  # an ``out_cache_loc`` / node slot past a request's D nodes (buffers sized for capacity C)
