"""The linear-attention checks: lay a case out as SGLang's hybrid backend lays out a verify, call the kernel once,
judge against :mod:`.oracle`.

Backend methods (one per record, :mod:`.records`), buffers on the target's device:

* ``gdn_verify_tree(A_log, dt_bias, q, k, v, a, b, ssm_states, cache_indices, query_start_loc,
  intermediate_states_buffer, intermediate_state_indices, cache_steps, retrieve_parent_token) -> o`` and
  ``gdn_verify_chain(...)`` (the same, ``retrieve_parent_token=None``): q, k ``[1, bs * D, H, K]``, v
  ``[1, bs * D, HV, V]``, a, b ``[bs * D, HV]`` (the activations' dtype); ``A_log``, ``dt_bias`` fp32 ``[HV]``;
  ``ssm_states`` one layer's persistent pool ``[P + 1, HV, V, K]``; ``cache_indices`` int32 ``[bs]`` (each request's
  slot, not the batch order); ``query_start_loc`` int32 ``[bs + 1]`` (``b * D``); the scratch one layer's
  ``[P + 1, C, HV, V, K]`` (pitch ``C``, the capacity, from its stride); ``intermediate_state_indices`` int32
  ``[bs]`` (scratch row ``b``: SGLang's default); ``cache_steps = C``; the parent table int64 ``[bs, D]`` (the
  root's 0). Returns o ``[1, bs * D, HV, V]``.
* ``conv_verify_tree(x, conv_states, weight, bias, cache_indices, intermediate_conv_window,
  intermediate_state_indices, retrieve_next_token, retrieve_next_sibling, retrieve_parent_token) -> out``: x
  ``[bs, dim, D]`` (a transposed view of ``[bs, D, dim]``, as the backend passes it); one layer's conv pool
  ``[P + 1, dim, W - 1]`` and window scratch ``[P + 1, C, dim, W - 1]``; weight ``[dim, W]``, no bias (the
  field's layers have none); the EAGLE retrieve links int64 ``[bs, D]``; ``retrieve_parent_token`` int64
  ``[bs, D]``, written. Returns ``[bs, dim, D]``.
* ``ssm_state_commit(dst, src, dst_indices, step_indices)`` and ``conv_window_commit(...)``: every layer's pool
  ``[L, P + 1, ...]`` and scratch ``[L, P + 1, C, ...]``; int32 slots and steps ``[bs + 1]``: the requests' last
  accepted node, then a padding request with step -1 on a slot no request holds.

Judging: outputs, states and conv outputs by :data:`TOLERANCE` (``max |got - want| / (1 + max |want|)``, per
request, node and tensor); what is a copy (conv windows, the parent table, the commits) exactly, in bits. Every
scratch entry the verify must not write (steps ``D .. C - 1``, rows of no request, the other layer) keeps its NaN
poison; the persistent state pool is unchanged by the verify; canaries guard every buffer; inputs are unchanged.
A cell takes up to ~8 GB of GPU memory (a 64-node tree of 48 value heads: the scratch and its copy), handed back
once judged (``check(release=True)``), so parallel workers share the card.
The verified slots' persistent conv windows are not judged after the verify (the commit overwrites them); every
other slot's are, exactly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from ...cases import stable_seed
from ...harness.buffers import CANARY_BAND, Guarded, Inputs, canary_report, compare, poison_bits
from ...harness.calls import check
from ..verify.oracle import to_eagle
from . import oracle
from .records import LinearCase

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TOLERANCE = {"fp32": 2e-4, "bf16": 4e-2}
"""Tolerance by the coarser of the state and activation dtypes, on ``max |got - want| / (1 + max |want|)``: fp32
accumulates rounding over up to 65 chained updates; a bf16 state is rounded at every store, and a tree node starts
from its parent's stored state. A sibling's update leaking into a node changes it by the order of the state
itself, far above either."""
LAYERS = 2
"""Pools hold two layers; the verify runs on layer 1 (the other must stay untouched), the commits on both."""
EXTRA_SLOTS = 3
"""Persistent slots beyond the batch (``P = bs + 3``), plus the pool's padding row."""


def tolerance(case: LinearCase) -> float:
    return max(TOLERANCE[case.state_dtype], TOLERANCE[case.io_dtype])


