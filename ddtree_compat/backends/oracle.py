"""The ``oracle`` backend: the kernel contracts written out in plain Python over the kernel buffers.

Runs on the host for any real target (tensors are read back, results written back: never inside a
CUDA graph). Each method is a second, independent statement of its kernel, not the reference the
judge holds: verify walks the EAGLE retrieve links in the buffers
(:func:`ddtree_compat.families.verify.oracle.verify_greedy_eagle`) where the expected outputs walk the parent array;
the commit kernels are loops over the buffers, apart from the oracle's commit plan; verify attention
is a float64 per-row softmax over the layout's indirections, apart from the judge's float32 reference.
So the ``oracle`` column checks the layout and the harness end to end.

torch is imported inside the methods: the CLI and pytest's xdist controller load every adapter and run none,
and importing torch was most of their start (~1.5 s on the H200, ~3.7 s on a 2-core box).
"""

from __future__ import annotations

import math

from ..families.attention.records import CASCADE_KERNEL, GRAPH_KERNEL, KERNEL as VERIFY_ATTENTION
from ..families.commit.records import KERNELS as COMMIT_KERNELS
from ..families.verify.records import VERIFY
from ..families.verify.oracle import verify_greedy_eagle
from . import Backend, KernelImpl


class OracleBackend(Backend):
    name = "oracle"
    implements = tuple(KernelImpl(k, "host", what="the oracle (Python on the host)")
                       for k in (VERIFY, *COMMIT_KERNELS, VERIFY_ATTENTION, GRAPH_KERNEL, CASCADE_KERNEL))

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        import torch
        out = verify_greedy_eagle(candidates.tolist(), retrive_index.tolist(), retrive_next_token.tolist(),
                                  retrive_next_sibling.tolist(), target_predict.tolist(), accept_index.shape[1])
        for i, v in enumerate(out.predicts):
            if v is not None:
                predicts[i] = v
        for b, row in enumerate(out.accept_index):
            for j, v in enumerate(row):
                if v is not None:
                    accept_index[b, j] = v
        accept_token_num.copy_(torch.tensor(out.accept_token_num, dtype=accept_token_num.dtype))

    # ---- commit kernels (see ddtree_compat.commit): plain loops, written apart from the oracle's plan

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

    # ---- verify attention (see ddtree_compat.attention): read back through the layout's indirections

    def verify_attention(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                         mask_indptr, max_len_extend, sm_scale, page_size, tiles="native") -> None:
        """Per request ``b``: rows ``qo_indptr[b]..``, prefix keys ``k_buffer[kv_indices[kv_indptr[b]..]]``
        (a slot index is the same row at any page size), mask block ``custom_mask[mask_indptr[b]..]``
        read ``[n, P + n]`` with the prefix columns taken as visible (SGLang's ``skip_prefix_custom_mask``);
        then, per row and query head ``h`` (KV head ``h // G``), a float64 softmax over the visible keys
        only (max-subtracted) and its weighted sum of values. Tile choice: none (``tiles`` ignored)."""
        import torch
        qo, kv, mi = qo_indptr.tolist(), kv_indptr.tolist(), mask_indptr.tolist()
        group = q.shape[1] // k.shape[1]
        for b in range(len(qo) - 1):
            first, n, prefix = qo[b], qo[b + 1] - qo[b], kv[b + 1] - kv[b]
            slots = kv_indices[kv[b]:kv[b + 1]]
            keys = torch.cat([k_buffer[slots], k[first:first + n]]).double().repeat_interleave(group, dim=1)
            values = torch.cat([v_buffer[slots], v[first:first + n]]).double().repeat_interleave(group, dim=1)
            block = custom_mask[mi[b]:mi[b] + n * (prefix + n)].view(n, prefix + n).cpu()
            for i in range(n):
                seen = [j for j in range(prefix, prefix + n) if bool(block[i, j])]
                index = torch.tensor([*range(prefix), *seen], device=keys.device)
                logits = torch.einsum("hd,thd->ht", q[first + i].double(), keys[index]) * sm_scale  # [H, seen]
                weights = torch.exp(logits - logits.max(dim=1, keepdim=True).values)
                o[first + i] = (torch.einsum("ht,thd->hd", weights, values[index]) / weights.sum(dim=1)[:, None]).to(o.dtype)

    def verify_attention_graph(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                               mask_indptr, max_len_extend, sm_scale, page_size, capacity, captured_batch) -> None:
        """The graph's contract: a replay at the live layout gives what one eager call at that layout gives
        (no graph on the host: :meth:`verify_attention`)."""
        self.verify_attention(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                              mask_indptr, max_len_extend, sm_scale, page_size)

    def verify_attention_cascade(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                                 mask_indptr, max_len_extend, sm_scale, page_size) -> None:
        """The cascade's contract: two passes merged by their log-sum-exp give the one-pass attention
        (:meth:`verify_attention`)."""
        self.verify_attention(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                              mask_indptr, max_len_extend, sm_scale, page_size)
