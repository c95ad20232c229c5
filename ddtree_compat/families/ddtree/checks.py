"""Checks of the DDTree implementations' kernels (records: :mod:`.records`).

Every output the kernel gets is a slice of a poisoned, canary-guarded allocation laid out as the case's
layout says (``exact``: ``bs`` rows of the live width; ``worker``: ``max_bs`` rows, follow and sampling
outputs ``B + 1`` wide, FA page tables the worker's width), so an element written outside the slice, an
element of the slice left unwritten and a write past the allocation all show. The expected allocation is
poison everywhere but the slice, which holds the oracle's values (:mod:`.oracle`);
allocations are compared whole, bit for bit, bands included, and every input must come back unchanged.
"""

from __future__ import annotations

import numpy as np
import torch

from ...cases import stable_seed
from ...harness import graphs
from ...harness.buffers import BOOL_POISON, POISON, Inputs, Out, compare
from ...harness.calls import Findings, check
from .oracle import (CPU_RULE, arrays, compile_inputs, eagle_links_reverse, fa_full_row, fa_suffix_row, follow,
                     graph_buckets, packed_mask, padded_visibility, prune_deepest_chains, sample_walk, select_bucket)
from .records import DDTreeCase


def _rows(case: DDTreeCase) -> slice:
    return slice(0, case.batch)


def _tree_outs(case: DDTreeCase, device: str) -> list[Out]:
    rows, bmax, b = _rows(case), case.max_bs, case.budget
    return [Out.alloc("out_tokens", (bmax, b), rows, torch.int64, device),
            Out.alloc("out_depths", (bmax, b), rows, torch.int64, device),
            Out.alloc("out_parents", (bmax, b + 1), rows, torch.int64, device),
            Out.alloc("out_visibility", (bmax, b + 1, b + 1), rows, torch.bool, device),
            Out.alloc("out_sizes", (bmax,), rows, torch.int64, device)]


def _tree_values(arrs) -> list:
    return [[a.tokens for a in arrs], [a.depths for a in arrs], [a.parents for a in arrs],
            [a.visibility for a in arrs], [a.size for a in arrs]]


def _top_inputs(case: DDTreeCase, device: str) -> tuple[Inputs, torch.Tensor, torch.Tensor]:
    lp, ids = case.top
    inputs = Inputs(device)
    return inputs, inputs.add("top_log_probs", lp, torch.float32), inputs.add("top_token_ids", ids, torch.int64)


@check
def ddtree_build(case: DDTreeCase, backend, device: str):
    inputs, lp, ids = _top_inputs(case, device)
    outs = _tree_outs(case, device)
    backend.ddtree_build(lp, ids, case.budget, *(o.arg for o in outs))

    def judge() -> list[str]:
        want = _tree_values([arrays(t, case.budget) for t in case.built()])
        return [p for o, w in zip(outs, want) for p in o.problems(w)] + inputs.problems()

    return judge


def _cpu_trees(case: DDTreeCase):
    trees = case.built(CPU_RULE)
    return [prune_deepest_chains(t)[0] for t in trees] if case.prune else trees


@check
def ddtree_build_cpu(case: DDTreeCase, backend, device: str):
    inputs, lp, ids = _top_inputs(case, "cpu")
    got = backend.ddtree_build_cpu(lp, ids, case.budget, case.prune)

    def judge() -> list[str]:
        want = _tree_values([arrays(t, case.budget) for t in _cpu_trees(case)])
        names = ("tokens", "depths", "parents", "visibility", "sizes")
        return [p for n, g, w in zip(names, got, want) for p in compare(n, g, w)] + inputs.problems()

    return judge


