"""The ``oracle`` backend: :func:`ddtree_compat.oracle.verify_greedy_eagle` run over the kernel buffers.

Pure PyTorch/Python on any device (tensors are read to the host, results written back). It follows the
EAGLE retrieve links rather than the parent array the tree-level oracle walks, so its cell checks the
layout and the harness end to end; it is the reference every kernel column is read against.
"""

from __future__ import annotations

import torch

from ..oracle import verify_attention_reference, verify_greedy_eagle
from ..tiers import Target


class OracleBackend:
    name = "oracle"
    graph_capturable = False  # reads tensors back to the host: cannot run inside a CUDA graph capture

    def unavailable_reason(self, target: Target) -> str | None:
        if target.fake:
            return f"{target.arch} is a DDTREE_FAKE_GPUS entry: no device to run on"
        return None

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
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
        kept = [int(out_cache_loc[i]) for i in accept_index.tolist() if i != -1]
        accept_out_cache_loc[: len(kept)] = torch.tensor(kept, dtype=accept_out_cache_loc.dtype)

    def front_out_cache_loc(self, num_front, out_cache_loc, front_out_cache_loc) -> None:
        blocks = out_cache_loc.view(num_front.numel(), -1)
        offset = 0
        for b, n in enumerate(num_front.tolist()):
            front_out_cache_loc[offset:offset + n] = blocks[b, :n]
            offset += n

    def commit_outputs(self, predict, accept_index, accept_lens, seq_lens):
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
        """Per request: rows ``qo_indptr[b]..``, prefix keys ``k_buffer[kv_indices[kv_indptr[b]..]]`` (a slot
        index is the same row at any page size), mask block ``custom_mask[mask_indptr[b]..]`` viewed
        ``[n, P + n]`` with the prefix columns taken as visible (SGLang's ``skip_prefix_custom_mask``),
        then :func:`~ddtree_compat.oracle.verify_attention_reference`. Tile choice: none (``tiles`` ignored)."""
        qo, kv, mi = qo_indptr.tolist(), kv_indptr.tolist(), mask_indptr.tolist()
        for b in range(len(qo) - 1):
            rows, prefix = slice(qo[b], qo[b + 1]), kv[b + 1] - kv[b]
            n = qo[b + 1] - qo[b]
            slots = kv_indices[kv[b]:kv[b + 1]]
            keys = torch.cat([k_buffer[slots], k[rows]])
            values = torch.cat([v_buffer[slots], v[rows]])
            visible = custom_mask[mi[b]:mi[b] + n * (prefix + n)].view(n, prefix + n).to(torch.bool).clone()
            visible[:, :prefix] = True
            o[rows] = verify_attention_reference(q[rows], keys, values, visible, sm_scale).to(o.dtype)