@dataclass
class LinearLayout:
    """A case's concrete inputs (CPU tensors in their dtypes) and placement.

    Attributes:
        pool: ``P``, persistent slots (the pools have ``P + 1`` rows).
        slots: int ``[bs]``: each request's persistent slot, not in batch order.
        steps: int ``[bs]``: the node whose state each request commits (its last accepted node, the oracle's).
        spare: a slot no request holds (the padding commit's).
    """

    pool: int
    slots: list[int]
    steps: list[int]
    spare: int
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    A_log: torch.Tensor
    dt_bias: torch.Tensor
    x: torch.Tensor
    weight: torch.Tensor


def _f64(t: torch.Tensor) -> np.ndarray:
    return t.to(torch.float64).cpu().numpy()


@functools.lru_cache(maxsize=8)
def layout(case: LinearCase) -> LinearLayout:
    bs, d = case.verify.batch, case.verify.num_nodes
    h, hv, dim = case.key_heads, case.value_heads, case.head_dim
    gen = torch.Generator().manual_seed(stable_seed("linear", case.id) % (2 ** 63))
    io = DTYPES[case.io_dtype]
    pool = bs + EXTRA_SLOTS
    order = torch.randperm(pool, generator=gen).tolist()
    if order[:bs] == sorted(order[:bs]):  # the slots must not be the batch order
        order[:bs] = order[:bs][::-1]
    steps = [r.path[-1] for r in case.verify.expected()]

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(io)

    return LinearLayout(
        pool=pool, slots=order[:bs], steps=steps, spare=order[bs],
        q=randn(bs * d, h, dim), k=randn(bs * d, h, dim), v=randn(bs * d, hv, dim),
        a=randn(bs * d, hv), b=randn(bs * d, hv),
        A_log=torch.log(torch.rand(hv, generator=gen, dtype=torch.float64) * 15 + 1).to(torch.float32),
        dt_bias=(torch.randn(hv, generator=gen, dtype=torch.float64) * 0.5).to(torch.float32),
        x=randn(bs, d, case.conv_dim), weight=randn(case.conv_dim, case.conv_kernel, scale=0.5))


def _pool_values(shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: str) -> torch.Tensor:
    """Seeded random pool contents, made on the device (deployment pools are GBs)."""
    gen = torch.Generator(device=device).manual_seed(stable_seed("linear-pool", seed) % (2 ** 63))
    return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * 0.1).to(dtype)


def close(name: str, got: torch.Tensor, want: np.ndarray, tol: float) -> list[str]:
    """``[]`` when ``got`` is within ``tol`` of ``want`` (``max |got - want| / (1 + max |want|)``), else one line."""
    g = _f64(got)
    if g.shape != want.shape:
        return [f"{name}: shape {g.shape} (want {want.shape})"]
    if not np.isfinite(g).all():
        bad = np.argwhere(~np.isfinite(g))
        return [f"{name}: {len(bad)} element(s) not finite (never written, or NaN), first at {bad[0].tolist()}"]
    err = float(np.abs(g - want).max()) if g.size else 0.0
    scale = 1.0 + float(np.abs(want).max()) if want.size else 1.0
    if err / scale > tol:
        at = np.unravel_index(int(np.abs(g - want).argmax()), g.shape)
        return [f"{name}: max |err| {err:.3g} (relative {err / scale:.2e} > {tol:g}) at {list(map(int, at))}: "
                f"{g[at]:.6g} (want {want[at]:.6g})"]
    return []


def untouched(name: str, g: Guarded, before: torch.Tensor, keep: torch.Tensor) -> list[str]:
    """Bits of ``g``'s storage where ``keep`` (bool, the storage's shape) is set must equal ``before``'s."""
    got = g.storage
    bad = (got != before) & keep
    if not bool(bad.any()):
        return []
    return [f"{name}: {int(bad.sum())} element(s) written where the verify must leave them "
            f"(first at storage offset {int(bad.nonzero()[0, 0])})"]


