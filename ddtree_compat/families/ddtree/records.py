"""DDTree implementations' own kernels: tree build, prune, verify-input compile, FlashAttention metadata,
greedy follow, sampling verify, EAGLE links and CUDA-graph buckets, one record each.

The systems under test are DDTree branches of SGLang (:mod:`ddtree_compat.impls`); each implementation
found is a backend (:mod:`ddtree_compat.backends.ddtree_impl`) that implements the records its code has.
Their Triton wrappers run on the device tier (they refuse CPU tensors); their CPU helpers run on any
tier. Every integer output is compared exactly with :mod:`ddtree_compat.families.ddtree.oracle`.

Backend methods (``bs`` requests, budget ``B``, live width ``q``; int64 unless said; outputs in place):

* ``ddtree_build(top_log_probs f32 [bs,L,K], top_token_ids [bs,L,K], budget, out_tokens [bs,B],
  out_depths [bs,B], out_parents [bs,B+1], out_visibility bool [bs,B+1,B+1], out_sizes [bs])``: the Triton
  best-first heap build (push-order ties; always ``B`` pops).
* ``ddtree_build_cpu(top_log_probs, top_token_ids, budget, prune) -> (tokens, depths, parents,
  visibility, sizes)``: the CPU build (rank-path ties; stops when the heap empties), optionally pruned to
  the deepest chains; padding zeros / -1 / False.
* ``ddtree_prune(in_tokens, in_depths, in_parents, in_visibility, out_tokens, out_depths, out_parents,
  out_visibility, out_sizes, budget)``: the Triton deepest-chain prune of a full ``B + 1`` tree.
* ``ddtree_compile(root [bs], tokens, depths, visibility, start [bs], past [bs], sizes [bs], out_ids [bs*q],
  out_positions [bs*q], out_mask bool [sum q*(past+q)], q, max_kv_len)``: verify ids, positions and the
  packed tree mask (Triton); ``visibility`` rows past a tree's size padded to the identity in place when
  the mask is not built (``out_mask=None``).
* ``ddtree_compile_cpu(...same inputs..., q, build_mask) -> (ids [bs,q], positions [bs,q], mask | None)``.
* ``ddtree_fa_suffix(visibility bool [bs,q,q], req_to_token int32 [rows, ctx], req_pool_indices [bs],
  seq_lens [bs], page_table int32 [bs*q, q], cache_seqlens int32 [bs*q], q)`` and ``ddtree_fa_full(...,
  page_table int32 [bs*q, ctx + q], ...)``: FlashAttention tree-verify metadata (Triton).
* ``ddtree_follow(draft [bs,q], target [bs,q], parents [bs,q], sizes [bs], out_indices [bs,q], out_tokens
  [bs,q], out_lens [bs], out_next [bs])``: greedy follow over parents (Triton).
* ``ddtree_follow_cpu(draft, target, parents, sizes) -> (paths, next_tokens)``: the CPU follow.
* ``ddtree_sample(target_probs f32 [bs,q,V], draft, parents, sizes, out_indices, out_tokens, out_lens,
  out_next) -> None``: sampling verify (Triton); its uniforms come from torch's generator.
* ``ddtree_eagle_links(top_log_probs, top_token_ids, budget) -> (next_token [bs,B+1], next_sibling
  [bs,B+1])``: DFlash's DDTree builder's EAGLE links.
* ``ddtree_graph_buckets(budget, prune, configured) -> (buckets, {size: bucket})``: CUDA-graph verify widths.

Layouts (the ``cap16`` idea applied to every input and output): ``exact`` buffers hold ``bs`` rows of the
live width; ``worker`` buffers are allocated as the implementation's worker allocates them (``max_bs`` =
``bs + 5`` rows; follow and sampling outputs ``B + 1`` wide, FA page tables ``T = max bucket`` wide) and the
kernel gets the ``[:bs]`` / ``[:bs, :q]`` slices the worker passes; with prune the live width ``q`` is the
graph bucket, smaller than ``B + 1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np

from ...cases import FlatCase, plant_path, stable_seed, target_for_path
from ...errors import CaseError
from ..verify.oracle import top_k
from .oracle import KERNEL_RULE, BuiltTree, arrays, build, graph_buckets, prune_deepest_chains, select_bucket
from ...tree import DraftTree
from ...contract import CaseContext, KernelRecord

SCHEMA = "ddtree-compat/ddtree-case/1"
LOGITS = ("peaked", "flat", "ties", "deep", "wide")
LAYOUTS = ("exact", "worker")
PLANTS = ("none", "first", "partial", "deep", "sibling")
PADDINGS = ("identity", "zeros")  # visibility rows past a pruned tree: the Triton prune's, the CPU build's
PROBS = ("onehot", "spread", "edge")  # sampling verify's target probabilities
WIDE_EVERY = 4  # ``wide`` logits branch at depths 1, 5, 9, ... (two near-tied tokens there, one dominant elsewhere)
SPARE_ROWS = 5  # the worker's max_bs beyond the batch


@dataclass(frozen=True)
class DDTreeCase(FlatCase):
    """One call of a DDTree kernel: the draft's top-k for a batch, and what the kernel gets around it.

    Attributes:
        budget: ``B >= 1`` drafted nodes.
        block_size: DFlash block; depth limit ``L = block_size - 1``.
        topk: ``K`` (``None``: ``min(B, vocab)``, what the implementations use).
        logits: ``peaked`` (one dominant token per depth: deep trees), ``flat`` (near-uniform: wide), ``ties``
            (spread-out logits, log-probs rounded to 1/2: tied sums, where the CPU and kernel tie rules part),
            ``deep`` (one overwhelming token per depth: the argmax chain reaches the depth limit once
            ``B >= L``), ``wide`` (two near-tied tokens every :data:`WIDE_EVERY` depths, one overwhelming token
            between: a tree that branches at several depths and is deep).
        batch: requests.
        vocab: token ids are in ``[0, vocab)``.
        plant: the accepted path planted for follow and sampling (as the verify grid's plants).
        past: request ``b``'s prefix is ``past + 3 b`` tokens (ragged).
        prune: the tree is pruned to its deepest chains.
        layout: ``exact`` or ``worker`` (module docstring).
        padding: the visibility the compile gets past a pruned tree's rows: ``identity`` (what the Triton
            prune writes) or ``zeros`` (the CPU build with prune: the no-mask compile must pad them itself).
        probs: sampling verify's target probabilities: ``onehot`` (the target's token per node: exactly the
            greedy follow), ``spread`` (masses of 1/64 on each child's token and a few others: exact in
            float32), ``edge`` (a child's cumulative mass equal to the uniform its node reads: ``<`` and
            ``<=`` part).
        seed: the draw.

    Raises:
        CaseError: via :meth:`check`.
    """

    SCHEMA = SCHEMA
    KIND = "ddtree"

    budget: int
    block_size: int = 16
    topk: int | None = None
    logits: str = "peaked"
    batch: int = 1
    vocab: int = 1024
    plant: str = "deep"
    past: int = 0
    prune: bool = False
    layout: str = "exact"
    padding: str = "identity"
    probs: str = "onehot"
    seed: int = 0

    # ---------------------------------------------------------------- identity
    @property
    def id(self) -> str:
        """``b8-k8-peaked-bs3`` plus what differs from the defaults (``-deep``, ``-past100``, ``-prune``, ``-worker``)."""
        parts = [f"b{self.budget}", f"k{self.k}", self.logits, f"bs{self.batch}"]
        if self.block_size != 16:
            parts.append(f"blk{self.block_size}")
        if self.plant != "deep":
            parts.append(self.plant)
        if self.past:
            parts.append(f"past{self.past}")
        if self.prune:
            parts.append("prune")
        if self.layout != "exact":
            parts.append(self.layout)
        if self.padding != "identity":
            parts.append("zeropad")
        if self.probs != "onehot":
            parts.append(self.probs)
        if self.vocab != 1024:
            parts.append(f"v{self.vocab}")
        if self.seed:
            parts.append(f"s{self.seed}")
        return "-".join(parts)

    @property
    def k(self) -> int:
        return self.topk if self.topk is not None else min(self.budget, self.vocab)

    @property
    def depth_limit(self) -> int:
        return self.block_size - 1

    def check(self) -> "DDTreeCase":
        where = f"ddtree case {self.id}"
        if not isinstance(self.budget, int) or self.budget < 1:
            raise CaseError("budget", self.budget, "integer >= 1", "out of range", where)
        if not isinstance(self.block_size, int) or self.block_size < 2:
            raise CaseError("block_size", self.block_size, "integer >= 2", "out of range", where)
        if not 1 <= self.k <= self.vocab:
            raise CaseError("topk", self.topk, f"null or 1..vocab ({self.vocab})", "out of range", where)
        for name, value, allowed in (("logits", self.logits, LOGITS), ("layout", self.layout, LAYOUTS),
                                     ("plant", self.plant, PLANTS), ("padding", self.padding, PADDINGS),
                                     ("probs", self.probs, PROBS)):
            if value not in allowed:
                raise CaseError(name, value, ", ".join(allowed), "unknown", where)
        if not isinstance(self.batch, int) or self.batch < 1 or not isinstance(self.past, int) or self.past < 0:
            raise CaseError("batch", (self.batch, self.past), "batch >= 1, past >= 0", "out of range", where)
        return self

    def coordinates(self) -> dict:
        return dict(budget=self.budget, topology=f"ddtree-{self.logits}", plant=self.plant, batch=self.batch,
                    block_size=self.block_size, mode="prune" if self.prune else "tree",
                    layout=self.layout + ("-prune" if self.prune else ""),
                    shape=f"k{self.k}-past{self.past}" + ("-zeropad" if self.padding != "identity" else "")
                    + (f"-{self.probs}" if self.probs != "onehot" else ""))

    # ---------------------------------------------------------------- derived data
    @cached_property
    def top(self) -> tuple[list, list]:
        """``(lp, ids)``: per request ``[L][K]`` float32 log-probs (as Python floats, descending) and their
        distinct token ids, drawn from ``[L, vocab]`` logits of the case's kind."""
        rng = np.random.default_rng(stable_seed("ddtree", self.budget, self.block_size, self.k, self.logits, self.batch,
                                          self.vocab, self.seed))
        lps, idss = [], []
        for _ in range(self.batch):
            x = rng.standard_normal((self.depth_limit, self.vocab))
            if self.logits == "peaked":
                x[np.arange(self.depth_limit), rng.integers(self.vocab, size=self.depth_limit)] += 8.0
            elif self.logits == "flat":
                x *= 0.05
            elif self.logits == "deep":
                x[np.arange(self.depth_limit), rng.integers(self.vocab, size=self.depth_limit)] += 24.0
            elif self.logits == "wide":
                for d in range(self.depth_limit):
                    pair = rng.choice(self.vocab, size=2, replace=False)
                    x[d, pair] = (20.0, 19.8) if d % WIDE_EVERY == 0 else (24.0, x[d, pair[1]])
            else:  # ties: a spread-out draft whose rounded log-probs tie near the top of each depth
                x *= 3.0
            shifted = x - x.max(axis=1, keepdims=True)
            logp = (shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))).astype(np.float32)
            if self.logits == "ties":
                logp = (np.round(logp * 2) / 2).astype(np.float32)
            lp, ids = top_k(logp, self.k)
            lps.append(lp)
            idss.append(ids)
        return lps, idss

    def built(self, rule: str = KERNEL_RULE) -> list[BuiltTree]:
        lp, ids = self.top
        return [build(lp[b], ids[b], self.budget, rule) for b in range(self.batch)]

    @cached_property
    def trees(self) -> list[BuiltTree]:
        """The trees downstream kernels (compile, metadata, follow, sampling) get: the kernel build, pruned
        when ``prune``."""
        trees = self.built(KERNEL_RULE)
        return [prune_deepest_chains(t)[0] for t in trees] if self.prune else trees

    @property
    def sizes(self) -> list[int]:
        return [t.size for t in self.trees]

    @property
    def buckets(self) -> list[int]:
        return graph_buckets(self.budget, self.prune)

    @property
    def q(self) -> int:
        """The live width: ``B + 1``; with prune the largest pruned size, or (worker layout, CUDA graphs) its
        graph bucket."""
        if not self.prune:
            return self.budget + 1
        size = max(self.sizes)
        return select_bucket(size, self.buckets) if self.layout == "worker" else size

    @property
    def max_bs(self) -> int:
        return self.batch + (SPARE_ROWS if self.layout == "worker" else 0)

    @property
    def past_lens(self) -> list[int]:
        return [self.past + 3 * b for b in range(self.batch)]

    @cached_property
    def roots(self) -> list[int]:
        rng = np.random.default_rng(stable_seed("ddtree-roots", self.id))
        return [int(t) for t in rng.integers(self.vocab, size=self.batch)]

    def arrays(self, padding: str = "empty"):
        return [arrays(t, self.budget, padding) for t in self.trees]

    @cached_property
    def targets(self) -> list[list[int]]:
        """Per request, the target's token at each of the ``q`` columns, planting :attr:`plant`'s path
        (padding columns get random tokens)."""
        out = []
        for b, tree in enumerate(self.trees):
            rng = np.random.default_rng(stable_seed("ddtree-target", self.id, b))
            draft = DraftTree(tree.parents, (self.roots[b], *tree.tokens))
            path = plant_path(draft, self.plant, rng) or (0,)
            planted = list(target_for_path(draft, path, rng, self.vocab))
            out.append(planted + [int(t) for t in rng.integers(self.vocab, size=self.q - len(planted))])
        return out

    def draft_row(self, b: int) -> list[int]:
        """Request ``b``'s draft tokens over the ``q`` columns: the root, the nodes, zeros (the builders' padding)."""
        tree = self.trees[b]
        return ([self.roots[b], *tree.tokens] + [0] * self.q)[:self.q]

    def parents_row(self, b: int) -> list[int]:
        return (list(self.trees[b].parents) + [-1] * self.q)[:self.q]


