"""The DDTree grid: the covering design (every pair of the case dimensions in the default grid, every
combination at the field's budgets), deep and wide-and-deep trees, the inputs the workers pass, sampling with
given uniforms, the interpret tier for the implementations' Triton kernels, and the mutation check: each planted
bug of ``families/ddtree/variants.py``'s ``GAP_BUGS`` fails a cell of the covering grid and passes every cell of
the rotation grid it replaced (frozen below as ``rotation``)."""

from itertools import combinations, product

import pytest

from ddtree_compat import records
from ddtree_compat.families.ddtree import records as dd
from ddtree_compat.families.ddtree.records import (BATCHES, DIMENSIONS, FIELD_BUDGETS, GRID_DIMENSIONS, LAYOUTS, LOGITS,
                                                   PLANTS, DDTreeCase)
from ddtree_compat.families.ddtree.reference import DDTreeReference
from ddtree_compat.families.ddtree.variants import GAP_BUGS
from ddtree_compat.covering import missing_pairs, pairwise
from ddtree_compat.contract import CaseContext
from ddtree_compat.tiers import Target

CPU = Target("interpret", "cpu")
DEFAULT = CaseContext("default", ())
GRID_OF = {"ddtree_build": "build", "ddtree_prune": "build", "ddtree_build_cpu": "build_cpu",
           "ddtree_compile": "compile", "ddtree_compile_cpu": "compile", "ddtree_fa_suffix": "tree",
           "ddtree_fa_full": "tree", "ddtree_follow": "follow", "ddtree_follow_cpu": "follow", "ddtree_sample": "sample"}


def _value(case: DDTreeCase, dim: str):
    if dim == "pruning":
        return "off" if not case.prune else "prune-zeropad" if case.padding == "zeros" else "prune"
    return getattr(case, dim)


# ---------------------------------------------------------------- the covering design

def test_pairwise_covers_every_pair_and_is_deterministic():
    dims = {"a": range(4), "b": "xyz", "c": (True, False), "d": range(5), "e": (0, 1, 2)}
    rows = pairwise(dims)
    assert missing_pairs(rows, dims) == [] and rows == pairwise(dims)
    assert len(rows) < 4 * 3 * 2 * 5 * 3 / 4  # a covering array, not the product
    start = [dict(a=a, b=b) for a, b in product(range(4), "xyz")]
    extended = pairwise(dims, start)
    assert [{k: r[k] for k in "ab"} for r in extended[:12]] == start and missing_pairs(extended, dims) == []


@pytest.mark.parametrize("kernel", sorted(GRID_OF))
def test_default_grid_holds_every_pair_of_its_dimensions(kernel):
    dims, extra = GRID_DIMENSIONS[GRID_OF[kernel]]
    cases = records.get(kernel).cases(DEFAULT)
    axes = {"budget": dd.BUDGETS["default"], **{d: DIMENSIONS[d] for d in (*dims, *extra)}}
    seen = {(x, _value(c, x), y, _value(c, y)) for c in cases for x, y in combinations(axes, 2)}
    missing = [(x, a, y, b) for x, y in combinations(axes, 2) for a in axes[x] for b in axes[y]
               if (x, a, y, b) not in seen]
    assert missing == [], f"{kernel}: {len(missing)} pairs missing, e.g. {missing[:5]}"


@pytest.mark.parametrize("kernel", sorted(GRID_OF))
def test_field_budgets_hold_every_combination(kernel):
    dims, _ = GRID_DIMENSIONS[GRID_OF[kernel]]
    cases = records.get(kernel).cases(DEFAULT)
    for budget in FIELD_BUDGETS:
        seen = {tuple(_value(c, d) for d in dims) for c in cases if c.budget == budget and c.block_size == 16}
        want = set(product(*(DIMENSIONS[d] for d in dims)))
        assert want <= seen, (kernel, budget, sorted(want - seen)[:4])


def test_full_profile_crosses_block_sizes_pairwise():
    cases = records.get("ddtree_follow").cases(CaseContext("full", ()))
    pairs = {(c.block_size, c.logits) for c in cases} | {(c.block_size, c.budget) for c in cases}
    assert {(b, lg) for b in (8, 16, 32) for lg in LOGITS} <= pairs
    assert {(b, n) for b in (8, 16, 32) for n in dd.BUDGETS["full"]} <= pairs


