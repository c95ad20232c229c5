"""The sampling family's oracle, decisions given the uniforms: pure Python, written from each sampler's
contract (``docs/sampling-kernels.md``), not from the code under test. Exact distributions of what the samplers
emit, and the planted skews, are :mod:`.law`'s.

Three samplers, one function each, all returning a :class:`Round` per request:

* :func:`tree_target_only`: SGLang's ``tree_speculative_sampling_target_only`` (EAGLE-format tree, target
  probabilities only). At the last accepted node ``n`` (the root first) its children are tried in EAGLE link
  order with one coin, ``uniforms[n]``, shared by the siblings: child ``c`` is accepted when its target mass
  ``p`` (row ``n``) is positive and ``coin < P / threshold_acc`` (``P``: the masses of ``n``'s children tried so
  far, ``c`` included) or ``p >= threshold_single``. A rejected child's target mass is written into
  ``draft_probs`` at row ``n``. The bonus token is drawn from ``relu(target - draft_probs)`` of the last
  accepted node with ``uniform_final`` (the full target row when ``width - 1`` drafts were accepted).
* :func:`chain_rejection`: SGLang's ``chain_speculative_sampling_triton`` (a chain; real draft probabilities):
  draft ``x`` at step ``s`` is accepted when ``uniforms[s - 1] * q(x) < p(x)`` (rows ``s - 1``; with
  ``draft_guard``, only when ``0 < q(x) <= 1``); the bonus from ``relu(p - q)`` of the first rejected step, or
  ``p`` of the last row when every draft was accepted. ``block=True``: block verification (arXiv 2403.10444,
  Algorithm 2) as the kernel states it.
* :func:`ddtree_native`: the DDTree implementations' ``sample_ddtree_target_probs_triton`` (parent array): at
  node ``n`` its children (index order) with the target's masses; the first child whose cumulative mass
  exceeds ``uniforms[n]`` is accepted; the bonus from node's row with its children's tokens zeroed.

Arithmetic: the kernels compute in float32. Every comparison here is made on float32 values the way the kernel
forms them (:func:`f32` rounds a float64 result of one operation on float32 operands to float32, which is the
correctly rounded float32 operation: binary64 has more than ``2 * 24 + 2`` bits). Sums over the vocabulary (the
bonus token's normaliser and CDF) are float64 here; they equal the kernel's whatever its summation order when
every mass is a multiple of a common power of two (the case generators draw such masses), which is the
condition for an exact comparison of bonus tokens.

Rows are sparse: ``{token: mass}``; a token absent has mass 0.

``skew=``: a planted skew of :mod:`.skews` instead of the sampler's rule (what a broken backend runs); the same
skew's law is :mod:`.law`'s.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Mapping, Sequence

from ...tree import AcceptedPath, DraftTree
from . import skews as K

Row = Mapping[int, float]

STRICT = "strict"
"""``coin < P / threshold_acc`` and a zero-mass child never accepted: SGLang's JIT kernel (0.5.22, 0.5.23)."""
INCLUSIVE = "inclusive"
"""``coin <= P / threshold_acc``, no zero-mass guard: the comparison seen in an earlier sgl-kernel source of the
same kernel (``docs/sampling-kernels.md``); a zero coin then accepts a first child of zero mass."""
COMPARES = (STRICT, INCLUSIVE)

BONUS_CUDA = "cuda"
"""The first token whose CDF exceeds ``u = coin * total`` (strictly); none: the last token with positive mass,
else ``vocab - 1`` (FlashInfer's sampling-from-probabilities, which SGLang's CUDA kernel uses)."""
BONUS_TRITON = "triton"
"""The first token whose CDF exceeds ``u`` (strictly); none: ``vocab - 1`` (``chain_speculative_sampling_triton``)."""
BONUS_SEARCHSORTED = "searchsorted"
"""The first token whose CDF reaches ``u`` (``>=``: ``torch.searchsorted(right=False)`` over the whole row),
clamped to ``vocab - 1`` (the DDTree implementations' wrapper). ``u = 0`` gives token 0 whatever its mass."""
BONUS_RULES = (BONUS_CUDA, BONUS_TRITON, BONUS_SEARCHSORTED)

THRESHOLD_ACC_FLOOR = 1e-9  # the host passes max(threshold_acc, 1e-9) (as float32) to the kernel


