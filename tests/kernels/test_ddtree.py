"""DDTree implementations' own kernels (``ddtree_compat.families.ddtree.records``): every record, every DDTree
implementation found (``--ddtree-impl`` / ``DDTREE_IMPLS``, or the installed sglang's), every case. Ids:
``sm90-rancy-ddtree-v2-433c58ed-ddtree_follow-b8-k8-peaked-bs3-worker``. Triton wrappers run on the device
tier (on the CPU they are counted skips: they refuse CPU tensors); CPU helpers on every tier.
"""


def test_ddtree_kernel(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_ddtree_case, ddtree_check):
    ddtree_check(ddtree_target, ddtree_backend, ddtree_kernel, ddtree_ddtree_case)


import pytest  # noqa: E402

from ddtree_compat.families.ddtree.checks import CHAIN_GRAPH, SAMPLE_CHAIN_GRAPH, run_chain_graph  # noqa: E402
from ddtree_compat.families.ddtree.records import BUILD, COMPILE, FOLLOW, SAMPLE, DDTreeCase  # noqa: E402

# The field's budgets at block size 16 (B = 8 and 12 below the block, 15 at it, 16 / 32 / 64 above), batch 3.
CHAIN_CASES = [DDTreeCase(b, logits=lg, batch=3, plant=p, past=17, layout="worker")
               for b in (8, 12, 15, 16, 32, 64) for lg, p in (("peaked", "deep"), ("flat", "sibling"))]


@pytest.mark.ddtree_needs(BUILD.name, COMPILE.name, FOLLOW.name)
@pytest.mark.parametrize("case", CHAIN_CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("sampling", [False, True], ids=["follow", "sample"])
def test_ddtree_round_in_one_cuda_graph(ddtree_target, ddtree_backend, ddtree_check_run, case, sampling):
    """build -> compile -> follow (or sampling verify) captured in one graph and replayed with new data."""
    ddtree_check_run(ddtree_target, ddtree_backend, SAMPLE_CHAIN_GRAPH if sampling else CHAIN_GRAPH, case,
                     lambda: run_chain_graph(case, ddtree_backend, ddtree_target.device, sampling=sampling),
                     needs=(BUILD.name, COMPILE.name, SAMPLE.name if sampling else FOLLOW.name))