# --------------------------------------------------------------------------------------------------
# Case generators
# --------------------------------------------------------------------------------------------------

BUDGETS = {"default": (1, 2, 3, 7, 8, 12, 13, 14, 15, 16, 17, 31, 32, 33, 63, 64),
           "full": (1, 2, 3, 7, 8, 12, 13, 14, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256)}
BLOCK_SIZES = {"default": (16,), "full": (8, 16, 32)}
FIELD_BUDGETS = (8, 12, 15, 16, 32, 64)  # the field's budgets: every combination, at block size 16
FIELD_BLOCK = 16
BATCHES = (1, 3, 8)
PASTS = (0, 17, 300)
DIMENSIONS = {"logits": LOGITS, "batch": BATCHES, "past": PASTS, "prune": (False, True), "layout": LAYOUTS,
              "plant": PLANTS, "padding": PADDINGS, "probs": PROBS, "pruning": ("off", "prune", "prune-zeropad")}
"""Every case dimension and its values (``pruning``: prune and the visibility padding as one dimension, since
zero padding exists only past a pruned tree). A record's grid crosses the ones its kernel reads (a dimension it
does not read would only repeat a cell): :data:`GRID_DIMENSIONS`."""

GRID_DIMENSIONS = {
    "build": (("logits", "batch", "layout"), ()),
    "build_cpu": (("logits", "batch", "prune"), ()),
    "tree": (("logits", "batch", "past", "prune", "layout"), ()),
    "compile": (("logits", "batch", "past", "pruning", "layout"), ()),
    "follow": (("logits", "batch", "plant", "prune", "layout"), ()),
    "sample": (("logits", "batch", "plant", "prune", "layout"), ("probs",)),
}
"""Per grid: ``(dimensions, extra)``. The default grid covers every pair of values of budget and all of them
(pairwise, :func:`~ddtree_compat.covering.pairwise`; with block size too in the full profile); at
the :data:`FIELD_BUDGETS` it holds every combination of ``dimensions`` and every pair with ``extra`` (an input
one kernel alone reads: sampling's target probabilities)."""


