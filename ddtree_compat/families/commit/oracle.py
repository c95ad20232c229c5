"""The commit family's oracle: which KV-cache slots a commit keeps, frees and gives back, per request, from
the verify result (pure Python, no torch). Sources: SGLang DDTree PR #29907 (page size 1: keep the accepted
slots in place) and PR #27509 (compact the accepted K/V rows), SGLang's ``alloc_extend`` page rounding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ...errors import CaseError
from ..verify.oracle import PADDING_SLOT, VerifyResult


@dataclass(frozen=True)
class CommitPlan:
    """KV-cache commit of one request after verify: which slots hold the committed tokens, which the
    commit gives up, and which of those go back to the allocator.

    Two commit models, chosen by page size:

    * page size 1, *in place* (SGLang DDTree PR #29907, which rejects page_size != 1): the accepted
      nodes' slots stay where they are and become positions ``seq_len ..``; every other node slot of
      the verify block is freed.
    * page size > 1, *compacting* (SGLang 0.5.23's tree commit, ``eagle_worker_common.
      _finalize_accept_tree_path``: ``move_accept_tokens_to_target_kvcache`` moves the accepted K/V
      to the front of the block, targets from ``fill_front_out_cache_loc_func``, sources from
      ``fill_accept_out_cache_loc``): the block's first ``commit_len`` slots hold the committed
      tokens; the block's tail is over-allocation, returned when the request releases its KV
      (``mem_cache.common._release_overallocated_kv_indices``: positions from
      ``ceil_align(kv_committed_len, page_size)`` up to ``kv_allocated_len``, whole pages). Tail slots
      in the last committed page (``retained_slots``) stay with the request: its page is live.

    Attributes:
        kept_slots: ``out_cache_loc`` of the accepted nodes, in path order (where the accepted K/V
            is before the commit; ``fill_accept_out_cache_loc``'s output). Often non-contiguous.
        front_slots: the block's first ``commit_len`` slots (``fill_front_out_cache_loc_func``'s
            output; where a compacting commit moves the accepted K/V).
        committed_slots: the slots holding positions ``seq_len .. new_seq_len - 1`` after the
            commit: ``kept_slots`` (page size 1) or ``front_slots`` (page size > 1).
        freed_slots: the block's other slots (padding -1 never counted), in position order.
        released_slots: the freed slots that go back to the allocator: all of them at page size 1;
            at page size > 1 those at positions ``>= ceil_align(new_seq_len, page_size)``.
        retained_slots: the freed slots below that boundary: the committed page's tail (page size > 1).
        commit_len: ``accepted_drafts + 1`` (root included).
        req_to_token: ``(position, slot)`` for positions ``seq_len .. new_seq_len - 1``
            (``committed_slots``; SGLang ``assign_req_to_token_pool``).
        new_seq_len: ``seq_len + commit_len``.
        bonus_token: the next round's root token.
        page_size: KV page size in slots.
    """

    kept_slots: tuple[int, ...]
    front_slots: tuple[int, ...]
    committed_slots: tuple[int, ...]
    freed_slots: tuple[int, ...]
    released_slots: tuple[int, ...]
    retained_slots: tuple[int, ...]
    commit_len: int
    req_to_token: tuple[tuple[int, int], ...]
    new_seq_len: int
    bonus_token: int
    page_size: int = 1


def release_boundary(new_seq_len: int, page_size: int) -> int:
    """First position SGLang frees when a request releases its over-allocated tail:
    ``ceil_align(kv_committed_len, page_size)`` (``mem_cache.common._release_overallocated_kv_indices``)."""
    return -(-new_seq_len // page_size) * page_size


def commit_plan(result: VerifyResult, out_cache_loc: Sequence[int], seq_len: int, page_size: int = 1) -> CommitPlan:
    """Plan the commit of one request.

    Args:
        out_cache_loc: the request's verify block: KV slot of node ``k`` (int), length ``D`` or the
            capacity ``C``; entries equal to :data:`PADDING_SLOT` (nodes ``D..C-1``) are absent.
        seq_len: tokens in the request's KV cache before this round's tree; the root is written at it.
        page_size: KV page size (1 = the in-place commit; > 1 the compacting one).

    Raises:
        CaseError: a path node outside the block or on a padding slot; page_size < 1.
    """
    if page_size < 1:
        raise CaseError("page_size", page_size, "integer >= 1", "out of range")
    block = [int(s) for s in out_cache_loc]
    nodes = [n for n, s in enumerate(block) if s != PADDING_SLOT]
    if any(n not in nodes for n in result.path):
        raise CaseError("path", result.path, f"nodes of the block {nodes}", "on a padding slot or outside the block")
    kept = tuple(block[n] for n in result.path)
    front = tuple(block[n] for n in nodes[:len(kept)])
    committed = kept if page_size == 1 else front
    freed = tuple(block[n] for n in nodes if block[n] not in committed)
    new_seq_len = seq_len + len(kept)
    boundary = release_boundary(new_seq_len, page_size)
    released = freed if page_size == 1 else tuple(block[n] for n in nodes if seq_len + n >= boundary)
    retained = tuple(s for s in freed if s not in released)
    writes = tuple((seq_len + i, slot) for i, slot in enumerate(committed))
    return CommitPlan(kept, front, committed, freed, released, retained, len(kept), writes, new_seq_len,
                      result.bonus_token, page_size)
