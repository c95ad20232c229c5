"""Sampling verify (temperature > 0): SGLang's target-only tree sampler, SGLang's rejection (chain) sampler, and
the DDTree implementations' own sampler; the case type, its generators and the records.

Backend methods (``bs`` requests or rows, ``D`` nodes, ``S = width`` columns, ``V`` vocabulary; outputs in place;
``docs/sampling-kernels.md`` has the signatures as each release keeps them):

* ``tree_speculative_sampling(predicts int32 [bs*D], accept_index int32 [bs, S], accept_token_num int32 [bs],
  candidates int64 [bs, D], retrive_index, retrive_next_token, retrive_next_sibling int64 [bs, D],
  uniform_samples f32 [bs, D], uniform_samples_for_final_sampling f32 [bs], target_probs f32 [bs, D, V],
  draft_probs f32 [bs, D, V] (zeros; the kernel writes the rejected children's target masses into it),
  threshold_single, threshold_acc, deterministic=True)``: SGLang's ``tree_speculative_sampling_target_only``.
* ``chain_speculative_sampling(...same..., draft_probs f32 [bs, D - 1, V] (the draft's distributions), 1.0, 1.0,
  True, block_verification)``: SGLang's ``chain_speculative_sampling_triton`` (a chain, ``S = D``).
* ``ddtree_sample(...)``: the DDTree family's backend method (:mod:`ddtree_compat.families.ddtree.records`), here
  judged by its law (record ``ddtree_sample_distribution``); its exact cells stay the DDTree family's.

Two kinds of case. ``exact``: a small batch with given uniforms, every output compared exactly with
:mod:`.oracle` (masses are multiples of 1/256 and uniforms of 2^-16 or chosen at a boundary, so every float32
sum and product the kernels form is exact). ``distribution``: one call of ``N`` rows of one tree and one set of
probabilities, seeded uniforms (and, for the chain, drafts drawn from the draft's rows), the emitted sequences
counted and tested against the exact law (:mod:`.law`, :mod:`.distribution`).

Vocabularies: exact cases use 16, 17, 18 (the CUDA kernel's vector width ``gcd(4, V)`` is 4, 1, 2), 1024 and
4100 (past one block of 1024 threads x 4 lanes and one Triton tile of 4096: the bonus token's CDF carried across
tiles); a sampler's decisions depend on a few tokens' masses, not on ``V``, and the oracle walks rows in Python.
Distribution cases use ``V = 8``: few categories, so the test's power goes to the skews, not to sparse cells.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Sequence

import numpy as np

from ...cases import FlatCase, stable_seed
from ...errors import CaseError
from ...contract import CaseContext, KernelRecord
from ...tree import DraftTree
from ..verify.topologies import TOPOLOGIES as VERIFY_TOPOLOGIES
from . import law as L
from . import oracle as O

SCHEMA = "ddtree-compat/sampling-case/1"
SAMPLERS = ("tree", "chain", "ddtree")
KINDS = ("exact", "distribution")
DDTREE_SHAPES = ("bf-flat", "bf-peaked", "balanced", "random", "fanout")
TOPOLOGIES = ("chain", "eagle-topk", *DDTREE_SHAPES)
TREE_PROBS = ("onehot", "peaked", "flat", "edge", "saturated")
PROBS = (*TREE_PROBS, "residual")
EXACT_ONLY = ("edge", "saturated", "residual")
UNITS = 256  # every mass a multiple of 1 / UNITS
COIN_UNITS = 1 << 16  # exact cases' uniforms: multiples of 2^-16
TOP_COIN = 1.0 - 2.0 ** -24  # the largest float32 below 1 (SGLang clamps seeded coins to it)
DISTRIBUTION_VOCAB = 8
DEPTH = 2  # a distribution cell counts the first two emitted tokens (or the first and "stopped")


@dataclass(frozen=True)
class SamplingCase(FlatCase):
    """One call of a sampler.

    Attributes:
        sampler: ``tree`` (SGLang's target-only tree sampler), ``chain`` (SGLang's rejection sampler) or
            ``ddtree`` (the DDTree implementations' sampler).
        kind: ``exact`` (given uniforms, every output exact) or ``distribution`` (``batch`` rows, the law tested).
        topology: ``chain`` (EAGLE with top-k 1, DFLASH's block), ``eagle-topk`` (EAGLE-2's tree: ``topk``
            candidates per depth, the best ``budget`` by cumulative score) or a DDTree shape of the verify grid.
        budget: drafted nodes ``B`` (``D = B + 1``).
        probs: the target's rows: ``onehot``, ``peaked`` (one token 1/2..7/8), ``flat`` (spread over up to 8
            tokens), ``edge`` (a child's cumulative mass equal to its node's coin, a threshold equal to a mass,
            the bonus coin on a CDF step) or ``saturated`` (the root's children carry all the mass, their float32
            sum ``1 - 2^-24``, the root's coin ``1 - 2^-24``: every child rejected, the residual empty).
        batch: requests (exact) or rows ``N`` (distribution).
        vocab: ``V``.
        width: ``accept_index`` columns (``None``: the depth + 1 for ``chain`` / ``eagle-topk`` as EAGLE sizes
            it, ``D`` for the DDTree shapes as the DFlash DDTree worker sizes it).
        threshold_single, threshold_acc: the tree sampler's thresholds (1: lossless).
        siblings: the tree sampler's link order: ``ascending`` (SGLang's EAGLE) or ``reverse`` (DFlash's DDTree
            builder).
        block: the chain sampler with block verification.
        topk: ``eagle-topk``'s width.
        seed: the draw.

    Raises:
        CaseError: via :meth:`check`.
    """

    SCHEMA = SCHEMA
    KIND = "sampling"

    sampler: str
    kind: str
    topology: str
    budget: int
    probs: str
    batch: int = 1
    vocab: int = 16
    width: int | None = None
    threshold_single: float = 1.0
    threshold_acc: float = 1.0
    siblings: str = O.ASCENDING
    block: bool = False
    topk: int = 2
    seed: int = 0

    # ---------------------------------------------------------------- identity
    @property
    def id(self) -> str:
        """``tree-exact-eagle-topk-b6-flat-bs3`` plus what differs from the defaults."""
        parts = [self.sampler, self.kind, self.topology, f"b{self.budget}", self.probs, f"bs{self.batch}"]
        if self.vocab != 16:
            parts.append(f"v{self.vocab}")
        if self.width is not None:
            parts.append(f"w{self.width}")
        if (self.threshold_single, self.threshold_acc) != (1.0, 1.0):
            parts.append(f"ts{self.threshold_single:g}-ta{self.threshold_acc:g}")
        if self.siblings != O.ASCENDING:
            parts.append("rev")
        if self.block:
            parts.append("block")
        if self.topology == "eagle-topk" and self.topk != 2:
            parts.append(f"k{self.topk}")
        if self.seed:
            parts.append(f"s{self.seed}")
        return "-".join(parts)

    @property
    def nodes(self) -> int:
        return self.budget + 1

    @property
    def accept_width(self) -> int:
        """``S``: ``accept_index``'s columns."""
        if self.width is not None:
            return self.width
        if self.topology in ("chain", "eagle-topk"):
            return max(t.max_depth for t in self.trees) + 1
        return self.nodes

    @property
    def label(self) -> str:
        if self.kind == "distribution" and self.sampler != "ddtree":  # the DDTree record is the law's already
            return f"{RECORD_NAMES[self.sampler]}@distribution"
        return RECORD_NAMES[self.sampler]

    def coordinates(self) -> dict:
        """The results' coordinates (the keys every family's cases give)."""
        mode = self.kind + ("-block" if self.block else "")
        layout = ("exact" if self.width is None else f"w{self.width}") + ("-rev" if self.siblings != O.ASCENDING else "")
        shape = f"v{self.vocab}" + (f"-ts{self.threshold_single:g}-ta{self.threshold_acc:g}"
                                    if (self.threshold_single, self.threshold_acc) != (1.0, 1.0) else "")
        return dict(budget=self.budget, topology=self.topology, plant=self.probs, batch=self.batch, block_size=None,
                    mode=mode, layout=layout, shape=shape)

    # ---------------------------------------------------------------- validation
    def check(self) -> "SamplingCase":
        where = f"sampling case {self.id}"
        for name, value, allowed in (("sampler", self.sampler, SAMPLERS), ("kind", self.kind, KINDS),
                                     ("topology", self.topology, TOPOLOGIES), ("probs", self.probs, PROBS),
                                     ("siblings", self.siblings, O.ORDERS)):
            if value not in allowed:
                raise CaseError(name, value, ", ".join(allowed), "unknown", where)
        for name in ("budget", "batch", "vocab", "topk", "seed"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "seed" else 1):
                raise CaseError(name, value, "an integer >= 1" if name != "seed" else "an integer >= 0", "out of range", where)
        if self.vocab < 8:
            raise CaseError("vocab", self.vocab, "integer >= 8", "too small for the planted rows", where)
        if self.width is not None and (not isinstance(self.width, int) or self.width < 1):
            raise CaseError("width", self.width, "null or an integer >= 1", "out of range", where)
        for name in ("threshold_single", "threshold_acc"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise CaseError(name, value, "0 .. 1 (the kernel's host check)", "out of range", where)
        if self.sampler == "chain" and self.topology != "chain":
            raise CaseError("topology", self.topology, "chain", "the chain sampler verifies a chain", where)
        if self.sampler != "tree" and ((self.threshold_single, self.threshold_acc) != (1.0, 1.0)
                                       or self.siblings != O.ASCENDING):
            raise CaseError("threshold_single", self.threshold_single, "1 (and siblings ascending)",
                            f"the {self.sampler} sampler takes no thresholds or link order", where)
        if self.block and self.sampler != "chain":
            raise CaseError("block", self.block, "false", "block verification is the chain sampler's", where)
        if self.kind == "distribution" and self.probs in EXACT_ONLY:
            raise CaseError("probs", self.probs, ", ".join(p for p in PROBS if p not in EXACT_ONLY),
                            "a boundary plant needs given uniforms (exact cases)", where)
        if self.probs == "residual" and not (self.block and self.budget == 2):
            raise CaseError("probs", self.probs, "a block-verification chain of 2 drafts",
                            "the stated residual request is one", where)
        if self.probs == "saturated" and self.sampler == "chain":
            raise CaseError("probs", self.probs, "onehot, peaked, flat, edge", "no children to saturate", where)
        if self.topology == "fanout" and self.budget > self.vocab:
            raise CaseError("budget", self.budget, f"<= vocab ({self.vocab})", "more siblings than tokens", where)
        if self.sampler == "ddtree" and self.kind == "exact":
            raise CaseError("kind", self.kind, "distribution", "the DDTree sampler draws its own uniforms: its exact "
                            "cells are the DDTree family's ddtree_sample", where)
        return self

    # ---------------------------------------------------------------- trees and rows
    @property
    def requests(self) -> int:
        """Distinct draws: ``batch`` for exact cases; one for distribution cases (every row the same tree)."""
        return self.batch if self.kind == "exact" else 1

    @cached_property
    def trees(self) -> tuple[DraftTree, ...]:
        out = []
        for b in range(self.requests):
            rng = np.random.default_rng(stable_seed("sampling-tree", self.topology, self.budget, self.vocab, self.topk,
                                                    self.seed, b))
            out.append(_tree(self.topology, self.budget, self.vocab, self.topk, rng))
        return tuple(out)

    def links(self, b: int = 0) -> O.Links:
        return O.links(self.trees[b], self.siblings)

    def target_fn(self, b: int = 0) -> "_TargetFn":
        """Request ``b``'s target row as a function of the context (tokens emitted this round), memoised."""
        return self._tables.setdefault(("target", b), _TargetFn(self, b))

    def draft_fn(self, b: int = 0) -> "_DraftFn":
        """Request ``b``'s draft row (the chain's) as a function of the context, memoised."""
        return self._tables.setdefault(("draft", b), _DraftFn(self, b))

    @cached_property
    def _tables(self) -> dict:
        return {}

    # ---------------------------------------------------------------- exact cases
    @cached_property
    def exact(self) -> tuple["ExactRequest", ...]:
        """Per request: the kernel's inputs (rows, uniforms) as :mod:`.oracle` takes them."""
        if self.kind != "exact":
            raise CaseError("kind", self.kind, "exact", "no given uniforms", f"sampling case {self.id}")
        return tuple(_exact_request(self, b) for b in range(self.batch))

    def expected(self) -> tuple[O.Round, ...]:
        """The oracle's round per request (exact cases)."""
        out = []
        for req in self.exact:
            if self.sampler == "tree":
                out.append(O.tree_target_only(self.links(req.index), req.target, req.uniforms, req.uniform_final,
                                              self.vocab, self.accept_width, self.threshold_single, self.threshold_acc))
            else:
                out.append(O.chain_rejection(req.candidates, req.target, req.draft, req.uniforms, req.uniform_final,
                                             self.vocab, block=self.block))
        return tuple(out)

    def expected_outputs(self) -> O.BatchOutputs:
        rounds = self.expected()
        target = [req.target for req in self.exact] if self.sampler == "tree" else None
        return O.batch_outputs(rounds, self.nodes, self.accept_width, target)

    # ---------------------------------------------------------------- distribution cases
    def law(self, skew: str | None = None) -> dict:
        """The exact law of one row's emitted sequence (``skew``: a planted alternative, :mod:`.law`)."""
        if self.sampler == "chain":
            return L.chain_law(self.budget, self.target_fn(), self.draft_fn(), self.vocab, self.block, skew)
        rows = [self.target_fn()(_context(self.trees[0], n)) for n in range(self.nodes)]
        fallback = "last" if self.sampler == "tree" else "vocab-1"
        width = self.accept_width if self.sampler == "tree" else self.nodes
        ts, ta = self.threshold_single, self.threshold_acc
        return L.tree_law(self.links(), rows, self.vocab, width, ts, ta, skew, fallback)

    def categories(self, skew: str | None = None) -> dict:
        """The law of what a distribution cell counts: the first :data:`DEPTH` emitted tokens."""
        return L.marginal(self.law(skew), DEPTH)

    @property
    def skews(self) -> tuple[str, ...]:
        if self.sampler == "chain":
            return L.BLOCK_SKEWS if self.block else L.CHAIN_SKEWS
        return L.TREE_SKEWS

    def distribution_inputs(self) -> dict:
        """The ``N`` rows' inputs as NumPy arrays: ``uniforms`` f32 ``[N, D]``, ``uniform_final`` f32 ``[N]`` (the
        DDTree sampler draws its own: the check seeds torch instead), and for the chain ``candidates`` int64
        ``[N, D]``, ``target`` f32 ``[N, D, V]``, ``draft`` f32 ``[N, D - 1, V]`` (drafts drawn from the draft's
        rows); for the tree samplers ``target`` f32 ``[D, V]`` (every row the same)."""
        rng = np.random.default_rng(stable_seed("sampling-rows", self.id))
        n, d, v = self.batch, self.nodes, self.vocab
        out = {"uniforms": rng.random((n, d), dtype=np.float32), "uniform_final": rng.random(n, dtype=np.float32)}
        if self.sampler != "chain":
            tree, fn = self.trees[0], self.target_fn()
            out["target"] = _dense([fn(_context(tree, i)) for i in range(d)], v)
            return out
        target_fn, draft_fn = self.target_fn(), self.draft_fn()
        cand = np.zeros((n, d), dtype=np.int64)
        cand[:, 0] = self.trees[0].tokens[0]
        target = np.zeros((n, d, v), dtype=np.float32)
        draft = np.zeros((n, d - 1, v), dtype=np.float32)
        groups = {(): np.arange(n)}  # context -> the rows that drafted it
        for s in range(d):
            coins = rng.random(n)
            nxt: dict[tuple, list] = {}
            for context, at in groups.items():
                target[at, s] = _dense([target_fn(context)], v)[0]
                if s == d - 1:
                    continue
                q_row = _dense([draft_fn(context)], v)[0].astype(np.float64)
                draft[at, s] = q_row
                drawn = np.minimum(np.searchsorted(np.cumsum(q_row), coins[at], side="right"), v - 1)
                cand[at, s + 1] = drawn
                for x in np.unique(drawn):
                    nxt.setdefault((*context, int(x)), []).append(at[drawn == x])
            groups = {c: np.concatenate(parts) for c, parts in nxt.items()}
        out.update(candidates=cand, target=target, draft=draft)
        return out


@dataclass(frozen=True)
class ExactRequest:
    """One request of an exact case, as :mod:`.oracle` takes it.

    Attributes:
        index: the request.
        candidates: tokens per node (the chain: the root and the drafts).
        target: a row per node; draft: the chain's draft rows (``D - 1``; empty for the tree sampler).
        uniforms: a coin per node; uniform_final: the bonus token's coin.
    """

    index: int
    candidates: tuple[int, ...]
    target: tuple[dict, ...]
    draft: tuple[dict, ...]
    uniforms: tuple[float, ...]
    uniform_final: float


# --------------------------------------------------------------------------------------------------
# Trees
# --------------------------------------------------------------------------------------------------


def eagle_topk(budget: int, vocab: int, topk: int, rng: np.random.Generator) -> DraftTree:
    """EAGLE-2's draft tree: depth 1 the drafter's top ``topk``; each further depth the best ``topk`` of the
    frontier's ``topk x topk`` children by cumulative log-probability; then the best ``budget`` nodes overall
    (an ancestor always scores above its descendants), in depth-major order. Sibling tokens are distinct."""
    steps = max(1, -(-budget // topk))
    nodes = []  # (score, depth, parent index in nodes or -1, token)
    frontier = [(0.0, -1)]
    for depth in range(1, steps + 1):
        expand = []
        for score, parent in frontier:
            logp = np.log(rng.dirichlet(np.full(vocab, 0.3)) + 1e-12)
            for t in np.argsort(-logp, kind="stable")[:topk]:
                expand.append((score + float(logp[t]), parent, int(t)))
        expand.sort(key=lambda e: -e[0])
        frontier = []
        for score, parent, token in expand[:topk]:
            nodes.append((score, depth, parent, token))
            frontier.append((score, len(nodes) - 1))
    keep = sorted(range(len(nodes)), key=lambda i: -nodes[i][0])[:budget]
    keep = sorted(keep, key=lambda i: (nodes[i][1], i))  # depth-major, parents before children
    new = {old: n + 1 for n, old in enumerate(keep)}
    parents = [-1] + [0 if nodes[i][2] == -1 else new[nodes[i][2]] for i in keep]
    tokens = [int(rng.integers(vocab))] + [nodes[i][3] for i in keep]
    return DraftTree(tuple(parents), tuple(tokens))


def _tree(topology: str, budget: int, vocab: int, topk: int, rng: np.random.Generator) -> DraftTree:
    if topology == "chain":
        return DraftTree(tuple(range(-1, budget)), tuple(int(t) for t in rng.integers(1, vocab - 1, size=budget + 1)))
    if topology == "eagle-topk":
        return eagle_topk(budget, vocab, topk, rng)
    return VERIFY_TOPOLOGIES[topology](budget, max(budget + 1, 16), rng, vocab, None)


def _context(tree: DraftTree, node: int) -> tuple[int, ...]:
    return tuple(tree.tokens[n] for n in tree.path_to(node)[1:])


# --------------------------------------------------------------------------------------------------
# Rows (masses are multiples of 1 / UNITS)
# --------------------------------------------------------------------------------------------------


def _split(rng: np.random.Generator, units: int, parts: int, even: bool) -> list[int]:
    """``units`` split into ``parts`` non-negative integers (near-even with ``even``)."""
    if parts <= 1:
        return [units]
    if even:
        base = [units // parts] * parts
        for i in rng.choice(parts, size=units - sum(base), replace=False):
            base[int(i)] += 1
        jitter = int(rng.integers(0, max(1, units // (4 * parts)) + 1))
        a, b = rng.choice(parts, size=2, replace=False)
        move = min(jitter, base[int(a)] - 1) if base[int(a)] > 1 else 0
        base[int(a)] -= move
        base[int(b)] += move
        return base
    cuts = sorted(int(c) for c in rng.integers(0, units + 1, size=parts - 1))
    return [b - a for a, b in zip([0, *cuts], [*cuts, units])]


def planted_row(rng: np.random.Generator, kind: str, vocab: int, favoured: Sequence[int]) -> dict[int, float]:
    """A target row of ``kind`` (``onehot``, ``peaked``, ``flat``) with mass on the ``favoured`` tokens (the
    node's children) often enough that drafts are accepted and rejected."""
    favoured = [int(t) for t in favoured]
    def token() -> int:
        return int(rng.choice(favoured)) if favoured and rng.random() < 0.6 else int(rng.integers(vocab))
    if kind == "onehot":
        return {token(): 1.0}
    if kind == "peaked":
        top = token()
        units = {top: int(rng.integers(UNITS // 2, 7 * UNITS // 8 + 1))}
        others = [t for t in dict.fromkeys([*favoured, *(int(x) for x in rng.choice(vocab, size=3, replace=False))])
                  if t != top][:4]
        for t, u in zip(others or [(top + 1) % vocab], _split(rng, UNITS - units[top], max(1, len(others)), False)):
            units[t] = units.get(t, 0) + u
    else:  # flat
        pool = list(dict.fromkeys([*favoured, *(int(x) for x in rng.permutation(vocab))]))[:min(vocab, 8)]
        units = dict(zip(pool, _split(rng, UNITS, len(pool), True)))
    return {t: u / UNITS for t, u in units.items() if u > 0}


def _children_tokens(tree: DraftTree, context: tuple) -> tuple[int, ...]:
    node = 0
    for t in context:
        node = next((c for c in tree.children[node] if tree.tokens[c] == t), None)
        if node is None:
            return ()
    return tuple(tree.tokens[c] for c in tree.children[node])


class _RowFn:
    """A case's row per context for request ``b``, drawn once per context (seeded by the case and the context)."""

    def __init__(self, case: SamplingCase, b: int):
        self.case, self.b, self.memo = case, b, {}

    def __call__(self, context: tuple) -> dict:
        context = tuple(int(t) for t in context)
        if context not in self.memo:
            self.memo[context] = self._row(context)
        return self.memo[context]


class _TargetFn(_RowFn):
    """The target row: the node's children (the chain's draft favourites) favoured."""

    def _row(self, context: tuple) -> dict:
        c = self.case
        rng = np.random.default_rng(stable_seed("sampling-target", c.sampler, c.topology, c.budget, c.probs,
                                                c.vocab, c.topk, c.seed, self.b, context))
        if c.sampler == "chain":
            q = c.draft_fn(self.b)(context)
            favoured = sorted(q, key=lambda t: (-q[t], t))[:2]
        else:
            favoured = _children_tokens(c.trees[self.b], context)
        kind = c.probs if c.probs in ("onehot", "peaked", "flat") else "peaked"
        return planted_row(rng, kind, c.vocab, favoured)


class _DraftFn(_RowFn):
    """The chain's draft row: ``flat`` (``peaked`` when the target is flat)."""

    def _row(self, context: tuple) -> dict:
        c = self.case
        rng = np.random.default_rng(stable_seed("sampling-draft", c.topology, c.budget, c.probs, c.vocab, c.seed,
                                                self.b, context))
        return planted_row(rng, "peaked" if c.probs == "flat" else "flat", c.vocab, ())


def _dense(rows: Sequence[dict], vocab: int) -> np.ndarray:
    out = np.zeros((len(rows), vocab), dtype=np.float32)
    for i, row in enumerate(rows):
        for t, m in row.items():
            out[i, t] = m
    return out


# --------------------------------------------------------------------------------------------------
# Exact requests: rows, coins, and the boundary plants
# --------------------------------------------------------------------------------------------------


def _coin(rng: np.random.Generator) -> float:
    return int(rng.integers(COIN_UNITS)) / COIN_UNITS


def _exact_request(case: SamplingCase, b: int) -> ExactRequest:
    rng = np.random.default_rng(stable_seed("sampling-exact", case.id, b))
    uniforms = [_coin(rng) for _ in range(case.nodes)]
    final = _coin(rng)
    if case.probs == "residual":
        return _residual_chain(case, b)
    if case.sampler == "chain":
        return _exact_chain(case, b, rng, uniforms, final)
    tree, fn = case.trees[b], case.target_fn(b)
    target = [dict(fn(_context(tree, n))) for n in range(case.nodes)]
    if case.probs == "saturated":
        _saturate(case, tree, target, uniforms)
    elif case.probs == "edge":
        _edge_tree(case, b, tree, target, uniforms)
    req = ExactRequest(b, tree.tokens, tuple(target), (), tuple(uniforms), final)
    if case.probs == "edge":
        req = replace(req, uniform_final=_edge_final(case, req))
    return req


def _saturate(case: SamplingCase, tree: DraftTree, target: list, uniforms: list) -> None:
    """The root's first two children carry all its mass, ``1/2`` and ``1/2 - 2^-24`` (sum ``1 - 2^-24`` in
    float32 whatever the order), the root's coin ``1 - 2^-24``: both rejected, the residual empty. A root
    with one child: that child carries ``1 - 2^-24``."""
    kids = tree.children[0]
    toks = [tree.tokens[c] for c in kids[:2]]
    masses = [0.5, 0.5 - 2.0 ** -24] if len(toks) == 2 else [TOP_COIN]
    target[0] = dict(zip(toks, masses))
    uniforms[0] = TOP_COIN


def _edge_tree(case: SamplingCase, b: int, tree: DraftTree, target: list, uniforms: list) -> None:
    """At every node with children, one boundary (the node's coin and its children's masses chosen so):

    * ``threshold_single == 0``: the first child tried has mass 0 (``p >= 0`` holds; the zero-mass guard rejects
      it), the next 1/4 (accepted);
    * ``0 < threshold_single < 1``, odd nodes with two children or more: the first child a small mass, the next
      exactly ``threshold_single``, the coin equal to their cumulative mass over ``threshold_acc`` (the cumulative
      test rejects both: only ``p >= threshold_single`` accepts the second);
    * otherwise: the first child's mass over ``threshold_acc`` equal to the coin (``coin < P`` rejects it,
      ``coin <= P`` would not), the next 1/4 (accepted).

    The rest of the row's mass on one token that is no child."""
    links = case.links(b)
    ts, ta = case.threshold_single, case.threshold_acc
    for node in range(case.nodes):
        kids = links.children(node)
        if not kids:
            continue
        first = 1 + node % (UNITS // 8)  # 1/256 .. 32/256
        row: dict[int, float] = {}
        if ts == 0.0:
            row = {tree.tokens[kids[0]]: 0.0}
            if len(kids) > 1:
                row[tree.tokens[kids[1]]] = 0.25
        elif ts < 1.0 and node % 2 == 1 and len(kids) > 1 and first / UNITS < ts and (first / UNITS + ts) / ta < 1.0:
            row = {tree.tokens[kids[0]]: first / UNITS, tree.tokens[kids[1]]: ts}
            uniforms[node] = O.f32((first / UNITS + ts) / ta)
        else:
            row = {tree.tokens[kids[0]]: first / UNITS}
            if first / UNITS / ta < 1.0:
                uniforms[node] = O.f32(first / UNITS / ta)
            if len(kids) > 1:
                row[tree.tokens[kids[1]]] = 0.25
        left = 1.0 - sum(row.values())
        spare = [t for t in range(case.vocab) if t not in {tree.tokens[c] for c in kids}]
        if left > 0:
            row[spare[node % len(spare)]] = left
        target[node] = {t: m for t, m in row.items() if m > 0}


def _edge_final(case: SamplingCase, req: ExactRequest) -> float:
    """A final coin putting ``u = coin * total`` exactly on a step of the bonus token's CDF (strict ``>`` picks
    the next token), when one such coin is a float32 whose product is exact; else the drawn coin."""
    if case.sampler == "tree":
        rnd = O.tree_target_only(case.links(req.index), req.target, req.uniforms, 0.0, case.vocab, case.accept_width,
                                 case.threshold_single, case.threshold_acc)
        node = rnd.path[-1]
        removed = {t for n, t in rnd.rejected if n == node}
        masses = {t: m for t, m in req.target[node].items() if t not in removed} if len(rnd.path) < case.accept_width \
            else dict(req.target[node])
    else:
        rnd = O.chain_rejection(req.candidates, req.target, req.draft, req.uniforms, 0.0, case.vocab, case.block)
        k = rnd.accepted_drafts
        masses = dict(req.target[k]) if k == case.budget else O.residual(req.target[k], req.draft[k])
    positive = sorted((t, m) for t, m in masses.items() if m > 0)
    total, cdf = sum(m for _, m in positive), 0.0
    for _, m in positive[:-1]:
        cdf += m
        coin = O.f32(cdf / total)
        if coin < 1.0 and O.f32(coin * O.f32(total)) == cdf:
            return coin
    return req.uniform_final


def _exact_chain(case: SamplingCase, b: int, rng: np.random.Generator, uniforms: list, final: float) -> ExactRequest:
    """A chain request: drafts drawn from the draft's rows (a draft of zero draft mass now and then), target rows
    by context; with ``block``, each draft's target mass set to its draft mass times 1/2, 1 or 2 (the prefix
    probabilities stay dyadic); ``edge``: the drafts before a chosen step carry their draft mass (accepted), the
    one at that step half of it with coin 1/2 (``coin * q == p``: rejected), the final coin on a CDF step."""
    target_fn, draft_fn = case.target_fn(b), case.draft_fn(b)
    cand, target, draft, context = [case.trees[b].tokens[0]], [], [], ()
    edge_step = int(rng.integers(case.budget))
    for s in range(case.budget):
        q_row = dict(draft_fn(context))
        toks = sorted(q_row)
        off_support = case.probs != "edge" and rng.random() < 0.1  # a draft of zero draft mass now and then
        x = int(rng.integers(case.vocab)) if off_support else \
            int(rng.choice(toks, p=np.array([q_row[t] for t in toks]) / sum(q_row.values())))
        p_row = dict(target_fn(context))
        qx = q_row.get(x, 0.0)
        if case.probs == "edge" and qx > 0 and s <= edge_step:
            p_row = _with_mass(p_row, x, qx * (0.5 if s == edge_step else 1.0), case.vocab)
            if s == edge_step:
                uniforms[s] = 0.5
        elif case.block and qx > 0:
            ratios = [0.5, 1.0, 2.0] if qx <= 0.5 else [0.5, 1.0]
            p_row = _with_mass(p_row, x, qx * float(rng.choice(ratios)), case.vocab)
        cand.append(x)
        target.append(p_row)
        draft.append(q_row)
        context = (*context, x)
    target.append(dict(target_fn(context)))
    req = ExactRequest(b, tuple(cand), tuple(target), tuple(draft), tuple(uniforms), final)
    if case.probs == "edge":
        req = replace(req, uniform_final=_edge_final(case, req))
    return req


def _residual_chain(case: SamplingCase, b: int) -> ExactRequest:
    """Block verification stopping short of the chain with prefix probability ``h = 1/2``, the bonus coin where the
    scaled residual ``relu(h * p - q)`` and the unscaled ``relu(p - q)`` pick different tokens (``docs/
    sampling-kernels.md``): drafts ``a, b``; ``p0 = {a: 1/2, x: 1/2}``, ``q0 = {a: 1}`` (``h1 = 1/2``);
    ``p1 = {b: 1/8, c: 1/2, e: 3/8}``, ``q1 = {b: 7/8, c: 1/8}`` (``h2 = 1/14``; the scaled residual ``c: 1/8,
    e: 3/16``, ``S = 5/16``); coins ``0.25`` (``< h1`` and ``< S / (S + 1 - h1) = 5/13``: step 1 taken) and ``0.5``
    (``>= h2``: step 2 not); the final coin ``7/16``: ``e`` from the scaled residual, ``c`` from the unscaled."""
    root = case.trees[b].tokens[0]
    a, t_b, c, e, x, last = ((root + k) % case.vocab for k in range(1, 7))
    target = ({a: 0.5, x: 0.5}, {t_b: 0.125, c: 0.5, e: 0.375}, {last: 1.0})
    draft = ({a: 1.0}, {t_b: 0.875, c: 0.125})
    return ExactRequest(b, (root, a, t_b), target, draft, (0.25, 0.5, 0.75), 7 / 16)


def _with_mass(row: dict, token: int, mass: float, vocab: int) -> dict:
    """``row`` with ``token`` carrying ``mass`` and the difference taken from / given to one other token."""
    out = dict(row)
    delta = mass - out.get(token, 0.0)
    out[token] = mass
    others = sorted((t for t in out if t != token), key=lambda t: -out[t])
    if delta > 0:
        for t in others:
            take = min(out[t], delta)
            out[t] -= take
            delta -= take
            if delta <= 0:
                break
    elif delta < 0:
        spare = others[0] if others else (token + 1) % vocab
        out[spare] = out.get(spare, 0.0) - delta
    return {t: m for t, m in out.items() if m > 0}


# --------------------------------------------------------------------------------------------------
# Case generators
# --------------------------------------------------------------------------------------------------

EXACT_VOCABS = (16, 17, 18, 1024, 4100)
THRESHOLDS = ((1.0, 1.0), (0.5, 1.0), (1.0, 0.5), (0.25, 0.25), (0.0, 1.0))
TREE_BUDGETS = (1, 3, 7, 8, 12, 15)
CHAIN_STEPS = (1, 2, 3, 5, 7)
EXACT_BATCHES = (1, 3)


def _unique(cases) -> tuple:
    return tuple({c.id: c.check() for c in cases}.values())


def tree_exact_cases(ctx: CaseContext | None = None) -> tuple[SamplingCase, ...]:
    """Every pair of topology, budget, target rows, thresholds, link order, vocabulary and batch; and every
    thresholds x rows at budget 7 on EAGLE's tree (the lossy thresholds against each row kind)."""
    from ...covering import pairwise

    rows = pairwise({"topology": TOPOLOGIES, "budget": TREE_BUDGETS, "probs": TREE_PROBS, "thresholds": THRESHOLDS,
                     "siblings": O.ORDERS, "vocab": EXACT_VOCABS, "batch": EXACT_BATCHES})
    rows += [dict(topology="eagle-topk", budget=7, probs=p, thresholds=t, siblings=O.ASCENDING, vocab=16, batch=3)
             for p in TREE_PROBS for t in THRESHOLDS]
    return _unique(SamplingCase("tree", "exact", r["topology"], r["budget"], r["probs"], r["batch"], r["vocab"],
                                threshold_single=r["thresholds"][0], threshold_acc=r["thresholds"][1],
                                siblings=r["siblings"]) for r in rows)


def chain_exact_cases(ctx: CaseContext | None = None) -> tuple[SamplingCase, ...]:
    """Every pair of steps, target rows, block verification, vocabulary and batch."""
    from ...covering import pairwise

    rows = pairwise({"budget": CHAIN_STEPS, "probs": ("onehot", "peaked", "flat", "edge"), "block": (False, True),
                     "vocab": EXACT_VOCABS, "batch": EXACT_BATCHES})
    stated = [SamplingCase("chain", "exact", "chain", 2, "residual", 1, 16, block=True)]  # the residual's scale
    return _unique([*(SamplingCase("chain", "exact", "chain", r["budget"], r["probs"], r["batch"], r["vocab"],
                                   block=r["block"]) for r in rows), *stated])


ROWS = 1 << 16
"""``N``, the rows of one distribution cell: every planted skew of :mod:`.law` is caught with power
:data:`~.distribution.POWER` at :data:`~.distribution.ALPHA` by at least one distribution case of each sampler
(``docs/sampling-kernels.md`` has the table; ``tests/unit/test_sampling_distribution.py`` holds it). The device
tier's."""
INTERPRET_ROWS = 512
"""``N`` on the CPU tiers (Triton's interpreter: 12-40 ms a row): every skew but ``unscaled-residual`` (11,768 rows;
the exact cells catch it) is caught there with power 0.999 by some case of its sampler."""
INTERPRET_TRITON = ("chain-distribution-chain-b3-peaked", "ddtree-distribution-bf-flat-b5-flat")
"""The distribution cases a Triton sampler runs on the interpret tier (id prefixes): one per sampler; the others run
on the device tier (:func:`interpret_refusal`)."""


def rows_for(ctx: CaseContext | None) -> int:
    """``N`` for a run: :data:`ROWS` on the device tier (and with no context), :data:`INTERPRET_ROWS` on the CPU
    (the case context's size profile, ``attention_profile``, follows the tier)."""
    return ROWS if ctx is None or ctx.attention_profile == "device" else INTERPRET_ROWS


def interpret_refusal(target, case) -> str | None:
    """A Triton sampler on the interpret tier runs the exact cases and :data:`INTERPRET_TRITON`'s distribution cases
    only; the others are a counted skip that says the device tier runs them."""
    if target.tier != "interpret" or case is None or case.kind != "distribution":
        return None
    if case.id.startswith(INTERPRET_TRITON) and "-block" not in case.id:
        return None
    own = [p for p in INTERPRET_TRITON if p.split("-", 1)[0] == case.id.split("-", 1)[0]]  # this sampler's case
    return (f"the interpret tier runs one distribution case per Triton sampler ({', '.join(own) or 'none'} for this "
            "one, without block verification; Triton's interpreter: 12-40 ms a row); this cell runs on the device tier")


def tree_distribution_cases(ctx: CaseContext | None = None, rows: int | None = None) -> tuple[SamplingCase, ...]:
    v, rows = DISTRIBUTION_VOCAB, rows or rows_for(ctx)
    return _unique([
        SamplingCase("tree", "distribution", "eagle-topk", 6, "peaked", rows, v),
        SamplingCase("tree", "distribution", "eagle-topk", 6, "flat", rows, v, siblings=O.REVERSE),
        SamplingCase("tree", "distribution", "bf-flat", 5, "flat", rows, v),
        SamplingCase("tree", "distribution", "balanced", 7, "peaked", rows, v),
        SamplingCase("tree", "distribution", "chain", 3, "peaked", rows, v),
        SamplingCase("tree", "distribution", "eagle-topk", 6, "flat", rows, v, threshold_single=0.5, threshold_acc=0.5),
    ])


def chain_distribution_cases(ctx: CaseContext | None = None, rows: int | None = None) -> tuple[SamplingCase, ...]:
    v, rows = DISTRIBUTION_VOCAB, rows or rows_for(ctx)
    return _unique([SamplingCase("chain", "distribution", "chain", 3, p, rows, v, block=blk)
                    for p in ("peaked", "flat") for blk in (False, True)])


def ddtree_distribution_cases(ctx: CaseContext | None = None, rows: int | None = None) -> tuple[SamplingCase, ...]:
    v, rows = DISTRIBUTION_VOCAB, rows or rows_for(ctx)
    return _unique([
        SamplingCase("ddtree", "distribution", "bf-flat", 5, "flat", rows, v),
        SamplingCase("ddtree", "distribution", "balanced", 7, "peaked", rows, v),
        SamplingCase("ddtree", "distribution", "random", 7, "peaked", rows, v),
    ])


# --------------------------------------------------------------------------------------------------
# The records
# --------------------------------------------------------------------------------------------------

TREE = "tree_speculative_sampling"
CHAIN = "chain_speculative_sampling"
DDTREE_LAW = "ddtree_sample_distribution"
RECORD_NAMES = {"tree": TREE, "chain": CHAIN, "ddtree": DDTREE_LAW}


def _label(case: SamplingCase) -> str:
    return case.label


def _record(name: str, summary: str, cases) -> KernelRecord:
    return KernelRecord(name=name, summary=summary, case_param="ddtree_sampling_case", case_type=SamplingCase,
                        cases=cases, run=f"ddtree_compat.families.sampling.checks:{name}", label=_label)


TREE_RECORD = _record(TREE, "SGLang tree_speculative_sampling_target_only: target-only tree sampling verify "
                      "(exact given uniforms; law over N rows)",
                      lambda ctx: tree_exact_cases(ctx) + tree_distribution_cases(ctx))
CHAIN_RECORD = _record(CHAIN, "SGLang chain_speculative_sampling_triton: rejection sampling, block verification "
                       "(exact given uniforms; law over N rows)",
                       lambda ctx: chain_exact_cases(ctx) + chain_distribution_cases(ctx))
DDTREE_RECORD = _record(DDTREE_LAW, "DDTree implementations' sample_ddtree_target_probs_triton: the law over N rows "
                        "(exact cells: the DDTree family's ddtree_sample)", ddtree_distribution_cases)

RECORDS = (TREE_RECORD, CHAIN_RECORD, DDTREE_RECORD)
KERNELS = tuple(r.name for r in RECORDS)