def _unique(cases) -> tuple:
    return tuple({c.id: c.check() for c in cases}.values())


def _case(row: dict) -> DDTreeCase:
    row = dict(row)
    pruning = row.pop("pruning", None)
    if pruning is not None:
        row.update(prune=pruning != "off", padding="zeros" if pruning == "prune-zeropad" else "identity")
    return DDTreeCase(**row)


def grid_rows(profile: str, grid: str, field: bool = True) -> list[dict]:
    """The rows of one of :data:`GRID_DIMENSIONS`' grids: pairwise over the profile's budgets (and block sizes),
    then every combination at the field's budgets."""
    from itertools import product

    from ...covering import pairwise

    profile = profile if profile in BUDGETS else "default"
    dims, extra = GRID_DIMENSIONS[grid]
    axes = {"budget": BUDGETS[profile]}
    if len(BLOCK_SIZES[profile]) > 1:
        axes["block_size"] = BLOCK_SIZES[profile]
    axes.update((d, DIMENSIONS[d]) for d in (*dims, *extra))
    rows = pairwise(axes)
    if not field:
        return rows
    full = [dict(budget=b, block_size=FIELD_BLOCK, **dict(zip(dims, combo)))
            for b in FIELD_BUDGETS for combo in product(*(DIMENSIONS[d] for d in dims))]
    if extra:
        field_axes = {"budget": FIELD_BUDGETS, "block_size": (FIELD_BLOCK,), **{d: DIMENSIONS[d] for d in dims},
                      **{d: DIMENSIONS[d] for d in extra}}
        full = pairwise(field_axes, full)
    return rows + full


