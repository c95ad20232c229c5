"""Deliberately wrong ``verify_tree_greedy`` backends (test-only), proving each check can fail.

Each wraps the oracle backend and breaks one thing. Use with ``--ddtree-backend
ddtree_compat.mutants:ZeroAccept`` etc. Expected outcomes: ``ZeroAccept`` -> ``zero-accept``;
``SkipsPredicts``, ``WritesTail``, ``OutOfBounds``, ``OffByOne`` -> ``wrong``; ``Raises`` -> ``fault``
(illegal-instruction, sticky: the xdist worker is replaced); ``RaisesOOM`` -> ``fault``
(out-of-memory, not sticky); ``Aborts`` -> ``fault`` (other: the process died); ``Hangs`` -> ``fault``
(hang, with ``--timeout``); ``Slow`` -> ``pass``, slowly. They run on the CPU; the GPU fault injectors
are in :mod:`ddtree_compat.faultinject`. ``CommitMutant`` breaks each commit kernel;
``WritesPastCommit`` writes past the kept slots (caught in the verify + commit graph sequence).
``OversizedSmem`` verifies correctly but declares a planted static kernel: its static cells are
``out of resources`` on the 99 KB-per-block archs (sm120) and pass on sm90. The ``Attention*`` mutants
break one thing of ``verify_attention`` each (all -> ``wrong`` on a case where that thing matters).
"""

from __future__ import annotations

import torch

from .backends import with_static
from .backends.oracle import OracleBackend
from .kernels.verify import VERIFY
from .static.kernels import Spec, TritonKernel


class ZeroAccept(OracleBackend):
    """Accepts nothing: the root's target as bonus, ``accept_token_num = 0`` (the field symptom)."""

    name = "mutant-zero-accept"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        bs, cap = candidates.shape
        for b in range(bs):
            root = int(retrive_index[b, 0])
            accept_index[b, 0] = root
            predicts[root] = target_predict.flatten()[root].to(predicts.dtype)
        accept_token_num.zero_()


class SkipsPredicts(OracleBackend):
    """Correct walk, but never writes ``predicts`` (an unwritten output: the poison shows)."""

    name = "mutant-skips-predicts"

    def verify_tree_greedy(self, predicts, *args) -> None:
        scratch = predicts.clone()
        super().verify_tree_greedy(scratch, *args)


class WritesTail(OracleBackend):
    """Correct, then fills ``accept_index`` past the accepted path with -1 (writes the contract forbids)."""

    name = "mutant-writes-tail"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, *args) -> None:
        super().verify_tree_greedy(predicts, accept_index, accept_token_num, *args)
        for b in range(accept_index.shape[0]):
            accept_index[b, int(accept_token_num[b]) + 1:] = -1


class OutOfBounds(OracleBackend):
    """Correct, then writes one element past the end of ``accept_token_num`` (a canary catches it)."""

    name = "mutant-out-of-bounds"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, *args) -> None:
        super().verify_tree_greedy(predicts, accept_index, accept_token_num, *args)
        flat = torch.as_strided(accept_token_num, (accept_token_num.numel() + 1,), (1,))
        flat[-1] = 0


class OffByOne(OracleBackend):
    """Reports one accepted draft too many."""

    name = "mutant-off-by-one"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, *args) -> None:
        super().verify_tree_greedy(predicts, accept_index, accept_token_num, *args)
        accept_token_num += 1


class Raises(OracleBackend):
    """Raises a CUDA-style error (classified ``illegal-instruction``)."""

    name = "mutant-raises"

    def verify_tree_greedy(self, *args) -> None:
        raise RuntimeError("CUDA error: an illegal instruction was encountered")


class RaisesOOM(OracleBackend):
    """Raises an out-of-memory error: a fault, but not sticky (the worker goes on)."""

    name = "mutant-oom"

    def verify_tree_greedy(self, *args) -> None:
        raise RuntimeError("CUDA out of memory. Tried to allocate 16.00 TiB")


class Aborts(OracleBackend):
    """Kills its own process (SIGABRT), as a crashing native library would: the controller records it."""

    name = "mutant-aborts"

    def verify_tree_greedy(self, *args) -> None:
        import os

        os.abort()


class Hangs(OracleBackend):
    """Never returns (a kernel spinning forever): the per-case timeout kills the worker; class ``hang``."""

    name = "mutant-hangs"

    def verify_tree_greedy(self, *args) -> None:
        import time

        while True:
            time.sleep(1)


class Slow(OracleBackend):
    """Correct but takes 0.3 s a cell: for killing a run midway and resuming it."""

    name = "mutant-slow"

    def verify_tree_greedy(self, *args) -> None:
        import time

        time.sleep(0.3)
        super().verify_tree_greedy(*args)


class CommitMutant(OracleBackend):
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



def _blocks(qo_indptr, kv_indptr, mask_indptr):
    """Per request: ``(rows n, prefix P, mask offset)``."""
    qo, kv, mi = qo_indptr.tolist(), kv_indptr.tolist(), mask_indptr.tolist()
    return [(qo[b + 1] - qo[b], kv[b + 1] - kv[b], mi[b]) for b in range(len(qo) - 1)]


class _TreeMaskMutant(OracleBackend):
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


class AttentionMisreadsPrefixToken(OracleBackend):
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


class AttentionWrongKVHead(OracleBackend):
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


class AttentionWritesPastRows(OracleBackend):
    """Correct, then writes zeros into the output rows past ``qo_indptr[-1]`` (``tail`` layouts)."""

    name = "mutant-attention-writes-past-rows"

    def verify_attention(self, q, k, v, o, *args, **kwargs) -> None:
        super().verify_attention(q, k, v, o, *args, **kwargs)
        o[int(args[2][-1]):] = 0


class WritesPastCommit(OracleBackend):
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


def _oversized_spec(case, arch: str) -> Spec:
    return Spec("bm128-bn128-bk128-s4", (("BM", 128), ("BN", 128), ("BK", 128)), num_warps=8, num_stages=4)


class OversizedSmem(OracleBackend):
    """Correct verify, plus a planted static kernel (:mod:`ddtree_compat.static.planted`) whose shared
    memory (128 KB on sm120, 160 KB on sm90) fits sm90's 227 KB per block but not sm120's 99 KB: its
    static cells are ``out of resources`` on sm86/sm89/sm120/sm121 and pass elsewhere."""

    name = "mutant-oversized-smem"
    PLANTED = TritonKernel(kernel="oversized_smem_kernel", fn="ddtree_compat.static.planted:oversized_smem_kernel",
                           signature=(("a_ptr", "*fp16"), ("b_ptr", "*fp16"), ("c_ptr", "*fp32"), ("K", "i32")),
                           specialize=_oversized_spec)
    implements = with_static(OracleBackend.implements, VERIFY, (PLANTED,))
