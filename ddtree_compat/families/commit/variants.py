"""Deliberately wrong commit backends (test-only), each wrapping the family's reference
(:class:`.reference.CommitReference`): each commit check must call them ``wrong``.
``CommitMutant`` breaks each commit kernel; ``WritesPastCommit`` writes past the kept slots (caught in the
verify + commit graph sequence, :mod:`.graphs`)."""

from __future__ import annotations

import torch

from ..verify.reference import VerifyReference
from .reference import CommitReference


class _Round(CommitReference, VerifyReference):
    """The reference's verify and commit kernels (a commit check's round, the verify + commit graph)."""

    implements = VerifyReference.implements + CommitReference.implements


class CommitMutant(_Round):
    """Wrong commit kernels: skips the last kept slot, takes the front slots from node 1 on (drops the
    root's slot), forgets the V pools, writes one position too many into ``req_to_token``, advances
    ``seq_lens`` by one too few, and takes the bonus from the first accepted token."""

    name = "mutant-commit"

    def accept_out_cache_loc(self, accept_index, out_cache_loc, accept_out_cache_loc) -> None:
        super().accept_out_cache_loc(accept_index, out_cache_loc, accept_out_cache_loc)
        accept_out_cache_loc[-1:] = -1

    def front_out_cache_loc(self, num_front, out_cache_loc, front_out_cache_loc) -> None:
        blocks = out_cache_loc.view(num_front.numel(), -1)
        super().front_out_cache_loc(num_front, blocks[:, 1:].flatten(), front_out_cache_loc)

    def move_kv(self, k_buffers, v_buffers, tgt_loc, src_loc) -> None:
        super().move_kv(k_buffers, [], tgt_loc, src_loc)

    def assign_req_to_token(self, req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc) -> None:
        super().assign_req_to_token(req_pool_indices, req_to_token, start_offset, end_offset + 1,
                                    torch.cat([out_cache_loc, out_cache_loc[-1:]]))

    def bonus_tokens(self, accept_tokens, accept_lens, bonus, accept_stride) -> None:
        super().bonus_tokens(accept_tokens, torch.ones_like(accept_lens), bonus, accept_stride)

    def commit_outputs(self, predict, accept_index, accept_lens, seq_lens):
        new_seq_lens, bonus = super().commit_outputs(predict, accept_index, accept_lens, seq_lens)
        return new_seq_lens - 1, bonus


class WritesPastCommit(_Round):
    """Correct commit, but ``fill_accept_out_cache_loc`` also copies the slot one node past each request's
    accepted path into the entry after the kept list (a kernel that walks the capacity ``C`` instead of
    the path): a write past what the oracle says may change, the padded-layout class."""

    name = "mutant-writes-past-commit"

    def accept_out_cache_loc(self, accept_index, out_cache_loc, accept_out_cache_loc) -> None:
        super().accept_out_cache_loc(accept_index, out_cache_loc, accept_out_cache_loc)
        valid = (accept_index != -1).nonzero().flatten()
        past = min(int(accept_index[valid[-1]]) + 1, out_cache_loc.numel() - 1)
        if valid.numel() < accept_out_cache_loc.numel():
            accept_out_cache_loc[valid.numel()] = out_cache_loc[past]
