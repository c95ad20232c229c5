"""The commit stage: cases, oracle expectations and judging for the KV-cache commit kernels.

After verify, a DDTree round commits the accepted path (SGLang DDTree PR #29907, page_size 1: keep the
accepted nodes' slots where they are; earlier PR #27509: compact their K/V rows to contiguous slots,
"read all, then write all"). The kernels (records in :mod:`ddtree_compat.families.commit.records`, each a backend
method of its name; one check function each here, named after it):

* ``accept_out_cache_loc(accept_index, out_cache_loc, accept_out_cache_loc)``: SGLang
  ``fill_accept_out_cache_loc``: the kept slots ``out_cache_loc[accept_index != -1]``, compacted in
  order. ``accept_index`` int32 ``[bs * S]`` (-1 past each path), ``out_cache_loc`` int64 ``[bs * C]``,
  output int64 ``[sum(accept_len)]``.
* ``front_out_cache_loc(num_front, out_cache_loc, front_out_cache_loc)``: SGLang
  ``fill_front_out_cache_loc_func``: the first ``num_front[b]`` (``accept_lens``) slots of each
  request's verify block, compacted in order: where SGLang 0.5.23's tree commit moves the accepted
  K/V (``move_accept_tokens_to_target_kvcache``). ``num_front`` int32 ``[bs]``.
* ``commit_outputs(predict, accept_index, accept_lens, seq_lens) -> (new_seq_lens, bonus)``: SGLang
  ``prepare_verify_commit_outputs``: ``seq_lens + accept_lens`` and the bonus token
  ``predict[accept_index[b, accept_lens[b] - 1]]``. It allocates its outputs itself (so no poison).
* ``bonus_tokens(accept_tokens, accept_lens, bonus, accept_stride)``: SGLang ``fill_bonus_tokens``:
  ``bonus[b] = accept_tokens[b * S + accept_lens[b] - 1]``.
* ``assign_req_to_token(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc)``:
  SGLang ``assign_req_to_token_pool``: ``req_to_token[row_b, seq_len_b : seq_len_b + accept_len_b]``
  = that request's committed slots (the compacted list, requests in order). ``req_to_token`` int32
  ``[rows, max_context]``.
* ``move_kv(k_buffers, v_buffers, tgt_loc, src_loc)``: the token KV pool's ``move_kv_cache``
  (SGLang ``copy_all_layer_kv_cache_tiled``, or ``move_kv_cache_native``; per-layer
  ``[slots, heads, head_dim]`` pools): rows at ``src_loc`` copied to ``tgt_loc`` (the first
  ``accept_len`` slots of each request's verify block), all reads before any write.

Which slots a commit keeps, frees and gives back is :func:`ddtree_compat.families.commit.oracle.commit_plan`'s (page
size 1: in place; page size > 1: compacting, the tail released page-aligned). The freed-slot set a
kernel's output implies is checked against it by :func:`freed_set_report`: for the kept slots of
``accept_out_cache_loc`` (page size 1), the front slots of ``front_out_cache_loc`` and the release
boundary ``ceil_align(new_seq_len, page_size)`` of ``commit_outputs`` (page size > 1). SGLang frees
with plain torch and Python (``mem_cache.common._release_overallocated_kv_indices`` and the
allocator's ``free``, no kernel), so the set is derived here from the kernels' outputs.

The expected values come from the plan, never from the code that made the kernel's inputs: the move's
expected pool is each committed position's slot (``committed_slots``) holding the K/V the accepted
node had before the commit (``kept_slots``), in the plan's own terms.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from ...cases import stable_seed
from ...harness.buffers import POISON, Guarded, canary_report, compare
from ...harness.calls import check
from ..verify.oracle import PADDING_SLOT
from .oracle import CommitPlan, commit_plan, release_boundary
from .records import CommitCase

KV_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp8": torch.uint8}
"""Case KV dtype names (:data:`ddtree_compat.families.commit.records.KV_DTYPES`) -> the pool's torch dtype."""
LAYERS = 2


# --------------------------------------------------------------------------------------------------
# Layout: slots, sequence lengths, request rows
# --------------------------------------------------------------------------------------------------


