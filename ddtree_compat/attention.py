"""Verify attention: the target forward's attention over ``[prefix + D tree nodes]`` under DDTree's
ancestor-only mask, laid out the way SGLang's target verify lays it out, judged against a float32
reference (:func:`ddtree_compat.oracle.verify_attention_reference`).

Layout (SGLang 0.5.23, Triton backend, ``forward_mode.is_target_verify()``; kernel
``extend_attention_fwd`` in ``sglang.kernels.ops.attention.extend_attention``), for ``bs`` requests
with prefixes ``P_b`` and ``n`` query rows each (``num_tokens_per_req``):

* ``q`` ``[rows, H, Dh]``, ``k``/``v`` ``[rows, Hk, Dh]`` (the tree rows' own K/V), ``o`` ``[rows, H, Dh]``
  (fp16 / bf16); request ``b``'s rows are ``qo_indptr[b] .. qo_indptr[b + 1]``.
* ``qo_indptr`` int32 ``[bs + 1]`` = ``b * n``; ``kv_indptr`` int32 ``[bs + 1]`` = cumsum ``P_b``;
  ``kv_indices`` int64: each prefix token's KV slot (``req_to_token`` of the request), request by request.
* ``k_buffer``/``v_buffer`` ``[slots, Hk, Dh]``: the KV pool. Page size 1: slots scattered; page size 16:
  each request owns whole pages (scattered), its tokens contiguous inside a page; the kernel gets
  ``page_size`` and the same slot indices. Slots nobody references hold NaN: a stray read shows.
* ``custom_mask``: per request a row-major block of ``n x (P_b + n)``, concatenated;
  ``mask_indptr`` int64 ``[bs + 1]`` = cumsum ``n * (P_b + n)``. Row ``i`` sees the prefix (all ``P_b``
  columns; the kernel skips reading them, ``skip_prefix_custom_mask`` being SGLang's default), itself
  and its ancestors (:func:`ddtree_compat.oracle.ancestor_mask`). bool when exact (the eager path's
  ``spec_info.custom_mask``); uint8 when ``stale`` (the CUDA-graph path's buffer, "read as uint8").
* ``is_causal=True``, ``sm_scale = 1 / sqrt(Dh)``, ``max_len_extend = n``.

Variants: ``padding`` (when the tree case has capacity ``C > D``, the CUDA-graph sizing of the field
failure): ``nodes``: ``n = C``, slots ``D..C-1`` of each request are padding nodes whose mask rows see
the prefix, themselves and a random set of earlier nodes (a stale buffer), and whose keys carry a
large logit bias, so one leaking into a real row takes most of its mass; ``tail``: ``n = D`` inside
buffers of ``bs * C`` rows (SGLang's ``q.shape[0] != qo_indptr[-1]`` situation): rows past
``qo_indptr[-1]`` are NaN inputs and their outputs must stay unwritten. ``stale``: ``kv_indices`` and
``custom_mask`` are longer than needed, their tails holding stale entries (slots of NaN KV, ones), as
SGLang's preallocated graph buffers do.

Inputs are shaped so a wrong visibility shows: values ``v ~ U(-1, 1)`` (so ``|out| <= 1``); queries
``3 * N(0, 1)`` (peaked softmax: a few prefix keys dominate, so a dropped or misread prefix tile
moves outputs); column 0 of every query is :data:`TREE_AXIS` and column 0 of request ``b``'s tree keys
gives them a logit bias ``ln(1 + P_b / 8)``, so tree keys hold about half the attention mass even
behind a 4096-token prefix: one wrongly visible or hidden node moves an output by ~0.03 to 0.5.

Tile configurations: ``tiles`` is ``native`` (the module's own choice on this device) or an arch of
:data:`TILE_ARCHES` whose choice SGLang's code makes under an emulated compute capability
(:mod:`ddtree_compat.backends.sglang_tiles`); results say ``verify_attention@emulated-<arch>``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import torch

from .buffers import FLOAT_POISON_BITS, Guarded, canary_report
from .cases import NestedCase, VerifyCase, _seed, make_case
from .errors import CaseError
from .harness import Verdict, fault_verdict, synchronize
from .oracle import ancestor_mask, verify_attention_reference
from .tiers import Target

SCHEMA = "ddtree-compat/attention-case/1"
KERNEL = "verify_attention"
NATIVE = "native"
TILE_ARCHES = ("sm80", "sm86", "sm89", "sm90", "sm100", "sm120")
TILES = (NATIVE, *TILE_ARCHES)
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
HEADS = (1, 8, 32, 64)
GROUPS = (1, 4, 8)
HEAD_DIMS = (64, 128, 256)
PREFIXES = (0, 1, 17, 1000, 4096)
PAGE_SIZES = (1, 16)
PADDINGS = ("nodes", "tail")
PROFILES = ("interpret", "device")

Q_SCALE = 3.0  # query std: logits of std ~3 over the prefix
TREE_AXIS = 2.0  # q[..., 0]; k[..., 0] of tree keys sets their logit bias
PAD_BIAS = 8.0  # extra logit of padding-node keys


@dataclass(frozen=True)
class Tolerance:
    """Per-dtype bound on ``|kernel - reference|`` for outputs of values in ``[-1, 1]``.

    Attributes:
        dtype: ``fp16`` or ``bf16``.
        unit_roundoff: ``u = 2^-(mantissa bits + 1)``.
        atol: the bound, ``4u``.
        reason: why ``4u``.
    """

    dtype: str
    unit_roundoff: float
    atol: float
    reason: str


_REASON = ("|v| <= 1 so |out| <= 1. The kernel rounds the softmax weights to {d} before P.V (each off by "
           "<= u relative: <= u on the output) and rounds the output to {d} (<= u); products and sums are "
           "fp32 (~1e-6).{extra} 4u bounds this with room; a wrong mask entry moves outputs by ~0.03-0.5.")
TOLERANCES: dict[str, Tolerance] = {
    "fp16": Tolerance("fp16", 2.0 ** -11, 4 * 2.0 ** -11, _REASON.format(
        d="fp16", extra=" Weights below 2^-14 are fp16 subnormals (absolute error <= 2^-25 each: <= 1.3e-4 "
                        "over 4096 prefix keys).")),
    "bf16": Tolerance("bf16", 2.0 ** -8, 4 * 2.0 ** -8, _REASON.format(d="bf16", extra="")),
}


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
DEVICE_AXES = dict(heads=HEADS, group=GROUPS, head_dim=HEAD_DIMS, prefix=PREFIXES, dtype=tuple(DTYPES),
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
    rng = np.random.default_rng(_seed("verify-attention", "device-samples"))
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
    return [AttentionCase(_tree(b, t, bs, cap), heads=h, group=g, head_dim=d, prefix=p, dtype=dt, page_size=pg,
                          padding=pad, stale=stale, tiles=tiles)
            for b, t, bs, cap, pad, h, g, d, p, dt, pg, stale, tiles in INTERPRET_CELLS]


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


# --------------------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------------------


@dataclass
class AttentionLayout:
    """The kernel's arguments for one case on one device, and the reference.

    Attributes:
        q, k, v: ``[rows, H|Hk, Dh]`` (``rows = bs * C``).
        o: the guarded, poisoned output ``[rows, H, Dh]``.
        k_buffer, v_buffer: the KV pool ``[slots, Hk, Dh]``.
        qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr: see the module docstring.
        max_len_extend: ``n``.
        sm_scale: ``1 / sqrt(Dh)``.
        reference: float32 ``[bs * n, H, Dh]``.
        row_names: ``(request, node)`` of each row of ``reference``.
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    o: Guarded
    k_buffer: torch.Tensor
    v_buffer: torch.Tensor
    qo_indptr: torch.Tensor
    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    custom_mask: torch.Tensor
    mask_indptr: torch.Tensor
    max_len_extend: int
    sm_scale: float
    reference: torch.Tensor
    row_names: list[tuple[int, int]]

    INPUTS = ("q", "k", "v", "k_buffer", "v_buffer", "qo_indptr", "kv_indptr", "kv_indices", "custom_mask",
              "mask_indptr")

    def args(self) -> tuple:
        """``verify_attention``'s positional arguments, in order."""
        return (self.q, self.k, self.v, self.o.view, self.k_buffer, self.v_buffer, self.qo_indptr, self.kv_indptr,
                self.kv_indices, self.custom_mask, self.mask_indptr, self.max_len_extend, self.sm_scale)

    def input_bits(self) -> dict[str, torch.Tensor]:
        """Bit copies of the inputs (NaN-safe), to check the kernel left them alone."""
        return {name: _bits(getattr(self, name)).clone() for name in self.INPUTS}


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    if t.is_floating_point():
        return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])
    return t


