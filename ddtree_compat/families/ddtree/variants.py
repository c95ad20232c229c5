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


# --------------------------------------------------------------------------------------------------
# One planted bug per gap of the rotation grid: each is caught by a cell of the covering grid and passes
# every cell of the rotation grid it replaced (tests/unit/test_ddtree_grid.py holds both).
# --------------------------------------------------------------------------------------------------


class OnePrefixForgotten(DDTreeReference):
    """Gap 1 (combinations): a one-request fast path of the packed mask that leaves out the prefix. The rotation
    paired one request with no prefix only (peaked, bs 1, past 0), so no cell had one request with a prefix."""

    name = "planted-one-request-prefix-forgotten"

    def _compiled(self, root, tokens, depths, visibility, start, past, sizes, q):
        ids, pos, mask = super()._compiled(root, tokens, depths, visibility, start, past, sizes, q)
        if root.numel() == 1 and int(past[0]) > 0:
            p = int(past[0])
            mask = [False if (i % (p + q)) < p else m for i, m in enumerate(mask)]
        return ids, pos, mask


class DepthLimitOneShort(DDTreeReference):
    """Gap 2 (depth): the Triton build's depth limit one short (no child pushed at depth ``L``) on its top-k path
    (``K > 1``; the ``K = 1`` chain is another loop): only a ``K > 1`` tree that reaches the depth limit shows it,
    and no rotation tree did (its only trees at the limit are the ``K = 1`` exhaustion cells)."""

    name = "planted-depth-limit-one-short"

    def ddtree_build(self, top_log_probs, top_token_ids, budget, out_tokens, out_depths, out_parents, out_visibility,
                     out_sizes) -> None:
        if top_log_probs.shape[1] > 1 and top_log_probs.shape[2] > 1:
            top_log_probs, top_token_ids = top_log_probs[:, :-1], top_token_ids[:, :-1]
        super().ddtree_build(top_log_probs, top_token_ids, budget, out_tokens, out_depths, out_parents, out_visibility,
                             out_sizes)


class NoMaskTrustsPadding(DDTreeReference):
    """Gap 3 (worker inputs): the no-mask compiles (Triton and CPU) leave visibility's padding rows as given,
    trusting the Triton prune's identity rows; the CPU build's zero rows stay zero."""

    name = "planted-no-mask-trusts-padding"

    def ddtree_compile(self, root, tokens, depths, visibility, start, past, sizes, out_ids, out_positions, out_mask,
                       q, max_kv_len) -> None:
        if out_mask is not None:
            return super().ddtree_compile(root, tokens, depths, visibility, start, past, sizes, out_ids,
                                          out_positions, out_mask, q, max_kv_len)
        ids, pos, _ = self._compiled(root, tokens, depths, visibility, start, past, sizes, q)
        self._write(out_ids, [x for row in ids for x in row])
        self._write(out_positions, [x for row in pos for x in row])

    def ddtree_compile_cpu(self, root, tokens, depths, visibility, start, past, sizes, q, build_mask):
        ids, pos, mask = self._compiled(root, tokens, depths, visibility, start, past, sizes, q)
        return torch.tensor(ids), torch.tensor(pos), torch.tensor(mask) if build_mask else None


def _walk_with(pick):
    """:func:`.oracle.sample_walk` with the uniform each step reads chosen by ``pick(uniforms, node, step)``."""
    from .oracle import sample_walk

    def walk(draft, parents, size, q, probs, uniforms, uniform_final):
        # re-key each node's uniform so that sample_walk's ``uniforms[cur]`` reads what ``pick`` says
        path, seen = [0], list(uniforms)
        for step in range(q - 1):
            cur = path[-1]
            seen[cur] = pick(uniforms, cur, step)
            out = sample_walk(draft, parents, size, q, probs, seen, uniform_final)
            if len(out.indices) <= step + 1:
                return out
            path.append(out.indices[step + 1])
        return sample_walk(draft, parents, size, q, probs, seen, uniform_final)

    return walk


class _SamplingBug(DDTreeReference):
    walk = None

    def ddtree_sample(self, target_probs, draft, parents, sizes, out_indices, out_tokens, out_lens, out_next, uniforms,
                      uniform_final) -> None:
        uniforms.uniform_()
        uniform_final.uniform_()
        got = self._sampled(target_probs, draft, parents, sizes, uniforms, uniform_final, walk=type(self).walk)
        self._write_followed(got, draft.shape[1], out_indices, out_tokens, out_lens, out_next)


class UniformByStep(_SamplingBug):
    """Gap 4 (sampling): the step's uniform (``uniforms[step]``) instead of the node's (``uniforms[cur]``);
    one-hot target probabilities accept the target's child whatever the uniform."""

    name = "planted-uniform-by-step"
    walk = staticmethod(_walk_with(lambda u, cur, step: u[step]))


class OneUniformReused(_SamplingBug):
    """Gap 4 (sampling): the root's uniform reused down the whole path."""

    name = "planted-one-uniform-reused"
    walk = staticmethod(_walk_with(lambda u, cur, step: u[0]))


class AcceptAtThreshold(_SamplingBug):
    """Gap 4 (sampling): a child accepted when the uniform equals its cumulative mass (``<=`` for ``<``)."""

    name = "planted-accept-at-threshold"

    @staticmethod
    def walk(draft, parents, size, q, probs, uniforms, uniform_final):
        import numpy as np

        from .oracle import sample_walk

        nudged = [float(np.nextafter(np.float32(u), np.float32(-1))) if u > 0 else u for u in uniforms]
        return sample_walk(draft, parents, size, q, probs, nudged, uniform_final)


GAP_BUGS = {1: (OnePrefixForgotten,), 2: (DepthLimitOneShort,), 3: (NoMaskTrustsPadding,),
            4: (UniformByStep, OneUniformReused, AcceptAtThreshold)}
"""The rotation grid's gaps -> the planted reference backends each must be caught by the covering grid and missed by the
rotation grid (gap 5, the interpret tier, is held by ``tests/unit/test_ddtree_grid.py`` directly)."""