def test_deep_trees_reach_the_depth_limit_and_wide_trees_branch_deep():
    deep = DDTreeCase(16, logits="deep", batch=3)
    assert all(max(t.depths) == deep.depth_limit == 15 for t in deep.trees)
    wide = DDTreeCase(64, logits="wide", batch=3)
    for t in wide.trees:
        branching = {d for n, d in enumerate(t.depths, 1) if sum(p == t.parents[n] for p in t.parents[1:]) > 1}
        assert max(t.depths) > 7 and len({d for d in branching}) >= 3, (t.depths, branching)


def test_case_ids_of_the_rotation_kinds_are_unchanged():
    assert DDTreeCase(31, logits="ties", batch=8, prune=True, layout="worker").id == "b31-k31-ties-bs8-prune-worker"
    assert DDTreeCase(12, prune=True, padding="zeros", probs="edge").id == "b12-k12-peaked-bs1-prune-zeropad-edge"


# ---------------------------------------------------------------- the rotation grid it replaced (frozen)

def rotation(kind: str) -> tuple:
    """The grid the covering design replaced (the rotation): one index advanced per logits kind (batch and past
    followed it)."""
    out, i = [], 0
    for budget in dd.BUDGETS["default"]:
        for logits in ("peaked", "flat", "ties"):
            bs = BATCHES[i % 3]
            if kind == "build":
                out += [DDTreeCase(budget, logits=logits, batch=bs), DDTreeCase(budget, logits=logits, batch=bs, layout="worker")]
            elif kind == "tree":
                out += [DDTreeCase(budget, logits=logits, batch=bs, past=(0, 17, 300)[i % 3], prune=p, layout=lay)
                        for p in (False, True) for lay in LAYOUTS]
            else:
                out += [DDTreeCase(budget, logits=logits, batch=bs, plant=PLANTS[(i + j) % len(PLANTS)], prune=p, layout=lay)
                        for j, (p, lay) in enumerate((p, lay) for p in (False, True) for lay in LAYOUTS)]
            i += 1
    return tuple({c.id: c for c in out}.values())


BUG_KERNELS = {1: ("ddtree_compile", "ddtree_compile_cpu"), 2: ("ddtree_build",),
               3: ("ddtree_compile", "ddtree_compile_cpu"), 4: ("ddtree_sample",)}
ROTATION_OF = {"ddtree_build": "build", "ddtree_compile": "tree", "ddtree_compile_cpu": "tree", "ddtree_sample": "follow"}
PLANTED = [(gap, bug) for gap, bugs in GAP_BUGS.items() for bug in bugs]


def test_the_rotation_paired_each_logits_kind_with_one_batch():
    assert len({(c.logits, c.batch, c.past) for c in rotation("tree")}) == 3


def _rotation_slice(kernel: str) -> tuple:
    """The rotation grid's cells of ``kernel`` (its exhaustion cases too, for the build); the biggest masks
    (B >= 63 with 8 requests) are left out of the compile's slice to keep this test inside a CPU minute."""
    cases = rotation(ROTATION_OF[kernel])
    if kernel == "ddtree_build":
        cases += dd.exhaustion_cases(DEFAULT)
    return cases


@pytest.mark.parametrize("gap, bug", PLANTED, ids=[f"gap{g}-{b.name}" for g, b in PLANTED])
def test_planted_bug_is_missed_by_the_rotation_and_caught_by_the_grid(gap, bug):
    backend = bug()
    for kernel in BUG_KERNELS[gap]:
        run = records.get(kernel).runner()
        missed = [(c.id, v.outcome, v.message[:200]) for c in _rotation_slice(kernel)
                  for v in [run(c, backend, CPU)] if v.outcome != "pass"]
        assert missed == [], f"{bug.name}: the rotation grid already fails it: {missed[:3]}"
    caught = None
    for kernel in BUG_KERNELS[gap]:
        run = records.get(kernel).runner()
        for case in records.get(kernel).cases(DEFAULT):
            verdict = run(case, backend, CPU)
            assert verdict.outcome in ("pass", "wrong"), (case.id, verdict.message[:300])
            if verdict.outcome == "wrong":
                caught = (kernel, case.id)
                break
        if caught:
            break
    assert caught, f"{bug.name} passed every cell of the covering grid"
    assert records.get(caught[0]).runner()(DDTreeCase.from_json(
        next(c for c in records.get(caught[0]).cases(DEFAULT) if c.id == caught[1]).to_json()),
        DDTreeReference(), CPU).outcome == "pass"  # the same cell passes the correct reference