def _visible(case: AttentionCase, b: int, prefix: int, rng: np.random.Generator) -> torch.Tensor:
    """bool ``[n, P + n]``: request ``b``'s mask block (prefix, ancestors; padding rows as documented)."""
    v, n = case.verify, case.tokens_per_request
    d = v.num_nodes
    vis = torch.zeros(n, prefix + n, dtype=torch.bool)
    vis[:, :prefix] = True
    vis[:d, prefix:prefix + d] = ancestor_mask(v.requests[b].tree)
    for r in range(d, n):  # padding nodes: causal-compatible stale rows, always seeing themselves
        vis[r, prefix:prefix + r] = torch.from_numpy(rng.random(r) < 0.5)
        vis[r, prefix + r] = True
    return vis


def build(case: AttentionCase, device: str) -> AttentionLayout:
    """Lay ``case`` out on ``device`` (values seeded by :attr:`AttentionCase.data_id`) and compute the
    reference there, in float32.

    Raises:
        RuntimeError: TF32 matmuls are enabled on CUDA (the reference must be plain float32).
    """
    if device.startswith("cuda") and torch.backends.cuda.matmul.allow_tf32:
        raise RuntimeError("torch.backends.cuda.matmul.allow_tf32 is on: the float32 reference would be TF32")
    v = case.verify
    bs, d, cap, n = v.batch, v.num_nodes, v.slots, case.tokens_per_request
    heads, kv_heads, dim = case.heads, case.kv_heads, case.head_dim
    dtype, page = DTYPES[case.dtype], case.page_size
    prefixes = case.prefix_lens
    rng = np.random.default_rng(_seed(case.data_id, "layout"))
    gen = torch.Generator(device=device).manual_seed(_seed(case.data_id, "values"))
    axis_scale = math.sqrt(dim) / TREE_AXIS  # k[..., 0] = bias * axis_scale gives a logit of +bias

    def normal(*shape):
        return torch.randn(*shape, generator=gen, device=device)

    def uniform(*shape):
        return torch.rand(*shape, generator=gen, device=device) * 2 - 1

    rows = bs * cap
    q = normal(rows, heads, dim) * Q_SCALE
    q[..., 0] = TREE_AXIS
    k, val = normal(rows, kv_heads, dim), uniform(rows, kv_heads, dim)
    for b, prefix in enumerate(prefixes):
        bias = math.log1p(prefix / 8)
        k[b * n:b * n + d, :, 0] = bias * axis_scale
        k[b * n + d:(b + 1) * n, :, 0] = (bias + PAD_BIAS) * axis_scale
    if n * bs < rows:  # tail: rows past qo_indptr[-1] are never to be read
        for t in (q, k, val):
            t[n * bs:] = float("nan")
    q, k, val = q.to(dtype), k.to(dtype), val.to(dtype)

    # KV pool: whole pages per request, scattered; unreferenced slots NaN
    pages = [-(-p // page) for p in prefixes]
    total_pages = sum(pages) + 3
    order = rng.permutation(total_pages)
    k_buffer = torch.full((total_pages * page, kv_heads, dim), float("nan"), dtype=dtype, device=device)
    v_buffer = torch.full_like(k_buffer, float("nan"))
    slots, prefix_kv, taken = [], [], 0
    for b, prefix in enumerate(prefixes):
        own = order[taken:taken + pages[b]]
        taken += pages[b]
        s = torch.tensor([int(own[t // page]) * page + t % page for t in range(prefix)], dtype=torch.int64)
        pk, pv = normal(prefix, kv_heads, dim), uniform(prefix, kv_heads, dim)
        pk[..., 0] = 0
        pk, pv = pk.to(dtype), pv.to(dtype)
        k_buffer[s.to(device)], v_buffer[s.to(device)] = pk, pv
        slots.append(s)
        prefix_kv.append((pk, pv))
    kv_indices = torch.cat(slots)
    used = set(kv_indices.tolist())
    if case.stale:  # stale tail: slots of NaN KV
        spare = [s for s in range(total_pages * page) if s not in used]
        kv_indices = torch.cat([kv_indices, torch.tensor(rng.choice(spare, max(16, len(used) // 4)), dtype=torch.int64)])

    blocks = [_visible(case, b, prefix, rng) for b, prefix in enumerate(prefixes)]
    mask = torch.cat([blk.flatten() for blk in blocks])
    if case.stale:  # the graph path's uint8 buffer, longer than this batch needs, stale ones after it
        mask = torch.cat([mask, torch.ones(max(64, mask.numel() // 4), dtype=torch.bool)]).to(torch.uint8)
    sizes = torch.tensor([n * (p + n) for p in prefixes], dtype=torch.int64)

    sm_scale = 1.0 / math.sqrt(dim)
    reference, names = [], []
    for b, (prefix, (pk, pv)) in enumerate(zip(prefixes, prefix_kv)):
        r = slice(b * n, (b + 1) * n)
        reference.append(verify_attention_reference(q[r], torch.cat([pk, k[r]]), torch.cat([pv, val[r]]),
                                                    blocks[b].to(device), sm_scale))
        names += [(b, node) for node in range(n)]
    return AttentionLayout(
        q=q, k=k, v=val, o=Guarded.poisoned_float((rows, heads, dim), dtype, device),
        k_buffer=k_buffer, v_buffer=v_buffer,
        qo_indptr=torch.arange(0, (bs + 1) * n, n, dtype=torch.int32, device=device),
        kv_indptr=torch.tensor([0, *np.cumsum(prefixes)], dtype=torch.int32, device=device),
        kv_indices=kv_indices.to(device), custom_mask=mask.to(device),
        mask_indptr=torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)]).to(device),
        max_len_extend=n, sm_scale=sm_scale, reference=torch.cat(reference), row_names=names)


# --------------------------------------------------------------------------------------------------
# Running and judging
# --------------------------------------------------------------------------------------------------

TILE_CHECK = ("BLOCK_DMODEL", "BLOCK_DV", "BLOCK_M", "BLOCK_N", "num_warps")


def describe_tiles(t: dict | None) -> str:
    if not t:
        return "no launch recorded"
    return " ".join(f"{k}={t[k]}" for k in ("BLOCK_M", "BLOCK_N", "num_warps") if k in t)


def judge(case: AttentionCase, lay: AttentionLayout, before: dict[str, torch.Tensor], launch: dict | None,
          expected_tiles: dict | None, target: Target) -> Verdict:
    """Compare ``o`` with the reference (see the module docstring and :data:`TOLERANCES`)."""
    tol = TOLERANCES[case.dtype]
    poison = FLOAT_POISON_BITS[DTYPES[case.dtype]]
    m = lay.reference.shape[0]
    bits = lay.o.view.view(torch.int16)
    unwritten = bits[:m] == poison
    got = lay.o.view[:m].float()
    nan = torch.isnan(got) & ~unwritten
    err = (got - lay.reference).abs()
    bad = unwritten | nan | ~torch.isfinite(got) | (err > tol.atol)
    problems = []
    if not bool(torch.isfinite(lay.reference).all()):
        problems.append("the reference is not finite (suite bug)")
    if bool(bad.any()):
        where = bad.nonzero().tolist()
        shown = []
        for row, h, j in where[:6]:
            b, node = lay.row_names[row]
            kind = "unwritten" if unwritten[row, h, j] else f"{got[row, h, j].item():.5g}"
            shown.append(f"o[request {b}, node {node}{' (padding)' if node >= case.verify.num_nodes else ''}, "
                         f"head {h}, dim {j}] = {kind} (want {lay.reference[row, h, j].item():.5g})")
        finite = err[~unwritten & ~nan]
        worst = f"{finite.max().item():.3g}" if finite.numel() else "n/a"
        problems.append(f"{len(where)} of {got.numel()} output element(s) off ({int(unwritten.sum())} unwritten, "
                        f"{int(nan.sum())} NaN; max |err| {worst} > atol {tol.atol:.3g} ({case.dtype})): "
                        + "; ".join(shown))
    if m < bits.shape[0] and bool((bits[m:] != poison).any()):
        rows = sorted({r + m for r in (bits[m:] != poison).nonzero()[:, 0].tolist()})
        problems.append(f"wrote {len(rows)} row(s) past qo_indptr[-1] = {m} (rows {rows[:8]}): buffers hold "
                        f"{bits.shape[0]} rows")
    problems += canary_report({"o": lay.o})
    for name, old in before.items():
        if not torch.equal(_bits(getattr(lay, name)), old):
            problems.append(f"input {name} was modified")
    if expected_tiles is not None:
        if launch is None or any(launch.get(k) != expected_tiles[k] for k in TILE_CHECK):
            problems.append(f"the launch did not use {case.tiles_label}'s tile choice: launched "
                            f"{launch}, SGLang's choice {expected_tiles}")
    note = f"tiles {describe_tiles(launch)}" if launch else "no tile launch"
    if case.tiles != NATIVE:
        note += f" (SGLang's choice for {case.tiles}, emulated on {target.id})"
    if problems:
        return Verdict("wrong", "; ".join(problems) + f"; {note}")
    worst = err.max().item() if err.numel() else 0.0
    return Verdict("pass", f"max |err| {worst:.3g} <= atol {tol.atol:.3g} ({case.dtype}); {note}")


def run_attention(case: AttentionCase, backend, target: Target) -> Verdict:
    """Lay ``case`` out on ``target.device``, call ``backend.verify_attention`` once, judge the result.

    Never raises for a kernel failure: an exception is a ``fault`` verdict, except that an emulated
    tile configuration that does not fit this device (Triton's out-of-resources error) is a ``skip`` with
    class ``out-of-resources``: a fact about this device, not about the emulated arch. A backend's
    ``attention_unavailable_reason(target, case)``, when it has one and it says so, makes the cell a
    ``skip`` with that reason before anything runs.
    """
    refuse = getattr(backend, "attention_unavailable_reason", None)
    reason = refuse(target, case) if refuse else None
    if reason:
        return Verdict("skip", reason)
    lay = build(case, target.device)
    before = lay.input_bits()
    expected = backend.attention_tile_choice(case.tiles, case.head_dim) if getattr(backend, "attention_tiles",
                                                                                   False) else None
    try:
        synchronize(target.device)
        start = time.perf_counter()
        launch = backend.verify_attention(*lay.args(), page_size=case.page_size, tiles=case.tiles)
        synchronize(target.device)
        duration = time.perf_counter() - start
    except Exception as e:  # noqa: BLE001 - every kernel error is a classified fault
        verdict = fault_verdict(e)
        if case.tiles != NATIVE and verdict.fault_class == "out-of-resources" and not verdict.context_poisoned:
            return Verdict("skip", f"{case.tiles_label} tiles ({describe_tiles(expected)}) do not fit {target.id}: "
                                   f"{verdict.message}", fault_class="out-of-resources")
        return verdict
    verdict = judge(case, lay, before, launch, expected, target)
    verdict.duration_s = duration
    return verdict


__all__ = ["AttentionCase", "AttentionLayout", "Tolerance", "TOLERANCES", "TILES", "TILE_ARCHES", "PROFILES",
           "attention_cases", "build", "judge", "run_attention", "check_profile"]
