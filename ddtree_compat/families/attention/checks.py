"""Verify attention: the target forward's attention over ``[prefix + D tree nodes]`` under DDTree's
ancestor-only mask, laid out the way SGLang's target verify lays it out, judged against a float32
reference (:func:`verify_attention_reference`, the judge's own: the ``oracle`` backend computes
attention its own way, so it does not grade itself). Cases and profiles: :mod:`ddtree_compat.families.attention.records`.

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
  and its ancestors (:func:`ddtree_compat.families.verify.oracle.ancestor_mask`). bool when exact (the eager path's
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
:data:`ddtree_compat.arch.TILE_ARCHES` whose choice SGLang's code makes under an emulated compute capability
(:mod:`.tiles`); results say ``verify_attention@emulated-<arch>``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from ...cases import stable_seed
from ...harness.buffers import FLOAT_POISON_BITS, Guarded, canary_report
from ...harness.calls import check
from ...outcomes import Verdict
from ...tiers import Target
from ..verify.oracle import ancestor_mask
from .oracle import TOLERANCES, Tolerance, verify_attention_reference
from .records import CASCADE_KERNEL, GRAPH_KERNEL, KERNEL, NATIVE, AttentionCase, captured_batch

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
"""Case dtype names (:data:`ddtree_compat.families.attention.records.DTYPES`) -> torch dtypes."""
Q_SCALE = 3.0  # query std: logits of std ~3 over the prefix
TREE_AXIS = 2.0  # q[..., 0]; k[..., 0] of tree keys sets their logit bias
PAD_BIAS = 8.0  # extra logit of padding-node keys


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
        reference_inputs: per request, ``(q rows, keys, values, mask block)`` the reference attends over.
        row_names: ``(request, node)`` of each row of :attr:`reference`.
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
    reference_inputs: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]
    row_names: list[tuple[int, int]]

    INPUTS = ("q", "k", "v", "k_buffer", "v_buffer", "qo_indptr", "kv_indptr", "kv_indices", "custom_mask",
              "mask_indptr")

    def args(self) -> tuple:
        """``verify_attention``'s positional arguments, in order."""
        return (self.q, self.k, self.v, self.o.view, self.k_buffer, self.v_buffer, self.qo_indptr, self.kv_indptr,
                self.kv_indices, self.custom_mask, self.mask_indptr, self.max_len_extend, self.sm_scale)

    @cached_property
    def reference(self) -> torch.Tensor:
        """float32 ``[bs * n, H, Dh]``: the oracle's attention (:func:`verify_attention_reference`), computed when the
        judge first reads it (after the kernel's call: an exception in it is the suite's own error)."""
        return torch.cat([verify_attention_reference(q, k, v, mask, self.sm_scale)
                          for q, k, v, mask in self.reference_inputs])

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
    vis[:d, prefix:prefix + d] = torch.from_numpy(ancestor_mask(v.requests[b].tree))
    for r in range(d, n):  # padding nodes: causal-compatible stale rows, always seeing themselves
        vis[r, prefix:prefix + r] = torch.from_numpy(rng.random(r) < 0.5)
        vis[r, prefix + r] = True
    return vis


