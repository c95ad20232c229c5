"""Deployment shapes: the kernels of every family at the batches where their tensors' offsets pass 2^31 and 2^32
(:mod:`.boundaries`), with plants that make every row's answer known (:mod:`.oracle`); one record per kernel,
``<kernel>@scale``, calling the kernel's own backend method (``docs/tiers.md``, "Deployment shapes").

Cells: the ``scale`` profile (``--ddtree-profile scale``) runs every derived cell of every kernel over the vocabularies
(``--ddtree-vocab``), budgets and contexts of :mod:`.boundaries`, and nothing else; every other profile runs a
bounded slice (the field's vocabulary 248320, budget 16, context 1M, the 2^31 limit's two sides). They run on
the device tier only; elsewhere each is a skip saying so, counted.

Memory: each cell's footprint (:meth:`ScaleCase.footprint`, torch-free) is its whole peak on the GPU: the tensors its
check takes (:meth:`ScaleCase.layout`) with their canary bands, and the largest phase's temporaries beside them (the
layout's, the call's with the adapter's copies, the judge's); :func:`fit` turns it and the GPU's free memory into
run or a skip that states both.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...cases import FlatCase
from ...contract import KernelRecord
from ...errors import CaseError
from . import boundaries as bd

SCHEMA = "ddtree-compat/scale-case/1"
SUFFIX = "@scale"
ORIGINS = ("derived", "bisect")
BAD = ("wrong", "zero-accept", "fault")
"""The kernel's failures (an ``error`` is the suite's own: it bounds no envelope)."""
TAGS = {"tree_speculative_sampling": "tree", "chain_speculative_sampling": "chain", "ddtree_sample": "ddsample",
        "verify_tree_greedy": "greedy", "assign_req_to_token": "r2t", "move_kv": "kvcopy", "ddtree_fa_full": "fafull",
        "verify_attention": "attn", "ddtree_compile": "compile", "ddtree_fa_suffix": "fasuffix", "ddtree_build": "build",
        "ddtree_prune": "prune", "ddtree_follow": "follow", "verify_attention_cascade": "cascade"}
"""A short tag per kernel, first in a case's id: ids are unique across the kernels (``replay ID`` finds the one)."""
SLICE = bd.Shape(vocab=248320, budget=16, context=1048576)
"""The default profiles' slice: the field's model family's vocabulary, budget 16, a 1M context."""


