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


# --------------------------------------------------------------------------------------------------
# DDTree implementations' kernels (ddtree_compat.kernels.ddtree): a reference written from the oracle,
# runnable on any tier, and one wrong variant per check
# --------------------------------------------------------------------------------------------------


class DDTreeReference:
    """Every DDTree record's contract, computed from :mod:`ddtree_compat.oracle_ddtree` and written with
    torch (any device, any tier). Test-only: its column must pass every DDTree check, and each subclass
    below breaks one thing that check must catch."""

    name = "mutant-ddtree-reference"

    @property
    def implements(self):
        from .backends import Implementation
        from .kernels.ddtree import KERNELS

        return tuple(Implementation(k, "torch", what="the DDTree reference (test-only)") for k in KERNELS)

    @staticmethod
    def _tops(top_log_probs, top_token_ids):
        return top_log_probs.cpu().double().tolist(), top_token_ids.cpu().tolist()

    def _trees(self, top_log_probs, top_token_ids, budget, rule):
        from .oracle_ddtree import build

        lp, ids = self._tops(top_log_probs, top_token_ids)
        return [build(lp[b], ids[b], budget, rule) for b in range(len(lp))]

    @staticmethod
    def _write(out, values) -> None:
        out.copy_(torch.as_tensor(values, dtype=out.dtype).to(out.device))

    def _write_arrays(self, arrs, out_tokens, out_depths, out_parents, out_visibility, out_sizes) -> None:
        self._write(out_tokens, [a.tokens for a in arrs])
        self._write(out_depths, [a.depths for a in arrs])
        self._write(out_parents, [a.parents for a in arrs])
        self._write(out_visibility, [a.visibility for a in arrs])
        self._write(out_sizes, [a.size for a in arrs])

    def ddtree_build(self, top_log_probs, top_token_ids, budget, out_tokens, out_depths, out_parents, out_visibility,
                     out_sizes) -> None:
        from .oracle_ddtree import KERNEL_RULE, arrays

        arrs = [arrays(t, budget) for t in self._trees(top_log_probs, top_token_ids, budget, KERNEL_RULE)]
        self._write_arrays(arrs, out_tokens, out_depths, out_parents, out_visibility, out_sizes)

    def ddtree_build_cpu(self, top_log_probs, top_token_ids, budget, prune):
        from .oracle_ddtree import CPU_RULE, arrays, prune_deepest_chains

        trees = self._trees(top_log_probs, top_token_ids, budget, CPU_RULE)
        arrs = [arrays(prune_deepest_chains(t)[0] if prune else t, budget) for t in trees]
        return (torch.tensor([a.tokens for a in arrs]), torch.tensor([a.depths for a in arrs]),
                torch.tensor([a.parents for a in arrs]), torch.tensor([a.visibility for a in arrs]),
                torch.tensor([a.size for a in arrs]))

    def ddtree_prune(self, in_tokens, in_depths, in_parents, in_visibility, out_tokens, out_depths, out_parents,
                     out_visibility, out_sizes, budget) -> None:
        from .oracle_ddtree import BuiltTree, arrays, prune_deepest_chains

        arrs = [arrays(prune_deepest_chains(BuiltTree(tuple(t), tuple(d), tuple(p)))[0], budget, "identity")
                for t, d, p in zip(in_tokens.tolist(), in_depths.tolist(), in_parents.tolist())]
        self._write_arrays(arrs, out_tokens, out_depths, out_parents, out_visibility, out_sizes)

    def _compiled(self, root, tokens, depths, visibility, start, past, sizes, q):
        from .oracle_ddtree import TreeArrays, compile_inputs, packed_mask

        ids, pos, mask = [], [], []
        for b in range(root.numel()):
            a = TreeArrays(tuple(tokens[b].tolist()), tuple(depths[b].tolist()), (), visibility[b].tolist(),
                           int(sizes[b]))
            i, p = compile_inputs(int(root[b]), a, int(start[b]), q)
            ids.append(i)
            pos.append(p)
            mask += packed_mask(a.visibility, a.size, int(past[b]), q)
        return ids, pos, mask

    def ddtree_compile(self, root, tokens, depths, visibility, start, past, sizes, out_ids, out_positions, out_mask,
                       q, max_kv_len) -> None:
        from .oracle_ddtree import padded_visibility

        ids, pos, mask = self._compiled(root, tokens, depths, visibility, start, past, sizes, q)
        self._write(out_ids, [x for row in ids for x in row])
        self._write(out_positions, [x for row in pos for x in row])
        if out_mask is not None:
            self._write(out_mask, mask)
        else:
            for b in range(root.numel()):
                visibility[b, :q, :q] = torch.tensor(padded_visibility(visibility[b].tolist(), int(sizes[b]), q))

    def ddtree_compile_cpu(self, root, tokens, depths, visibility, start, past, sizes, q, build_mask):
        ids, pos, mask = self._compiled(root, tokens, depths, visibility, start, past, sizes, q)
        return torch.tensor(ids), torch.tensor(pos), torch.tensor(mask) if build_mask else None

    def ddtree_fa_suffix(self, visibility, req_to_token, req_pool_indices, seq_lens, page_table, cache_seqlens,
                         q) -> None:
        from .oracle_ddtree import fa_suffix_row

        for b in range(seq_lens.numel()):
            seq, row = int(seq_lens[b]), int(req_pool_indices[b])
            slots = req_to_token[row, seq:seq + q].tolist()
            for i in range(q):
                entries, n = fa_suffix_row(visibility[b, i].tolist(), slots, q)
                self._write(page_table[b * q + i], entries)
                cache_seqlens[b * q + i] = n

    def ddtree_fa_full(self, visibility, req_to_token, req_pool_indices, seq_lens, page_table, cache_seqlens,
                       q) -> None:
        from .oracle_ddtree import fa_full_row

        for b in range(seq_lens.numel()):
            seq, row = int(seq_lens[b]), int(req_pool_indices[b])
            prefix, slots = req_to_token[row, :seq].tolist(), req_to_token[row, seq:seq + q].tolist()
            for i in range(q):
                entries, n = fa_full_row(visibility[b, i].tolist(), prefix, slots, q)
                self._write(page_table[b * q + i, :n], entries)
                cache_seqlens[b * q + i] = n

    def _followed(self, draft, target, parents, sizes, cap=True):
        from .oracle_ddtree import follow

        q = draft.shape[1]
        return [follow(d, t, p, int(s), q, cap) for d, t, p, s in
                zip(draft.tolist(), target.tolist(), parents.tolist(), sizes.tolist())]

    def _write_followed(self, got, q, out_indices, out_tokens, out_lens, out_next) -> None:
        self._write(out_indices, [list(f.indices) + [-1] * (q - len(f.indices)) for f in got])
        self._write(out_tokens, [list(f.tokens) + [0] * (q - len(f.tokens)) for f in got])
        self._write(out_lens, [len(f.indices) for f in got])
        self._write(out_next, [f.next_token for f in got])

    def ddtree_follow(self, draft, target, parents, sizes, out_indices, out_tokens, out_lens, out_next) -> None:
        self._write_followed(self._followed(draft, target, parents, sizes), draft.shape[1], out_indices, out_tokens,
                             out_lens, out_next)

    def ddtree_follow_cpu(self, draft, target, parents, sizes):
        got = self._followed(draft, target, parents, sizes, cap=False)
        return [list(f.indices) for f in got], [f.next_token for f in got]

    def ddtree_sample(self, target_probs, draft, parents, sizes, out_indices, out_tokens, out_lens, out_next) -> None:
        target = target_probs.argmax(dim=-1)  # one-hot probabilities: the target's token
        self.ddtree_follow(draft, target, parents, sizes, out_indices, out_tokens, out_lens, out_next)

    def ddtree_eagle_links(self, top_log_probs, top_token_ids, budget):
        from .oracle_ddtree import CPU_RULE, eagle_links_reverse

        rows = [eagle_links_reverse(t.parents) for t in self._trees(top_log_probs, top_token_ids, budget, CPU_RULE)]
        pad = lambda r: (list(r) + [-1] * (budget + 1))[:budget + 1]  # noqa: E731
        return torch.tensor([pad(n) for n, _ in rows]), torch.tensor([pad(s) for _, s in rows])

    def ddtree_graph_buckets(self, budget, prune, configured):
        from .oracle_ddtree import graph_buckets, select_bucket

        buckets = graph_buckets(budget, prune, configured)
        return buckets, {s: select_bucket(s, buckets) for s in range(budget + 3)}


