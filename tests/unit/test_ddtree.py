"""The DDTree tier's own machinery on the CPU: the oracle's rules, the cases, and every DDTree check
against a reference written from the oracle and against a variant that breaks each kernel once."""

import pytest

from ddtree_compat import records
from ddtree_compat.contract import CaseContext
from ddtree_compat.families.ddtree.records import KERNELS, DDTreeCase
from ddtree_compat.families.ddtree.variants import DDTreeBreaks
from ddtree_compat.families.ddtree.reference import DDTreeReference
from ddtree_compat.families.ddtree.oracle import CPU_RULE, KERNEL_RULE, build, graph_buckets, prune_deepest_chains, select_bucket
from ddtree_compat.tiers import Target

CPU = Target("interpret", "cpu")


@pytest.mark.parametrize("budget, prune, want", [
    (8, False, [9]), (8, True, [8, 9]), (12, True, [8, 12, 13]), (15, True, [8, 12, 16]), (16, True, [8, 12, 16, 17]),
    (32, True, [8, 12, 16, 20, 24, 28, 33]), (64, True, [8, 12, 16, 24, 32, 40, 48, 56, 65]), (0, True, [1]),
    (7, True, [8])])
def test_graph_buckets(budget, prune, want):
    assert graph_buckets(budget, prune) == want


def test_configured_buckets_drop_widths_past_the_budget():
    assert graph_buckets(8, False, (4, 16, 9)) == [4, 9]
    assert graph_buckets(8, False, (20,)) == [9]
    assert [select_bucket(s, [8, 12, 16, 20, 24, 28, 33]) for s in (0, 1, 8, 9, 13, 29, 33, 40)] == [
        8, 8, 8, 12, 16, 33, 33, 33]


def test_exhausted_heap_stops_on_the_cpu_and_repeats_in_the_kernel():
    lp, ids = [[0.0], [0.0], [0.0]], [[5], [6], [7]]
    assert build(lp, ids, 6, CPU_RULE).parents == (-1, 0, 1, 2)
    kernel = build(lp, ids, 6, KERNEL_RULE)
    assert kernel.tokens == (5, 6, 7, 5, 5, 5) and kernel.parents == (-1, 0, 1, 2, 0, 0, 0)


def test_tie_rules_agree_without_ties_and_part_on_tied_sums():
    untied = DDTreeCase(32, logits="flat", batch=3)
    assert untied.built(CPU_RULE) == untied.built(KERNEL_RULE)
    tied = [DDTreeCase(b, logits="ties", batch=8) for b in (16, 32, 64)]
    assert any(c.built(CPU_RULE) != c.built(KERNEL_RULE) for c in tied)


def test_prune_keeps_the_root_and_the_deepest_chains():
    lp, ids = [[-0.1, -0.2], [-0.1, -0.3], [-0.1, -0.5]], [[1, 2], [3, 4], [5, 6]]
    tree = build(lp, ids, 6, CPU_RULE)
    pruned, kept = prune_deepest_chains(tree)
    assert kept[0] == 0 and max(pruned.depths) == max(tree.depths) == 3
    assert all(d <= 3 for d in pruned.depths) and len(kept) < tree.size


def test_case_ids_are_unique_and_round_trip():
    ctx = CaseContext("default", ())
    for record in (r for r in records.registry().values() if r.name in KERNELS):
        cases = record.cases(ctx)
        assert len({c.id for c in cases}) == len(cases) > 0, record.name
        assert DDTreeCase.from_json(cases[-1].to_json()) == cases[-1]


def _slice(record, per=40):
    cases = record.cases(CaseContext("default", ()))
    return cases[::max(1, len(cases) // per)] + tuple(c for c in cases if c.layout == "worker" and c.prune and c.batch > 1)[:3]


@pytest.mark.parametrize("kernel", KERNELS)
def test_reference_passes_every_check(kernel):
    record = records.get(kernel)
    for case in _slice(record):
        verdict = record.runner()(case, DDTreeReference(), CPU)
        assert verdict.outcome == "pass", (case.id, verdict.message[:600])


@pytest.mark.parametrize("kernel", KERNELS)
def test_each_check_catches_its_broken_kernel(kernel):
    record = records.get(kernel)
    outcomes = {case.id: record.runner()(case, DDTreeBreaks(), CPU) for case in _slice(record, per=80)}
    wrong = [v for v in outcomes.values() if v.outcome == "wrong"]
    assert wrong, f"{kernel}: the broken variant passed every case: {list(outcomes)[:5]}"
    assert all(v.outcome in ("wrong", "pass") for v in outcomes.values()), [v.message for v in outcomes.values()]
