"""Commit oracle and checks: hand-worked layouts, mutants caught, JSON round trip, bad input."""

import pytest
import torch

from ddtree_compat.families.commit.variants import CommitMutant
from ddtree_compat.backends.oracle_column import OracleBackend
from ddtree_compat.families.verify.records import make_case
from ddtree_compat import records
from ddtree_compat.families.commit.checks import freed_set_report, kept_slots, layout, move_plan, plan_slots
from ddtree_compat.families.commit.records import KERNELS, CommitCase, commit_cases
from ddtree_compat.errors import CaseError
from ddtree_compat.tiers import Target

CPU = Target("interpret", "cpu")


def check(kernel: str):
    """The kernel's check, as the plugin finds it: through its record."""
    return records.get(kernel).runner()


SIBLING = CommitCase(make_case(16, "bf-peaked", "sibling", 3), 16, "page-cross", 2, 64, "bf16")


def test_grid_feeds_every_verify_case_and_rotates_layouts():
    cases = commit_cases()
    assert len({c.verify.id for c in cases}) == len(cases)
    assert {c.page_size for c in cases} == {1, 16, 64}
    assert {c.placement for c in cases} == {"start", "pool-end", "page-cross"}
    assert {c.kv_dtype for c in cases} == {"fp16", "bf16", "fp32", "fp8"}
    assert {c.head_dim for c in cases} == {64, 128, 256}


def test_layout_is_page_aligned_and_plans_are_the_accepted_path():
    lay = layout(SIBLING)
    cap, p = SIBLING.verify.slots, SIBLING.page_size
    for b, path in enumerate(lay.paths):
        block = lay.out_cache_loc[b * cap:b * cap + SIBLING.verify.num_nodes].tolist()
        start = int(lay.seq_lens[b])
        assert start % p == p - 2  # page-cross: the block starts two slots before a page boundary
        assert block[1] - block[0] == 1 and block[2] // p != block[1] // p or block[2] - block[1] == 1
        assert all(s != -1 for s in block)
    keep = kept_slots(SIBLING, lay).tolist()
    tgt, src = move_plan(SIBLING, lay)
    assert len(keep) == sum(len(p) for p in lay.paths) == len(tgt) == len(src)
    assert src.tolist() == keep


def test_zero_accept_commits_root_only():
    case = CommitCase(make_case(12, "spine", "none", 3), 1, "start", 1, 64, "fp32")
    lay = layout(case)
    assert [len(p) for p in lay.paths] == [1, 1, 1]
    assert kept_slots(case, lay).tolist() == [int(lay.out_cache_loc[b * 13]) for b in range(3)]


def test_pool_end_placement_uses_the_last_pages():
    case = CommitCase(make_case(8, "spine", "deep", 8), 64, "pool-end", 1, 64, "fp16")
    lay = layout(case)
    assert int(lay.out_cache_loc.max()) >= lay.pool_slots - case.page_size * 2


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", [SIBLING, CommitCase(make_case(8, "spine", "deep", 3, capacity=16), 64, "pool-end",
                                                      8, 128, "fp8")], ids=lambda c: c.id)
def test_oracle_backend_passes(kernel, case):
    assert check(kernel)(case, OracleBackend(), CPU).outcome == "pass"


@pytest.mark.parametrize("kernel", KERNELS)
def test_mutant_commit_is_caught(kernel):
    bad = check(kernel)(SIBLING, CommitMutant(), CPU)  # a non-contiguous kept path
    assert bad.outcome in ("wrong", "fault") and bad.message, kernel


class MovesAnotherPoolsRows(OracleBackend):
    """Writes each pool's target slots with another pool's source rows (only the pools' values tell it)."""

    def move_kv(self, k_buffers, v_buffers, tgt_loc, src_loc) -> None:
        pools = [*k_buffers, *v_buffers]
        rows = [buf[src_loc].clone() for buf in pools]
        for buf, other in zip(pools, rows[::-1]):
            buf[tgt_loc] = other


def test_kv_pools_differ_by_layer_and_are_a_fresh_copy_of_one_draw():
    from itertools import combinations

    from ddtree_compat.families.commit.checks import _kv_pool

    lay = layout(SIBLING)
    pools = [_kv_pool(SIBLING, lay, "cpu", i)[0] for i in range(4)]
    assert all(not torch.equal(a, b) for a, b in combinations(pools, 2))
    again = _kv_pool(SIBLING, lay, "cpu", 1)[0]
    assert torch.equal(again, pools[1]) and again.data_ptr() != pools[1].data_ptr()  # the cell may write it
    assert check("move_kv")(SIBLING, MovesAnotherPoolsRows(), CPU).outcome == "wrong"


def test_commit_case_json_round_trip_and_bad_input(tmp_path):
    path = SIBLING.save(tmp_path)
    assert CommitCase.from_json(path.read_text()) == SIBLING
    with pytest.raises(CaseError, match="field 'page_size' = 32"):
        CommitCase.from_json(SIBLING.to_json().replace('"page_size":16', '"page_size":32'))
    with pytest.raises(CaseError, match="field 'kv_dtype'"):
        CommitCase.from_json(SIBLING.to_json().replace('"kv_dtype":"bf16"', '"kv_dtype":"fp4"'))
    with pytest.raises(CaseError, match="commit case JSON: field 'fields'"):  # no nested verify case
        CommitCase.from_json('{"schema":"ddtree-compat/commit-case/1","page_size":16}')
    with pytest.raises(CaseError, match="field 'schema'"):
        CommitCase.from_json(SIBLING.to_json().replace("commit-case/1", "attention-case/1"))


