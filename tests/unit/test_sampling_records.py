"""The sampling family's cases and records (torch-free): JSON, ids, coordinates, validation, the generators'
coverage, the planted boundaries really on their boundaries, and the distribution cells' inputs."""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pytest

from ddtree_compat.covering import missing_pairs
from ddtree_compat.errors import CaseError
from ddtree_compat.families.ddtree.records import DDTreeCase
from ddtree_compat.families.sampling import oracle as O
from ddtree_compat.families.sampling import records as R


@lru_cache(maxsize=1)
def every_case() -> tuple:
    return (R.tree_exact_cases() + R.chain_exact_cases() + R.tree_distribution_cases() + R.chain_distribution_cases()
            + R.ddtree_distribution_cases())


def test_json_round_trip_and_stable_unique_ids(tmp_path):
    cases = every_case()
    assert len({c.id for c in cases}) == len(cases)
    for case in cases:
        again = R.SamplingCase.from_json(case.to_json())
        assert again == case and again.id == case.id
    path = cases[0].save(tmp_path)
    assert path.name == f"{cases[0].id}.json" and R.SamplingCase.from_json(path.read_text()) == cases[0]


def test_coordinates_carry_the_keys_every_family_records():
    keys = set(DDTreeCase(8).coordinates())
    for case in every_case():
        coords = case.coordinates()
        assert set(coords) == keys
        assert coords["budget"] == case.budget and coords["topology"] == case.topology
        assert coords["mode"].startswith(case.kind)


@pytest.mark.parametrize("fields, word", [
    (dict(sampler="chain", topology="bf-flat"), "verifies a chain"),
    (dict(sampler="chain", topology="chain", threshold_acc=0.5), "takes no thresholds"),
    (dict(sampler="tree", block=True), "block verification"),
    (dict(kind="distribution", probs="edge"), "given uniforms"),
    (dict(sampler="ddtree"), "draws its own uniforms"),
    (dict(threshold_single=1.5), "host check"),
    (dict(topology="fanout", budget=20), "more siblings"),
    (dict(probs="uniformish"), "unknown"),
    (dict(vocab=4), "too small"),
])
def test_bad_cases_are_refused(fields, word):
    base = dict(sampler="tree", kind="exact", topology="eagle-topk", budget=6, probs="flat")
    with pytest.raises(CaseError, match=word):
        R.SamplingCase(**{**base, **fields}).check()


def test_bad_json_is_refused():
    good = json.loads(R.tree_exact_cases()[0].to_json())
    with pytest.raises(CaseError, match="wrong schema"):
        R.SamplingCase.from_json(json.dumps({**good, "schema": "other"}))
    with pytest.raises(CaseError, match="malformed"):
        R.SamplingCase.from_json(json.dumps({**good, "colour": "red"}))
    with pytest.raises(CaseError, match="not JSON"):
        R.SamplingCase.from_json("{")


def test_the_exact_grids_cover_every_pair():
    rows = [dict(topology=c.topology, budget=c.budget, probs=c.probs, thresholds=(c.threshold_single, c.threshold_acc),
                 siblings=c.siblings, vocab=c.vocab, batch=c.batch) for c in R.tree_exact_cases()]
    assert missing_pairs(rows, {"topology": R.TOPOLOGIES, "budget": R.TREE_BUDGETS, "probs": R.TREE_PROBS,
                                "thresholds": R.THRESHOLDS, "siblings": O.ORDERS, "vocab": R.EXACT_VOCABS,
                                "batch": R.EXACT_BATCHES}) == []
    rows = [dict(budget=c.budget, probs=c.probs, block=c.block, vocab=c.vocab, batch=c.batch) for c in R.chain_exact_cases()]
    assert missing_pairs(rows, {"budget": R.CHAIN_STEPS, "probs": ("onehot", "peaked", "flat", "edge"),
                                "block": (False, True), "vocab": R.EXACT_VOCABS, "batch": R.EXACT_BATCHES}) == []


