"""CUDA graph captured at capacity C = 16, replayed with D < C nodes (the field failure's shape class).

Device tier only; on the interpret tier the cells are skips with the reason, counted.
"""

from dataclasses import replace

import pytest

from ddtree_compat.cases import make_case
from ddtree_compat.graphs import run_verify_graph

CASES = [replace(c, accept_width=16)
         for c in (make_case(b, "spine", p, 3, capacity=16) for b in (1, 2, 3, 7, 8, 12, 14)
                   for p in ("none", "first", "deep"))
         if c is not None]  # spine mode with D = B + 1 < 16; "deep" needs B >= 2


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_verify_graph_replay_padded(ddtree_target, ddtree_backend, ddtree_check_run, case):
    ddtree_check_run(ddtree_target, ddtree_backend, "verify_tree_greedy@graph", case,
                     lambda: run_verify_graph(case, ddtree_backend, ddtree_target.device))
