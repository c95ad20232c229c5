"""The commit family's reference column: each commit kernel's contract stated a second time, as plain loops over
the kernel's own buffers, apart from the commit plan the checks judge against (:func:`.oracle.commit_plan`; the
``move_kv`` pool is expected from the plan's front and kept slots, not from ``move_plan``, which makes the
kernel's inputs). Python and torch on the host, for any real target (never inside a CUDA graph). The ``oracle``
backend (:mod:`ddtree_compat.backends.oracle_column`) composes it; the broken variants (:mod:`.variants`) break it."""

from __future__ import annotations

from ...contract import Backend, KernelImpl
from ..verify.reference import HOST
from .records import KERNELS


class CommitReference(Backend):
    """The commit kernels as plain loops (see the module docstring)."""

    name = "commit-reference"
    implements = tuple(KernelImpl(k, "host", what=HOST) for k in KERNELS)

    def accept_out_cache_loc(self, accept_index, out_cache_loc, accept_out_cache_loc) -> None:
        import torch
        kept = [int(out_cache_loc[i]) for i in accept_index.tolist() if i != -1]
        accept_out_cache_loc[: len(kept)] = torch.tensor(kept, dtype=accept_out_cache_loc.dtype)

    def front_out_cache_loc(self, num_front, out_cache_loc, front_out_cache_loc) -> None:
        blocks = out_cache_loc.view(num_front.numel(), -1)
        offset = 0
        for b, n in enumerate(num_front.tolist()):
            front_out_cache_loc[offset:offset + n] = blocks[b, :n]
            offset += n

    def commit_outputs(self, predict, accept_index, accept_lens, seq_lens):
        import torch
        lens = accept_lens.tolist()
        bonus = [int(predict[int(accept_index[b, n - 1])]) for b, n in enumerate(lens)]
        return seq_lens + accept_lens.to(seq_lens.dtype), torch.tensor(bonus, dtype=torch.int32)

    def bonus_tokens(self, accept_tokens, accept_lens, bonus, accept_stride) -> None:
        for b, n in enumerate(accept_lens.tolist()):
            bonus[b] = accept_tokens[b * accept_stride + n - 1]

    def assign_req_to_token(self, req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc) -> None:
        offset = 0
        for row, s, e in zip(req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist()):
            req_to_token[row, s:e] = out_cache_loc[offset:offset + e - s].to(req_to_token.dtype)
            offset += e - s

    def move_kv(self, k_buffers, v_buffers, tgt_loc, src_loc) -> None:
        for buf in (*k_buffers, *v_buffers):
            rows = buf[src_loc].clone()  # read all, then write all
            buf[tgt_loc] = rows