def _dyadic(x: float, bits: int = 24) -> bool:
    return float(x * 2 ** bits).is_integer()


def test_exact_cases_are_exact_in_float32():
    """Masses multiples of 2^-9 (or the saturated plant's 2^-24), coins float32 values in [0, 1) (multiples of
    2^-16, or chosen on a boundary): every sum and product the kernels form is exact; rows are distributions;
    every request gets its own draw."""
    for case in R.tree_exact_cases() + R.chain_exact_cases():
        for req in case.exact:
            assert len(req.uniforms) == case.nodes and all(0 <= u < 1 and O.f32(u) == u for u in req.uniforms)
            assert 0 <= req.uniform_final < 1 and O.f32(req.uniform_final) == req.uniform_final
            for row in (*req.target, *req.draft):
                assert all(m > 0 and _dyadic(m) and 0 <= t < case.vocab for t, m in row.items())
                if case.probs != "saturated":
                    assert sum(row.values()) == 1.0 or not row
        if case.batch > 1:
            assert len({r.uniforms for r in case.exact}) == case.batch


def test_edge_cases_sit_on_their_boundaries():
    """Tree edge cases: where the strict comparison (0.5.22+) and the inclusive one (the earlier source) part,
    the edge cases make them part, and the bonus coin sits on a CDF step (searchsorted's ``>=`` and the strict
    ``>`` give different tokens). Chain edge cases: ``coin * q == p`` at the planted step (rejected)."""
    parted = steps = total = 0
    for case in (c for c in R.tree_exact_cases() if c.probs == "edge"):
        for req in case.exact:
            total += 1
            args = (case.links(req.index), req.target, req.uniforms, req.uniform_final, case.vocab, case.accept_width,
                    case.threshold_single, case.threshold_acc)
            parted += O.tree_target_only(*args) != O.tree_target_only(*args, compare=O.INCLUSIVE)
            r = O.tree_target_only(*args)
            node = r.path[-1]
            removed = {t for n, t in r.rejected if n == node}
            masses = {t: m for t, m in req.target[node].items() if t not in removed}
            if len(r.path) == case.accept_width:
                masses = dict(req.target[node])
            steps += O.pick(masses, case.vocab, req.uniform_final, O.BONUS_CUDA) != O.pick(
                masses, case.vocab, req.uniform_final, O.BONUS_SEARCHSORTED)
    assert parted >= total // 2 and steps >= total // 2, (parted, steps, total)
    for case in (c for c in R.chain_exact_cases() if c.probs == "edge"):
        for req, r in zip(case.exact, case.expected()):
            k = r.accepted_drafts
            if k < case.budget:
                x = req.candidates[k + 1]
                assert req.uniforms[k] * req.draft[k][x] == req.target[k][x], case.id


def test_saturated_cases_emit_a_token_of_zero_mass_at_thresholds_one():
    """The saturated plant at thresholds 1: the root's children rejected, the bonus a token the root's row
    gives no mass (the CUDA kernel's fallback)."""
    seen = 0
    for case in (c for c in R.tree_exact_cases() if c.probs == "saturated" and c.threshold_acc == 1.0
                 and c.threshold_single == 1.0):
        for req, r in zip(case.exact, case.expected()):
            assert r.path == (0,) and req.target[0].get(r.bonus, 0.0) == 0.0, case.id
            seen += 1
    assert seen >= 2


def test_eagle_topk_trees():
    """EAGLE-2's shape: B nodes, parents before children, depth-major, sibling tokens distinct, at most ``topk``
    nodes per depth."""
    for budget in (1, 4, 6, 9):
        for seed in range(5):
            tree = R.eagle_topk(budget, 16, 3, np.random.default_rng(seed))
            assert tree.budget == budget
            assert list(tree.depths) == sorted(tree.depths)
            for kids in tree.children:
                assert len({tree.tokens[c] for c in kids}) == len(kids)
            assert max(tree.depths.count(d) for d in range(1, tree.max_depth + 1)) <= 3


