"""CUDA graph captured at capacity C = 16, replayed with D < C nodes (the field failure's shape class):
the verify launch alone, and verify + the commit launches (``fill_accept_out_cache_loc``,
``fill_front_out_cache_loc_func``, ``prepare_verify_commit_outputs``, ``fill_bonus_tokens``) in one graph.

Device tier only; on the interpret tier the cells are skips with the reason, counted (the judging of
the verify + commit sequence runs eagerly on the CPU in ``tests/unit/test_graphs.py``).
"""

from dataclasses import replace

import pytest

from ddtree_compat.families.verify.records import GRAPH, VERIFY as VERIFY_KERNEL
from ddtree_compat.families.verify.records import make_case
from ddtree_compat.families.commit.records import PAGE_SIZES, CommitCase
from ddtree_compat.families.commit.graphs import COMMIT_GRAPH, GRAPH_COMMIT_KERNELS, run_commit_graph
from ddtree_compat.families.verify.graphs import run_verify_graph

CASES = [replace(c, accept_width=16)
         for c in (make_case(b, "spine", p, 3, capacity=16) for b in (1, 2, 3, 7, 8, 12, 14)
                   for p in ("none", "first", "deep"))
         if c is not None]  # spine mode with D = B + 1 < 16; "deep" needs B >= 2

# B = 8 (D = 9) and B = 12 (D = 13) in a graph of C = 16, and the D = C control (B = 15); page size
# rotating so each budget meets the in-place (1) and the compacting (16, 64) commit.
PLANTS = (("none", 3), ("first", 3), ("deep", 3), ("deep", 8))  # (plant, batch)
COMMIT_CASES = [CommitCase(replace(make_case(b, "spine", plant, bs, capacity=16), accept_width=16),
                           PAGE_SIZES[i % 3], "page-cross" if i % 2 else "start", 1, 64, "fp16")
                for i, (b, plant, bs) in enumerate((b, plant, bs) for b in (8, 12, 15) for plant, bs in PLANTS)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_verify_graph_replay_padded(ddtree_target, ddtree_backend, ddtree_check_run, case):
    ddtree_check_run(ddtree_target, ddtree_backend, GRAPH, case,
                     lambda: run_verify_graph(case, ddtree_backend, ddtree_target.device))


@pytest.mark.parametrize("case", COMMIT_CASES, ids=lambda c: c.id)
def test_verify_commit_graph_replay_padded(ddtree_target, ddtree_backend, ddtree_check_run, case):
    ddtree_check_run(ddtree_target, ddtree_backend, COMMIT_GRAPH, case,
                     lambda: run_commit_graph(case, ddtree_backend, ddtree_target.device),
                     needs=(VERIFY_KERNEL, *GRAPH_COMMIT_KERNELS))