INTERPRET_MAX_BUDGET = 16


@cache
def interpret_ids() -> frozenset[str]:
    """The cells the interpret tier runs an implementation's Triton kernels on (Triton's interpreter takes
    0.1-25 s a cell on a CPU core): the default grid's pairwise rows with ``B <= 16`` (every pair of the
    other dimensions' values still meets there) and the exhaustion cases; the rest are the device tier's."""
    ids = {c.id for c in exhaustion_cases(CaseContext("default", ()))}
    for grid, (dims, extra) in GRID_DIMENSIONS.items():
        pairwise_part = grid_rows("default", grid, field=False)
        ids |= {_case(r).id for r in pairwise_part if r["budget"] <= INTERPRET_MAX_BUDGET}
    return frozenset(ids)


def _grid(ctx: CaseContext, grid: str) -> tuple:
    profile = ctx.profile if ctx.profile in BUDGETS else "default"
    return _unique(_case(r) for r in grid_rows(profile, grid))


def build_cases(ctx: CaseContext) -> tuple:
    return _grid(ctx, "build")


def build_cpu_cases(ctx: CaseContext) -> tuple:
    return _grid(ctx, "build_cpu")


def exhaustion_cases(ctx: CaseContext) -> tuple:
    """Budgets past what ``K = 1`` can reach (``B > L``): the CPU builder stops, the kernel repeats."""
    return _unique([DDTreeCase(b, 4, topk=1, batch=2) for b in (3, 6)])


