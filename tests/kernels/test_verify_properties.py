"""Property tests: drawn trees, budgets, tokens and planted paths, backend against oracle.

Profiles: ``ci`` (derandomized, 40 examples, no deadline; the default) and ``nightly``
(``--hypothesis-profile nightly``: 2,000 examples). A failure shrinks to a minimal tree; the failing
message carries the replay line of that tree's case JSON.
"""

import pytest
from hypothesis import given

from ddtree_compat.families.verify.strategies import verify_cases


@pytest.mark.long
@given(case=verify_cases())
def test_verify_tree_greedy_on_drawn_trees(ddtree_target, ddtree_backend, ddtree_check_verify, case):
    ddtree_check_verify(ddtree_target, ddtree_backend, case)