@dataclass
class CommitLayout:
    """Concrete state before the commit (CPU tensors).

    Attributes:
        out_cache_loc: int64 ``[bs * C]``: slot of each verify node (padding slots -1).
        seq_lens: int64 ``[bs]``: tokens in each request's cache before the verify block.
        req_pool_indices: int64 ``[bs]``: each request's row in ``req_to_token``.
        req_to_token: int32 ``[rows, max_context]``: prefix slots filled, the rest POISON.
        pool_slots: KV slots in the pool (a multiple of ``page_size``).
        accept_index: int32 ``[bs, S]``: the oracle verify's accept_index, -1 past each path.
        accept_lens: int32 ``[bs]``: ``accepted + 1``.
        predict: int32 ``[bs * C]``: verify's ``predicts`` (target token at every node).
        plans: the oracle's :class:`~ddtree_compat.families.commit.oracle.CommitPlan` per request.
    """

    out_cache_loc: torch.Tensor
    seq_lens: torch.Tensor
    req_pool_indices: torch.Tensor
    req_to_token: torch.Tensor
    pool_slots: int
    accept_index: torch.Tensor
    accept_lens: torch.Tensor
    predict: torch.Tensor
    plans: tuple[CommitPlan, ...]
    paths: tuple[tuple[int, ...], ...]