@check
def ddtree_prune(case: DDTreeCase, backend, device: str):
    full = [arrays(t, case.budget) for t in case.built()]  # the build's trees, as the prune kernel is given them
    inputs = Inputs(device)
    given = [inputs.add(n, v, dt) for n, v, dt in zip(
        ("in_tokens", "in_depths", "in_parents", "in_visibility"), _tree_values(full)[:4],
        (torch.int64, torch.int64, torch.int64, torch.bool))]
    outs = _tree_outs(case, device)
    backend.ddtree_prune(*given, *(o.arg for o in outs), case.budget)

    def judge() -> list[str]:
        want = _tree_values([arrays(prune_deepest_chains(t)[0], case.budget, "identity") for t in case.built()])
        return [p for o, w in zip(outs, want) for p in o.problems(w)] + inputs.problems()

    return judge


def _compile_inputs(case: DDTreeCase, device: str, cpu: bool = False):
    """The compile step's inputs as the worker holds them: node buffers ``[max_bs, B]`` (sliced to ``bs``),
    the visibility of the build: past a pruned tree the Triton prune's identity rows, or (``padding="zeros"``)
    the CPU build's zero rows."""
    arrs = case.arrays(case.padding if case.prune else "empty")
    inputs = Inputs("cpu" if cpu else device)
    vals = _tree_values(arrs)
    args = dict(root=inputs.add("root", case.roots, torch.int64),
                tokens=inputs.add("tokens", vals[0], torch.int64), depths=inputs.add("depths", vals[1], torch.int64),
                visibility=inputs.add("visibility", vals[3], torch.bool),
                start=inputs.add("start", case.past_lens, torch.int64),
                past=inputs.add("past", case.past_lens, torch.int64),
                sizes=inputs.add("sizes", vals[4], torch.int64))
    return inputs, args, arrs


def _compile_want(case: DDTreeCase, arrs) -> tuple[list[int], list[int], list[bool]]:
    ids, pos, mask = [], [], []
    for b, a in enumerate(arrs):
        i, p = compile_inputs(case.roots[b], a, case.past_lens[b], case.q)
        ids += i
        pos += p
        mask += packed_mask(a.visibility, a.size, case.past_lens[b], case.q)
    return ids, pos, mask


def _mask_length(case: DDTreeCase) -> int:
    """The packed mask's length: per request ``q x (past + q)`` booleans, back to back."""
    return sum(case.q * (past + case.q) for past in case.past_lens)


def _padded_visibility_want(arrs, q: int) -> list:
    """Each tree's visibility with its rows past the tree padded to the identity (the no-mask compile's, in place)."""
    want = [[list(r) for r in a.visibility] for a in arrs]
    for b, a in enumerate(arrs):
        for i, row in enumerate(padded_visibility(a.visibility, a.size, q)):
            want[b][i][:q] = row
    return want


@check
def ddtree_compile(case: DDTreeCase, backend, device: str):
    inputs, args, arrs = _compile_inputs(case, device)
    bs, q, width = case.batch, case.q, case.budget + 1
    cap, mask_n = case.max_bs * width, _mask_length(case)
    ids = Out.alloc("verify_input_ids", (cap,), slice(0, bs * q), torch.int64, device)
    pos = Out.alloc("verify_position_ids", (cap,), slice(0, bs * q), torch.int64, device)
    mask_cap = mask_n * (2 if case.layout == "worker" else 1)  # the worker grows its mask buffer by doubling
    mask = Out.alloc("tree_attention_mask", (mask_cap,), slice(0, mask_n), torch.bool, device)
    backend.ddtree_compile(*args.values(), ids.arg, pos.arg, mask.arg, q, max(case.past_lens) + q)
    padded = any(a.size < q for a in arrs)  # the FlashAttention path: no mask, padding rows of visibility to identity
    if padded:
        vis = args["visibility"].clone()
        ids2 = Out.alloc("verify_input_ids (no mask)", (cap,), slice(0, bs * q), torch.int64, device)
        pos2 = Out.alloc("verify_position_ids (no mask)", (cap,), slice(0, bs * q), torch.int64, device)
        backend.ddtree_compile(args["root"], args["tokens"], args["depths"], vis, args["start"], args["past"],
                               args["sizes"], ids2.arg, pos2.arg, None, q, None)

    def judge() -> list[str]:
        ids_want, pos_want, mask_want = _compile_want(case, arrs)
        problems = ids.problems(ids_want) + pos.problems(pos_want) + mask.problems(mask_want) + inputs.problems()
        if padded:
            problems += (ids2.problems(ids_want) + pos2.problems(pos_want)
                         + compare("visibility (padded)", vis.cpu(), _padded_visibility_want(arrs, q)))
        return problems

    return judge