# ---- freed-slot sets: the oracle's plan, and the check that derives them from kernel outputs

PAGED = CommitCase(make_case(12, "spine", "first", 3, capacity=16), 16, "page-cross", 1, 64, "fp16")  # D 13 of C 16


def test_plans_account_for_every_block_slot_and_free_whole_pages():
    """Over the grid: committed + freed = the block (padding never counted), retained + released = freed,
    given-back pages hold no committed slot, and at page size > 1 req_to_token stays page-consistent
    (position q -> a slot at offset q % page_size): nothing leaked, no live page freed."""
    for case in commit_cases()[::5]:
        lay, cap, p = layout(case), case.verify.slots, case.page_size
        for b, plan in enumerate(lay.plans):
            block = [s for s in lay.out_cache_loc[b * cap:(b + 1) * cap].tolist() if s != -1]
            assert len(block) == case.verify.num_nodes
            assert sorted(plan.committed_slots + plan.freed_slots) == sorted(block), case.id
            assert sorted(plan.retained_slots + plan.released_slots) == sorted(plan.freed_slots), case.id
            assert not {s // p for s in plan.released_slots} & {s // p for s in plan.committed_slots}, case.id
            if p > 1:
                assert all(slot % p == pos % p for pos, slot in plan.req_to_token), case.id
                assert len(plan.retained_slots) == min(-plan.new_seq_len % p, len(plan.freed_slots)), case.id
            else:
                assert plan.committed_slots == plan.kept_slots and not plan.retained_slots


def test_paged_plan_is_compacting_and_releases_from_the_page_boundary():
    lay = layout(PAGED)
    plan, start = lay.plans[0], int(lay.seq_lens[0])
    block = lay.out_cache_loc[:13].tolist()
    assert start % 16 == 14 and plan.commit_len == 2  # the block starts 2 slots before a page end
    assert plan.front_slots == plan.committed_slots == tuple(block[:2])
    assert plan.retained_slots == () and plan.released_slots == tuple(block[2:])  # new_seq_len is page-aligned
    assert plan.req_to_token == ((start, block[0]), (start + 1, block[1]))


@pytest.mark.parametrize("case", [SIBLING, PAGED, CommitCase(make_case(8, "bf-peaked", "sibling", 3, capacity=16), 1,
                                                               "start", 1, 64, "fp16")], ids=lambda c: c.id)
def test_freed_set_report_accepts_the_oracle_and_catches_wrong_keep_sets(case):
    lay, cap = layout(case), case.verify.slots
    committed = plan_slots(lay, "committed_slots").tolist()
    assert freed_set_report(lay, cap, committed=committed) == []
    assert freed_set_report(lay, cap, new_seq_lens=[p.new_seq_len for p in lay.plans]) == []
    wrong = committed[:-1] + [-1]  # a padding slot kept in place of the last committed one
    report = " ".join(freed_set_report(lay, cap, committed=wrong))
    assert "not slots of its verify block" in report and "freed-slot set differs" in report
    kept = plan_slots(lay, "kept_slots").tolist()
    if case.page_size > 1 and kept != committed:  # in place at page size > 1 (a sibling path): wrong slots freed
        report = " ".join(freed_set_report(lay, cap, committed=kept))
        assert "freed-slot set differs" in report and "hold committed K/V" in report


def test_release_boundary_catches_unadvanced_and_overadvanced_lengths():
    """page size > 1: seq_lens not advanced gives back the committed page; advanced a page too far
    leaks the tail (SGLang releases from ceil_align(kv_committed_len, page_size))."""
    case = CommitCase(make_case(12, "spine", "deep", 3, capacity=16), 16, "page-cross", 1, 64, "fp16")
    lay, cap = layout(case), case.verify.slots  # blocks of 13 starting 2 slots before a page end, all accepted
    stale = [int(s) for s in lay.seq_lens]
    assert any("hold committed K/V" in p for p in freed_set_report(lay, cap, new_seq_lens=stale))
    lay = layout(PAGED)  # one draft accepted: 11 tail slots to give back
    ahead = [p.new_seq_len + 16 for p in lay.plans]
    assert any("never given back (leaked" in p for p in freed_set_report(lay, cap, new_seq_lens=ahead))


def test_padding_is_never_freed():
    case = CommitCase(make_case(8, "spine", "none", 3, capacity=16), 1, "start", 1, 64, "fp32")
    lay = layout(case)
    assert all(-1 not in plan.freed_slots and len(plan.freed_slots) == 8 for plan in lay.plans)
    assert lay.out_cache_loc.tolist().count(-1) == 3 * 7


@pytest.mark.parametrize("kernel, page, words", [
    ("accept_out_cache_loc", 1, ("not slots of its verify block", "freed-slot set differs")),
    ("front_out_cache_loc", 16, ("freed-slot set differs",)),
    ("commit_outputs", 16, ("hold committed K/V",)),  # seq_lens one short: the release starts a page early
])
def test_mutant_commit_fails_the_freed_set_check(kernel, page, words):
    case = CommitCase(make_case(12, "spine", "partial", 3, capacity=16), page, "page-cross", 1, 64, "fp16")
    message = check(kernel)(case, CommitMutant(), CPU).message
    assert all(w in message for w in words), message
