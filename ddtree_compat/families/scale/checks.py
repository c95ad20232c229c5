"""Run one deployment-shape cell and judge every row (the one check shape, :mod:`ddtree_compat.harness.calls`).

The tensors come from the process's arena (:mod:`ddtree_compat.harness.arena`: reused across cells, canary bands
around each); inputs are filled by :mod:`.oracle`'s rules on the device, outputs with POISON; the judge compares
every row with the rule on the device, in chunks, and names the first rows that differ (a 32-bit offset shows as
rows past the boundary going wrong, or a fault). Each check takes exactly :meth:`.records.ScaleCase.layout`'s
tensors, and its temporaries are the ones :meth:`.records.ScaleCase.footprint` counts; a cell whose footprint (the
adapter's copies included) does not fit the GPU's free memory at the cell's start less
:data:`.records.HEADROOM` is a skip that states both (:func:`.records.fit`); so is one that runs out of memory in
the suite's own code all the same (another process took the memory meanwhile). Where several workers share the GPU
(``-n``), each gives its cell's memory back once the cell is judged, and a cell that fits the GPU alone but not
beside the others' waits for them (:func:`wait_for_memory`, up to :data:`WAIT_S`). A cell off the GPU is a skip
(device only); the cell's footprint and peak memory go into ``measured``.
"""

from __future__ import annotations

import functools

import torch

from ...harness.arena import arena
from ...harness.buffers import BOOL_POISON, POISON
from ...harness.calls import Findings, check
from ...outcomes import Verdict
from ...tiers import DEVICE_ONLY as DEVICE_ONLY_PHRASE
from ..ddtree import oracle as D
from ..ddtree.records import DDTreeCase
from . import oracle as R
from .boundaries import BUILD_DEPTHS, gib
from .records import CHUNK, COMMIT_WIDTH, HEADROOM, ScaleCase, fit, moved_rows

DEVICE_ONLY = (f"{DEVICE_ONLY_PHRASE}: deployment-shape cells allocate their tensors (up to tens of GiB) on a GPU and launch "
               "its kernels")
F32, I32, I64 = torch.float32, torch.int32, torch.int64
DTYPES = {"float32": F32, "int64": I64, "int32": I32, "int16": torch.int16, "bfloat16": torch.bfloat16,
          "bool": torch.bool, "uint8": torch.uint8}
KV_DTYPE = torch.bfloat16
"""The KV pools' dtype (:data:`.boundaries.KV_LAYOUT`'s 2 bytes)."""


def scale_check(fn):
    """``fn(case, backend, device) -> judge`` as a record's run, with the device-only and memory skips before it and
    the cell's footprint and peak bytes in ``measured`` after it."""
    checked = check(_out_of_memory_is_a_skip(fn))

    @functools.wraps(fn)
    def run(case: ScaleCase, backend, target) -> Verdict:
        device = target if isinstance(target, str) else target.device
        if not str(device).startswith("cuda"):
            return Verdict("skip", DEVICE_ONLY)
        footprint = case.footprint(adapter_nbytes(case, backend))
        free = free_bytes(device)
        too_big = fit(case, footprint, free)
        if too_big and shared_gpu() and fits_alone(device, footprint):
            free, waited = wait_for_memory(device, footprint)
            too_big = fit(case, footprint, free)
            if too_big:
                too_big += (f"; alone on this GPU it fits: other processes held the rest for {waited:.0f} s "
                            "(fewer workers, -n, run it)")
        if too_big:
            return Verdict("skip", too_big)
        _make_room(device, footprint, free)
        torch.cuda.reset_peak_memory_stats(device)
        try:
            verdict = checked(case, backend, target)
        finally:
            if shared_gpu():  # the next cell of another worker may need what this cell's arena holds
                release(device)
        try:
            peak = torch.cuda.max_memory_allocated(device)
        except Exception:  # noqa: BLE001 - a context the kernel poisoned answers nothing
            peak = None
        verdict.measured.update(needed_bytes=footprint.peak, free_bytes=free,
                                **({"peak_bytes": peak} if peak is not None else {}))
        return verdict

    run.check = fn
    run.judged = checked  # the check without the device and memory gate (the CPU tests run it on small shapes)
    return run


def free_bytes(device: str) -> int:
    """The GPU's free memory at a cell's start, as the cell may use it: what ``torch.cuda.mem_get_info`` reports
    once torch's cache is given back, and the arena's allocation (reused, or given back when the cell needs it)."""
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(device)
    return free + arena(device).capacity


WAIT_S = 180.0
"""How long a cell that fits the GPU alone waits for other workers' cells to give their memory back."""


def shared_gpu() -> bool:
    """Several pytest-xdist workers share this process's GPU (each holds its cell's memory only while it runs)."""
    import os

    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1) > 1 and torch.cuda.is_available()


def fits_alone(device: str, footprint) -> bool:
    """The cell would fit this GPU with no other process on it (its whole memory less :data:`HEADROOM`)."""
    _, total = torch.cuda.mem_get_info(device)
    return footprint.peak + HEADROOM <= total


