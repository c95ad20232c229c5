"""Verify attention: the target forward's attention over ``[prefix + D tree nodes]`` under DDTree's
ancestor-only mask, laid out the way SGLang's target verify lays it out (layout, reference and
tolerances: :mod:`ddtree_compat.families.attention.checks`; ``docs/verify-attention.md``).

Backend method ``verify_attention(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices,
custom_mask, mask_indptr, max_len_extend, sm_scale, page_size, tiles="native") -> dict | None`` (SGLang
``extend_attention_fwd``), writing ``o`` in place and returning the launch's tile configuration. ``tiles``
names an arch whose tile choice to emulate; a backend that can emulate one declares
``attention_tiles = True`` and has ``attention_tile_choice(tiles, head_dim) -> dict``; others run each
case once, ``native``. Results say ``verify_attention`` or ``verify_attention@emulated-<arch>``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ...arch import TILE_ARCHES
from ..verify.records import NestedCase, VerifyCase, make_case
from ...cases import stable_seed
from ...errors import CaseError
from ...contract import CaseContext, KernelRecord

SCHEMA = "ddtree-compat/attention-case/1"
KERNEL = "verify_attention"
GRAPH_KERNEL = "verify_attention_graph"
CASCADE_KERNEL = "verify_attention_cascade"
CAPTURED_BATCHES = (1, 2, 4, 8, 16)  # the batch sizes a CUDA-graph runner captures (SGLang's default list starts so)
NATIVE = "native"
TILES = (NATIVE, *TILE_ARCHES)
DTYPES = ("fp16", "bf16")
HEADS = (1, 8, 32, 64)
GROUPS = (1, 4, 8)
HEAD_DIMS = (64, 128, 256)
PREFIXES = (0, 1, 17, 1000, 4096)
PAGE_SIZES = (1, 16)
PADDINGS = ("nodes", "tail")
PROFILES = ("interpret", "device")


@dataclass(frozen=True)
class AttentionCase(NestedCase):
    """One verify-attention call.

    Attributes:
        verify: the tree case (its requests' parent arrays; ``capacity`` gives ``C``).
        heads: query heads ``H``.
        group: GQA group ``G`` (query heads per KV head; ``Hk = H / G``).
        head_dim: ``Dh`` (q, k and v).
        prefix: ``P``; request ``b``'s prefix is ``P`` for even ``b`` and ``P // 2`` for odd ``b`` (ragged).
        dtype: ``fp16`` or ``bf16`` (q, k, v, KV pool, o).
        page_size: KV page size in slots (1 or 16).
        padding: ``""`` for exact buffers (``C == D``), else ``nodes`` or ``tail`` (module docstring).
        stale: ``kv_indices`` and ``custom_mask`` longer than needed, with stale tails.
        tiles: ``native`` or an arch of :data:`TILE_ARCHES` whose tile choice is emulated.

    Raises:
        CaseError: via :meth:`check`.
    """

    SCHEMA = SCHEMA
    KIND = "attention"

    verify: VerifyCase
    heads: int
    group: int
    head_dim: int
    prefix: int
    dtype: str
    page_size: int
    padding: str = ""
    stale: bool = False
    tiles: str = NATIVE

    @property
    def kv_heads(self) -> int:
        return self.heads // self.group

    @property
    def prefix_lens(self) -> tuple[int, ...]:
        return tuple(self.prefix if b % 2 == 0 else self.prefix // 2 for b in range(self.verify.batch))

    @property
    def tokens_per_request(self) -> int:
        """``n``: query rows per request the kernel is told about (``C`` for ``nodes``, else ``D``)."""
        return self.verify.slots if self.padding == "nodes" else self.verify.num_nodes

    @property
    def shape(self) -> str:
        """``h32g4d128-pre1000-bf16``."""
        return f"h{self.heads}g{self.group}d{self.head_dim}-pre{self.prefix}-{self.dtype}"

    @property
    def layout(self) -> str:
        """``exact-pg16``, ``cap16-nodes-pg1``, ``cap16-tail-pg16-stale``."""
        parts = [self.verify.layout] + ([self.padding] if self.padding else []) + [f"pg{self.page_size}"]
        return "-".join(parts + (["stale"] if self.stale else []))

    @property
    def tiles_label(self) -> str:
        return NATIVE if self.tiles == NATIVE else f"emulated-{self.tiles}"

    @property
    def kernel(self) -> str:
        """The results' kernel field: ``verify_attention`` or ``verify_attention@emulated-sm120``."""
        return KERNEL if self.tiles == NATIVE else f"{KERNEL}@{self.tiles_label}"

    @property
    def data_id(self) -> str:
        """The id without the tile configuration: every configuration of a case sees the same data."""
        pad = f"-{self.padding}" if self.padding else ""
        return f"{self.verify.id}{pad}-{self.shape}-pg{self.page_size}{'-stale' if self.stale else ''}"

    @property
    def id(self) -> str:
        """``b8-spine-none-bs3-h32g4d128-pre1000-bf16-pg16-emulated-sm120``."""
        return f"{self.data_id}-{self.tiles_label}"

    def check(self) -> "AttentionCase":
        where = f"attention case {self.id}"
        if self.dtype not in DTYPES:
            raise CaseError("dtype", self.dtype, ", ".join(DTYPES), "unsupported", where)
        if self.tiles not in TILES:
            raise CaseError("tiles", self.tiles, ", ".join(TILES), "unknown tile configuration", where)
        if self.heads < 1 or self.group < 1 or self.heads % self.group:
            raise CaseError("group", (self.heads, self.group), "heads a positive multiple of group", "invalid GQA",
                            where)
        if self.head_dim < 16 or self.head_dim % 16:
            raise CaseError("head_dim", self.head_dim, "a positive multiple of 16", "unsupported", where)
        if self.prefix < 0 or self.page_size not in PAGE_SIZES:
            raise CaseError("page_size", (self.prefix, self.page_size), f"prefix >= 0, page size in {PAGE_SIZES}",
                            "out of range", where)
        padded = self.verify.slots > self.verify.num_nodes
        if (self.padding in PADDINGS) != padded or self.padding not in ("", *PADDINGS):
            raise CaseError("padding", self.padding, "nodes or tail when capacity > D, else ''",
                            "does not match the tree case's capacity", where)
        self.verify.check()
        return self

    def coordinates(self) -> dict:
        """The results' coordinates: the tree case's, with this case's own layout and shape."""
        return {**self.verify.coordinates(), "layout": self.layout, "shape": self.shape}


# --------------------------------------------------------------------------------------------------
# Profiles
# --------------------------------------------------------------------------------------------------

# (budget, topology, batch, capacity, padding): odd D 9 / 13, D = 16, D < capacity 16 both ways,
# bs == D (bs 5, D 5), D 17 / 33 / 65 across BLOCK_M tiles, wide and deep trees.
DEVICE_TREES = ((8, "spine", 3, None, ""), (12, "spine", 3, None, ""), (15, "spine", 2, None, ""),
                (8, "spine", 3, 16, "nodes"), (12, "spine", 3, 16, "tail"), (4, "random", 5, None, ""),
                (16, "bf-flat", 3, None, ""), (32, "bf-peaked", 3, None, ""), (64, "balanced", 8, None, ""),
                (7, "fanout", 8, 16, "nodes"))
DEVICE_BASE = dict(heads=32, group=4, head_dim=128, prefix=1000, dtype="bf16", page_size=16, stale=False)
DEVICE_AXES = dict(heads=HEADS, group=GROUPS, head_dim=HEAD_DIMS, prefix=PREFIXES, dtype=DTYPES,
                   page_size=PAGE_SIZES, stale=(False, True))
DEVICE_SAMPLES = 240  # seeded draws from the full cross product (trees x shapes x tiles), on top of the axes

# The interpret profile: small shapes (heads 1..8, GQA 1 / 2 / 4 / 8, head_dim 64 / 128 / 256), fp16 (Triton's interpreter has no bf16 arithmetic: the bf16 cell is a
# counted skip for Triton backends there), each tile configuration at least once; odd D 9 / 13, D 65 over two
# 64-row tiles, D < capacity (nodes, tail), bs == D, prefix 0 / 1 / 17 / > BLOCK_N, page 16, GQA, stale buffers.
#   (budget, topology, batch, capacity, padding, heads, group, head_dim, prefix, dtype, page, stale, tiles)
INTERPRET_CELLS = (
    (8, "spine", 2, None, "", 4, 2, 64, 17, "fp16", 1, False, NATIVE),
    (12, "spine", 2, 16, "nodes", 4, 4, 64, 0, "fp16", 16, False, "sm120"),
    (12, "spine", 2, 16, "tail", 2, 1, 64, 1, "fp16", 16, True, "sm90"),
    (4, "random", 5, None, "", 4, 2, 64, 17, "fp16", 1, True, "sm80"),
    (64, "bf-flat", 1, None, "", 2, 2, 64, 130, "fp16", 16, False, "sm86"),
    (16, "balanced", 2, None, "", 8, 4, 128, 17, "fp16", 16, False, "sm100"),
    (32, "bf-peaked", 1, None, "", 2, 1, 256, 1, "fp16", 1, False, "sm89"),
    (7, "fanout", 3, 16, "nodes", 4, 4, 64, 40, "fp16", 16, True, NATIVE),
    (15, "spine", 1, None, "", 1, 1, 64, 0, "fp16", 1, False, "sm90"),
    (32, "random", 2, None, "", 8, 8, 64, 70, "fp16", 16, False, "sm120"),
    (12, "spine", 3, 16, "tail", 4, 2, 128, 17, "fp16", 1, True, "sm120"),
    (8, "spine", 2, None, "", 4, 2, 64, 17, "bf16", 16, False, "sm120"),
)


def _tree(budget: int, topology: str, batch: int, capacity: int | None) -> VerifyCase:
    case = make_case(budget, topology, "none", batch, capacity=capacity)
    if case is None:
        raise CaseError("tree", (budget, topology, batch), "a topology that exists at this budget", "no such tree")
    return case


def _valid_group(heads: int, group: int) -> int:
    return group if heads % group == 0 else 1


def _device_cases() -> list[AttentionCase]:
    shapes = [dict(DEVICE_BASE)]
    for axis, values in DEVICE_AXES.items():
        for value in values:
            if value != DEVICE_BASE[axis]:
                shape = {**DEVICE_BASE, axis: value}
                shape["group"] = _valid_group(shape["heads"], shape["group"])
                shapes.append(shape)
    trees = [(_tree(b, t, bs, cap), pad) for b, t, bs, cap, pad in DEVICE_TREES]
    cases = [AttentionCase(tree, padding=pad, tiles=tiles, **shape)
             for tree, pad in trees for shape in shapes for tiles in TILES]
    rng = np.random.default_rng(stable_seed("verify-attention", "device-samples"))
    for _ in range(DEVICE_SAMPLES):
        tree, pad = trees[int(rng.integers(len(trees)))]
        heads = int(rng.choice(HEADS))
        shape = dict(heads=heads, group=_valid_group(heads, int(rng.choice(GROUPS))),
                     head_dim=int(rng.choice(HEAD_DIMS)), prefix=int(rng.choice(PREFIXES)),
                     dtype=str(rng.choice(list(DTYPES))), page_size=int(rng.choice(PAGE_SIZES)),
                     stale=bool(rng.integers(2)))
        cases.append(AttentionCase(tree, padding=pad, tiles=str(rng.choice(TILES)), **shape))
    return cases


def _interpret_cases() -> list[AttentionCase]:
    """:data:`INTERPRET_CELLS`, then the first cell's shape under each tile configuration no cell names (an arch added
    to the table with tile emulation is covered from its row alone; give it a cell of its own here to pick its shape)."""
    cases = [AttentionCase(_tree(b, t, bs, cap), heads=h, group=g, head_dim=d, prefix=p, dtype=dt, page_size=pg,
                           padding=pad, stale=stale, tiles=tiles)
             for b, t, bs, cap, pad, h, g, d, p, dt, pg, stale, tiles in INTERPRET_CELLS]
    named = {c.tiles for c in cases}
    return cases + [replace(cases[0], tiles=t) for t in TILES if t not in named]


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise CaseError("attention profile", profile, ", ".join(PROFILES), "unknown profile")
    return profile


@lru_cache(maxsize=4)
def attention_cases(profile: str, verify_cases: tuple[VerifyCase, ...] | None = None) -> tuple[AttentionCase, ...]:
    """The cases of a profile, deduplicated, in a stable order.

    * ``interpret`` (CPU CI, Triton interpreted): :data:`INTERPRET_CELLS`, small shapes.
    * ``device``: each tree of :data:`DEVICE_TREES` x each tile configuration x the base shape
      :data:`DEVICE_BASE` and every one-axis variation of it (:data:`DEVICE_AXES`: heads, GQA group,
      head_dim, prefix, dtype, page size, stale buffers), plus :data:`DEVICE_SAMPLES` seeded draws from
      the full cross product (trees x every axis x tiles).
    * ``verify_cases`` given (``--ddtree-case``): those trees at the profile's first shape, every tile
      configuration (capacity > D: padding ``nodes``).
    """
    check_profile(profile)
    if verify_cases is not None:
        first = _interpret_cases()[0] if profile == "interpret" else AttentionCase(_tree(8, "spine", 1, None),
                                                                                     **DEVICE_BASE)
        cases = [replace(first, verify=v, padding="nodes" if v.slots > v.num_nodes else "", tiles=t)
                 for v in verify_cases for t in TILES]
    else:
        cases = _interpret_cases() if profile == "interpret" else _device_cases()
    unique = {c.id: c.check() for c in cases}
    return tuple(unique.values())


def _cases(ctx: CaseContext) -> tuple:
    return attention_cases(ctx.attention_profile, tuple(ctx.verify) if ctx.from_files else None)


def _for_backend(backend, cases: tuple) -> tuple:
    """A backend that cannot emulate another arch's tile choice runs each case once, ``native``."""
    if getattr(backend, "attention_tiles", False):
        return cases
    return tuple({c.id: c for c in (replace(c, tiles=NATIVE) for c in cases)}.values())


RECORD = KernelRecord(
    name=KERNEL,
    summary="the verify forward's attention (SGLang extend_attention_fwd) under the ancestor-only mask, per tile choice",
    case_param="ddtree_attention_case",
    case_type=AttentionCase,
    cases=_cases,
    run="ddtree_compat.families.attention.checks:run_attention",
    label=lambda case: case.kernel,
    for_backend=_for_backend,
    emulates=lambda case: None if case.tiles == NATIVE else case.tiles,
    table="attention",
)


def captured_batch(batch: int) -> int:
    """The captured batch a graph runner replays a live batch in: the smallest of :data:`CAPTURED_BATCHES`
    that holds it (3 -> 4, 5 -> 8: padding requests fill the rest)."""
    return next(b for b in CAPTURED_BATCHES if b >= batch)


def _native(backend, cases: tuple) -> tuple:
    return tuple({c.id: c for c in (replace(c, tiles=NATIVE) for c in cases)}.values())


GRAPH_RECORD = KernelRecord(
    name=GRAPH_KERNEL,
    summary="verify attention in a CUDA graph captured at capacity and a padded batch, replayed at the live "
            "width and batch",
    case_param="ddtree_attention_case",
    case_type=AttentionCase,
    cases=_cases,
    run="ddtree_compat.families.attention.checks:run_attention_graph",
    for_backend=_native,
    table="attention",
)
CASCADE_RECORD = KernelRecord(
    name=CASCADE_KERNEL,
    summary="verify attention as a cascade: the prefix pass and the tree pass (each row over its own ancestors), "
            "merged by their log-sum-exp",
    case_param="ddtree_attention_case",
    case_type=AttentionCase,
    cases=_cases,
    run="ddtree_compat.families.attention.checks:run_attention_cascade",
    for_backend=_native,
    table="attention",
)
RECORDS = (RECORD, GRAPH_RECORD, CASCADE_RECORD)