@dataclass(frozen=True)
class ScaleCase(FlatCase):
    """One kernel call at a deployment shape.

    Attributes:
        kernel: a kernel of :data:`.boundaries.KERNELS` (the backend method).
        batch: requests (``--max-running-requests`` for the pools' rows).
        vocab, budget, context: the dimensions the kernel's tensors are sized from (0 where it has none).
        boundary: which limit the batch sits at (:attr:`.boundaries.Boundary.label`), ``top`` or ``bisect``.
        origin: ``derived`` (a boundary cell) or ``bisect`` (a batch the envelope's bisection probed).
    """

    SCHEMA = SCHEMA
    KIND = "scale"

    kernel: str
    batch: int
    vocab: int = 0
    budget: int = 0
    context: int = 0
    boundary: str = ""
    origin: str = "derived"

    @property
    def shape(self) -> bd.Shape:
        return bd.Shape(self.vocab, self.budget, self.context)

    @property
    def q(self) -> int:
        return self.budget + 1

    @property
    def group(self) -> str:
        """The envelope's group: the kernel's dimensions but the batch (``v248320-b16``)."""
        parts = [f"v{self.vocab}" if self.vocab else "", f"b{self.budget}" if self.budget or self.kernel in (
            "verify_tree_greedy", "ddtree_build", "ddtree_prune", "ddtree_follow") else "", f"ctx{self.context}" if self.context else ""]
        return "-".join(p for p in parts if p)

    @property
    def id(self) -> str:
        return f"{TAGS.get(self.kernel, self.kernel)}-{self.group}-bs{self.batch}-{self.boundary or self.origin}"

    @property
    def label(self) -> str:
        return self.kernel + SUFFIX

    def nbytes(self) -> int:
        """Bytes of the tensors the kernel indexes (:func:`.boundaries.Kernel.nbytes`)."""
        return bd.KERNELS[self.kernel].nbytes(self.shape, self.batch)

    def dims(self, tensor: str) -> tuple[int, ...]:
        """The dims of one of the kernel's indexed tensors at this batch, as :mod:`.boundaries` declares them (the
        check allocates exactly these: the memory a cell needs and the boundary it sits at are of the same tensor).

        Raises:
            KeyError: the kernel indexes no tensor of that name.
        """
        found = {t.name: t for t in bd.KERNELS[self.kernel].tensors}
        return found[tensor].dims(self.shape, self.batch)

    def tensors(self) -> list[tuple[str, tuple[int, ...], int]]:
        """``(name, dims, bytes)`` of each indexed tensor."""
        return [(t.name, t.dims(self.shape, self.batch), t.nbytes(self.shape, self.batch))
                for t in bd.KERNELS[self.kernel].tensors]

    def layout(self) -> list[tuple[str, tuple[int, ...], str]]:
        """The tensors the check takes from the arena, ``(name, dims, dtype name)`` in order: the kernel's indexed
        tensors (:meth:`dims`) and the check's own (outputs, links, indices)."""
        return _LAYOUTS[self.kernel](self)

    def footprint(self, adapter: int = 0) -> "Footprint":
        """The cell's device bytes in each phase (:class:`Footprint`), ``adapter`` bytes of the adapter's own copies
        during the call."""
        return Footprint(self.nbytes(), arena_nbytes(self.layout()), *_phases(self), adapter=adapter)

    def coordinates(self) -> dict:
        return dict(budget=self.budget or None, topology="chain", plant="all-accepted", batch=self.batch,
                    block_size=None, mode="scale", layout=self.boundary or self.origin,
                    shape=self.group)

    def check(self) -> "ScaleCase":
        where = f"scale case {self.id}"
        if self.kernel not in bd.KERNELS:
            raise CaseError("kernel", self.kernel, ", ".join(bd.KERNELS), "no scale cells", where)
        for name in ("batch", "vocab", "budget", "context"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if name == "batch" else 0):
                raise CaseError(name, value, "an integer >= " + ("1" if name == "batch" else "0"), "out of range", where)
        axes = bd.KERNELS[self.kernel].axes
        for name in ("vocab", "budget", "context"):
            if name in axes and getattr(self, name) < (2 if name != "budget" else 1):
                raise CaseError(name, getattr(self, name), f"set: {self.kernel}'s tensors are sized by it",
                                "missing", where)
        if self.context and self.budget and self.context <= self.q:
            raise CaseError("context", self.context, f"> q = {self.q}", "too short for a verify block", where)
        if self.origin not in ORIGINS:
            raise CaseError("origin", self.origin, ", ".join(ORIGINS), "unknown", where)
        return self

    @classmethod
    def of(cls, b: bd.Boundary, origin: str = "derived") -> "ScaleCase":
        s = b.shape
        return cls(b.kernel, b.batch, s.vocab, s.budget, s.context, b.label, origin)


# ---------------------------------------------------------------------------------------------------- footprint
# What a cell holds on the GPU, torch-free: the tensors its check takes from the arena (the kernel's, as
# :mod:`.boundaries` declares them, and the check's own: outputs, links, indices), the arena's canary bands, and
# each phase's temporaries beside them (laying the case out; the kernel's call with the adapter's copies; the judge's
# expected rows and chunk temporaries). ``checks.py`` allocates exactly :func:`layout`'s tensors; the CPU tests
# (``tests/unit/test_scale_fit.py``) hold the rule at 32, 80, 96 and 141 GB cards.

CHUNK = 1 << 26
"""Elements a judge compares (or counts) at a time: its temporaries stay below a GiB beside a cell's tensors."""
COMMIT_WIDTH = 17
"""The verify block a commit writes per request in the ``req_to_token`` and KV cells (a budget-16 tree's ``q``)."""
HEADROOM = 4 << 30
"""Bytes of the free memory a cell leaves to what no footprint counts: the kernel's own scratch and JIT, a library's
workspace (FlashInfer's 384 MiB), the CUDA graphs' and allocators' rounding."""
ARENA_BAND, ARENA_ALIGN = 4096, 512
"""The arena's canary band and alignment (``harness/arena.py``'s ``BAND`` and ``ALIGN``; a CPU test holds them
equal)."""
ITEMSIZE = {"float32": 4, "int64": 8, "int32": 4, "int16": 2, "bfloat16": 2, "bool": 1, "uint8": 1}
COUNT_BYTES = 9
"""Bytes per element a device ``count_nonzero`` (or a sum of a bool) allocates: the bool mask and its int64 copy
(torch's CUDA sum casts its input to the output's dtype first)."""