def tree_cases(ctx: CaseContext) -> tuple:
    """Cases of the FlashAttention metadata kernels: prune on and off, both layouts, ragged prefixes."""
    return _grid(ctx, "tree")


def compile_cases(ctx: CaseContext) -> tuple:
    """The compile's cases: :func:`tree_cases`' dimensions and the visibility padding it gets past a pruned tree."""
    return _grid(ctx, "compile")


def follow_cases(ctx: CaseContext) -> tuple:
    return _grid(ctx, "follow")


def sample_cases(ctx: CaseContext) -> tuple:
    """The follow's cases and sampling's target probabilities (one-hot, spread, at the threshold)."""
    return _grid(ctx, "sample")


def bucket_cases(ctx: CaseContext) -> tuple:
    profile = ctx.profile if ctx.profile in BUDGETS else "default"
    return _unique([DDTreeCase(b, prune=p) for b in (*BUDGETS[profile], 127, 128, 255) for p in (False, True)])


def _record(name: str, summary: str, cases, check: str | None = None) -> KernelRecord:
    return KernelRecord(name=name, summary=summary, case_param="ddtree_ddtree_case", case_type=DDTreeCase,
                        cases=cases, run=f"ddtree_compat.families.ddtree.checks:{check or name}", table="ddtree",
                        known_issues=True)


BUILD = _record("ddtree_build", "Triton best-first heap build (push-order ties, B pops)",
                lambda ctx: build_cases(ctx) + exhaustion_cases(ctx))
BUILD_CPU = _record("ddtree_build_cpu", "CPU best-first build (rank-path ties), optionally pruned",
                    lambda ctx: build_cpu_cases(ctx) + exhaustion_cases(ctx))
PRUNE = _record("ddtree_prune", "Triton deepest-chain prune of a full tree", build_cases)
COMPILE = _record("ddtree_compile", "Triton verify ids, positions and packed tree mask", compile_cases)
COMPILE_CPU = _record("ddtree_compile_cpu", "CPU verify ids, positions and packed tree mask", compile_cases)
FA_SUFFIX = _record("ddtree_fa_suffix", "Triton FlashAttention suffix metadata: page-table rows, cache_seqlens",
                    tree_cases)
FA_FULL = _record("ddtree_fa_full", "Triton FlashAttention full metadata: prefix + visible suffix rows", tree_cases)
FOLLOW = _record("ddtree_follow", "Triton greedy follow over the parent array", follow_cases)
FOLLOW_CPU = _record("ddtree_follow_cpu", "CPU greedy follow over child maps", follow_cases)
SAMPLE = _record("ddtree_sample", "Triton sampling verify (given uniforms: exact)", sample_cases)
EAGLE_LINKS = _record("ddtree_eagle_links", "DFlash DDTree builder's EAGLE links (reverse insertion order)",
                      lambda ctx: tuple(c for c in build_cpu_cases(ctx) + exhaustion_cases(ctx) if not c.prune))
GRAPH_BUCKETS = _record("ddtree_graph_buckets", "CUDA-graph verify widths and the bucket a tree size selects",
                        bucket_cases)

RECORDS = (BUILD, BUILD_CPU, PRUNE, COMPILE, COMPILE_CPU, FA_SUFFIX, FA_FULL, FOLLOW, FOLLOW_CPU, SAMPLE,
           EAGLE_LINKS, GRAPH_BUCKETS)
KERNELS = tuple(r.name for r in RECORDS)