def test_accept_width_follows_the_callers():
    """EAGLE sizes accept_index by its depth + 1; the DFlash DDTree worker by D; an explicit width wins."""
    chain = R.SamplingCase("tree", "exact", "chain", 5, "flat").check()
    eagle = R.SamplingCase("tree", "exact", "eagle-topk", 6, "flat").check()
    shape = R.SamplingCase("tree", "exact", "bf-flat", 6, "flat").check()
    assert chain.accept_width == 6 and eagle.accept_width == eagle.trees[0].max_depth + 1 and shape.accept_width == 7
    assert R.SamplingCase("tree", "exact", "bf-flat", 6, "flat", width=3).check().accept_width == 3


def test_distribution_inputs():
    """Shapes and dtypes as the kernels take them; the chain's drafts drawn from the draft's rows (the first
    draft's counts pass the family's own test against the root's draft row); seeded: the same arrays twice."""
    from ddtree_compat.families.sampling.distribution import counts, gof_test

    tree = R.tree_distribution_cases(rows=512)[0]
    got = tree.distribution_inputs()
    assert got["uniforms"].shape == (512, tree.nodes) and got["uniforms"].dtype == np.float32
    assert got["target"].shape == (tree.nodes, 8) and np.allclose(got["target"].sum(axis=1), 1.0)
    chain = R.chain_distribution_cases(rows=4096)[0]
    got = chain.distribution_inputs()
    assert got["candidates"].shape == (4096, 4) and got["candidates"].dtype == np.int64
    assert got["target"].shape == (4096, 4, 8) and got["draft"].shape == (4096, 3, 8)
    q = chain.draft_fn()(())
    result = gof_test(counts(got["candidates"][:, 1].tolist()), q)
    assert not result.reject, result.describe()
    row = 17
    context = tuple(int(x) for x in got["candidates"][row, 1:3])
    want = np.zeros(8, dtype=np.float32)
    for t, m in chain.target_fn()(context).items():
        want[t] = m
    assert (got["target"][row, 2] == want).all()
    again = chain.distribution_inputs()
    assert all((again[k] == got[k]).all() for k in got)


def test_records():
    assert R.KERNELS == ("tree_speculative_sampling", "chain_speculative_sampling", "ddtree_sample_distribution")
    for record in R.RECORDS:
        assert record.run == f"ddtree_compat.families.sampling.checks:{record.name}"
        assert record.case_param == "ddtree_sampling_case" and record.case_type is R.SamplingCase
        cases = record.cases(None)
        assert cases and all(record.label_of(c) in (record.name, f"{record.name}@distribution") for c in cases)
    assert R.TREE_RECORD.label_of(R.tree_distribution_cases()[0]) == "tree_speculative_sampling@distribution"
    assert R.CHAIN_RECORD.label_of(R.chain_exact_cases()[0]) == "chain_speculative_sampling"


def test_an_interpret_refusal_names_its_own_samplers_case():
    """On the interpret tier a Triton sampler runs one distribution case; the others skip naming that sampler's case,
    never another sampler's (a chain cell's reason does not name the DDTree case, absent without an implementation)."""
    from ddtree_compat.tiers import Target

    cpu = Target("interpret", "cpu", None, "cpu")
    chain = [c for c in R.chain_distribution_cases() if not c.id.startswith(R.INTERPRET_TRITON)]
    ddtree = [c for c in R.ddtree_distribution_cases() if not c.id.startswith(R.INTERPRET_TRITON)]
    assert chain and ddtree
    chain_why, ddtree_why = R.interpret_refusal(cpu, chain[0]), R.interpret_refusal(cpu, ddtree[0])
    assert "chain-distribution-chain-b3-peaked for this one" in chain_why and "ddtree-" not in chain_why
    assert "ddtree-distribution-bf-flat-b5-flat for this one" in ddtree_why and "chain-distribution" not in ddtree_why
    assert R.interpret_refusal(cpu, next(c for c in R.chain_distribution_cases()
                                         if c.id.startswith(R.INTERPRET_TRITON) and "-block" not in c.id)) is None