@check
def ddtree_compile_cpu(case: DDTreeCase, backend, device: str):
    """With the mask (``build_mask=True``), then without it (as the FlashAttention worker calls it): the same
    ids and positions, no mask, and the visibility's rows past each tree padded to the identity in place."""
    inputs, args, arrs = _compile_inputs(case, device, cpu=True)
    q = case.q
    ids, pos, mask = backend.ddtree_compile_cpu(*args.values(), q, True)
    vis = args["visibility"].clone()
    ids2, pos2, mask2 = backend.ddtree_compile_cpu(*(vis if k == "visibility" else v for k, v in args.items()), q, False)

    def judge() -> list[str]:
        ids_want, pos_want, mask_want = _compile_want(case, arrs)
        per_row = lambda flat: [flat[b * q:(b + 1) * q] for b in range(case.batch)]  # noqa: E731
        return (compare("verify_input_ids", ids, per_row(ids_want)) + compare("verify_position_ids", pos, per_row(pos_want))
                + compare("tree_attention_mask", mask, mask_want) + inputs.problems()
                + compare("verify_input_ids (no mask)", ids2, per_row(ids_want))
                + compare("verify_position_ids (no mask)", pos2, per_row(pos_want))
                + ([] if mask2 is None else ["tree_attention_mask (no mask): a mask was built"])
                + compare("visibility (padded, no mask)", vis, _padded_visibility_want(arrs, q)))

    return judge


def _fa_inputs(case: DDTreeCase, device: str):
    """Visibility ``[bs, q, q]`` (live width), a ``req_to_token`` pool with distinct slots, pool rows, seq lens."""
    arrs = case.arrays("identity")
    q = case.q
    vis = [[list(r[:q]) for r in a.visibility[:q]] for a in arrs]
    ctx = max(case.past_lens) + q + 8
    rows = case.batch + 2
    g = torch.Generator().manual_seed(stable_seed(case.id, "req_to_token"))
    req_to_token = torch.randperm(rows * ctx, generator=g).view(rows, ctx).to(torch.int32) + 1
    pool = torch.randperm(rows, generator=g)[:case.batch]
    inputs = Inputs(device)
    args = (inputs.add("visibility", vis, torch.bool), inputs.add("req_to_token", req_to_token, torch.int32),
            inputs.add("req_pool_indices", pool, torch.int64), inputs.add("seq_lens", case.past_lens, torch.int64))
    return inputs, args, vis, req_to_token, pool


@check
def ddtree_fa_suffix(case: DDTreeCase, backend, device: str):
    inputs, args, vis, r2t, pool = _fa_inputs(case, device)
    bs, q = case.batch, case.q
    width = max(case.buckets) if case.layout == "worker" else q  # the graph table is sized at the largest bucket
    table = Out.alloc("page_table", (case.max_bs * width, width), (slice(0, bs * q), slice(0, q)), torch.int32, device)
    seqlens = Out.alloc("cache_seqlens", (case.max_bs * width,), slice(0, bs * q), torch.int32, device)
    backend.ddtree_fa_suffix(*args, table.arg, seqlens.arg, q)

    def judge() -> list[str]:
        rows, lens = [], []
        for b in range(bs):
            slots = r2t[pool[b], case.past_lens[b]:case.past_lens[b] + q].tolist()
            for i in range(q):
                row, n = fa_suffix_row(vis[b][i], slots, q)
                rows.append(row)
                lens.append(n)
        return table.problems(rows) + seqlens.problems(lens) + inputs.problems()

    return judge


