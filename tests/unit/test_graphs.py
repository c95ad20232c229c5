"""The verify + commit graph sequence, run eagerly on the CPU (no capture): the judging that the device
tier's CUDA-graph cells use, shown to pass on correct kernels and to fail, as a padded-layout failure,
on mutants."""

from dataclasses import replace

import pytest

from ddtree_compat.families.commit.reference import CommitReference
from ddtree_compat.families.commit.variants import CommitMutant, WritesPastCommit
from ddtree_compat.families.verify.variants import ZeroAccept
from ddtree_compat.contract import implementation, unavailable
from ddtree_compat.backends.registry import resolve
from ddtree_compat.backends.oracle_column import OracleBackend
from ddtree_compat.families.verify.records import make_case
from ddtree_compat.families.commit.records import CommitCase
from ddtree_compat.families.commit.graphs import GRAPH_COMMIT_KERNELS, run_commit_graph
from ddtree_compat.tiers import Target

CPU = Target("interpret", "cpu")


def padded(budget: int, plant: str, page: int, batch: int = 3) -> CommitCase:
    verify = replace(make_case(budget, "spine", plant, batch, capacity=16), accept_width=16)
    return CommitCase(verify, page, "page-cross", 1, 64, "fp16")


class ZeroAcceptRound(ZeroAccept, CommitReference):
    """The verify family's zero-accept variant with the reference's commit kernels (a whole round)."""

    implements = ZeroAccept.implements + CommitReference.implements


CASES = [padded(8, "deep", 1), padded(12, "first", 16), padded(12, "deep", 64, batch=8), padded(15, "deep", 16)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_oracle_sequence_passes(case):
    verdict = run_commit_graph(case, OracleBackend(), "cpu", graph=False)
    assert verdict.outcome == "pass", verdict.message


@pytest.mark.parametrize("case", CASES[:3], ids=lambda c: c.id)
def test_sglang_triton_sequence_interpreted(case, sglang_missing):
    (backend,) = resolve(["sglang-triton"])
    reason = next(filter(None, (sglang_missing(implementation(backend, k).places) or unavailable(backend, k, CPU)
                                for k in GRAPH_COMMIT_KERNELS)), None)
    if reason:
        pytest.skip(reason)
    front = "front_out_cache_loc"
    if sglang_missing(implementation(backend, front).places):
        backend.front_out_cache_loc = None  # this instance runs the sequence without the front kernel
    verdict = run_commit_graph(case, backend, "cpu", graph=False)
    assert verdict.outcome == "pass", verdict.message


@pytest.mark.parametrize("mutant, words", [
    (CommitMutant(), ("accept_out_cache_loc", "front_out_cache_loc", "new_seq_lens",
                              "bonus (fill_bonus_tokens)")),
    (WritesPastCommit(), ("accept_out_cache_loc", "want untouched")),
    (ZeroAcceptRound(), ("accept_token_num", "freed-slot set")),
], ids=lambda m: getattr(m, "name", ""))
def test_mutants_are_padded_layout_failures(mutant, words):
    verdict = run_commit_graph(CASES[0], mutant, "cpu", graph=False)
    assert verdict.outcome in ("wrong", "zero-accept"), verdict
    assert verdict.message.startswith("padded-layout failure (eager at C=16, D=9)"), verdict.message
    for w in words:
        assert w in verdict.message, (w, verdict.message)