def layout(case: CommitCase) -> CommitLayout:
    """Build the pre-commit state of ``case`` deterministically (seeded by its id)."""
    v, p = case.verify, case.page_size
    bs, cap, d = v.batch, v.slots, v.num_nodes
    rng = np.random.default_rng(stable_seed(case.id))
    prefix = [int(rng.integers(1, 200)) for _ in range(bs)]
    if case.placement == "page-cross" and p > 1:
        prefix = [(x // p) * p + p - 2 + p for x in prefix]  # the verify block starts 2 slots before a page end
    pages_per_req = [-(-(x + d) // p) for x in prefix]
    total_pages = sum(pages_per_req) + 4
    pool_pages = total_pages + (0 if case.placement == "pool-end" else 8)  # free pages after the requests' own
    first = pool_pages - total_pages if case.placement == "pool-end" else 1
    pages = list(range(first, first + total_pages))
    rng.shuffle(pages)  # requests own scattered pages
    out_cache_loc = torch.full((bs * cap,), -1, dtype=torch.int64)
    # a pool-wide row length, as SGLang's ReqToTokenPool has (assign_req_to_token_pool specialises on it)
    max_context = -(-(max(x + d for x in prefix) + 8) // 256) * 256
    rows = bs + 3
    req_pool_indices = torch.tensor(rng.permutation(rows)[:bs], dtype=torch.int64)
    req_to_token = torch.full((rows, max_context), POISON, dtype=torch.int32)
    taken = 0
    for b in range(bs):
        own = pages[taken:taken + pages_per_req[b]]
        taken += pages_per_req[b]
        slot = [own[pos // p] * p + pos % p for pos in range(prefix[b] + d)]
        req_to_token[req_pool_indices[b], :prefix[b]] = torch.tensor(slot[:prefix[b]], dtype=torch.int32)
        out_cache_loc[b * cap:b * cap + d] = torch.tensor(slot[prefix[b]:])
    results = v.expected()
    accept_index = torch.full((bs, v.width), -1, dtype=torch.int32)
    predict = torch.full((bs * cap,), POISON, dtype=torch.int32)
    for b, (req, res) in enumerate(zip(v.requests, results)):
        accept_index[b, :len(res.path)] = torch.tensor([b * cap + k for k in res.path], dtype=torch.int32)
        predict[b * cap:b * cap + d] = torch.tensor(req.target_predict, dtype=torch.int32)
    plans = tuple(commit_plan(res, out_cache_loc[b * cap:(b + 1) * cap].tolist(), prefix[b], p)
                  for b, res in enumerate(results))
    return CommitLayout(out_cache_loc, torch.tensor(prefix, dtype=torch.int64), req_pool_indices, req_to_token,
                        pool_pages * p, accept_index,
                        torch.tensor([plan.commit_len for plan in plans], dtype=torch.int32), predict, plans,
                        tuple(r.path for r in results))


def plan_slots(lay: CommitLayout, name: str) -> torch.Tensor:
    """One :class:`~ddtree_compat.families.commit.oracle.CommitPlan` slot field (``kept_slots``, ``front_slots``,
    ``committed_slots``, ...) of every request, concatenated in request order (int64)."""
    return torch.tensor([slot for plan in lay.plans for slot in getattr(plan, name)], dtype=torch.int64)


def kept_slots(case: CommitCase, lay: CommitLayout) -> torch.Tensor:
    """Oracle: the accepted nodes' slots, request by request in path order (int64)."""
    return plan_slots(lay, "kept_slots")


def move_plan(case: CommitCase, lay: CommitLayout) -> tuple[torch.Tensor, torch.Tensor]:
    """Oracle ``(tgt_loc, src_loc)`` of the compacting commit: path rows to the block's first slots."""
    return plan_slots(lay, "front_slots"), plan_slots(lay, "kept_slots")


def freed_set_report(lay: CommitLayout, cap: int, committed: list[int] | None = None,
                     new_seq_lens: list[int] | None = None) -> list[str]:
    """The slots a commit frees and gives back, as implied by kernel outputs, against the oracle's plan.

    Args:
        committed: a kernel's keep set, all requests concatenated (``commit_len`` each, the plan's
            order): the slots that hold the committed tokens. ``None``: the oracle's.
        new_seq_lens: a kernel's new sequence lengths: the release boundary is
            ``ceil_align(new_seq_len, page_size)``. ``None``: the oracle's.

    Freed = the request's verify-block slots (padding -1 excluded) not in its keep set. Page size 1
    gives back every freed slot; page size > 1 only those at positions at or past the boundary
    (whole pages), keeping the committed page's tail. One line per request and kind of difference:
    a keep slot outside the block (padding or another request's), a freed set unlike the oracle's,
    tail slots never given back (leaked), a given-back page that holds committed K/V.
    """
    problems = []
    offset = 0
    for b, plan in enumerate(lay.plans):
        p = plan.page_size
        block = [s for s in lay.out_cache_loc[b * cap:(b + 1) * cap].tolist() if s != PADDING_SLOT]
        position = {slot: int(lay.seq_lens[b]) + i for i, slot in enumerate(block)}
        if committed is None:
            mine = list(plan.committed_slots)
        else:
            mine = committed[offset:offset + plan.commit_len]
            offset += plan.commit_len
        boundary = release_boundary(plan.new_seq_len if new_seq_lens is None else int(new_seq_lens[b]), p)
        freed = [s for s in block if s not in mine]
        released = freed if p == 1 else [s for s in block if position[s] >= boundary]
        where = f"request {b} (seq_len {int(lay.seq_lens[b])}, page size {p})"
        stray = [s for s in mine if s not in position]
        if stray:
            problems.append(f"{where}: kept slot(s) {stray[:6]} are not slots of its verify block")
        if sorted(freed) != sorted(plan.freed_slots):
            problems.append(f"{where}: freed-slot set differs from the oracle's: extra "
                            f"{sorted(set(freed) - set(plan.freed_slots))[:6]}, missing "
                            f"{sorted(set(plan.freed_slots) - set(freed))[:6]}")
        leaked = sorted(set(plan.released_slots) - set(released))
        if leaked:
            problems.append(f"{where}: tail slot(s) {leaked[:6]} never given back (leaked; boundary {boundary})")
        live = {s // p for s in released} & {s // p for s in (*plan.committed_slots, *mine) if s in position}
        if live:
            problems.append(f"{where}: gives back page(s) {sorted(live)[:6]} that hold committed K/V")
        elif sorted(released) != sorted(plan.released_slots) and not leaked:
            problems.append(f"{where}: gives back {sorted(set(released) - set(plan.released_slots))[:6]} "
                            f"beyond the oracle's release set")
    return problems


# --------------------------------------------------------------------------------------------------
# Running and judging one kernel
# --------------------------------------------------------------------------------------------------


KV_BAND = 64  # elements of random bits before and after each KV pool; must come back unchanged


POOL_VALUES = 1 << 23
"""Values drawn per pool index and KV dtype (more for a pool that needs more): every pool of the default and
full grids (0.3-6 M elements) is a prefix of one draw."""


def _kv_pool(case: CommitCase, lay: CommitLayout, device: str, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pool ``index`` (``k`` layers, then ``v``): ``[pool_slots + page_size, heads, head_dim]`` of random values
    inside a banded allocation on ``device``, a fresh copy of :func:`_pool_values`' first elements; returns
    ``(storage, view)``."""
    shape = (lay.pool_slots + case.page_size, case.kv_heads, case.head_dim)  # one spare page, as SGLang keeps
    n = int(np.prod(shape))
    size = n + 2 * KV_BAND
    storage = _pool_values(device, case.kv_dtype, index, max(POOL_VALUES, 1 << (size - 1).bit_length()))[:size].clone()
    return storage, storage[KV_BAND:KV_BAND + n].view(shape)


@functools.lru_cache(maxsize=16)
def _pool_values(device: str, kv_dtype: str, index: int, length: int) -> torch.Tensor:
    """1-D ``[length]`` random values for pool ``index`` in ``kv_dtype``'s storage dtype (:data:`KV_DTYPES`;
    fp16, bf16, fp32: multiples of 2**-13 in [-4, 4) rounded to the dtype, all finite; fp8: uint8 bytes), drawn
    on ``device`` by that device's generator, seeded by the arguments alone (so a case's pools are the same in
    every process and run).

    Drawn once per process (``length`` is :data:`POOL_VALUES`, or a larger power of two; at most 16 draws are
    kept, 32 MiB each at most for fp32): a pool is 0.3-6 M elements, and drawing and converting four of them
    took most of a CPU ``move_kv`` cell's own time, where a copy takes a fiftieth of it. Every layer's pool
    differs from every other's; cases of one draw differ in their layouts."""
    gen = torch.Generator(device=device).manual_seed(stable_seed("kv-pool", kv_dtype, index, length))
    bits = torch.randint(-(2 ** 15), 2 ** 15, (length,), dtype=torch.int32, generator=gen, device=device)
    dtype = KV_DTYPES[kv_dtype]
    if dtype == torch.uint8:
        return (bits & 0xFF).to(torch.uint8)
    return (bits.float() / 2 ** 13).to(dtype)  # finite values: NaN bit patterns would not compare equal


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s bits as integers of its width, where ``t`` is (no copy)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def _accepted(case: CommitCase) -> list[int]:
    """Accepted drafts per request: the oracle's verify paths (what :func:`layout` lays out, without the rest)."""
    return [len(result.path) - 1 for result in case.verify.expected()]


def _commit_check(fn):
    """``fn(case, lay, backend, device) -> judge`` as a record's ``run``, on the one harness rule
    (:func:`~ddtree_compat.harness.calls.check`), with the case laid out by :func:`layout` first (its plans are the
    oracle's: an exception there is the suite's own error, never a kernel fault)."""

    @functools.wraps(fn)
    def with_layout(case: CommitCase, backend, device: str):
        return fn(case, layout(case), backend, device)

    return check(with_layout, accepted=_accepted)


@_commit_check
def accept_out_cache_loc(case: CommitCase, lay: CommitLayout, backend, device: str):
    keep = kept_slots(case, lay)
    ai = Guarded.of(lay.accept_index.flatten(), device)
    ocl = Guarded.of(lay.out_cache_loc, device)
    out = Guarded.poisoned(keep.numel(), torch.int64, device)
    backend.accept_out_cache_loc(ai.view, ocl.view, out.view)

    def judge() -> list[str]:
        problems = compare("accept_out_cache_loc", out.view.cpu(), keep)
        problems += canary_report({"accept_out_cache_loc": out, "accept_index": ai, "out_cache_loc": ocl})
        if case.page_size == 1:  # the in-place commit keeps exactly these slots
            problems += freed_set_report(lay, case.verify.slots, committed=out.view.cpu().tolist())
        return problems

    return judge


@_commit_check
def front_out_cache_loc(case: CommitCase, lay: CommitLayout, backend, device: str):
    front = plan_slots(lay, "front_slots")
    num_front = Guarded.of(lay.accept_lens, device)
    ocl = Guarded.of(lay.out_cache_loc, device)
    out = Guarded.poisoned(front.numel(), torch.int64, device)
    backend.front_out_cache_loc(num_front.view, ocl.view, out.view)

    def judge() -> list[str]:
        problems = compare("front_out_cache_loc", out.view.cpu(), front)
        problems += canary_report({"front_out_cache_loc": out, "num_front": num_front, "out_cache_loc": ocl})
        if case.page_size > 1:  # the compacting commit keeps exactly these slots
            problems += freed_set_report(lay, case.verify.slots, committed=out.view.cpu().tolist())
        return problems

    return judge


@_commit_check
def commit_outputs(case: CommitCase, lay: CommitLayout, backend, device: str):
    new_seq, bonus = backend.commit_outputs(lay.predict.to(device), lay.accept_index.to(device),
                                            lay.accept_lens.to(device), lay.seq_lens.to(device))

    def judge() -> list[str]:
        problems = (compare("new_seq_lens", new_seq.cpu().to(torch.int64),
                            torch.tensor([plan.new_seq_len for plan in lay.plans]))
                    + compare("bonus", bonus.cpu().to(torch.int32),
                              torch.tensor([plan.bonus_token for plan in lay.plans], dtype=torch.int32)))
        if case.page_size > 1 and new_seq.numel() == case.verify.batch:  # the committed length sets what is given back
            problems += freed_set_report(lay, case.verify.slots, new_seq_lens=new_seq.cpu().tolist())
        return problems

    return judge


@_commit_check
def bonus_tokens(case: CommitCase, lay: CommitLayout, backend, device: str):
    bs, width = case.verify.batch, case.verify.width
    tokens = torch.full((bs, width), POISON, dtype=torch.int32)
    for b, path in enumerate(lay.paths):
        tokens[b, :len(path)] = lay.predict[[b * case.verify.slots + k for k in path]]
    acc = Guarded.of(tokens.flatten(), device)
    out = Guarded.poisoned(bs, torch.int32, device)
    backend.bonus_tokens(acc.view, lay.accept_lens.to(device), out.view, width)
    return lambda: (compare("bonus", out.view.cpu(), torch.tensor([plan.bonus_token for plan in lay.plans],
                                                                 dtype=torch.int32))
                    + canary_report({"bonus": out, "accept_tokens": acc}))


@_commit_check
def assign_req_to_token(case: CommitCase, lay: CommitLayout, backend, device: str):
    r2t = Guarded.of(lay.req_to_token, device)
    ends = lay.seq_lens + lay.accept_lens
    src = Guarded.of(plan_slots(lay, "committed_slots"), device)
    backend.assign_req_to_token(lay.req_pool_indices.to(device), r2t.view, lay.seq_lens.to(device),
                                ends.to(device), src.view)

    def judge() -> list[str]:
        want = lay.req_to_token.clone()
        for row, plan in zip(lay.req_pool_indices.tolist(), lay.plans):
            for position, slot in plan.req_to_token:
                want[row, position] = slot
        return compare("req_to_token", r2t.view.cpu(), want) + canary_report({"req_to_token": r2t, "out_cache_loc": src})

    return judge


def expected_pool(old: torch.Tensor, lay: CommitLayout, shape: tuple[int, ...]) -> torch.Tensor:
    """A pool's bits after the compacting commit, from the plan alone: for every request and every
    committed position ``i``, slot ``front_slots[i]`` holds what slot ``kept_slots[i]`` (the accepted
    node's) held before; every other slot (and both bands) is unchanged. Computed where ``old`` is."""
    want = old.clone()
    rows_before = old[KV_BAND:KV_BAND + int(np.prod(shape))].view(shape)
    rows_after = want[KV_BAND:KV_BAND + int(np.prod(shape))].view(shape)
    pairs = [pair for plan in lay.plans for pair in zip(plan.front_slots, plan.kept_slots)]
    if pairs:  # every target slot is a different committed position's: one gather, no write order to keep
        targets, sources = torch.tensor(pairs, dtype=torch.int64, device=old.device).unbind(1)
        rows_after[targets] = rows_before[sources]
    return want


@_commit_check
def move_kv(case: CommitCase, lay: CommitLayout, backend, device: str):
    pools = [_kv_pool(case, lay, device, i) for i in range(2 * LAYERS)]
    before = [_bits(storage).clone() for storage, _ in pools]
    tgt, src = move_plan(case, lay)
    backend.move_kv([v for _, v in pools[:LAYERS]], [v for _, v in pools[LAYERS:]], tgt.to(device), src.to(device))
    return lambda: [p for i, ((storage, view), old) in enumerate(zip(pools, before))
                    for p in compare(f"{'kv'[i // LAYERS]}_buffer[{i % LAYERS}] (bits, bands included)", _bits(storage),
                                     expected_pool(old, lay, tuple(view.shape)))]