@check
def ddtree_fa_full(case: DDTreeCase, backend, device: str):
    inputs, args, vis, r2t, pool = _fa_inputs(case, device)
    bs, q = case.batch, case.q
    ctx = r2t.shape[1]
    width = ctx + q
    table = Out.alloc("page_table", (case.max_bs * q, width), slice(0, bs * q), torch.int32, device)
    seqlens = Out.alloc("cache_seqlens", (case.max_bs * q,), slice(0, bs * q), torch.int32, device)
    backend.ddtree_fa_full(*args, table.arg, seqlens.arg, q)

    def judge() -> list[str]:
        want = torch.full((bs * q, width), POISON, dtype=torch.int32)  # past a row's length: untouched (no zero fill)
        lens = []
        for b in range(bs):
            seq = case.past_lens[b]
            prefix = r2t[pool[b], :seq].tolist()
            slots = r2t[pool[b], seq:seq + q].tolist()
            for i in range(q):
                row, n = fa_full_row(vis[b][i], prefix, slots, q)
                want[b * q + i, :n] = torch.tensor(row, dtype=torch.int32)
                lens.append(n)
        return table.problems(want) + seqlens.problems(lens) + inputs.problems()

    return judge


def _follow_setup(case: DDTreeCase, device: str):
    inputs = Inputs(device)
    draft = [case.draft_row(b) for b in range(case.batch)]
    parents = [case.parents_row(b) for b in range(case.batch)]
    args = (inputs.add("draft_tokens", draft, torch.int64), inputs.add("target_predict", case.targets, torch.int64),
            inputs.add("parents", parents, torch.int64), inputs.add("actual_tree_sizes", case.sizes, torch.int64))
    return inputs, args


def _follow_want(case: DDTreeCase, cap: bool = True) -> list:
    """The oracle's greedy follow of each request (:func:`~.oracle.follow`)."""
    return [follow(case.draft_row(b), case.targets[b], case.parents_row(b), case.sizes[b], case.q, cap=cap)
            for b in range(case.batch)]


def _follow_outs(case: DDTreeCase, device: str) -> list[Out]:
    """Follow / sampling outputs: ``[bs, q]`` exact, or the worker's ``[max_bs, B + 1]`` buffers sliced
    ``[:bs, :q]`` (non-contiguous when ``q < B + 1``)."""
    bs, q = case.batch, case.q
    width = case.budget + 1 if case.layout == "worker" else q
    two = (slice(0, bs), slice(0, q))
    return [Out.alloc("accepted_indices", (case.max_bs, width), two, torch.int64, device),
            Out.alloc("accepted_token_ids", (case.max_bs, width), two, torch.int64, device),
            Out.alloc("accepted_lens", (case.max_bs,), slice(0, bs), torch.int64, device),
            Out.alloc("next_tokens", (case.max_bs,), slice(0, bs), torch.int64, device)]


def _follow_values(case: DDTreeCase, want) -> list:
    q = case.q
    return [[list(f.indices) + [-1] * (q - len(f.indices)) for f in want],
            [list(f.tokens) + [0] * (q - len(f.tokens)) for f in want],
            [len(f.indices) for f in want], [f.next_token for f in want]]


@check
def ddtree_follow(case: DDTreeCase, backend, device: str):
    inputs, args = _follow_setup(case, device)
    outs = _follow_outs(case, device)
    backend.ddtree_follow(*args, *(o.arg for o in outs))

    def judge() -> list[str]:
        want = _follow_values(case, _follow_want(case))
        return [p for o, w in zip(outs, want) for p in o.problems(w)] + inputs.problems()

    return judge


