"""The exact law of what a sampler emits in one round, by enumerating the branches of its algorithm, and the
planted skews (realistic wrong versions of each sampler, stated as alternatives of the same enumeration).

A round emits a token sequence: the accepted draft tokens, then the bonus token. The skews are
:mod:`.skews`' (re-exported here). :func:`tree_law` and
:func:`chain_law` return its law, ``{sequence: probability}``, in real (float64) arithmetic: every coin is
uniform on ``[0, 1)``, each acceptance test is the set of coins it accepts (an interval), and a branch's
probability is the measure of its coins. The law of the tree sampler holds for SGLang's target-only kernel and,
with thresholds 1 and ascending siblings, for the DDTree implementations' sampler (the two differ only on
measure-zero coins and in fallback tokens: :mod:`.oracle`).

Losslessness (the theorem every sampler here claims at thresholds 1): complete a round's output with the
target's own continuation (:func:`completed`); the result is the target's joint law of the next tokens
(:func:`target_joint`). Tested exactly on small cases, so this module also proves the oracle lossless.

Contexts: the target's (and the chain draft's) row is a function of the tokens emitted so far in the round,
``context`` (a tuple; ``()`` at the root). A tree's node ``n`` has the context of its path's tokens.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import product
from typing import Callable, Mapping, Sequence

from .oracle import Links, Row
from .skews import (BLOCK_SKEWS, CHAIN_SKEWS, CHILD_ROW, FRESH_UNIFORM, INVERTED_RATIO, KEEP_REJECTED,  # noqa: F401
                    NO_ACCUMULATE, REUSED_COIN, SKEWS, STALE_COIN, TREE_SKEWS, UNSCALED_COIN, UNSCALED_RESIDUAL)

Law = dict
"""``{emitted token sequence (tuple): probability}``."""
Interval = tuple[float, float]
UNIT: Interval = (0.0, 1.0)


def _cut(a: Interval, b: Interval) -> Interval:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if hi > lo else (lo, lo)


def _size(a: Interval) -> float:
    return max(0.0, a[1] - a[0])


def _bonus(law: dict, emitted: tuple, weight: float, coin: Interval, masses: Row, vocab: int, fallback: str,
           unscaled: bool) -> None:
    """Add the bonus token's branches: ``weight`` times the measure of the bonus coin's values in ``coin`` that
    pick each token from ``masses`` (normalised by their total, or, ``unscaled``, compared with the bare coin)."""
    positive = sorted((t, m) for t, m in masses.items() if m > 0)
    total = sum(m for _, m in positive)
    span = _size(coin)
    if weight <= 0 or span <= 0:
        return
    scale = 1.0 if unscaled else total
    cdf = 0.0
    for t, m in positive:
        lo, hi = cdf / scale, (cdf + m) / scale
        cdf += m
        share = _size(_cut((lo, hi), coin))
        if share > 0:
            law[(*emitted, t)] += weight * share
    rest = _size(_cut((cdf / scale if scale > 0 else 0.0, 1.0), coin)) if (unscaled or total <= 0) else 0.0
    if rest > 0:
        token = (positive[-1][0] if positive and fallback == "last" else vocab - 1)
        law[(*emitted, token)] += weight * rest


def _regions(masses: Sequence[float], single: float, acc: float, accumulate: bool) -> tuple[list[Interval], Interval]:
    """Per child (in order), the coins that accept it under the shared-coin rule; and the coins rejecting all."""
    regions, covered, total = [], 0.0, 0.0
    for p in masses:
        total += p
        if covered >= 1.0 or p <= 0:
            regions.append((covered, covered))
            continue
        top = 1.0 if p >= single else min((total if accumulate else p) / acc, 1.0)
        regions.append((covered, top) if top > covered else (covered, covered))
        covered = max(covered, top)
    return regions, (min(covered, 1.0), 1.0)


# --------------------------------------------------------------------------------------------------
# Tree samplers
# --------------------------------------------------------------------------------------------------


def tree_law(tree: Links, rows: Sequence[Row], vocab: int, width: int, threshold_single: float = 1.0,
             threshold_acc: float = 1.0, skew: str | None = None, fallback: str = "last") -> Law:
    """The law of one round of SGLang's target-only tree sampler (draft probabilities zero), or of ``skew``.

    Args:
        tree: EAGLE links (children in the order tried); rows: the target's row per node.
        width: ``accept_index`` columns: at most ``width - 1`` drafts, then the bonus from the full row.
        fallback: the token when the residual is empty: ``last`` (the last with positive mass; the CUDA kernel)
            or ``vocab-1``.

    Raises:
        ValueError: a skew not in :data:`TREE_SKEWS`.
    """
    if skew is not None and skew not in TREE_SKEWS:
        raise ValueError(f"tree skew {skew!r}: allowed {', '.join(TREE_SKEWS)}")
    acc = max(threshold_acc, 1e-9)
    law: dict = defaultdict(float)

    def mass(node: int, child: int) -> float:
        row = rows[child] if skew == CHILD_ROW else rows[node]
        return row.get(tree.candidates[child], 0.0)

    def walk(node: int, weight: float, coin: Interval, emitted: tuple) -> None:
        if len(emitted) == width - 1:  # no draft tried here: the node's coin is not read
            _bonus(law, emitted, weight * _size(coin), UNIT, rows[node], vocab, fallback, skew == UNSCALED_COIN)
            return
        kids = tree.children(node)
        masses = [mass(node, c) for c in kids]
        if skew == FRESH_UNIFORM:
            reached = weight
            for c, p, (lo, hi) in zip(kids, masses, _regions_fresh(masses, threshold_single, acc)):
                walk(c, reached * (hi - lo), UNIT, (*emitted, tree.candidates[c]))
                reached *= 1.0 - (hi - lo)
            stop_weight, stop = reached, UNIT
        else:
            regions, stop = _regions(masses, threshold_single, acc, skew != NO_ACCUMULATE)
            for c, region in zip(kids, regions):
                inside = _cut(region, coin)
                if _size(inside) > 0:
                    if skew == STALE_COIN:
                        walk(c, weight, inside, (*emitted, tree.candidates[c]))
                    else:
                        walk(c, weight * _size(inside), UNIT, (*emitted, tree.candidates[c]))
            stop = _cut(stop, coin)
            stop_weight = weight if skew in (STALE_COIN, REUSED_COIN) else weight * _size(stop)
        removed = {} if skew == KEEP_REJECTED else {tree.candidates[c]: p for c, p in zip(kids, masses)}
        residual = {t: max(m - removed.get(t, 0.0), 0.0) for t, m in rows[node].items()}
        if skew == STALE_COIN:
            _bonus(law, emitted, stop_weight * _size(stop), UNIT, residual, vocab, fallback, False)
        elif skew == REUSED_COIN:
            span = _size(stop)
            if span > 0:  # the bonus coin is the node's coin, known to lie in ``stop``
                _bonus(law, emitted, stop_weight, stop, residual, vocab, fallback, False)
        else:
            _bonus(law, emitted, stop_weight, UNIT, residual, vocab, fallback, skew == UNSCALED_COIN)

    walk(0, 1.0, UNIT, ())
    return {k: v for k, v in law.items() if v > 0}


def _regions_fresh(masses: Sequence[float], single: float, acc: float) -> list[Interval]:
    """Per sibling with its own coin: the coins accepting it (the cumulative rule, each coin fresh)."""
    out, total = [], 0.0
    for p in masses:
        total += p
        out.append((0.0, 0.0) if p <= 0 else (0.0, 1.0 if p >= single else min(total / acc, 1.0)))
    return out


# --------------------------------------------------------------------------------------------------
# Chain sampler (rejection sampling; block verification)
# --------------------------------------------------------------------------------------------------

RowFn = Callable[[tuple], Row]


def chain_law(steps: int, target: RowFn, draft: RowFn, vocab: int, block: bool = False,
              skew: str | None = None) -> Law:
    """The law of one round of SGLang's chain sampler, the drafts drawn from ``draft`` (each step's draft from
    ``draft(context)``), or of ``skew``.

    Raises:
        ValueError: a skew not allowed for the mode (:data:`CHAIN_SKEWS`, :data:`BLOCK_SKEWS`).
    """
    allowed = BLOCK_SKEWS if block else CHAIN_SKEWS
    if skew is not None and skew not in allowed:
        raise ValueError(f"chain skew {skew!r}{' (block)' if block else ''}: allowed {', '.join(allowed)}")
    law: dict = defaultdict(float)
    if block:
        _block_law(law, steps, target, draft, vocab, skew)
    else:
        _classic(law, steps, target, draft, vocab, skew, (), 1.0, UNIT)
    return {k: v for k, v in law.items() if v > 0}


def _classic(law, steps, target, draft, vocab, skew, context, weight, coin) -> None:
    p_row = target(context)
    if len(context) == steps:
        _bonus(law, context, weight * _size(coin), UNIT, p_row, vocab, "vocab-1", skew == UNSCALED_COIN)
        return
    q_row = draft(context)
    for x, qx in sorted(q_row.items()):
        if qx <= 0:
            continue
        px = (target((*context, x)) if skew == CHILD_ROW else p_row).get(x, 0.0)
        if skew == INVERTED_RATIO:  # coin * p < q: always when p == 0
            bound = min(qx / px, 1.0) if px > 0 else 1.0
        else:
            bound = min(px / qx, 1.0)
        accept, reject = _cut((0.0, bound), coin), _cut((bound, 1.0), coin)
        w = weight * qx
        if _size(accept) > 0:
            if skew == STALE_COIN:
                _classic(law, steps, target, draft, vocab, skew, (*context, x), w, accept)
            else:
                _classic(law, steps, target, draft, vocab, skew, (*context, x), w * _size(accept), UNIT)
        residual = dict(p_row) if skew == KEEP_REJECTED else {t: max(m - q_row.get(t, 0.0), 0.0) for t, m in p_row.items()}
        if skew == REUSED_COIN:
            _bonus(law, context, w, reject, residual, vocab, "vocab-1", False)
        else:
            _bonus(law, context, w * _size(reject), UNIT, residual, vocab, "vocab-1", skew == UNSCALED_COIN)


def _block_law(law, steps, target, draft, vocab, skew) -> None:
    for drafts in product(range(vocab), repeat=steps):
        weight, h, prefix, contexts = 1.0, 1.0, [], [()]
        for s, x in enumerate(drafts):
            qx = draft(contexts[-1]).get(x, 0.0)
            weight *= qx
            if weight <= 0:
                break
            px = target(contexts[-1]).get(x, 0.0)
            h = min(h * px / qx, 1.0)
            prefix.append(h)
            contexts.append((*contexts[-1], x))
        if weight <= 0:
            continue
        alive = 1.0  # probability that no longer prefix was chosen
        for s in range(steps, -1, -1):
            ctx = contexts[s]
            if s == steps:
                chance, masses = prefix[-1], dict(target(ctx))
            else:
                hs = prefix[s - 1] if s > 0 else 1.0
                p_row, q_row = target(ctx), draft(ctx)
                scale = 1.0 if skew == UNSCALED_RESIDUAL else hs
                if skew == KEEP_REJECTED:
                    masses = dict(p_row)
                else:
                    masses = {t: max(scale * m - q_row.get(t, 0.0), 0.0) for t, m in p_row.items()}
                mass = sum(max(hs * m - q_row.get(t, 0.0), 0.0) for t, m in p_row.items())
                if s == 0:
                    chance = 1.0
                elif 0.0 < hs < 1.0:
                    chance = mass / (mass + 1.0 - hs)
                else:
                    chance = hs
            if chance <= 0:
                continue
            take = weight * alive * chance
            if skew == REUSED_COIN and s > 0:  # the bonus coin is step s's coin, known to lie below ``chance``
                _bonus(law, drafts[:s], take / chance, (0.0, chance), masses, vocab, "vocab-1", False)
            else:
                _bonus(law, drafts[:s], take, UNIT, masses, vocab, "vocab-1", skew == UNSCALED_COIN)
            alive *= 1.0 - chance


# --------------------------------------------------------------------------------------------------
# Losslessness
# --------------------------------------------------------------------------------------------------


def marginal(law: Mapping[tuple, float], depth: int) -> dict:
    """``law`` with every sequence cut to its first ``depth`` tokens (shorter ones kept: the round stopped)."""
    out: dict = defaultdict(float)
    for seq, pr in law.items():
        out[tuple(seq[:depth])] += pr
    return dict(out)


def target_joint(target: RowFn, depth: int, context: tuple = ()) -> dict:
    """The target's law of its next ``depth`` tokens after ``context``."""
    if depth == 0:
        return {(): 1.0}
    out: dict = defaultdict(float)
    for t, m in target(context).items():
        if m > 0:
            for rest, pr in target_joint(target, depth - 1, (*context, t)).items():
                out[(t, *rest)] += m * pr
    return dict(out)


def completed(law: Mapping[tuple, float], target: RowFn, depth: int) -> dict:
    """The law of the next ``depth`` tokens when a round's output is followed by the target's own sampling
    (what the next rounds give, by losslessness): equal to :func:`target_joint` for a lossless sampler."""
    out: dict = defaultdict(float)
    for seq, pr in law.items():
        seq = tuple(seq)
        if len(seq) >= depth:
            out[seq[:depth]] += pr
            continue
        for rest, q in target_joint(target, depth - len(seq), seq).items():
            out[(*seq, *rest)] += pr * q
    return dict(out)


def distance(a: Mapping[tuple, float], b: Mapping[tuple, float]) -> float:
    """The largest absolute difference between two laws over the union of their sequences."""
    return max((abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b)), default=0.0)
