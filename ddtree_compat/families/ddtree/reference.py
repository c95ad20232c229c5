"""The DDTree family's correct reference backend (test-only): every record's contract written from the oracle,
runnable on any tier. The broken variants the checks must call ``wrong``: :mod:`.variants`."""

from __future__ import annotations

import torch


class DDTreeReference:
    """Every DDTree record's contract, computed from :mod:`.oracle` and written with torch (any device, any
    tier). Test-only: its column must pass every DDTree check; each broken variant
    (:mod:`.variants`) breaks one thing that check must catch."""

    name = "ddtree-reference"

    @property
    def implements(self):
        from ...contract import KernelImpl
        from ..ddtree.records import KERNELS

        return tuple(KernelImpl(k, "torch", what="the DDTree reference (test-only)") for k in KERNELS)

    @staticmethod
    def _tops(top_log_probs, top_token_ids):
        return top_log_probs.cpu().double().tolist(), top_token_ids.cpu().tolist()

    def _trees(self, top_log_probs, top_token_ids, budget, rule):
        from .oracle import build

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
        from .oracle import KERNEL_RULE, arrays

        arrs = [arrays(t, budget) for t in self._trees(top_log_probs, top_token_ids, budget, KERNEL_RULE)]
        self._write_arrays(arrs, out_tokens, out_depths, out_parents, out_visibility, out_sizes)

    def ddtree_build_cpu(self, top_log_probs, top_token_ids, budget, prune):
        from .oracle import CPU_RULE, arrays, prune_deepest_chains

        trees = self._trees(top_log_probs, top_token_ids, budget, CPU_RULE)
        arrs = [arrays(prune_deepest_chains(t)[0] if prune else t, budget) for t in trees]
        return (torch.tensor([a.tokens for a in arrs]), torch.tensor([a.depths for a in arrs]),
                torch.tensor([a.parents for a in arrs]), torch.tensor([a.visibility for a in arrs]),
                torch.tensor([a.size for a in arrs]))

    def ddtree_prune(self, in_tokens, in_depths, in_parents, in_visibility, out_tokens, out_depths, out_parents,
                     out_visibility, out_sizes, budget) -> None:
        from .oracle import BuiltTree, arrays, prune_deepest_chains

        arrs = [arrays(prune_deepest_chains(BuiltTree(tuple(t), tuple(d), tuple(p)))[0], budget, "identity")
                for t, d, p in zip(in_tokens.tolist(), in_depths.tolist(), in_parents.tolist())]
        self._write_arrays(arrs, out_tokens, out_depths, out_parents, out_visibility, out_sizes)

    def _compiled(self, root, tokens, depths, visibility, start, past, sizes, q):
        from .oracle import TreeArrays, compile_inputs, packed_mask

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
        from .oracle import padded_visibility

        ids, pos, mask = self._compiled(root, tokens, depths, visibility, start, past, sizes, q)
        self._write(out_ids, [x for row in ids for x in row])
        self._write(out_positions, [x for row in pos for x in row])
        if out_mask is not None:
            self._write(out_mask, mask)
        else:
            for b in range(root.numel()):
                visibility[b, :q, :q] = torch.tensor(padded_visibility(visibility[b].tolist(), int(sizes[b]), q))

    def ddtree_compile_cpu(self, root, tokens, depths, visibility, start, past, sizes, q, build_mask):
        from .oracle import padded_visibility

        ids, pos, mask = self._compiled(root, tokens, depths, visibility, start, past, sizes, q)
        if not build_mask:  # the FlashAttention path: the padding rows of visibility to the identity, in place
            for b in range(root.numel()):
                visibility[b, :q, :q] = torch.tensor(padded_visibility(visibility[b].tolist(), int(sizes[b]), q))
        return torch.tensor(ids), torch.tensor(pos), torch.tensor(mask) if build_mask else None

    def ddtree_fa_suffix(self, visibility, req_to_token, req_pool_indices, seq_lens, page_table, cache_seqlens,
                         q) -> None:
        from .oracle import fa_suffix_row

        for b in range(seq_lens.numel()):
            seq, row = int(seq_lens[b]), int(req_pool_indices[b])
            slots = req_to_token[row, seq:seq + q].tolist()
            for i in range(q):
                entries, n = fa_suffix_row(visibility[b, i].tolist(), slots, q)
                self._write(page_table[b * q + i], entries)
                cache_seqlens[b * q + i] = n

    def ddtree_fa_full(self, visibility, req_to_token, req_pool_indices, seq_lens, page_table, cache_seqlens,
                       q) -> None:
        from .oracle import fa_full_row

        for b in range(seq_lens.numel()):
            seq, row = int(seq_lens[b]), int(req_pool_indices[b])
            prefix, slots = req_to_token[row, :seq].tolist(), req_to_token[row, seq:seq + q].tolist()
            for i in range(q):
                entries, n = fa_full_row(visibility[b, i].tolist(), prefix, slots, q)
                self._write(page_table[b * q + i, :n], entries)
                cache_seqlens[b * q + i] = n

    def _followed(self, draft, target, parents, sizes, cap=True):
        from .oracle import follow

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

    def ddtree_sample(self, target_probs, draft, parents, sizes, out_indices, out_tokens, out_lens, out_next, uniforms,
                      uniform_final) -> None:
        """The implementations' contract: fill the given uniform buffers from torch's generator (per-node
        uniforms, then the final ones), then walk (:func:`.oracle.sample_walk`)."""
        uniforms.uniform_()
        uniform_final.uniform_()
        self._write_followed(self._sampled(target_probs, draft, parents, sizes, uniforms, uniform_final), draft.shape[1],
                             out_indices, out_tokens, out_lens, out_next)

    def _sampled(self, target_probs, draft, parents, sizes, uniforms, uniform_final, walk=None):
        from .oracle import sample_walk

        walk = walk or sample_walk
        probs = target_probs.cpu()
        got = []
        for b in range(draft.shape[0]):
            rows = [{int(t): float(probs[b, i, t]) for t in probs[b, i].nonzero().flatten().tolist()}
                    for i in range(draft.shape[1])]
            got.append(walk(draft[b].tolist(), parents[b].tolist(), int(sizes[b]), draft.shape[1], rows,
                            uniforms[b].tolist(), float(uniform_final[b])))
        return got

    def ddtree_eagle_links(self, top_log_probs, top_token_ids, budget):
        from .oracle import CPU_RULE, eagle_links_reverse

        rows = [eagle_links_reverse(t.parents) for t in self._trees(top_log_probs, top_token_ids, budget, CPU_RULE)]
        pad = lambda r: (list(r) + [-1] * (budget + 1))[:budget + 1]  # noqa: E731
        return torch.tensor([pad(n) for n, _ in rows]), torch.tensor([pad(s) for _, s in rows])

    def ddtree_graph_buckets(self, budget, prune, configured):
        from .oracle import graph_buckets, select_bucket

        buckets = graph_buckets(budget, prune, configured)
        return buckets, {s: select_bucket(s, buckets) for s in range(budget + 3)}