@check
def ddtree_follow_cpu(case: DDTreeCase, backend, device: str):
    inputs, args = _follow_setup(case, "cpu")
    paths, nexts = backend.ddtree_follow_cpu(*args)

    def judge() -> list[str]:
        want = _follow_want(case, cap=False)
        problems = [] if [list(p) for p in paths] == [list(f.indices) for f in want] else [
            f"accepted paths {[list(p) for p in paths]} (want {[list(f.indices) for f in want]})"]
        return problems + compare("next_tokens", list(nexts), [f.next_token for f in want]) + inputs.problems()

    return judge


def _uniform_buffers(case: DDTreeCase, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The sampler's uniform buffers as the worker passes them: ``[:bs, :q]`` of ``[max_bs, B + 1]`` (worker
    layout; exact: ``[bs, q]``) and ``[:bs]`` of ``[max_bs]``, NaN-filled (a uniform the sampler reads but
    never draws shows)."""
    width = case.budget + 1 if case.layout == "worker" else case.q
    u = torch.full((case.max_bs, width), float("nan"), dtype=torch.float32, device=device)[:case.batch, :case.q]
    return u, torch.full((case.max_bs,), float("nan"), dtype=torch.float32, device=device)[:case.batch]


def _predicted_uniforms(case: DDTreeCase, device: str, seed: int) -> tuple[list, list]:
    """The uniforms the sampler will draw into its buffers from torch's generator seeded ``seed`` (its
    documented order: the per-node uniforms, then the final ones), drawn here the same way."""
    u, uf = _uniform_buffers(case, device)
    torch.manual_seed(seed)
    u.uniform_()
    uf.uniform_()
    return u.cpu().tolist(), uf.cpu().tolist()


UNITS = 4096  # spread masses are multiples of 1 / UNITS: every partial sum exact in float32


def sample_probs(case: DDTreeCase, uniforms: list) -> list[list[dict]]:
    """Per request and column, the target's distribution ``{token: mass}`` (see :attr:`DDTreeCase.probs`)."""
    rng = np.random.default_rng(stable_seed("ddtree-probs", case.id))
    out = []
    for b in range(case.batch):
        draft, parents, size = case.draft_row(b), case.parents_row(b), case.sizes[b]
        rows = []
        for i in range(case.q):
            kids = [draft[j] for j in range(1, min(size, case.q)) if parents[j] == i]
            if case.probs == "onehot" or i >= size:
                rows.append({case.targets[b][i]: 1.0})
                continue
            others = [int(t) for t in rng.integers(case.vocab, size=3) if int(t) not in kids]
            if case.probs == "edge" and kids:
                u = float(np.float32(uniforms[b][i]))
                row = {kids[0]: u}
                rest = kids[1] if len(kids) > 1 else (others[0] if others else (kids[0] + 1) % case.vocab)
                row[rest] = row.get(rest, 0.0) + float(np.float32(1.0) - np.float32(u))
                rows.append(row)
                continue
            row, left = {}, UNITS
            for t in kids:
                k = int(rng.integers(0, max(1, 2 * UNITS // (len(kids) + 1)) + 1))
                k = min(k, left)
                row[t] = row.get(t, 0) + k
                left -= k
            for n, t in enumerate(others or [kids[0]]):
                k = left if n == len(others or [kids[0]]) - 1 else int(rng.integers(0, left + 1))
                row[t] = row.get(t, 0) + k
                left -= k
            rows.append({t: m / UNITS for t, m in row.items() if m})
        out.append(rows)
    return out


@check
def ddtree_sample(case: DDTreeCase, backend, device: str):
    """Sampling verify with the uniforms it draws into the buffers it is given (torch's generator, seeded):
    the accepted path and the bonus token must be exactly :func:`~.oracle.sample_walk`'s with the uniforms
    the buffers hold after the call. One-hot target probabilities: exactly the greedy follow, for any
    uniforms; ``spread``: real distributions (dyadic masses, so every sum is exact); ``edge``: a child's
    cumulative mass equal to its node's uniform (``<`` rejects it, ``<=`` would not)."""
    inputs, args = _follow_setup(case, device)
    seed = stable_seed("ddtree-uniforms", case.id) % (2 ** 31)
    predicted, _ = _predicted_uniforms(case, device, seed) if case.probs == "edge" else ([], [])
    rows = sample_probs(case, predicted)
    probs = torch.zeros(case.batch, case.q, case.vocab, dtype=torch.float32)
    for b, per_node in enumerate(rows):
        for i, row in enumerate(per_node):
            for t, m in row.items():
                probs[b, i, t] = m
    target_probs = inputs.add("target_probs", probs, torch.float32)
    outs = _follow_outs(case, device)
    uniforms, uniform_final = _uniform_buffers(case, device)
    torch.manual_seed(seed)
    backend.ddtree_sample(target_probs, args[0], args[2], args[3], *(o.arg for o in outs), uniforms, uniform_final)

    def judge() -> list[str]:
        greedy = _follow_want(case)
        used, used_final = uniforms.cpu().tolist(), uniform_final.cpu().tolist()
        problems = []
        if (any(u != u or not 0.0 <= u < 1.0 for r in used for u in r)
                or any(u != u or not 0.0 <= u < 1.0 for u in used_final)):
            problems.append("uniform buffers after the call are not all uniforms in [0, 1) (a uniform left undrawn)")
            want = greedy
        else:
            want = [sample_walk(case.draft_row(b), case.parents_row(b), case.sizes[b], case.q, rows[b], used[b],
                                used_final[b]) for b in range(case.batch)]
        if case.probs == "onehot" and want != greedy:
            problems.append(f"one-hot sampling walk {want} differs from the greedy follow {greedy} (oracle)")
        if case.probs == "edge" and used != predicted:
            problems.append("the sampler did not draw the uniforms its documented order gives (edge case not at the edge)")
        return problems + [p for o, w in zip(outs, _follow_values(case, want)) for p in o.problems(w)] + inputs.problems()

    return judge


@check
def ddtree_eagle_links(case: DDTreeCase, backend, device: str):
    inputs, lp, ids = _top_inputs(case, "cpu")
    nxt, sib = backend.ddtree_eagle_links(lp, ids, case.budget)

    def judge() -> list[str]:
        links = [eagle_links_reverse(t.parents) for t in _cpu_trees(case)]
        width = case.budget + 1
        pad = [[(row + [-1] * width)[:width] for row in r] for r in links]
        return (compare("retrieve_next_token", nxt, [p[0] for p in pad])
                + compare("retrieve_next_sibling", sib, [p[1] for p in pad]) + inputs.problems())

    return judge


@check
def ddtree_graph_buckets(case: DDTreeCase, backend, device: str):
    buckets, chosen = backend.ddtree_graph_buckets(case.budget, case.prune, ())

    def judge() -> list[str]:
        want = graph_buckets(case.budget, case.prune)
        problems = [] if list(buckets) == want else [f"buckets {list(buckets)} (want {want})"]
        wrong = {s: (c, select_bucket(s, want)) for s, c in chosen.items() if c != select_bucket(s, want)}
        if wrong:
            problems.append("selected bucket per tree size differs: " + ", ".join(
                f"size {s}: {c} (want {w})" for s, (c, w) in list(wrong.items())[:6]))
        return problems

    return judge


# --------------------------------------------------------------------------------------------------
# The per-round chain in one CUDA graph: build -> compile -> follow (or sampling verify)
# --------------------------------------------------------------------------------------------------

CHAIN_GRAPH = "ddtree_chain@graph"
SAMPLE_CHAIN_GRAPH = "ddtree_sample_chain@graph"


@check
def run_chain_graph(case: DDTreeCase, backend, device: str, sampling: bool = False):
    """Capture an implementation's round (``ddtree_build`` on the draft's top-k, ``ddtree_compile`` to verify
    ids, positions and mask, then ``ddtree_follow`` or, with ``sampling``, ``ddtree_sample`` with one-hot
    target probabilities) in one CUDA graph on the worker's buffers (``max_bs`` rows, width ``B + 1``), warmed
    up on another draw of the same shapes; then copy ``case``'s top-k and targets into the static inputs,
    replay, and judge every output exactly (build arrays, ids, positions, mask, follow outputs). The draft
    tokens the follow reads are the compiled verify ids, as in the worker."""
    from dataclasses import replace

    warm = replace(case, seed=case.seed + 1)
    bs, b, q = case.batch, case.budget, case.budget + 1
    lp, ids = case.top
    wlp, wids = warm.top
    top_lp = torch.tensor(wlp, dtype=torch.float32, device=device)
    top_ids = torch.tensor(wids, dtype=torch.int64, device=device)
    outs = _tree_outs(replace(case, layout="worker"), device)
    root = torch.tensor(warm.roots, dtype=torch.int64, device=device)
    past = torch.tensor(case.past_lens, dtype=torch.int64, device=device)
    vids = Out.alloc("verify_input_ids", (case.max_bs * q,), slice(0, bs * q), torch.int64, device)
    vpos = Out.alloc("verify_position_ids", (case.max_bs * q,), slice(0, bs * q), torch.int64, device)
    mask_n = sum(q * (p + q) for p in case.past_lens)
    mask = Out.alloc("tree_attention_mask", (mask_n,), slice(0, mask_n), torch.bool, device)
    target = torch.tensor([(t + [0] * q)[:q] for t in warm.targets], dtype=torch.int64, device=device)
    probs = torch.zeros(bs, q, case.vocab, dtype=torch.float32, device=device)
    follow_outs = _follow_outs(replace(case, layout="worker"), device)
    uniforms, uniform_final = _uniform_buffers(replace(case, layout="worker"), device)

    def step():
        backend.ddtree_build(top_lp, top_ids, b, *(o.arg for o in outs))
        backend.ddtree_compile(root, outs[0].arg, outs[1].arg, outs[3].arg, past, past, outs[4].arg, vids.arg,
                               vpos.arg, mask.arg, q, max(case.past_lens) + q)
        draft = vids.arg.view(bs, q)
        if sampling:
            probs.zero_().scatter_(2, target.unsqueeze(2), 1.0)
            backend.ddtree_sample(probs, draft, outs[2].arg, outs[4].arg, *(o.arg for o in follow_outs), uniforms,
                                  uniform_final)
        else:
            backend.ddtree_follow(draft, target, outs[2].arg, outs[4].arg, *(o.arg for o in follow_outs))

    graph = graphs.capture(step, device)  # warm-up on another draw: JIT compiles outside the capture
    top_lp.copy_(torch.tensor(lp, dtype=torch.float32))
    top_ids.copy_(torch.tensor(ids, dtype=torch.int64))
    root.copy_(torch.tensor(case.roots, dtype=torch.int64))
    target.copy_(torch.tensor([(t + [0] * q)[:q] for t in case.targets], dtype=torch.int64))
    for o in (*outs, vids, vpos, mask, *follow_outs):  # poison again: the replay must write every element
        o.guard.view.fill_(BOOL_POISON if o.boolean else POISON)
    graphs.replay(graph, device)

    def judged() -> Findings:
        arrs = [arrays(t, b) for t in case.built()]
        problems = [p for o, w in zip(outs, _tree_values(arrs)) for p in o.problems(w)]
        ids_want, pos_want, mask_want = _compile_want(replace(case, prune=False), arrs)
        problems += vids.problems(ids_want) + vpos.problems(pos_want) + mask.problems(mask_want)
        draft = [(list(ids_want[r * q:(r + 1) * q])) for r in range(bs)]
        want = [follow(draft[r], case.targets[r], arrs[r].parents, arrs[r].size, q) for r in range(bs)]
        problems += [p for o, w in zip(follow_outs, _follow_values(replace(case, prune=False), want))
                     for p in o.problems(w)]
        return Findings(problems, prefix=f"graph captured at width {q}, replayed with new data: ")

    return judged