def moved_rows(case: "ScaleCase") -> int:
    """The KV cell's rows moved: :data:`COMMIT_WIDTH` per request, at most half the pool."""
    pool = case.dims("k_buffer")[0]
    return min(case.batch * COMMIT_WIDTH, pool // 2)


def _walk_specs(bs: int, q: int) -> list:
    return [("draft_tokens", (bs, q), "int64"), ("parents", (bs, q), "int64"), ("sizes", (bs,), "int64"),
            ("accepted_indices", (bs, q), "int64"), ("accepted_token_ids", (bs, q), "int64"),
            ("accepted_lens", (bs,), "int64"), ("next_tokens", (bs,), "int64")]


def _tree_out_specs(c: "ScaleCase") -> list:
    bs, q, b = c.batch, c.q, c.budget
    return [("out_tokens", (bs, b), "int64"), ("out_depths", (bs, b), "int64"), ("out_parents", (bs, q), "int64"),
            ("out_visibility", c.dims("out_visibility"), "bool"), ("out_sizes", (bs,), "int64")]


def _sampling_specs(c: "ScaleCase") -> list:
    bs, q = c.batch, c.q
    return [("target_probs", c.dims("target_probs"), "float32"), ("draft_probs", c.dims("draft_probs"), "float32"),
            ("candidates", (bs, q), "int64"), ("uniform_samples", (bs, q), "float32"),
            ("uniform_final", (bs,), "float32"), ("predicts", (bs * q,), "int32"), ("accept_index", (bs, q), "int32"),
            ("accept_token_num", (bs,), "int32")]


def _fa_specs(c: "ScaleCase") -> list:
    bs, q = c.batch, c.q
    return [("visibility", (bs, q, q), "bool"), ("req_to_token", c.dims("req_to_token"), "int32"),
            ("req_pool_indices", (bs,), "int64"), ("seq_lens", (bs,), "int64"),
            ("page_table", c.dims("page_table"), "int32"), ("cache_seqlens", (bs * q,), "int32")]


def _attention_specs(c: "ScaleCase") -> list:
    bs, q, ctx = c.batch, c.q, c.context
    _, kv_heads, dim = c.dims("k_buffer")
    rows = bs * q
    return [("k_buffer", c.dims("k_buffer"), "bfloat16"), ("v_buffer", c.dims("v_buffer"), "bfloat16"),
            ("custom_mask", c.dims("custom_mask"), "bool"), ("q", (rows, bd.ATTN_HEADS, dim), "bfloat16"),
            ("k", (rows, kv_heads, dim), "bfloat16"), ("v", (rows, kv_heads, dim), "bfloat16"),
            ("o", (rows, bd.ATTN_HEADS, dim), "bfloat16"), ("kv_indices", (bs * ctx,), "int64")]


_LAYOUTS = {
    "tree_speculative_sampling": _sampling_specs,
    "chain_speculative_sampling": _sampling_specs,
    "ddtree_sample": lambda c: [("target_probs", c.dims("target_probs"), "float32"), *_walk_specs(c.batch, c.q),
                                ("uniforms", (c.batch, c.q), "float32"), ("uniform_final", (c.batch,), "float32")],
    "verify_tree_greedy": lambda c: [
        ("candidates", (c.batch, c.q), "int64"), ("target_predict", (c.batch, c.q), "int64"),
        ("predicts", (c.batch * c.q,), "int32"), ("accept_index", (c.batch, c.q), "int32"),
        ("accept_token_num", (c.batch,), "int32")],
    "assign_req_to_token": lambda c: [
        ("req_to_token", c.dims("req_to_token"), "int32"), ("req_pool_indices", (c.batch,), "int64"),
        ("start_offset", (c.batch,), "int64"), ("end_offset", (c.batch,), "int64"),
        ("out_cache_loc", (c.batch * COMMIT_WIDTH,), "int64")],
    "move_kv": lambda c: [("k_buffer", c.dims("k_buffer"), "bfloat16"), ("v_buffer", c.dims("k_buffer"), "bfloat16"),
                          ("src_loc", (moved_rows(c),), "int64"), ("tgt_loc", (moved_rows(c),), "int64")],
    "ddtree_fa_full": _fa_specs,
    "ddtree_fa_suffix": _fa_specs,
    "verify_attention": _attention_specs,
    "verify_attention_cascade": _attention_specs,
    "ddtree_compile": lambda c: [
        ("root", (c.batch,), "int64"), ("tokens", (c.batch, c.budget), "int64"),
        ("depths", (c.batch, c.budget), "int64"), ("visibility", (c.batch, c.q, c.q), "bool"),
        ("start", (c.batch,), "int64"), ("past", (c.batch,), "int64"), ("sizes", (c.batch,), "int64"),
        ("out_ids", (c.batch * c.q,), "int64"), ("out_positions", (c.batch * c.q,), "int64"),
        ("tree_attention_mask", c.dims("tree_attention_mask"), "bool")],
    "ddtree_build": lambda c: [("top_log_probs", c.dims("top_log_probs"), "float32"),
                               ("top_token_ids", c.dims("top_token_ids"), "int64"), *_tree_out_specs(c)],
    "ddtree_prune": lambda c: [
        ("in_tokens", (c.batch, c.budget), "int64"), ("in_depths", (c.batch, c.budget), "int64"),
        ("in_parents", (c.batch, c.q), "int64"), ("in_visibility", c.dims("in_visibility"), "bool"),
        *_tree_out_specs(c)],
    "ddtree_follow": lambda c: [("target_predict", (c.batch, c.q), "int64"), *_walk_specs(c.batch, c.q)],
}
"""Per kernel, the tensors its check takes from the arena: ``(name, dims, dtype name)``, in the order taken."""


def _numel(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def arena_nbytes(specs) -> int:
    """Bytes the arena allocates for ``specs``: each tensor aligned, between canary bands (``harness/arena.py``'s
    ``Arena.take``)."""
    at = ARENA_BAND
    for _, dims, dtype in specs:
        at = -(-(at + _numel(dims) * ITEMSIZE[dtype]) // ARENA_ALIGN) * ARENA_ALIGN + ARENA_BAND
    return at


def _phases(c: "ScaleCase") -> tuple[int, int, int]:
    """``(layout, call, judge)``: bytes beside the arena in each phase of ``c``'s check, its temporaries counted at
    their peak (``checks.py``, kernel by kernel). ``rows``: one ``[bs, q + 1]`` int64 (the plant's tokens and the
    per-request tensors made from them)."""
    k, bs, q, ctx = c.kernel, c.batch, c.q, c.context
    rows = 8 * bs * (q + 1)
    chunk = lambda n: min(n, CHUNK)  # noqa: E731 - elements of one chunk of a tensor of n elements
    if k in ("tree_speculative_sampling", "chain_speculative_sampling", "ddtree_sample"):
        probs = _numel(c.dims("target_probs"))
        # the plant's tokens and their arithmetic; the EAGLE links [bs, q] x 3 at the call; the judge's expected
        # rows, then _unchanged's chunks (count_nonzero, then a float64 sum)
        return 4 * rows, 4 * rows, rows + max(3 * rows, COUNT_BYTES * chunk(probs))
    if k in ("verify_tree_greedy", "ddtree_follow"):
        return 4 * rows, 4 * rows, 4 * rows
    if k == "assign_req_to_token":
        block = 8 * bs * COMMIT_WIDTH
        return 4 * block, block, block + max(3 * block, COUNT_BYTES * chunk(_numel(c.dims("req_to_token"))))
    if k == "move_kv":
        pool, heads, dim = c.dims("k_buffer")
        pattern = moved_rows(c) * heads * dim  # elements of the moved rows' bit pattern (int16)
        # int64 arithmetic of the pattern (two live at once) and the int16 pattern; the judge's pattern + i and its
        # comparison, then the chunked count of each pool
        return 2 * pattern + 16 * pattern + 2 * pattern, 2 * pattern, 2 * pattern + max(
            5 * pattern, COUNT_BYTES * chunk(pool * heads * dim))
    if k in ("ddtree_fa_full", "ddtree_fa_suffix"):
        fill = max(1, CHUNK // ctx) * ctx  # _req_to_token_rows: a chunk of rows, two int64 temporaries at once
        lay = 16 * fill + 4 * fill + 8 * ctx + 4 * rows
        if k == "ddtree_fa_full":
            width = ctx + q
            per = max(1, CHUNK // (q * width))
            block = per * q * width  # the judge's expected block of page-table rows (int32) and its comparison
            judge = 5 * block + 4 * per * width + 9 * q * width + 4 * rows
        else:
            judge = 13 * bs * q * q + 4 * rows  # the expected [bs, q, q] table (int64, then int32) and its compare
        return lay, 4 * rows, judge
    if k in ("verify_attention", "verify_attention_cascade"):
        _, kv_heads, dim = c.dims("k_buffer")
        row = kv_heads * dim
        mask = q * (ctx + q)  # the chain's mask block [q, ctx + q] and its arithmetic
        lay = 40 * bs * row + 10 * mask + 16 * (ctx + q) + 24 * (bs + 1)
        call = 2 * bs * row + 9 * mask + 24 * (bs + 1)
        per = max(1, CHUNK // (q * bd.ATTN_HEADS * dim))
        out = per * q * bd.ATTN_HEADS * dim  # a chunk of output rows in float32, its difference and masks
        judge = 2 * bs * row + 4 * bs * row + 10 * out + 24 * (bs + 1)
        return lay, call, judge
    if k == "ddtree_compile":
        width = ctx + q
        per = max(1, CHUNK // (q * width))
        # the judge's chunk of mask blocks compared; on a difference, the expected block, its comparison and the
        # positions that differ (int64 each)
        return 4 * rows + 2 * q * q, 2 * rows, 3 * rows + max(2 * per * q * width, 11 * q * width)
    if k in ("ddtree_build", "ddtree_prune"):
        shifted = 16 * bs * bd.BUILD_DEPTHS * c.budget if k == "ddtree_build" else 0  # token ids + b * stride
        return 4 * rows + shifted, 2 * rows, 4 * rows + 2 * bs * q * q
    raise KeyError(k)


ROUNDING = 1 << 20
"""Bytes the phases' own arithmetic cannot name: torch's caching allocator rounds every block up to 512 bytes, and a
phase's scalars and small index tensors are dozens of blocks (on an H100 the move_kv cell
``kvcopy-ctx32768-bs128-above-2^32-el-k_buffer`` peaked 5,632 bytes above its phases' sum, 2026-12-07)."""


@dataclass(frozen=True)
class Footprint:
    """A cell's device bytes (:meth:`ScaleCase.footprint`).

    Attributes:
        kernel: the tensors the kernel indexes, as SGLang allocates them (:mod:`.boundaries`).
        arena: every tensor the check takes (the kernel's and its own: outputs, links, indices), canary bands
            included.
        layout, call, judge: what each phase holds beside the arena at its peak (its temporaries; the call's
            includes ``adapter``).
        adapter: the adapter's own copies during the call (FlashInfer's and FA3's paged copy of the KV pool).
    """

    kernel: int
    arena: int
    layout: int
    call: int
    judge: int
    adapter: int = 0

    @property
    def peak(self) -> int:
        """The cell's peak: the arena and its largest phase (each phase frees its temporaries before the next), plus
        :data:`ROUNDING`."""
        return self.arena + max(self.layout, self.call + self.adapter, self.judge) + ROUNDING

    @property
    def temporaries(self) -> int:
        """The check's temporaries at the peak (the peak less the arena and, when the call is the peak, the
        adapter's copies)."""
        at_call = self.call + self.adapter >= max(self.layout, self.judge)
        return self.peak - self.arena - (self.adapter if at_call else 0)


def fit(case: "ScaleCase", footprint: Footprint, free: int, headroom: int = HEADROOM) -> str | None:
    """``None`` when ``footprint`` fits ``free`` bytes (the GPU's free memory at the cell's start, with what this
    process holds for reuse) less ``headroom``; else the skip's reason, stating the sizes."""
    if footprint.peak + headroom <= free:
        return None
    sizes = ", ".join(f"{n} {list(d)} {bd.gib(b)}" for n, d, b in case.tensors())
    adapter = f"; the adapter's own copies {bd.gib(footprint.adapter)}" if footprint.adapter else ""
    return (f"does not fit this GPU: needs {bd.gib(footprint.peak)}, {bd.gib(free)} free on this GPU "
            f"({bd.gib(headroom)} of it left as headroom): the kernel's tensors {sizes}; the check's tensors "
            f"{bd.gib(footprint.arena)} in all (with its outputs, indices and canary bands), its temporaries "
            f"{bd.gib(footprint.temporaries)} (plants, the judge's chunks){adapter}")


def check_vocabs(vocabs) -> tuple[int, ...]:
    """``--ddtree-vocab`` values as integers (``()``: every vocabulary of :data:`.boundaries.VOCABS`).

    Raises:
        CaseError: a value that is not an integer >= 2.
    """
    out = []
    for v in vocabs or ():
        text = str(v).strip()
        if not text.isdigit() or int(text) < 2:
            raise CaseError("--ddtree-vocab", v, "integers >= 2, comma-separated (e.g. 151936,248320)",
                            "not a vocabulary size")
        out.append(int(text))
    return tuple(dict.fromkeys(out))


def scale_cases(kernel: str, profile: str, vocabs: tuple[int, ...] = ()) -> tuple[ScaleCase, ...]:
    """``kernel``'s cells: every derived boundary under the ``scale`` profile, else the slice's 2^31 pair."""
    if profile == "scale":
        return tuple(ScaleCase.of(b) for b in bd.derived(kernel, vocabs=vocabs or bd.VOCABS))
    k = bd.KERNELS[kernel]
    shape = bd.Shape(SLICE.vocab if "vocab" in k.axes else 0, SLICE.budget if "budget" in k.axes else 0,
                     SLICE.context if "context" in k.axes else 0)
    cells = [b for b in bd.boundaries(kernel, shape) if b.bits in (31, 0)]
    return tuple(ScaleCase.of(b) for b in cells[:2])


def past_envelope(failed: list[dict], coords: dict) -> str | None:
    """Why a deployment-shape cell need not run: a smaller batch of its kernel x backend x arch x shape already
    failed in this run (``failed``: the run's result lines that neither passed nor skipped, as the plugin reads
    them; the envelope's first failing batch is known, a larger batch of the same shape is past it, and each fault
    costs a fresh worker). ``None``: run it."""
    key = (coords["kernel"], coords["backend"], coords["arch"], coords["shape"])
    first = min(((r["batch"], r["outcome"]) for r in failed if r.get("outcome") in BAD
                 and (r.get("kernel"), r.get("backend"), r.get("arch"), r.get("shape")) == key), default=None)
    if first is None or first[0] >= coords["batch"]:
        return None
    return (f"past the envelope: batch {first[0]} of this shape already failed ({first[1]}) in this run; the larger "
            "batches of a shape run only up to its first failure")


def _device_kernels(backend, cases: tuple) -> tuple:
    """A scale cell measures a device kernel: a backend's host reference (Python over host tensors) gets none."""
    from ...contract import implementation

    impl = implementation(backend, cases[0].kernel) if cases else None
    return () if impl is None or impl.runtime == "host" else cases


def _record(kernel: str) -> KernelRecord:
    return KernelRecord(
        name=kernel + SUFFIX,
        summary=f"{kernel} at deployment shapes: batches at the derived 2^31 / 2^32 offset boundaries, every row judged",
        case_param="ddtree_scale_case",
        case_type=ScaleCase,
        cases=lambda ctx, k=kernel: scale_cases(k, ctx.profile, ctx.vocabs),
        run=f"ddtree_compat.families.scale.checks:{kernel}",
        for_backend=_device_kernels,
        table="scale",
        needless=past_envelope,
    )


RECORDS = tuple(_record(k) for k in bd.KERNELS)
KERNELS = tuple(r.name for r in RECORDS)