class DDTreeBreaks(DDTreeReference):
    """One wrong thing per DDTree check (each must make that kernel's cells ``wrong``): the build's last
    node on the wrong parent; the CPU build unpruned; the prune keeping every node; positions one past;
    the packed mask's padding rows seeing the prefix; FA rows at stride ``q`` whatever the table's width
    (the implementations' own hazard); the follow's rows at stride ``q``; sampling's bonus token off by one;
    EAGLE links in insertion order; the bucket ladder without ``B + 1``."""

    name = "mutant-ddtree-breaks"

    def ddtree_build(self, *args) -> None:
        super().ddtree_build(*args)
        out_parents = args[5]
        if out_parents.shape[1] > 2:
            out_parents[:, -1] = 0 if int(out_parents[0, -1]) != 0 else 1

    def ddtree_build_cpu(self, top_log_probs, top_token_ids, budget, prune):
        got = super().ddtree_build_cpu(top_log_probs, top_token_ids, budget, False)
        if prune or budget < 2:
            return got
        got[1][:, 0] += 1  # depth of node 1 one too deep
        return got

    def ddtree_prune(self, in_tokens, in_depths, in_parents, in_visibility, out_tokens, out_depths, out_parents,
                     out_visibility, out_sizes, budget) -> None:
        out_tokens.copy_(in_tokens)
        out_depths.copy_(in_depths)
        out_parents.copy_(in_parents)
        out_visibility.copy_(in_visibility)
        out_sizes.fill_(budget + 1)

    def ddtree_compile(self, root, tokens, depths, visibility, start, past, sizes, out_ids, out_positions, out_mask,
                       q, max_kv_len) -> None:
        super().ddtree_compile(root, tokens, depths, visibility, start, past, sizes, out_ids, out_positions, out_mask,
                               q, max_kv_len)
        out_positions += 1

    def ddtree_compile_cpu(self, root, tokens, depths, visibility, start, past, sizes, q, build_mask):
        ids, pos, mask = super().ddtree_compile_cpu(root, tokens, depths, visibility, start, past, sizes, q, build_mask)
        return ids, pos, None if mask is None else torch.ones_like(mask)

    def ddtree_fa_suffix(self, visibility, req_to_token, req_pool_indices, seq_lens, page_table, cache_seqlens,
                         q) -> None:
        flat = torch.as_strided(page_table, (page_table.shape[0], q), (q, 1))  # rows at stride q, not the table's
        super().ddtree_fa_suffix(visibility, req_to_token, req_pool_indices, seq_lens, flat, cache_seqlens, q)
        if page_table.stride(0) == q:
            cache_seqlens += 1

    def ddtree_fa_full(self, visibility, req_to_token, req_pool_indices, seq_lens, page_table, cache_seqlens,
                       q) -> None:
        super().ddtree_fa_full(visibility, req_to_token, req_pool_indices, seq_lens, page_table, cache_seqlens, q)
        cache_seqlens -= 1

    def ddtree_follow(self, draft, target, parents, sizes, out_indices, out_tokens, out_lens, out_next) -> None:
        q = draft.shape[1]
        flat = [torch.as_strided(t, (t.shape[0], q), (q, 1)) for t in (out_indices, out_tokens)]
        super().ddtree_follow(draft, target, parents, sizes, *flat, out_lens, out_next)
        if out_indices.stride(0) == q:
            out_lens += 1

    def ddtree_follow_cpu(self, draft, target, parents, sizes):
        paths, nexts = super().ddtree_follow_cpu(draft, target, parents, sizes)
        return [p[:1] for p in paths], nexts

    def ddtree_sample(self, target_probs, draft, parents, sizes, out_indices, out_tokens, out_lens, out_next) -> None:
        super().ddtree_sample(target_probs, draft, parents, sizes, out_indices, out_tokens, out_lens, out_next)
        out_next += 1

    def ddtree_eagle_links(self, top_log_probs, top_token_ids, budget):
        from .oracle import to_eagle
        from .oracle_ddtree import CPU_RULE
        from .tree import DraftTree

        rows = []
        for t in self._trees(top_log_probs, top_token_ids, budget, CPU_RULE):
            e = to_eagle(DraftTree(t.parents, (0, *t.tokens)))  # ascending (insertion) order, not reversed
            rows.append((list(e.retrive_next_token), list(e.retrive_next_sibling)))
        pad = lambda r: (list(r) + [-1] * (budget + 1))[:budget + 1]  # noqa: E731
        return torch.tensor([pad(n) for n, _ in rows]), torch.tensor([pad(s) for _, s in rows])

    def ddtree_graph_buckets(self, budget, prune, configured):
        buckets, chosen = super().ddtree_graph_buckets(budget, prune, configured)
        return buckets[:-1] or buckets, chosen
