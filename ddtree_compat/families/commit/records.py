"""The KV-cache commit after verify: its kernels, one record each, sharing one case type.

After verify, a DDTree round commits the accepted path (SGLang DDTree PR #29907, page_size 1: keep the
accepted nodes' slots where they are; earlier PR #27509 and SGLang 0.5.23's tree commit: compact their
K/V rows to the block's first slots, "read all, then write all"). Each kernel is a backend method of its
name (signatures in :data:`RECORDS`' summaries; shapes and judging in :mod:`ddtree_compat.families.commit.checks`).
Which slots a commit keeps, frees and gives back is :func:`ddtree_compat.families.commit.oracle.commit_plan`'s.

Every verify grid case feeds one commit case; its slot layout (page size 1 / 16 / 64, allocation at
the pool's start, at its end, or crossing a page boundary) and KV layout (heads, head_dim 64 / 128 /
256, fp16 / bf16 / fp32 / fp8 stored as uint8) rotate with the case index, so every layout meets many
trees without multiplying the grid.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..verify.records import NestedCase, VerifyCase, grid
from ...errors import CaseError
from ...contract import CaseContext, KernelRecord

PAGE_SIZES = (1, 16, 64)
PLACEMENTS = ("start", "pool-end", "page-cross")
KV_DTYPES = ("fp16", "bf16", "fp32", "fp8")  # fp8 is stored as uint8, as SGLang stores fp8 KV
KV_DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8": 1}
KV_SHAPES = ((1, 64), (8, 128), (2, 256), (4, 64), (8, 256))  # (heads, head_dim)
SCHEMA = "ddtree-compat/commit-case/1"


@dataclass(frozen=True)
class CommitCase(NestedCase):
    """One commit of a verified batch.

    Attributes:
        verify: the verify case whose oracle result is committed.
        page_size: KV page size in slots (1, 16, 64); slots of a page are contiguous.
        placement: ``start`` | ``pool-end`` | ``page-cross`` (where the requests' pages sit / where
            the verify block starts in its page).
        kv_heads, head_dim, kv_dtype: the KV pool layout for ``move_kv`` (``fp8`` is stored as uint8,
            as SGLang stores fp8 KV).
    """

    SCHEMA = SCHEMA
    KIND = "commit"

    verify: VerifyCase
    page_size: int
    placement: str
    kv_heads: int
    head_dim: int
    kv_dtype: str

    @property
    def id(self) -> str:
        return f"{self.verify.id}-p{self.page_size}-{self.placement}-kv{self.kv_heads}x{self.head_dim}{self.kv_dtype}"

    def check(self) -> "CommitCase":
        where = f"commit case {self.id}"
        if self.page_size not in PAGE_SIZES:
            raise CaseError("page_size", self.page_size, ", ".join(map(str, PAGE_SIZES)), "unsupported", where)
        if self.placement not in PLACEMENTS:
            raise CaseError("placement", self.placement, ", ".join(PLACEMENTS), "unknown", where)
        if self.kv_dtype not in KV_DTYPES:
            raise CaseError("kv_dtype", self.kv_dtype, ", ".join(KV_DTYPES), "unknown", where)
        if self.kv_heads < 1 or self.head_dim < 1:
            raise CaseError("kv_heads", (self.kv_heads, self.head_dim), "positive integers", "out of range", where)
        self.verify.check()
        return self

    def coordinates(self) -> dict:
        """The results' coordinates: the verify case's, with the page size added to its layout."""
        return {**self.verify.coordinates(), "layout": f"{self.verify.layout}-p{self.page_size}"}


def commit_cases(verify_cases: tuple[VerifyCase, ...] | None = None) -> tuple[CommitCase, ...]:
    """One commit case per verify case (default: the default grid), layouts rotating with the case index."""
    out = []
    for i, v in enumerate(grid("default") if verify_cases is None else verify_cases):
        heads, dim = KV_SHAPES[i % len(KV_SHAPES)]
        out.append(CommitCase(v, PAGE_SIZES[i % 3], PLACEMENTS[(i // 3) % 3], heads, dim,
                              KV_DTYPES[(i // 9) % len(KV_DTYPES)]))
    return tuple(out)


def _cases(ctx: CaseContext) -> tuple:
    return commit_cases(tuple(ctx.verify))


def _record(name: str, summary: str) -> KernelRecord:
    return KernelRecord(name=name, summary=summary, case_param="ddtree_commit_case", case_type=CommitCase,
                        cases=_cases, run=f"ddtree_compat.families.commit.checks:{name}")


ACCEPT_OUT_CACHE_LOC = _record(
    "accept_out_cache_loc",
    "SGLang fill_accept_out_cache_loc(accept_index int32 [bs*S] (-1 past each path), out_cache_loc int64 "
    "[bs*C], accept_out_cache_loc int64 [sum(accept_len)]): the kept slots, compacted in path order")
FRONT_OUT_CACHE_LOC = _record(
    "front_out_cache_loc",
    "SGLang fill_front_out_cache_loc_func(num_front int32 [bs], out_cache_loc, front_out_cache_loc): the "
    "first num_front[b] slots of each verify block, compacted: where the compacting commit moves the K/V")
COMMIT_OUTPUTS = _record(
    "commit_outputs",
    "SGLang prepare_verify_commit_outputs(predict, accept_index, accept_lens, seq_lens) -> (seq_lens + "
    "accept_lens, bonus = predict[accept_index[b, accept_lens[b] - 1]])")
BONUS_TOKENS = _record(
    "bonus_tokens",
    "SGLang fill_bonus_tokens(accept_tokens, accept_lens, bonus, accept_stride): bonus[b] = "
    "accept_tokens[b * S + accept_lens[b] - 1]")
ASSIGN_REQ_TO_TOKEN = _record(
    "assign_req_to_token",
    "SGLang assign_req_to_token_pool(req_pool_indices, req_to_token int32 [rows, max_context], start, end, "
    "out_cache_loc): req_to_token[row_b, seq_len_b : seq_len_b + accept_len_b] = the committed slots")
MOVE_KV = _record(
    "move_kv",
    "the token KV pool's move_kv_cache(k_buffers, v_buffers, tgt_loc, src_loc) over per-layer [slots, heads, "
    "head_dim] pools: rows at src_loc copied to tgt_loc, every read before any write")

RECORDS = (ACCEPT_OUT_CACHE_LOC, FRONT_OUT_CACHE_LOC, COMMIT_OUTPUTS, BONUS_TOKENS, ASSIGN_REQ_TO_TOKEN, MOVE_KV)
KERNELS = tuple(r.name for r in RECORDS)