def build(case: AttentionCase, device: str) -> AttentionLayout:
    """Lay ``case`` out on ``device`` (values seeded by :attr:`AttentionCase.data_id`); the float32 reference is
    computed there when first read (:attr:`AttentionLayout.reference`).

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
    rng = np.random.default_rng(stable_seed(case.data_id, "layout"))
    gen = torch.Generator(device=device).manual_seed(stable_seed(case.data_id, "values"))
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
        reference.append((q[r].clone(), torch.cat([pk, k[r]]), torch.cat([pv, val[r]]), blocks[b].to(device)))
        names += [(b, node) for node in range(n)]
    return AttentionLayout(
        q=q, k=k, v=val, o=Guarded.poisoned_float((rows, heads, dim), dtype, device),
        k_buffer=k_buffer, v_buffer=v_buffer,
        qo_indptr=torch.arange(0, (bs + 1) * n, n, dtype=torch.int32, device=device),
        kv_indptr=torch.tensor([0, *np.cumsum(prefixes)], dtype=torch.int32, device=device),
        kv_indices=kv_indices.to(device), custom_mask=mask.to(device),
        mask_indptr=torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)]).to(device),
        max_len_extend=n, sm_scale=sm_scale, reference_inputs=reference, row_names=names)


# --------------------------------------------------------------------------------------------------
# Running and judging
# --------------------------------------------------------------------------------------------------

TILE_CHECK = ("BLOCK_DMODEL", "BLOCK_DV", "BLOCK_M", "BLOCK_N", "num_warps")


def describe_tiles(t: dict | None) -> str:
    if not t:
        return "no launch recorded"
    if "call" in t:
        return t["call"]
    return " ".join(f"{k}={t[k]}" for k in ("BLOCK_M", "BLOCK_N", "num_warps") if k in t)


def judge(case: AttentionCase, lay: AttentionLayout, before: dict[str, torch.Tensor], launch: dict | None,
          expected_tiles: dict | None, where: str) -> Verdict:
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
        note += f" (SGLang's choice for {case.tiles}, emulated on {where})"
    if problems:
        return Verdict("wrong", "; ".join(problems) + f"; {note}")
    worst = err.max().item() if err.numel() else 0.0
    return Verdict("pass", f"max |err| {worst:.3g} <= atol {tol.atol:.3g} ({case.dtype}); {note}")


@check
def _attend(case: AttentionCase, backend, device: str, kernel: str, where: str):
    """Lay ``case`` out on ``device``, call ``backend.<kernel>`` once (``verify_attention``, or its graph or cascade
    form), return the judge (:func:`judge`); ``where``: the target's id, for the verdict's note."""
    lay = build(case, device)
    before = lay.input_bits()
    expected = None
    if kernel == KERNEL:
        if getattr(backend, "attention_tiles", False):
            expected = backend.attention_tile_choice(case.tiles, case.head_dim)
        launch = backend.verify_attention(*lay.args(), page_size=case.page_size, tiles=case.tiles)
    elif kernel == GRAPH_KERNEL:
        launch = backend.verify_attention_graph(*lay.args(), page_size=case.page_size, capacity=case.verify.slots,
                                                captured_batch=captured_batch(case.verify.batch))
    else:
        launch = backend.verify_attention_cascade(*lay.args(), page_size=case.page_size)
    return lambda: judge(case, lay, before, launch, expected, where)


def run_attention(case: AttentionCase, backend, target: Target) -> Verdict:
    """Lay ``case`` out on ``target.device``, call ``backend.verify_attention`` once, judge the result (the one
    check shape, :func:`~ddtree_compat.harness.calls.check`).

    Never raises for a kernel failure: an exception is a ``fault`` verdict, except that an emulated
    tile configuration that does not fit this device (Triton's out-of-resources error) is a ``skip`` with
    class ``out-of-resources``: a fact about this device, not about the emulated arch. (A case the
    backend declares it cannot run here, e.g. bf16 under Triton's interpreter, never reaches this:
    :func:`ddtree_compat.contract.unavailable`.)
    """
    verdict = _attend(case, backend, target, kernel=KERNEL, where=_where(target))
    if (case.tiles != NATIVE and verdict.outcome == "fault" and verdict.fault_class == "out-of-resources"
            and not verdict.context_poisoned):
        return Verdict("skip", f"{case.tiles_label} tiles do not fit {_where(target)}: {verdict.message}",
                       fault_class="out-of-resources")
    return verdict


def run_attention_graph(case: AttentionCase, backend, target: Target) -> Verdict:
    """As :func:`run_attention`, through ``backend.verify_attention_graph``: captured for
    :func:`~ddtree_compat.families.attention.records.captured_batch` requests of capacity ``C`` rows each,
    replayed at the case's live layout; judged the same way (the rows past the live ones are the
    backend's own graph buffers, not ``o``)."""
    return _attend(case, backend, target, kernel=GRAPH_KERNEL, where=_where(target))


def run_attention_cascade(case: AttentionCase, backend, target: Target) -> Verdict:
    """As :func:`run_attention`, through ``backend.verify_attention_cascade`` (the prefix and the tree attended
    in two passes and merged); judged the same way."""
    return _attend(case, backend, target, kernel=CASCADE_KERNEL, where=_where(target))


def _where(target) -> str:
    return target if isinstance(target, str) else target.id


run_attention.check = run_attention_graph.check = run_attention_cascade.check = _attend.check  # the one shape


__all__ = ["AttentionLayout", "Tolerance", "TOLERANCES", "build", "judge", "run_attention", "run_attention_cascade", "run_attention_graph",
           "verify_attention_reference"]