# ---------------------------------------------------------------- sampling with given uniforms

def test_one_hot_sampling_is_the_greedy_follow_and_edge_cells_sit_on_the_threshold():
    run = records.get("ddtree_sample").runner()
    for probs in ("onehot", "spread", "edge"):
        case = DDTreeCase(16, logits="wide", batch=3, probs=probs, layout="worker")
        assert run(case, DDTreeReference(), CPU).outcome == "pass", probs
    edge = DDTreeCase(16, logits="wide", batch=3, probs="edge")
    assert run(edge, GAP_BUGS[4][2](), CPU).outcome == "wrong"


# ---------------------------------------------------------------- the interpret tier

def test_the_interpret_tier_runs_the_implementations_triton_kernels():
    """An implementation's Triton records are declared ``triton`` (interpreted on the CPU tier; a counted skip
    outside the interpret subset, saying the device tier runs it), and its wrappers' CUDA guards are lifted at
    load time on the interpret tier only: the lifted module is its own source without those statements."""
    import ast

    from ddtree_compat import impls
    from ddtree_compat.backends.ddtree_impl import interpret_subset

    source = ("import torch\n\ndef wrapper(x):\n    if not x.is_cuda:\n        raise ValueError('requires CUDA')\n"
              "    if x.is_cuda:\n        pass\n    return x\n")
    tree, lifted = impls.without_device_guards(ast.parse(source))
    assert lifted == (4,) and "requires CUDA" not in ast.unparse(tree) and "if x.is_cuda" in ast.unparse(tree)
    small = next(iter(sorted(dd.interpret_ids())))
    inside = next(c for r in dd.RECORDS for c in r.cases(DEFAULT) if c.id == small)
    assert interpret_subset(CPU, inside) is None
    big = DDTreeCase(64, batch=8)
    assert "device tier" in interpret_subset(CPU, big)
    assert interpret_subset(Target("device", "cuda:0", "sm90"), big) is None


@pytest.mark.parametrize("logits", LOGITS)
def test_a_cases_draft_top_k_is_the_stable_sorts_first_k(logits, monkeypatch):
    """A case's per-depth top-k, taken by partition (``verify.oracle.top_k``), is the first ``K`` of a stable
    descending sort of each depth's log-probs: the same ids, values and order. ``ties`` rounds log-probs to 1/2, so
    its depths tie at the K-th value, where the two ways of choosing could part."""
    import numpy as np

    from ddtree_compat.families.verify.oracle import top_k

    def stable_sort_top_k(logp, k):
        ids = np.argsort(-logp, axis=-1, kind="stable")[:, :k]
        return np.take_along_axis(logp, ids, axis=-1).astype(np.float64).tolist(), ids.tolist()

    straddling = []  # per call: depths whose K-th value recurs past the K kept (where partition alone may part)

    def partition_top_k(logp, k):
        kth = -np.sort(-logp, axis=-1)[:, k - 1:k]
        straddling.append(int(((logp >= kth).sum(axis=-1) > k).sum()))
        return top_k(logp, k)

    make = lambda: dd.DDTreeCase(budget=16, logits=logits, batch=3, seed=5)  # noqa: E731 (a fresh, uncached case)
    monkeypatch.setattr(dd, "top_k", partition_top_k)
    lps, ids = make().top
    monkeypatch.setattr(dd, "top_k", stable_sort_top_k)
    assert (lps, ids) == make().top
    assert len(straddling) == 3
    if logits == "ties":
        assert sum(straddling) > 0
