"""The verify-attention family's reference column: attention under the tree mask stated a second time, as a
float64 per-row softmax read back through the layout's indirections (page table, ``kv_indices``, the packed
mask), apart from the float32 reference the checks judge against (:mod:`.oracle`). torch on the host, for any
real target (never inside a CUDA graph). The ``oracle`` backend (:mod:`ddtree_compat.backends.oracle_column`) composes
it; the broken variants (:mod:`.variants`) break it."""

from __future__ import annotations

from ...contract import Backend, KernelImpl
from ..verify.reference import HOST
from .records import CASCADE_KERNEL, GRAPH_KERNEL, KERNEL


class AttentionReference(Backend):
    """``verify_attention`` and its graph and cascade forms, in float64 (see the module docstring)."""

    name = "attention-reference"
    implements = tuple(KernelImpl(k, "host", what=HOST) for k in (KERNEL, GRAPH_KERNEL, CASCADE_KERNEL))

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