def f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (ties to even), as a Python float."""
    return struct.unpack("f", struct.pack("f", x))[0]


@dataclass(frozen=True)
class Round(AcceptedPath):
    """One request's sampling verify.

    Attributes:
        path: accepted node indices, root first (``path[0] == 0``).
        drafts: the accepted draft tokens (the tokens of ``path[1:]``).
        bonus: the token sampled after them (SGLang's ``predicts`` at the last accepted node).
        rejected: ``(node, token)`` per child tried and rejected, in walk order: ``node`` is the row the target
            mass was read from (the tree kernel writes ``draft_probs[node][token]`` there).
    """

    path: tuple[int, ...]
    drafts: tuple[int, ...]
    bonus: int
    rejected: tuple[tuple[int, int], ...] = ()

    @property
    def emitted(self) -> tuple[int, ...]:
        return (*self.drafts, self.bonus)


# --------------------------------------------------------------------------------------------------
# EAGLE links
# --------------------------------------------------------------------------------------------------

ASCENDING = "ascending"
"""Children linked in ascending index order (SGLang's EAGLE trees; :func:`..verify.oracle.to_eagle`)."""
REVERSE = "reverse"
"""Children linked highest index first (DFlash's DDTree builder: each new child becomes the first child)."""
ORDERS = (ASCENDING, REVERSE)


@dataclass(frozen=True)
class Links:
    """One request's tree as the tree kernel reads it (local node indices, ``-1`` for none).

    Attributes:
        candidates: token per node (node 0: the root).
        next_token: first child per node in link order.
        next_sibling: next sibling per node in link order.
    """

    candidates: tuple[int, ...]
    next_token: tuple[int, ...]
    next_sibling: tuple[int, ...]

    def children(self, node: int) -> tuple[int, ...]:
        """``node``'s children in the order the kernel tries them."""
        out, child = [], self.next_token[node]
        while child != -1:
            out.append(child)
            child = self.next_sibling[child]
        return tuple(out)


def links(tree: DraftTree, order: str = ASCENDING) -> Links:
    """EAGLE links of ``tree`` with its children in ``order``.

    Raises:
        ValueError: an unknown order.
    """
    if order not in ORDERS:
        raise ValueError(f"sibling order {order!r}: allowed {', '.join(ORDERS)}")
    first, sibling = [-1] * tree.num_nodes, [-1] * tree.num_nodes
    for kids in tree.children:
        ordered = kids if order == ASCENDING else tuple(reversed(kids))
        if ordered:
            first[tree.parents[ordered[0]]] = ordered[0]
        for a, b in zip(ordered, ordered[1:]):
            sibling[a] = b
    return Links(tree.tokens, tuple(first), tuple(sibling))


# --------------------------------------------------------------------------------------------------
# The bonus token
# --------------------------------------------------------------------------------------------------


def pick(masses: Row, vocab: int, coin: float, rule: str, total: float | None = None) -> int:
    """The token a sampler draws from the (unnormalised) ``masses`` with ``coin`` in ``[0, 1)``: ``u =
    float32(coin * total)`` (``total``: the masses' sum unless the kernel brings its own normaliser), then the
    CDF over token ids ``0 .. vocab - 1`` by ``rule`` (:data:`BONUS_RULES`).

    Raises:
        ValueError: an unknown rule.
    """
    if rule not in BONUS_RULES:
        raise ValueError(f"bonus rule {rule!r}: allowed {', '.join(BONUS_RULES)}")
    positive = sorted((t, f32(m)) for t, m in masses.items() if f32(m) > 0)
    if total is None:
        total = sum(m for _, m in positive)
    u = f32(f32(coin) * f32(total))
    if rule == BONUS_SEARCHSORTED and u <= 0.0:
        return 0  # cdf[0] >= 0 holds at token 0, with or without mass
    cdf = 0.0
    for t, m in positive:
        cdf += m
        if cdf > u or (rule == BONUS_SEARCHSORTED and cdf >= u):
            return t
    if rule == BONUS_CUDA and positive:
        return positive[-1][0]
    return vocab - 1


def residual(target: Row, subtract: Row, scale: float = 1.0) -> dict[int, float]:
    """``relu(float32(scale * target) - subtract)`` per token, in float32 (the tokens with a positive result)."""
    out = {}
    for t, p in target.items():
        scaled = f32(p) if scale == 1.0 else f32(f32(scale) * f32(p))
        d = f32(scaled - f32(subtract.get(t, 0.0)))
        if d > 0:
            out[t] = d
    return out


# --------------------------------------------------------------------------------------------------
# SGLang's tree sampler (target only)
# --------------------------------------------------------------------------------------------------


def tree_target_only(tree: Links, target: Sequence[Row], uniforms: Sequence[float], uniform_final: float,
                     vocab: int, width: int, threshold_single: float = 1.0, threshold_acc: float = 1.0,
                     draft: Sequence[Row] | None = None, compare: str = STRICT, skew: str | None = None) -> Round:
    """SGLang's ``tree_speculative_sampling_target_only`` for one request (module docstring).

    Args:
        tree: the EAGLE links (node 0 is the root).
        target: the target's row per node (``target_probs[b, node]``).
        uniforms: per node, the coin its children are tried with (``uniform_samples[b, node]``).
        uniform_final: the bonus token's coin (``uniform_samples_for_final_sampling[b]``).
        width: ``accept_index``'s columns (``spec_tokens``): at most ``width - 1`` drafts are accepted.
        threshold_single, threshold_acc: as the host passes them (float; ``threshold_acc`` floored at 1e-9).
        draft: the ``draft_probs`` rows the call starts from (SGLang passes zeros: ``None``).
        compare: :data:`STRICT` or :data:`INCLUSIVE`.
        skew: one of :data:`.skews.TREE_SKEWS`, or ``None``.

    Raises:
        ValueError: an unknown comparison or skew.
    """
    if compare not in COMPARES:
        raise ValueError(f"comparison {compare!r}: allowed {', '.join(COMPARES)}")
    if skew is not None and skew not in K.TREE_SKEWS:
        raise ValueError(f"tree skew {skew!r}: allowed {', '.join(K.TREE_SKEWS)}")
    single = f32(threshold_single)
    acc = max(f32(threshold_acc), f32(THRESHOLD_ACC_FLOOR))
    node, coin, path, rejected = 0, f32(uniforms[0]), [0], []
    for _ in range(1, width):
        chosen, prob_acc = None, 0.0
        for child in tree.children(node):
            row = target[child] if skew == K.CHILD_ROW else target[node]
            p = f32(row.get(tree.candidates[child], 0.0))
            prob_acc = p if skew == K.NO_ACCUMULATE else f32(prob_acc + p)
            bound = f32(prob_acc / acc)
            test = f32(uniforms[child]) if skew == K.FRESH_UNIFORM else coin
            if compare == STRICT:
                accept = p > 0 and (test < bound or p >= single)
            else:
                accept = test <= bound or p >= single
            if accept:
                chosen = child
                break
            rejected.append((node, tree.candidates[child], p))
        if chosen is None:
            break
        node = chosen
        coin = coin if skew == K.STALE_COIN else f32(uniforms[chosen])
        path.append(chosen)
    if len(path) == width:  # no draft probabilities for the bonus token
        masses = dict(target[node])
    else:
        written = dict(draft[node]) if draft is not None else {}
        if skew != K.KEEP_REJECTED:
            written.update({t: p for n, t, p in rejected if n == node})
        masses = residual(target[node], written)
    final = coin if skew == K.REUSED_COIN else uniform_final
    bonus = pick(masses, vocab, final, BONUS_CUDA, total=1.0 if skew == K.UNSCALED_COIN else None)
    return Round(tuple(path), tuple(tree.candidates[n] for n in path[1:]), bonus,
                 tuple((n, t) for n, t, _ in rejected))


# --------------------------------------------------------------------------------------------------
# SGLang's chain sampler (rejection sampling, optionally block verification)
# --------------------------------------------------------------------------------------------------


def _draft_mass(q: float, guard: bool) -> float:
    """A draft row entry as the kernel's bonus pass reads it: with ``guard`` a value outside ``[0, 1]`` is 0."""
    return q if not guard or 0.0 <= q <= 1.0 else 0.0


def chain_rejection(candidates: Sequence[int], target: Sequence[Row], draft: Sequence[Row],
                    uniforms: Sequence[float], uniform_final: float, vocab: int, block: bool = False,
                    draft_guard: bool = True, skew: str | None = None) -> Round:
    """SGLang's ``chain_speculative_sampling_triton`` for one request (module docstring).

    Args:
        candidates: ``S`` tokens: the root, then the drafts of steps ``1 .. S - 1``.
        target: ``S`` rows: row ``i`` is the target's distribution after node ``i``.
        draft: ``S - 1`` rows: row ``i`` is the distribution the draft of step ``i + 1`` was drawn from.
        uniforms: ``S`` coins; step ``s`` uses ``uniforms[s - 1]`` (the last one is never read).
        block: block verification: the longest prefix is chosen from the last step down, step ``s`` with
            ``uniforms[s - 1]`` (docs/sampling-kernels.md).
        draft_guard: 0.5.22+: a draft mass outside ``(0, 1]`` never accepts (0.5.15-0.5.20: no guard).
        skew: one of :data:`.skews.CHAIN_SKEWS` (:data:`.skews.BLOCK_SKEWS` with ``block``), or ``None``.

    Raises:
        ValueError: a skew not of the mode.
    """
    allowed = K.BLOCK_SKEWS if block else K.CHAIN_SKEWS
    if skew is not None and skew not in allowed:
        raise ValueError(f"chain skew {skew!r}: allowed {', '.join(allowed)}")
    steps = len(candidates) - 1
    scale, norm = 1.0, -1.0
    if not block:
        accepted = 0
        while accepted < steps:
            token = candidates[accepted + 1]
            p = f32((target[accepted + 1] if skew == K.CHILD_ROW else target[accepted]).get(token, 0.0))
            q = f32(draft[accepted].get(token, 0.0))
            coin = f32(uniforms[0] if skew == K.STALE_COIN else uniforms[accepted])
            ok = (0.0 < q <= 1.0) if draft_guard else True
            passed = f32(coin * p) < q if skew == K.INVERTED_RATIO else f32(coin * q) < p
            if ok and passed:
                accepted += 1
            else:
                break
        final = uniforms[accepted] if skew == K.REUSED_COIN else uniform_final
    else:
        accepted, scale, norm = _block(candidates, target, draft, uniforms, steps)
        final = uniforms[accepted - 1] if skew == K.REUSED_COIN and accepted > 0 else uniform_final
    if accepted == steps or skew == K.KEEP_REJECTED:
        masses, norm = dict(target[accepted]), -1.0
    else:
        subtract = {t: _draft_mass(f32(m), draft_guard) for t, m in draft[accepted].items()}
        if skew == K.UNSCALED_RESIDUAL:
            scale, norm = 1.0, -1.0
        masses = residual(target[accepted], subtract, scale)
    total = 1.0 if skew == K.UNSCALED_COIN else (norm if norm >= 0 else None)
    bonus = pick(masses, vocab, final, BONUS_TRITON, total=total)
    return Round(tuple(range(accepted + 1)), tuple(candidates[1:accepted + 1]), bonus)


def _block(candidates, target, draft, uniforms, steps) -> tuple[int, float, float]:
    """Block verification's choice: ``(accepted drafts, residual scale h, residual mass or -1)``. Prefix
    probabilities ``h_s = min(h_{s-1} * p / q, 1)`` (0 where ``q`` is outside ``(0, 1]``); from the last step
    down, step ``s`` is taken when ``uniforms[s - 1] < h_s`` and, for ``s`` before the last with ``0 < h_s < 1``,
    below ``S / (S + 1 - h_s)`` with ``S = sum relu(h_s * p - q)`` over row ``s``."""
    prefix, h = [], 1.0
    for s in range(1, steps + 1):
        token = candidates[s]
        p = f32(target[s - 1].get(token, 0.0))
        q = f32(draft[s - 1].get(token, 0.0))
        h = min(f32(f32(h * p) / q), 1.0) if 0.0 < q <= 1.0 else 0.0
        prefix.append(h)
    for s in range(steps, 0, -1):
        h, coin = prefix[s - 1], f32(uniforms[s - 1])
        if not coin < h:
            continue
        accept_prob, mass = h, -1.0
        if s < steps and 0.0 < h < 1.0:
            mass = f32(sum(residual(target[s], draft[s], h).values()))  # this pass reads q unguarded
            accept_prob = f32(mass / f32(f32(mass + 1.0) - h))
        if coin < accept_prob:
            return s, h, mass
    return 0, 1.0, -1.0


# --------------------------------------------------------------------------------------------------
# The DDTree implementations' sampler
# --------------------------------------------------------------------------------------------------


def ddtree_native(draft: Sequence[int], parents: Sequence[int], size: int, q: int, target: Sequence[Row],
                  uniforms: Sequence[float], uniform_final: float, vocab: int, skew: str | None = None) -> Round:
    """``sample_ddtree_target_probs_triton`` for one request (module docstring).

    Args:
        draft: ``q`` tokens, the root first; parents: ``q`` parents (``-1`` for the root and past the tree).
        size: the tree's node count, clamped to ``1 .. q``; nodes ``>= size`` are not children.
        target: ``q`` rows; uniforms: ``q`` coins (node ``n``'s children use ``uniforms[n]``).
        skew: one of :data:`.skews.TREE_SKEWS`, or ``None``.

    Raises:
        ValueError: an unknown skew.
    """
    if skew is not None and skew not in K.TREE_SKEWS:
        raise ValueError(f"tree skew {skew!r}: allowed {', '.join(K.TREE_SKEWS)}")
    live = max(1, min(size, q))
    path, node, coin = [0], 0, f32(uniforms[0])
    kids: list[int] = []
    for _ in range(q - 1):
        kids = [j for j in range(1, live) if parents[j] == node]
        prefix, chosen = 0.0, None
        for j in kids:
            p = f32((target[j] if skew == K.CHILD_ROW else target[node]).get(draft[j], 0.0))
            prefix = p if skew == K.NO_ACCUMULATE else f32(prefix + p)
            test = f32(uniforms[j]) if skew == K.FRESH_UNIFORM else coin
            if test < prefix:
                chosen = j
                break
        if chosen is None:
            break
        path.append(chosen)
        node = chosen
        coin = coin if skew == K.STALE_COIN else f32(uniforms[node])
        kids = []
    removed = {} if skew == K.KEEP_REJECTED else {
        draft[j]: f32((target[j] if skew == K.CHILD_ROW else target[node]).get(draft[j], 0.0)) for j in kids}
    masses = residual(target[node], removed)
    final = coin if skew == K.REUSED_COIN else uniform_final
    bonus = pick(masses, vocab, final, BONUS_SEARCHSORTED, total=1.0 if skew == K.UNSCALED_COIN else None)
    return Round(tuple(path), tuple(draft[j] for j in path[1:]), bonus)


# --------------------------------------------------------------------------------------------------
# A batch as SGLang's kernels write it
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchOutputs:
    """What SGLang's two samplers write for a batch, ``None`` where they must leave an element as it was.

    Attributes:
        predicts: ``bs * D``; at each accepted node's flat index (``b * D + node``) the next accepted token, at
            the last accepted node the bonus token.
        accept_index: ``bs`` rows of ``width``: the flat indices of the accepted path.
        accept_token_num: accepted drafts per request.
        draft_probs: per request ``{(node, token): mass}`` the tree kernel writes into ``draft_probs`` (the
            rejected children's target masses); empty for the chain kernel, which only reads it.
    """

    predicts: tuple[int | None, ...]
    accept_index: tuple[tuple[int | None, ...], ...]
    accept_token_num: tuple[int, ...]
    draft_probs: tuple[dict, ...]


def batch_outputs(rounds: Sequence[Round], nodes: int, width: int, target: Sequence[Sequence[Row]] | None = None
                  ) -> BatchOutputs:
    """Lay ``rounds`` (one per request, ``nodes`` slots each, ``retrive_index = b * nodes + node``) out as the
    kernels write them; ``target`` (the rows) gives the tree kernel's ``draft_probs`` writes."""
    predicts: list[int | None] = [None] * (len(rounds) * nodes)
    accept_index, writes = [], []
    for b, r in enumerate(rounds):
        flat = [b * nodes + n for n in r.path]
        for at, token in zip(flat, (*r.drafts, r.bonus)):
            predicts[at] = token
        accept_index.append(tuple(flat) + (None,) * (width - len(flat)))
        writes.append({(n, t): f32(target[b][n].get(t, 0.0)) for n, t in r.rejected} if target is not None else {})
    return BatchOutputs(tuple(predicts), tuple(accept_index), tuple(r.accepted_drafts for r in rounds), tuple(writes))
