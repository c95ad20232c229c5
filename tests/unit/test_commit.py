"""Commit oracle and checks: hand-worked layouts, mutants caught, JSON round trip, bad input."""

import pytest

from ddtree_compat import mutants
from ddtree_compat.backends.oracle import OracleBackend
from ddtree_compat.cases import make_case
from ddtree_compat.commit import KERNELS, CommitCase, commit_cases, kept_slots, layout, move_plan, run_commit
from ddtree_compat.errors import CaseError
from ddtree_compat.tiers import Target

CPU = Target("interpret", "cpu")
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
    assert run_commit(case, kernel, OracleBackend(), CPU).outcome == "pass"


@pytest.mark.parametrize("kernel", KERNELS)
def test_mutant_commit_is_caught(kernel):
    bad = run_commit(SIBLING, kernel, mutants.CommitMutant(), CPU)  # a non-contiguous kept path
    assert bad.outcome in ("wrong", "fault") and bad.message, kernel


def test_commit_case_json_round_trip_and_bad_input(tmp_path):
    path = SIBLING.save(tmp_path)
    assert CommitCase.from_json(path.read_text()) == SIBLING
    with pytest.raises(CaseError, match="field 'page_size' = 32"):
        CommitCase.from_json(SIBLING.to_json().replace('"page_size":16', '"page_size":32'))
    with pytest.raises(CaseError, match="field 'kv_dtype'"):
        CommitCase.from_json(SIBLING.to_json().replace('"kv_dtype":"bf16"', '"kv_dtype":"fp4"'))