def wait_for_memory(device: str, footprint, wait_s: float = WAIT_S) -> tuple[int, float]:
    """Poll the free memory until the cell fits or ``wait_s`` passes: ``(free bytes, seconds waited)``."""
    import time

    start = time.monotonic()
    release(device)
    while True:
        free = free_bytes(device)
        waited = time.monotonic() - start
        if footprint.peak + HEADROOM <= free or waited >= wait_s:
            return free, waited
        time.sleep(0.5)


def release(device: str) -> None:
    """Give the arena's allocation and torch's cache back to the GPU."""
    arena(device).buffer = None
    torch.cuda.empty_cache()


def _make_room(device: str, footprint, free: int) -> None:
    """Give the arena's allocation back before a cell whose temporaries need the part of it the cell's own tensors
    leave over (the arena is reused only where it is no larger than what the cell counts)."""
    held = arena(device).capacity
    if held > footprint.arena and held + (footprint.peak - footprint.arena) + HEADROOM > free:
        release(device)


def _is_out_of_memory(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _oom_skip(footprint, where: str, exc: BaseException) -> Verdict:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return Verdict("skip", f"does not fit this GPU: the suite's own {where} ran out of memory (needs "
                           f"{gib(footprint.peak)} by its footprint, which fitted at the cell's start: another process "
                           f"took memory meanwhile): {text[:200]}")


def _out_of_memory_is_a_skip(fn):
    """``fn`` whose own out-of-memory errors (laying the case out, the adapter's copies, the judge) are a skip that
    states the cell's size: the memory was there at the cell's start (:func:`~.records.fit`) and another process took
    it. What the kernel itself raises stays the fault rule's."""
    from ...contract import AdapterError
    from ...harness.calls import KernelRaised

    @functools.wraps(fn)
    def laid(case, backend, device, **options):
        footprint = case.footprint(adapter_nbytes(case, backend))
        try:
            judge = fn(case, backend, device, **options)
        except torch.cuda.OutOfMemoryError as e:
            return lambda e=e: _oom_skip(footprint, "layout", e)
        except KernelRaised as e:
            if isinstance(e.error, AdapterError) and _is_out_of_memory(e.error):
                return lambda e=e: _oom_skip(footprint, "adapter", e.error)
            raise

        def judged():
            try:
                return judge()
            except torch.cuda.OutOfMemoryError as e:
                return _oom_skip(footprint, "judge", e)

        return judged

    return laid


def _take(case: ScaleCase, device: str) -> dict:
    """The case's tensors (:meth:`~.records.ScaleCase.layout`) from the arena."""
    return arena(device).take([(name, dims, DTYPES[dtype]) for name, dims, dtype in case.layout()])


def _count_nonzero(tensor: torch.Tensor) -> int:
    """Nonzero elements, in chunks of :data:`CHUNK` (a device count casts to int64: 9 bytes an element at once)."""
    flat = tensor.reshape(-1)
    return sum(int(torch.count_nonzero(flat[s:s + CHUNK])) for s in range(0, flat.numel(), CHUNK))


def adapter_nbytes(case: ScaleCase, backend) -> int:
    """Device bytes ``backend``'s adapter allocates beside ``case``'s tensors to call its kernel: what its
    ``scale_adapter_nbytes(case)`` says (an adapter that lays the case out anew, as FlashInfer's and FA3's copy the KV
    pool into their paged layout), else 0."""
    own = getattr(backend, "scale_adapter_nbytes", None)
    return int(own(case)) if callable(own) else 0


def _tokens(bs: int, depth: int, vocab: int, device: str) -> torch.Tensor:
    """``[bs, depth]``: request ``b``'s chain tokens at depths ``0 .. depth - 1`` (:func:`.oracle.token`)."""
    b = torch.arange(bs, dtype=I64, device=device).unsqueeze(1)
    i = torch.arange(depth, dtype=I64, device=device).unsqueeze(0)
    return R.token(b, i, vocab)


def _rows_differ(name: str, got: torch.Tensor, want: torch.Tensor) -> list[str]:
    """``[]``, or one line: how many rows of ``got`` (first dim) differ from ``want`` and the first few."""
    bad = (got != want).reshape(got.shape[0], -1).any(dim=1).nonzero().flatten()
    if not bad.numel():
        return []
    first = bad[:4].tolist()
    r = first[0]
    g, w = got[r].flatten(), want[r].flatten()
    cols = (g != w).nonzero().flatten()[:4].tolist()
    shown = ", ".join(f"[{c}] {g[c].item()} want {w[c].item()}" for c in cols)
    return [f"{name}: {bad.numel()} of {got.shape[0]} rows differ (rows {first}{' ...' if bad.numel() > 4 else ''}; "
            f"row {r} of {g.numel()} elements: {shown})"]


def _chain(bs: int, q: int, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """EAGLE links of a chain per request: retrive_index, retrive_next_token, retrive_next_sibling ``[bs, q]``."""
    index = torch.arange(bs * q, dtype=I64, device=device).view(bs, q)
    nxt = torch.arange(1, q + 1, dtype=I64, device=device).repeat(bs, 1)
    nxt[:, -1] = -1
    return index, nxt, torch.full((bs, q), -1, dtype=I64, device=device)


def _one_hot_rows(probs: torch.Tensor, tokens: torch.Tensor) -> None:
    """``probs [bs, n, V]`` zeroed, then 1 at ``tokens [bs, n]`` per row."""
    probs.zero_()
    probs.scatter_(2, tokens.unsqueeze(2), 1.0)


def _verify_outputs(t: dict, tok: torch.Tensor, bs: int, q: int, budget: int) -> list[str]:
    """SGLang's EAGLE-format outputs after every draft of a chain is accepted: ``accept_token_num = B``,
    ``accept_index[b] = b * q + 0..B``, ``predicts[b * q + j]`` the next token at node ``j`` (the bonus at ``B``)."""
    device = tok.device
    want_index = torch.arange(bs * q, dtype=I32, device=device).view(bs, q)
    return (_rows_differ("accept_token_num", t["accept_token_num"].view(bs, 1),
                         torch.full((bs, 1), budget, dtype=I32, device=device))
            + _rows_differ("accept_index", t["accept_index"], want_index)
            + _rows_differ("predicts", t["predicts"].view(bs, q), tok[:, 1:q + 1].to(I32)))


def _unchanged(name: str, tensor: torch.Tensor, nonzero: int, total: float) -> list[str]:
    """An input planted with ``nonzero`` ones: still so (count and sum, over chunks of :data:`CHUNK` elements: the
    judge's temporaries stay small beside a 16 GiB tensor)."""
    flat = tensor.view(-1)
    n, s = 0, 0.0
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start:start + CHUNK]
        n += int(torch.count_nonzero(part))
        s += float(part.sum(dtype=torch.float64))
    return [] if (n, s) == (nonzero, total) else [f"input {name} changed: {n} nonzero (was {nonzero}), sum {s} "
                                                    f"(was {total})"]


def _judged(problems: list[str], lens: torch.Tensor, expected: int) -> Findings:
    """The problems, with every row's accepted drafts (``expected`` each by the plant) and the kernel's ``lens``: the
    harness calls rows that accepted none ``zero-accept`` (the field symptom)."""
    return Findings(problems, [expected] * lens.numel(), lens.tolist())


def _sampling_layout(case: ScaleCase, device: str):
    bs, q = case.batch, case.q
    t = _take(case, device)
    tok = _tokens(bs, q + 1, case.vocab, device)
    _one_hot_rows(t["target_probs"], tok[:, 1:])
    t["candidates"].copy_(tok[:, :q])
    t["uniform_samples"].fill_(0.5)
    t["uniform_final"].fill_(0.5)
    for name in ("predicts", "accept_index", "accept_token_num"):
        t[name].fill_(POISON)
    return t, tok


@scale_check
def tree_speculative_sampling(case: ScaleCase, backend, device: str):
    """SGLang's target-only tree sampler over ``bs`` chains: ``target_probs`` f32 ``[bs, B+1, V]`` one-hot on the next
    draft token and the bonus, ``draft_probs`` f32 ``[bs, B+1, V]`` zeros (nothing rejected: it must stay zeros);
    every row's ``accept_token_num`` is ``B``, its ``accept_index`` and ``predicts`` the chain's."""
    bs, q, b = case.batch, case.q, case.budget
    t, tok = _sampling_layout(case, device)
    t["draft_probs"].zero_()
    links = _chain(bs, q, device)
    backend.tree_speculative_sampling(t["predicts"], t["accept_index"], t["accept_token_num"], t["candidates"], *links,
                                      t["uniform_samples"], t["uniform_final"], t["target_probs"], t["draft_probs"],
                                      1.0, 1.0, True)

    def judge():
        problems = (_verify_outputs(t, tok, bs, q, b)
                    + _unchanged("target_probs", t["target_probs"], bs * q, bs * q)
                    + _unchanged("draft_probs (nothing rejected: nothing written)", t["draft_probs"], 0, 0.0)
                    + arena(device).damaged())
        return _judged(problems, t["accept_token_num"], b)

    return judge


@scale_check
def chain_speculative_sampling(case: ScaleCase, backend, device: str):
    """SGLang's rejection (chain) sampler over ``bs`` chains: the draft's rows ``[bs, B, V]`` one-hot on the draft
    token, the target's ``[bs, B+1, V]`` the same and the bonus last: every ratio is 1, every draft accepted."""
    bs, q, b = case.batch, case.q, case.budget
    t, tok = _sampling_layout(case, device)
    _one_hot_rows(t["draft_probs"], tok[:, 1:q])
    links = _chain(bs, q, device)
    backend.chain_speculative_sampling(t["predicts"], t["accept_index"], t["accept_token_num"], t["candidates"],
                                       *links, t["uniform_samples"], t["uniform_final"], t["target_probs"],
                                       t["draft_probs"], 1.0, 1.0, True, False)

    def judge():
        problems = (_verify_outputs(t, tok, bs, q, b)
                    + _unchanged("target_probs", t["target_probs"], bs * q, bs * q)
                    + _unchanged("draft_probs", t["draft_probs"], bs * (q - 1), bs * (q - 1))
                    + arena(device).damaged())
        return _judged(problems, t["accept_token_num"], b)

    return judge


WALK_OUTPUTS = ("accepted_indices", "accepted_token_ids", "accepted_lens", "next_tokens")


def _lay_walk(t: dict, tok: torch.Tensor, bs: int, q: int) -> None:
    """Each request's tree is a chain of its tokens ``tok[:, :q]`` (parents ``-1, 0, .., q - 2``, all ``q`` nodes
    live); the walk's outputs POISON."""
    t["draft_tokens"].copy_(tok[:, :q])
    t["parents"].copy_(torch.arange(-1, q - 1, dtype=I64, device=tok.device).repeat(bs, 1))
    t["sizes"].fill_(q)
    for name in WALK_OUTPUTS:
        t[name].fill_(POISON)


def _walk_problems(t: dict, tok: torch.Tensor, bs: int, q: int, first_token: int) -> list[str]:
    """Every node accepted: ``accepted_lens = q`` (the root counted), indices ``0..q-1``, the accepted tokens the
    chain's from column ``first_token`` on, ``next_tokens`` the bonus ``tok[:, q]``."""
    device = tok.device
    return (_rows_differ("accepted_lens", t["accepted_lens"].view(bs, 1),
                         torch.full((bs, 1), q, dtype=I64, device=device))
            + _rows_differ("accepted_indices", t["accepted_indices"],
                           torch.arange(q, dtype=I64, device=device).repeat(bs, 1))
            + _rows_differ(f"accepted_token_ids[:, {first_token}:]", t["accepted_token_ids"][:, first_token:],
                           tok[:, first_token:q])
            + _rows_differ("next_tokens", t["next_tokens"].view(bs, 1), tok[:, q:q + 1]))


@scale_check
def ddtree_sample(case: ScaleCase, backend, device: str):
    """The DDTree sampler over a parent array: ``accepted_lens = q`` (the root counted), indices ``0..B``, tokens the
    chain's, ``next_tokens`` the bonus."""
    bs, q, v, b = case.batch, case.q, case.vocab, case.budget
    t = _take(case, device)
    tok = _tokens(bs, q + 1, v, device)
    _one_hot_rows(t["target_probs"], tok[:, 1:])
    _lay_walk(t, tok, bs, q)
    backend.ddtree_sample(t["target_probs"], t["draft_tokens"], t["parents"], t["sizes"], t["accepted_indices"],
                          t["accepted_token_ids"], t["accepted_lens"], t["next_tokens"], t["uniforms"],
                          t["uniform_final"])

    def judge():
        problems = (_walk_problems(t, tok, bs, q, 1) + _unchanged("target_probs", t["target_probs"], bs * q, bs * q)
                    + arena(device).damaged())
        return _judged(problems, t["accepted_lens"] - 1, b)

    return judge


@scale_check
def verify_tree_greedy(case: ScaleCase, backend, device: str):
    """Greedy verify: ``target_predict`` at node ``i`` is the chain's next token (the bonus at ``B``)."""
    bs, q, b = case.batch, case.q, case.budget
    t = _take(case, device)
    tok = _tokens(bs, q + 1, 1 << 17, device)
    t["candidates"].copy_(tok[:, :q])
    t["target_predict"].copy_(tok[:, 1:])
    for name in ("predicts", "accept_index", "accept_token_num"):
        t[name].fill_(POISON)
    backend.verify_tree_greedy(t["predicts"], t["accept_index"], t["accept_token_num"], t["candidates"],
                               *_chain(bs, q, device), t["target_predict"])

    def judge():
        return _judged(_verify_outputs(t, tok, bs, q, b) + arena(device).damaged(), t["accept_token_num"], b)

    return judge


def _req_to_token_rows(r2t: torch.Tensor, context: int) -> None:
    """Row ``b + 1`` of ``req_to_token`` holds request ``b``'s slots (:func:`.oracle.slot`), row 0 zeros; in chunks."""
    r2t[0].zero_()
    rows = max(1, CHUNK // context)
    pos = torch.arange(context, dtype=I64, device=r2t.device).unsqueeze(0)
    for start in range(1, r2t.shape[0], rows):
        b = torch.arange(start - 1, min(start - 1 + rows, r2t.shape[0] - 1), dtype=I64, device=r2t.device)
        r2t[start:start + b.numel()] = R.slot(b.unsqueeze(1), pos, context).to(I32)


@scale_check
def assign_req_to_token(case: ScaleCase, backend, device: str):
    """Each request commits a verify block of :data:`COMMIT_WIDTH` slots at the end of its row."""
    bs, ctx, w = case.batch, case.context, COMMIT_WIDTH
    t = _take(case, device)
    t["req_to_token"].zero_()
    t["req_pool_indices"].copy_(torch.arange(1, bs + 1, dtype=I64, device=device))
    start = R.verify_block_start(ctx, w)
    t["start_offset"].fill_(start)
    t["end_offset"].fill_(ctx)
    b = torch.arange(bs, dtype=I64, device=device).unsqueeze(1)
    want = R.slot(b, torch.arange(start, ctx, dtype=I64, device=device).unsqueeze(0), ctx)
    t["out_cache_loc"].copy_(want.flatten())
    backend.assign_req_to_token(t["req_pool_indices"], t["req_to_token"], t["start_offset"], t["end_offset"],
                                t["out_cache_loc"])

    def judge():
        r2t = t["req_to_token"]
        written = _count_nonzero(r2t)
        return (_rows_differ(f"req_to_token[b + 1, -{w}:]", r2t[1:, start:].to(I64), want)
                + ([] if written == bs * w else [f"req_to_token: {written} entries nonzero, want {bs * w} (writes "
                                                 "outside the verify blocks)"])
                + arena(device).damaged())

    return judge


@scale_check
def move_kv(case: ScaleCase, backend, device: str):
    """One layer's K and V pools of ``bs * context + page_size`` slots (``[slots, heads, head_dim]`` bf16, as
    :data:`.boundaries.K_BUFFER`); ``bs *`` :data:`COMMIT_WIDTH` rows move from the pool's top to just below
    (:func:`.oracle.move_plan`); each source row holds a pattern of its slot (bit patterns: the copy moves bytes)."""
    pool, heads, dim = case.dims("k_buffer")
    moved = moved_rows(case)
    t = _take(case, device)
    src0, tgt0 = R.move_plan(pool, moved)
    t["src_loc"].copy_(torch.arange(src0, src0 + moved, dtype=I64, device=device))
    t["tgt_loc"].copy_(torch.arange(tgt0, tgt0 + moved, dtype=I64, device=device))
    col = torch.arange(heads * dim, dtype=I64, device=device).unsqueeze(0)
    pattern = ((t["src_loc"].unsqueeze(1) * 31 + col) & 0x3FFF | 0x0100).to(torch.int16)
    for i, name in enumerate(("k_buffer", "v_buffer")):
        bits = t[name].view(torch.int16).view(pool, heads * dim)
        bits.zero_()
        bits[src0:] = pattern + i
    backend.move_kv([t["k_buffer"]], [t["v_buffer"]], t["tgt_loc"], t["src_loc"])

    def judge():
        problems = []
        for i, name in enumerate(("k_buffer", "v_buffer")):
            bits = t[name].view(torch.int16).view(pool, heads * dim)
            problems += _rows_differ(f"{name}[tgt_loc]", bits[tgt0:tgt0 + moved], pattern + i)
            problems += _rows_differ(f"{name}[src_loc] (a source row)", bits[src0:], pattern + i)
            nonzero = _count_nonzero(bits)
            if nonzero != 2 * moved * heads * dim:
                problems.append(f"{name}: {nonzero} nonzero elements, want {2 * moved * heads * dim} (rows written "
                                "outside tgt_loc)")
        return problems + arena(device).damaged()

    return judge


def _chain_visibility(t: torch.Tensor, bs: int, q: int) -> None:
    """``[bs, q, q]``: each request's tree is a chain, row ``i`` sees nodes ``0..i``."""
    t.copy_(torch.ones(q, q, dtype=torch.bool, device=t.device).tril().expand(bs, q, q))


def _fa_metadata(case: ScaleCase, kernel, device: str) -> tuple[dict, int]:
    """Lay out and call one of the FlashAttention tree-verify metadata builders (``ddtree_fa_full``,
    ``ddtree_fa_suffix``: the same arguments, their page tables of the case's ``page_table`` dims, int32): every
    request's tree a chain (visibility ``[bs, q, q]`` bool, lower-triangular), its ``req_to_token`` row ``b + 1``
    (:func:`_req_to_token_rows`), ``seq_len = context - q`` (the verify block at the row's end); the page table and
    ``cache_seqlens [bs * q]`` int32 POISON. Returns the tensors and ``seq_len``."""
    bs, q, ctx = case.batch, case.q, case.context
    t = _take(case, device)
    _chain_visibility(t["visibility"], bs, q)
    _req_to_token_rows(t["req_to_token"], ctx)
    t["req_pool_indices"].copy_(torch.arange(1, bs + 1, dtype=I64, device=device))
    seq = ctx - q
    t["seq_lens"].fill_(seq)
    t["page_table"].fill_(POISON)
    t["cache_seqlens"].fill_(POISON)
    kernel(t["visibility"], t["req_to_token"], t["req_pool_indices"], t["seq_lens"], t["page_table"],
           t["cache_seqlens"], q)
    return t, seq


@scale_check
def ddtree_fa_full(case: ScaleCase, backend, device: str):
    """FlashAttention tree-verify metadata over a chain (visibility lower-triangular): row ``(b, i)`` of the page
    table is request ``b``'s ``req_to_token`` row up to ``seq_len + i + 1``, POISON past it; ``seq_len = context -
    q`` (the verify block at the row's end)."""
    bs, q, ctx = case.batch, case.q, case.context
    t, seq = _fa_metadata(case, backend.ddtree_fa_full, device)

    def judge():
        lens = (seq + 1 + torch.arange(q, dtype=I32, device=device)).repeat(bs)
        problems = _rows_differ("cache_seqlens", t["cache_seqlens"].view(bs, q), lens.view(bs, q))
        table = t["page_table"].view(bs, q, ctx + q)
        per = max(1, CHUNK // (q * (ctx + q)))
        cols = torch.arange(ctx + q, device=device).view(1, 1, -1)
        limit = (seq + 1 + torch.arange(q, device=device)).view(1, q, 1)
        bad_rows, first = 0, None
        for s in range(0, bs, per):
            e = min(bs, s + per)
            row = torch.nn.functional.pad(t["req_to_token"][s + 1:e + 1], (0, q), value=POISON).unsqueeze(1)
            want = torch.where(cols < limit, row, torch.tensor(POISON, dtype=I32, device=device))
            differ = (table[s:e] != want).flatten(1).any(dim=1).nonzero().flatten()
            bad_rows += differ.numel()
            if first is None and differ.numel():
                first = s + int(differ[0])
        if bad_rows:
            problems.append(f"page_table: {bad_rows} of {bs} requests' rows differ (first: request {first})")
        return problems + arena(device).damaged()

    return judge


ATTENTION_TOLERANCE = 2 ** -6
"""Absolute tolerance of an output element: the softmax weights of identical V rows sum to 1 within float32
rounding, so the output is the row itself to bf16 precision (2^-8 near 1); a row read from another request differs
by at least 1/16."""


@scale_check
def verify_attention(case: ScaleCase, backend, device: str):
    """Verify attention over a pool of ``bs * context`` tokens: request ``b``'s prefix fills slots
    ``b * context ..`` (the last requests' slots past the boundary), its tree is a chain (row ``i`` sees the prefix
    and tree rows ``0..i``); K is zero and every V row of request ``b`` is :func:`.oracle.attention_value`, so every output
    row of request ``b`` is that row whatever the weights: every row judged, no reference attention."""
    return _attention(case, backend.verify_attention, device)


@scale_check
def verify_attention_cascade(case: ScaleCase, backend, device: str):
    """:func:`verify_attention`'s cell on FA3's cascade (a DDTree tree's prefix pass, suffix pass and merge)."""
    return _attention(case, backend.verify_attention_cascade, device)


def paged_copy_nbytes(case: ScaleCase) -> int:
    """Device bytes :func:`~..attention.paging.paged_layout` allocates for an attention cell as :func:`_attention` lays
    it out (``batch`` requests of a ``context``-slot prefix and ``q`` tree rows each, in a pool of ``k_buffer``'s
    slots): what an adapter that pages the case (FlashInfer's, FA3's) needs beside the cell's own tensors."""
    from ..attention.paging import paged_layout_nbytes

    pool, _, _ = case.dims("k_buffer")
    pool_bytes = next(b for name, _, b in case.tensors() if name == "k_buffer")
    return paged_layout_nbytes(pool_bytes, pool, case.batch * case.context, case.batch * case.q, case.batch)


def _attention(case: ScaleCase, kernel, device: str):
    from .boundaries import ATTN_HEADS

    bs, q, ctx = case.batch, case.q, case.context
    pool, kv_heads, dim = case.dims("k_buffer")
    dtype = KV_DTYPE
    t = _take(case, device)
    b = torch.arange(bs, device=device).view(bs, 1, 1)
    h = torch.arange(kv_heads, device=device).view(1, kv_heads, 1)
    d = torch.arange(dim, device=device).view(1, 1, dim)
    rows = R.attention_value(b, h, d).to(dtype)  # [bs, Hk, D]
    t["k_buffer"].zero_()
    t["v_buffer"][:1].zero_()
    t["v_buffer"][1:].view(bs, ctx, kv_heads, dim).copy_(rows.unsqueeze(1).expand(bs, ctx, kv_heads, dim))
    torch.arange(1, pool, dtype=I64, device=device, out=t["kv_indices"])  # slot 0: the pool's padding; no copy
    t["q"].normal_()
    t["k"].zero_()
    t["v"].view(bs, q, kv_heads, dim).copy_(rows.unsqueeze(1).expand(bs, q, kv_heads, dim))
    cols = torch.arange(ctx + q, device=device).view(1, -1)
    block = cols < (ctx + 1 + torch.arange(q, device=device).view(-1, 1))  # [q, ctx + q]: the prefix, the chain
    t["custom_mask"].view(bs, q * (ctx + q)).copy_(block.flatten().expand(bs, -1))
    t["o"].fill_(float("nan"))
    qo_indptr = torch.arange(0, (bs + 1) * q, q, dtype=I32, device=device)
    kv_indptr = torch.arange(0, (bs + 1) * ctx, ctx, dtype=I32, device=device)
    mask_indptr = torch.arange(0, (bs + 1) * q * (ctx + q), q * (ctx + q), dtype=I64, device=device)
    kernel(t["q"], t["k"], t["v"], t["o"], t["k_buffer"], t["v_buffer"], qo_indptr, kv_indptr, t["kv_indices"],
           t["custom_mask"], mask_indptr, q, dim ** -0.5, page_size=1)

    def judge():
        group = ATTN_HEADS // kv_heads
        out = t["o"].view(bs, q, kv_heads, group, dim)
        want = rows.float().view(bs, 1, kv_heads, 1, dim)
        per = max(1, CHUNK // (q * ATTN_HEADS * dim))
        bad = torch.cat([(((out[s:s + per].float() - want[s:s + per]).abs() > ATTENTION_TOLERANCE)
                          | out[s:s + per].isnan()).flatten(1).any(dim=1).nonzero().flatten() + s
                         for s in range(0, bs, per)])
        if not bad.numel():
            return arena(device).damaged()
        r = int(bad[0])
        got = out[r].float()
        first = got[((got - want[r]).abs() > ATTENTION_TOLERANCE) | got.isnan()][:4].tolist()
        return [f"o: {bad.numel()} of {bs} requests' rows differ from their V rows by more than "
                f"{ATTENTION_TOLERANCE:g} (requests {bad[:4].tolist()}{' ...' if bad.numel() > 4 else ''}; request {r}: "
                f"got {first}, want {want[r].flatten()[:4].tolist()} ...)"] + arena(device).damaged()

    return judge


@scale_check
def ddtree_compile(case: ScaleCase, backend, device: str):
    """The DDTree verify-input compile over ``bs`` chains of ``B`` nodes after a prefix of ``context`` tokens: ids
    ``[root, tokens]``, positions ``context + depth``, and each request's block of the packed tree mask (``q`` rows of
    ``context + q``: the whole prefix, then the chain's lower triangle) at offset ``b * q * (context + q)``; the mask
    poisoned with a byte no bool store writes, so an element left unwritten shows."""
    bs, q, ctx, b = case.batch, case.q, case.context, case.budget
    t = _take(case, device)
    tok = _tokens(bs, q, 1 << 17, device)
    t["root"].copy_(tok[:, 0])
    t["tokens"].copy_(tok[:, 1:])
    t["depths"].copy_(torch.arange(1, q, dtype=I64, device=device).repeat(bs, 1))
    _chain_visibility(t["visibility"], bs, q)
    for name, value in (("start", ctx), ("past", ctx), ("sizes", q), ("out_ids", POISON), ("out_positions", POISON)):
        t[name].fill_(value)
    mask = t["tree_attention_mask"]
    mask.view(torch.uint8).fill_(BOOL_POISON)
    backend.ddtree_compile(t["root"], t["tokens"], t["depths"], t["visibility"], t["start"], t["past"], t["sizes"],
                           t["out_ids"], t["out_positions"], mask, q, ctx + q)

    def judge():
        positions = (ctx + torch.arange(q, dtype=I64, device=device)).repeat(bs, 1)
        problems = (_rows_differ("verify_input_ids", t["out_ids"].view(bs, q), tok)
                    + _rows_differ("verify_position_ids", t["out_positions"].view(bs, q), positions))
        blocks = mask.view(torch.uint8).view(bs, q, ctx + q)
        tree = torch.ones(q, q, dtype=torch.uint8, device=device).tril()
        per = max(1, CHUNK // (q * (ctx + q)))
        bad = torch.cat([((blocks[s:s + per, :, :ctx] != 1).flatten(1).any(dim=1)
                          | (blocks[s:s + per, :, ctx:] != tree).flatten(1).any(dim=1)).nonzero().flatten() + s
                         for s in range(0, bs, per)])
        if bad.numel():
            r = int(bad[0])
            row = blocks[r].flatten()
            want = torch.cat([torch.ones(q, ctx, dtype=torch.uint8, device=device), tree], dim=1).flatten()
            cols = (row != want).nonzero().flatten()[:4].tolist()
            shown = ", ".join(f"[{c}] {row[c].item()} want {want[c].item()}" for c in cols)
            problems.append(f"tree_attention_mask: {bad.numel()} of {bs} requests' blocks differ (requests "
                            f"{bad[:4].tolist()}{' ...' if bad.numel() > 4 else ''}; request {r}'s block of "
                            f"{row.numel()} elements: {shown}; {BOOL_POISON} = never written)")
        return problems + arena(device).damaged()

    return judge


@scale_check
def ddtree_fa_suffix(case: ScaleCase, backend, device: str):
    """FlashAttention suffix metadata over a chain (tree attention's cascade): row ``(b, i)`` of the ``[bs * q, q]``
    page table holds request ``b``'s verify slots ``0..i`` from its ``req_to_token`` row (the block at the row's end,
    ``seq_len = context - q``), zeros after; ``cache_seqlens`` ``i + 1``."""
    bs, q, ctx = case.batch, case.q, case.context
    t, seq = _fa_metadata(case, backend.ddtree_fa_suffix, device)

    def judge():
        lens = (1 + torch.arange(q, dtype=I32, device=device)).repeat(bs, 1)
        b = torch.arange(bs, dtype=I64, device=device).view(bs, 1, 1)
        j = torch.arange(q, dtype=I64, device=device).view(1, 1, q)
        i = torch.arange(q, dtype=I64, device=device).view(1, q, 1)
        want = torch.where(j <= i, R.slot(b, seq + j, ctx), 0).to(I32)
        return (_rows_differ("cache_seqlens", t["cache_seqlens"].view(bs, q), lens)
                + _rows_differ("page_table", t["page_table"].view(bs, q, q), want)
                + arena(device).damaged())

    return judge


BUILD_ROW_STRIDE = 1 << 20
"""The tree build's cells give request ``b`` the draft of one DDTree case with every token id plus ``b *`` this:
the same tree in every row, its tokens naming the row they belong to."""


@scale_check
def ddtree_build(case: ScaleCase, backend, device: str):
    """The Triton best-first tree build over ``bs`` requests whose top-k log-probs are one case's (the DDTree
    family's ``peaked`` draft at this budget, its tree known by the family's oracle), the token ids of request ``b``
    shifted by ``b *`` :data:`BUILD_ROW_STRIDE`: every row's tree is that tree, its tokens shifted."""
    bs, b = case.batch, case.budget
    one, built = _one_tree(b)
    lp, ids = one.top
    tree = D.arrays(built, b)
    t = _take(case, device)
    rows = torch.arange(bs, dtype=I64, device=device)
    t["top_log_probs"].copy_(torch.tensor(lp[0], dtype=F32, device=device).expand(bs, -1, -1))
    t["top_token_ids"].copy_(torch.tensor(ids[0], dtype=I64, device=device) + rows.view(bs, 1, 1) * BUILD_ROW_STRIDE)
    _poison_tree_outs(t)
    backend.ddtree_build(t["top_log_probs"], t["top_token_ids"], b, t["out_tokens"], t["out_depths"],
                         t["out_parents"], t["out_visibility"], t["out_sizes"])

    def judge():
        return _tree_problems(t, tree, bs, device) + arena(device).damaged()

    return judge


def _one_tree(budget: int):
    """The DDTree case whose draft every request of the build and prune cells gets (the family's ``peaked`` draft
    at this budget, block size 16, top-k ``B``) and its tree by the family's oracle."""
    one = DDTreeCase(budget, block_size=BUILD_DEPTHS + 1, topk=budget, batch=1, vocab=max(1024, budget))
    return one, one.built()[0]


def _same(values, bs: int, dtype, device: str) -> torch.Tensor:
    """One tree's array, in every row."""
    one = torch.tensor(values, dtype=dtype, device=device)
    return one.expand(bs, *one.shape)


def _poison_tree_outs(t: dict) -> None:
    """POISON in the integer outputs, a byte no bool store writes in the visibility."""
    for name in ("out_tokens", "out_depths", "out_parents", "out_sizes"):
        t[name].fill_(POISON)
    t["out_visibility"].view(torch.uint8).fill_(BOOL_POISON)


def _shifted_tokens(arr, bs: int, device: str) -> torch.Tensor:
    """``[bs, B]`` int64: one tree's node tokens (:class:`~..ddtree.oracle.TreeArrays`) in every row, request ``b``'s
    live nodes shifted by ``b *`` :data:`BUILD_ROW_STRIDE` (the padding past the tree stays 0)."""
    tokens = _same(arr.tokens, bs, I64, device).clone()
    tokens[:, :arr.size - 1] += torch.arange(bs, dtype=I64, device=device).view(bs, 1) * BUILD_ROW_STRIDE
    return tokens


def _tree_problems(t: dict, arr, bs: int, device: str) -> list[str]:
    """The tree kernels' outputs (``out_tokens``, ``out_depths [bs, B]``, ``out_parents [bs, B+1]`` int64,
    ``out_visibility [bs, B+1, B+1]`` bool compared as bytes, so the poison byte shows, ``out_sizes [bs]``) against
    one tree's arrays in every row, its tokens shifted per request."""
    return (_rows_differ("out_tokens", t["out_tokens"], _shifted_tokens(arr, bs, device))
            + _rows_differ("out_depths", t["out_depths"], _same(arr.depths, bs, I64, device))
            + _rows_differ("out_parents", t["out_parents"], _same(arr.parents, bs, I64, device))
            + _rows_differ("out_visibility", t["out_visibility"].view(torch.uint8),
                           _same(arr.visibility, bs, torch.uint8, device))
            + _rows_differ("out_sizes", t["out_sizes"].view(bs, 1),
                           torch.full((bs, 1), arr.size, dtype=I64, device=device)))


@scale_check
def ddtree_prune(case: ScaleCase, backend, device: str):
    """The Triton deepest-chain prune of ``bs`` copies of one built tree (token ids shifted per request by
    :data:`BUILD_ROW_STRIDE`): every row's pruned tree is the family oracle's prune of that tree."""
    bs, q, b = case.batch, case.q, case.budget
    _, built = _one_tree(b)
    full, pruned = D.arrays(built, b), D.arrays(D.prune_deepest_chains(built)[0], b, "identity")
    t = _take(case, device)
    t["in_tokens"].copy_(_shifted_tokens(full, bs, device))
    t["in_depths"].copy_(_same(full.depths, bs, I64, device))
    t["in_parents"].copy_(_same(full.parents, bs, I64, device))
    t["in_visibility"].copy_(_same(full.visibility, bs, torch.bool, device))
    _poison_tree_outs(t)
    backend.ddtree_prune(t["in_tokens"], t["in_depths"], t["in_parents"], t["in_visibility"], t["out_tokens"],
                         t["out_depths"], t["out_parents"], t["out_visibility"], t["out_sizes"], b)

    def judge():
        return _tree_problems(t, pruned, bs, device) + arena(device).damaged()

    return judge


@scale_check
def ddtree_follow(case: ScaleCase, backend, device: str):
    """The greedy follow over ``bs`` chains whose target at node ``i`` is the next draft token (the bonus at ``B``):
    every node accepted, ``accepted_lens = q``, the path ``0..B``, its tokens the chain's, ``next_tokens`` the bonus."""
    bs, q, b = case.batch, case.q, case.budget
    t = _take(case, device)
    tok = _tokens(bs, q + 1, 1 << 17, device)
    t["target_predict"].copy_(tok[:, 1:])
    _lay_walk(t, tok, bs, q)
    backend.ddtree_follow(t["draft_tokens"], t["target_predict"], t["parents"], t["sizes"], t["accepted_indices"],
                          t["accepted_token_ids"], t["accepted_lens"], t["next_tokens"])

    def judge():
        return _judged(_walk_problems(t, tok, bs, q, 0) + arena(device).damaged(), t["accepted_lens"] - 1, b)

    return judge