def _body_mask(g: Guarded, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(keep, body)``: a storage-shaped bool mask (bands set, body clear) and the body's view of it."""
    keep = torch.ones_like(g.storage, dtype=torch.bool)
    n = g.view.numel()
    keep[CANARY_BAND:CANARY_BAND + n] = False
    return keep, keep[CANARY_BAND:CANARY_BAND + n].view(shape)


def expected_gdn(case: LinearCase, lay: LinearLayout, state0: np.ndarray, chain: bool = False):
    """Per request: ``(outputs [D, HV, V], states [D, HV, V, K])`` by the tree rule (``chain``: every node's
    parent the node before it)."""
    d = case.verify.num_nodes
    out = []
    for b, req in enumerate(case.verify.requests):
        parents = list(range(-1, d - 1)) if chain else list(req.parents)
        rows = slice(b * d, (b + 1) * d)
        o, s = oracle.gdn_verify(parents, state0[b].transpose(0, 2, 1), _f64(lay.q[rows]), _f64(lay.k[rows]),
                                 _f64(lay.v[rows]), _f64(lay.a[rows]), _f64(lay.b[rows]), _f64(lay.A_log),
                                 _f64(lay.dt_bias))
        out.append((o, s.transpose(0, 1, 3, 2)))
    return out


def parent_tables(case: LinearCase) -> torch.Tensor:
    return torch.tensor([oracle.parent_table(r.parents) for r in case.verify.requests], dtype=torch.int64)


def poison_kept(name: str, g: Guarded, written) -> list[str]:
    """Every element of ``g``'s body (``[layers, rows, C, ...]``) outside ``written`` (``(layer, row, steps)``:
    the entries the verify writes) still holds the poison, checked one scratch row at a time on the device (a
    deployment-sized scratch is never copied)."""
    poison = poison_bits(g.view.dtype)
    bits = g.storage[CANARY_BAND:CANARY_BAND + g.view.numel()].view(g.view.shape)
    wrote = {(layer, row): steps for layer, row, steps in written}
    bad, first = 0, None
    for layer in range(bits.shape[0]):
        for row in range(bits.shape[1]):
            entry = bits[layer, row]
            steps = wrote.get((layer, row), 0)
            n = int((entry[steps:] != poison).sum()) if steps < entry.shape[0] else 0
            if n and first is None:
                first = (layer, row)
            bad += n
    return [] if not bad else [f"{name}: {bad} element(s) written where the verify must leave them (first in layer "
                               f"{first[0]}, row {first[1]})"]


def _gdn_check(case: LinearCase, backend, device: str, tree: bool):
    lay = layout(case)
    bs, d, c = case.verify.batch, case.verify.num_nodes, case.verify.slots
    hv, dim = case.value_heads, case.head_dim
    sd = DTYPES[case.state_dtype]
    layers = 1 if case.rows else LAYERS  # a deployment-sized scratch: one layer (its offsets are the layer view's)
    top = case.rows - bs if case.rows else 0  # the requests' scratch rows: top .. top + bs - 1
    pool_shape = (layers, lay.pool + 1, hv, dim, dim)
    scratch_shape = (layers, (case.rows or lay.pool) + 1, c, hv, dim, dim)
    pool = Guarded.float_bits(pool_shape, sd, device, _pool_values(pool_shape, sd, device, case.id))
    scratch = Guarded.float_bits(scratch_shape, sd, device)
    pool_before = pool.storage.clone()
    scratch_before = None if case.rows else scratch.storage.clone()
    here = layers - 1  # the layer verified (the other, where there is one, must stay untouched)
    inputs = Inputs(device)
    q, k, v = (inputs.add(n, t, t.dtype).unsqueeze(0) for n, t in (("q", lay.q), ("k", lay.k), ("v", lay.v)))
    a, b = inputs.add("a", lay.a, lay.a.dtype), inputs.add("b", lay.b, lay.b.dtype)
    A_log, dt_bias = inputs.add("A_log", lay.A_log, torch.float32), inputs.add("dt_bias", lay.dt_bias, torch.float32)
    slots = inputs.add("cache_indices", torch.tensor(lay.slots), torch.int32)
    qsl = inputs.add("query_start_loc", torch.arange(0, bs * d + 1, d), torch.int32)
    rows = inputs.add("intermediate_state_indices", torch.arange(top, top + bs), torch.int32)
    parents = inputs.add("retrieve_parent_token", parent_tables(case), torch.int64) if tree else None
    state0 = _f64(pool.view[here][torch.tensor(lay.slots, device=device)])
    method = backend.gdn_verify_tree if tree else backend.gdn_verify_chain
    extra = {"retrieve_parent_token": parents} if tree else {}
    o = method(A_log, dt_bias, q, k, v, a, b, ssm_states=pool.view[here], cache_indices=slots, query_start_loc=qsl,
               intermediate_states_buffer=scratch.view[here], intermediate_state_indices=rows, cache_steps=c, **extra)

    def judge() -> list[str]:
        tol = tolerance(case)
        want = expected_gdn(case, lay, state0)
        problems = []
        got_o = o.reshape(bs, d, hv, dim)
        for r, (wo, ws) in enumerate(want):
            problems += close(f"output of request {r}", got_o[r], wo, tol)
            problems += close(f"recurrent state of request {r} (scratch row {top + r}, steps 0..{d - 1})",
                              scratch.view[here, top + r, :d], ws, tol)
        if scratch_before is None:  # deployment-sized: the poison itself is the record of what stays unwritten
            problems += poison_kept(f"scratch of {case.rows + 1} rows (steps past the live width, rows of no request)",
                                    scratch, [(here, top + r, d) for r in range(bs)])
        else:
            keep, body = _body_mask(scratch, scratch_shape)
            body[0] = True
            body[1, bs:] = True
            body[1, :bs, d:] = True
            problems += untouched("scratch (steps past the live width, rows of no request, layer 0)", scratch,
                                  scratch_before, keep)
        problems += compare("persistent state pool (bits)", pool.storage, pool_before)
        return problems + canary_report({"scratch": scratch}) + inputs.problems()

    return judge


HEADROOM = 4 << 30
"""Memory a deployment-shape cell leaves free beyond its own buffers (the pools, inputs, the judge's host copies and
the CUDA context's own)."""


def scratch_nbytes(case: LinearCase) -> int:
    """Bytes of a case's verify scratch ``[layers, rows + 1, C, HV, V, K]`` in its state dtype."""
    layers = 1 if case.rows else LAYERS
    rows = (case.rows or case.verify.batch + EXTRA_SLOTS) + 1
    return (layers * rows * case.verify.slots * case.value_heads * case.head_dim * case.head_dim
            * DTYPES[case.state_dtype].itemsize)


def deployment_fit(run):
    """``run`` for a deployment-shape case (:attr:`LinearCase.rows`) only where its scratch fits this GPU's free
    memory with :data:`HEADROOM`: else a skip that states the sizes, on any card; off a GPU a skip saying it needs
    one."""
    @functools.wraps(run)
    def wrapped(case: LinearCase, backend, target, **options):
        if not case.rows:
            return run(case, backend, target, **options)
        from ...sizes import gib
        from ...outcomes import Verdict
        from ...tiers import DEVICE_ONLY

        device = str(target if isinstance(target, str) else target.device)
        need = scratch_nbytes(case)
        if not device.startswith("cuda"):
            return Verdict("skip", f"{DEVICE_ONLY}: a deployment-shape verify, its scratch alone {gib(need)}")
        free, total = torch.cuda.mem_get_info(device)
        if need + HEADROOM > free:
            return Verdict("skip", f"does not fit this GPU: the verify scratch of {case.rows + 1} rows is {gib(need)} "
                                   f"(with {gib(HEADROOM)} beside it for the rest); {gib(free)} of {gib(total)} free")
        return run(case, backend, target, **options)
    return wrapped


@deployment_fit
@check(release=True)
def gdn_verify_tree(case: LinearCase, backend, device: str):
    return _gdn_check(case, backend, device, tree=True)


@check(release=True)
def gdn_verify_chain(case: LinearCase, backend, device: str):
    return _gdn_check(case, backend, device, tree=False)


@check(release=True)
def conv_verify_tree(case: LinearCase, backend, device: str):
    lay = layout(case)
    bs, d, c, w, ch = case.verify.batch, case.verify.num_nodes, case.verify.slots, case.conv_kernel, case.conv_dim
    io = DTYPES[case.io_dtype]
    pool_shape = (LAYERS, lay.pool + 1, ch, w - 1)
    scratch_shape = (LAYERS, lay.pool + 1, c, ch, w - 1)
    pool = Guarded.float_bits(pool_shape, io, device, _pool_values(pool_shape, io, device, case.id))
    scratch = Guarded.float_bits(scratch_shape, io, device)
    pool_before, scratch_before = pool.storage.clone(), scratch.storage.clone()
    window0 = _f64(pool.view[1][torch.tensor(lay.slots, device=device)])
    inputs = Inputs(device)
    x = inputs.add("x", lay.x, io)
    weight = inputs.add("weight", lay.weight, io)
    slots = inputs.add("cache_indices", torch.tensor(lay.slots), torch.int32)
    rows = inputs.add("intermediate_state_indices", torch.arange(bs), torch.int32)
    eagle = [to_eagle(r.tree) for r in case.verify.requests]
    nxt = inputs.add("retrieve_next_token", [list(e.retrive_next_token) for e in eagle], torch.int64)
    sib = inputs.add("retrieve_next_sibling", [list(e.retrive_next_sibling) for e in eagle], torch.int64)
    parents = Guarded.poisoned(bs * d, torch.int64, device)
    out = backend.conv_verify_tree(x.transpose(1, 2), pool.view[1], weight, None, slots, scratch.view[1], rows, nxt,
                                   sib, parents.view.view(bs, d))

    def judge() -> list[str]:
        tol = TOLERANCE[case.io_dtype]
        problems = compare("retrieve_parent_token", parents.view.view(bs, d).cpu(), parent_tables(case))
        for r, req in enumerate(case.verify.requests):
            want_out, want_win = oracle.conv_verify(req.parents, window0[r], _f64(lay.x[r]).T, _f64(lay.weight), None)
            problems += close(f"conv output of request {r}", out[r], want_out, tol)
            problems += close(f"conv windows of request {r} (scratch row {r}, steps 0..{d - 1}; copies of the "
                              "inputs: exact)", scratch.view[1, r, :d], want_win, 0.0)
        keep, body = _body_mask(scratch, scratch_shape)
        body[0] = True
        body[1, bs:] = True
        body[1, :bs, d:] = True
        problems += untouched("conv window scratch (steps past the live width, rows of no request, layer 0)",
                              scratch, scratch_before, keep)
        keep, body = _body_mask(pool, pool_shape)
        body[:] = True
        body[1, torch.tensor(lay.slots)] = False  # rolled by the verify, overwritten by the commit
        problems += untouched("conv state pool (slots of no request, layer 0)", pool, pool_before, keep)
        return problems + canary_report({"retrieve_parent_token": parents, "conv windows": scratch}) + inputs.problems()

    return judge


def _commit_check(case: LinearCase, backend, device: str, entry: tuple[int, ...], dtype: torch.dtype, method: str):
    lay = layout(case)
    c = case.verify.slots
    pool_shape = (LAYERS, lay.pool + 1, *entry)
    scratch_shape = (LAYERS, lay.pool + 1, c, *entry)
    pool = Guarded.float_bits(pool_shape, dtype, device, _pool_values(pool_shape, dtype, device, case.id + method))
    scratch = Guarded.float_bits(scratch_shape, dtype, device,
                                 _pool_values(scratch_shape, dtype, device, case.id + method + "-scratch"))
    before = pool.storage.clone()
    inputs = Inputs(device)
    dst = inputs.add("dst_indices", torch.tensor([*lay.slots, lay.spare]), torch.int32)
    steps = inputs.add("step_indices", torch.tensor([*lay.steps, -1]), torch.int32)
    scratch_before = scratch.storage.clone()
    getattr(backend, method)(pool.view, scratch.view, dst, steps)

    def judge() -> list[str]:
        held = [*lay.slots, lay.spare]  # the slots the commit names: the oracle's rows
        body = before[CANARY_BAND:CANARY_BAND + pool.view.numel()].view(pool_shape)
        src = scratch_before[CANARY_BAND:CANARY_BAND + scratch.view.numel()].view(scratch_shape)
        rows = list(range(len(lay.slots)))
        want = oracle.committed(body[:, held].cpu().numpy(), src[:, rows].cpu().numpy(), slots=rows, rows=rows,
                                steps=lay.steps)
        got = pool.storage[CANARY_BAND:CANARY_BAND + pool.view.numel()].view(pool_shape)
        keep, others = _body_mask(pool, pool_shape)
        others[:] = True
        others[:, held] = False
        return (compare(f"committed slots {lay.slots} (bits; request b's takes scratch row b at its last accepted "
                        f"step {lay.steps}) and the padding request's slot {lay.spare} (step -1: unchanged)",
                        got[:, held].cpu(), torch.from_numpy(want))
                + untouched("persistent pool (slots no request names, both layers)", pool, before, keep)
                + compare("scratch (bits, unchanged)", scratch.storage, scratch_before) + inputs.problems())

    return judge


@check(release=True)
def ssm_state_commit(case: LinearCase, backend, device: str):
    return _commit_check(case, backend, device, (case.value_heads, case.head_dim, case.head_dim),
                         DTYPES[case.state_dtype], "ssm_state_commit")


@check(release=True)
def conv_window_commit(case: LinearCase, backend, device: str):
    return _commit_check(case, backend, device, (case.conv_dim, case.conv_kernel - 1), DTYPES[case.io_dtype],
                         "conv_window_commit")
