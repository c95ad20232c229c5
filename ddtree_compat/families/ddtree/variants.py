"""Deliberately wrong DDTree backends (test-only): one wrong thing per DDTree check, on top of the correct
reference (:mod:`.reference`)."""

from __future__ import annotations

import torch

from .reference import DDTreeReference


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

    def ddtree_sample(self, target_probs, draft, parents, sizes, out_indices, out_tokens, out_lens, out_next, uniforms,
                      uniform_final) -> None:
        super().ddtree_sample(target_probs, draft, parents, sizes, out_indices, out_tokens, out_lens, out_next, uniforms,
                              uniform_final)
        out_next += 1

    def ddtree_eagle_links(self, top_log_probs, top_token_ids, budget):
        from ..verify.oracle import to_eagle
        from .oracle import CPU_RULE
        from ...tree import DraftTree

        rows = []
        for t in self._trees(top_log_probs, top_token_ids, budget, CPU_RULE):
            e = to_eagle(DraftTree(t.parents, (0, *t.tokens)))  # ascending (insertion) order, not reversed
            rows.append((list(e.retrive_next_token), list(e.retrive_next_sibling)))
        pad = lambda r: (list(r) + [-1] * (budget + 1))[:budget + 1]  # noqa: E731
        return torch.tensor([pad(n) for n, _ in rows]), torch.tensor([pad(s) for _, s in rows])

    def ddtree_graph_buckets(self, budget, prune, configured):
        buckets, chosen = super().ddtree_graph_buckets(budget, prune, configured)
        return buckets[:-1] or buckets, chosen
