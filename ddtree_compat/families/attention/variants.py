"""Deliberately wrong ``verify_attention`` backends (test-only): each breaks one thing (all -> ``wrong`` on a
case where that thing matters), wrapping the family's reference float64 attention (:class:`.reference.AttentionReference`)."""

from __future__ import annotations

import torch

from .reference import AttentionReference


def _blocks(qo_indptr, kv_indptr, mask_indptr):
    """Per request: ``(rows n, prefix P, mask offset)``."""
    qo, kv, mi = qo_indptr.tolist(), kv_indptr.tolist(), mask_indptr.tolist()
    return [(qo[b + 1] - qo[b], kv[b + 1] - kv[b], mi[b]) for b in range(len(qo) - 1)]


class _TreeMaskMutant(AttentionReference):
    """Runs the oracle's verify attention with each request's tree block of the mask (the last ``n``
    columns of its ``n x (P + n)`` rows) replaced by :meth:`tree_block`."""

    def tree_block(self, old: torch.Tensor) -> torch.Tensor:
        """The replacement for ``old``, one request's ``[n, n]`` tree block (the mask's dtype, 1 = visible)."""
        raise NotImplementedError

    def verify_attention(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                         mask_indptr, *args, **kwargs) -> None:
        mask = custom_mask.clone()
        for n, prefix, at in _blocks(qo_indptr, kv_indptr, mask_indptr):
            block = mask[at:at + n * (prefix + n)].view(n, prefix + n)
            block[:, prefix:] = self.tree_block(block[:, prefix:])
        super().verify_attention(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, mask,
                                 mask_indptr, *args, **kwargs)


class AttentionCausal(_TreeMaskMutant):
    """Ignores the tree: every row sees all earlier rows (a causal mask), not only its ancestors."""

    name = "mutant-attention-causal"

    def tree_block(self, old: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(old, dtype=torch.bool).tril().to(old.dtype)


class AttentionMisreadsPrefixToken(AttentionReference):
    """Reads one prefix token of each request from the wrong slot (its last token's KV is its first's)."""

    name = "mutant-attention-misreads-prefix-token"

    def verify_attention(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, *args,
                         **kwargs) -> None:
        indices = kv_indices.clone()
        kv = kv_indptr.tolist()
        for b in range(len(kv) - 1):
            if kv[b + 1] - kv[b] >= 2:
                indices[kv[b + 1] - 1] = indices[kv[b]]
        super().verify_attention(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, indices, *args, **kwargs)


class AttentionWrongKVHead(AttentionReference):
    """Query head ``h`` reads KV head ``(h // G + 1) % Hk`` (a GQA mapping off by one; no effect when Hk = 1)."""

    name = "mutant-attention-wrong-kv-head"

    def verify_attention(self, q, k, v, o, k_buffer, v_buffer, *args, **kwargs) -> None:
        roll = [t.roll(-1, dims=1) for t in (k, v, k_buffer, v_buffer)]
        super().verify_attention(q, *roll[:2], o, *roll[2:], *args, **kwargs)


class AttentionSeesAll(_TreeMaskMutant):
    """Every row sees every tree row of its request: later nodes, siblings' subtrees and padding nodes too."""

    name = "mutant-attention-sees-all"

    def tree_block(self, old: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(old)


class AttentionWritesPastRows(AttentionReference):
    """Correct, then writes zeros into the output rows past ``qo_indptr[-1]`` (``tail`` layouts)."""

    name = "mutant-attention-writes-past-rows"

    def verify_attention(self, q, k, v, o, *args, **kwargs) -> None:
        super().verify_attention(q, k, v, o, *args, **kwargs)
        o[int(args[2][-1]):] = 0
