"""Static tier: each kernel compiled ahead of time for each arch on the CPU and checked for fit.

``test_static`` is parametrized by the ddtree_compat plugin over arch x backend x the backend's
``static_kernels`` x their specializations over the case grid; ids read
``static-sm120-sglang-triton-verify_tree_greedy-bs3-w16-c16``, marks ``static``, the arch and its
family, so ``pytest -m sm120`` on a CPU machine runs the sm120 static cells. Results join the matrix
with tier ``static``.
"""

import pytest

from ddtree_compat.arch import detect_gpus
from ddtree_compat.faultinject import OversizedSmem
from ddtree_compat.plugin import arch_marks
from ddtree_compat.static.kernels import SGLANG_VERIFY_ATTENTION, Spec
from ddtree_compat.static.limits import limits_for
from ddtree_compat.static.runner import StaticCell, run_static


def test_static(ddtree_static_cell, ddtree_check_static):
    verdict = ddtree_check_static(ddtree_static_cell)
    assert verdict.outcome == "pass" and verdict.message.startswith("fits "), verdict.message


PLANTED = OversizedSmem.PLANTED


@pytest.mark.static
@pytest.mark.long
@pytest.mark.parametrize("arch", [pytest.param(a, marks=arch_marks(a)) for a in ("sm120", "sm90")])
def test_planted_oversized_smem_is_out_of_resources_on_sm120_only(arch, ddtree_static_cache):
    """The planted configuration (128 KB of shared memory on sm120, 160 KB on sm90) must be caught on
    sm120 (99 KB per block) and pass on sm90 (227 KB)."""
    spec = PLANTED.specialize(None, arch)
    verdict = run_static(StaticCell(arch, OversizedSmem.name, PLANTED, spec), ddtree_static_cache)
    if verdict.outcome == "skip":
        pytest.skip(verdict.message)
    if arch == "sm120":
        assert (verdict.outcome, verdict.fault_class) == ("fault", "out-of-resources"), verdict.message
        for words in ("out of resources", "oversized_smem_kernel", "num_warps=8, num_stages=4", "on sm120",
                      "shared memory 131072 B > 101376 B per block"):
            assert words in verdict.message, verdict.message
    else:
        assert verdict.outcome == "pass", verdict.message
        assert "smem 163840/232448 B" in verdict.message, verdict.message


@pytest.mark.static
@pytest.mark.long
@pytest.mark.parametrize("arch", [pytest.param("sm120", marks=arch_marks("sm120"))])
def test_oversized_attention_tiles_are_out_of_resources_on_sm120(arch, ddtree_static_cache):
    """SGLang's verify attention at head_dim 256 with 128 x 128 tiles (a choice SGLang does not make on
    sm120: it picks 64 x 64 there) needs 160 KB of shared memory: the attention entry must call it
    ``out of resources`` on sm120, naming the tile config."""
    spec = Spec("d256-bf16-m128-n128", (("head_dim", 256), ("BLOCK_M", 128), ("BLOCK_N", 128), ("BLOCK_N_PREFIX", 128)))
    verdict = run_static(StaticCell(arch, "sglang-triton", SGLANG_VERIFY_ATTENTION, spec), ddtree_static_cache)
    if verdict.outcome == "skip":
        pytest.skip(verdict.message)
    assert (verdict.outcome, verdict.fault_class) == ("fault", "out-of-resources"), verdict.message
    for words in ("out of resources", "verify_attention", "BLOCK_M=128, BLOCK_N=128", "num_warps=8, num_stages=1",
                  "on sm120", "> 101376 B per block"):
        assert words in verdict.message, verdict.message


@pytest.mark.device
def test_limits_table_matches_each_visible_gpu():
    """On a GPU host: the table's per-block shared memory equals the device's opt-in maximum."""
    gpus = [g for g in detect_gpus() if not g.fake]
    if not gpus:
        pytest.skip("no real GPU visible: the limits table is checked against torch.cuda on a GPU host")
    import torch

    for g in gpus:
        optin = getattr(torch.cuda.get_device_properties(g.index), "shared_memory_per_block_optin", None)
        if optin is None:
            pytest.skip(f"torch {torch.__version__} does not report shared_memory_per_block_optin")
        assert optin == limits_for(g.arch).smem_per_block, (g, optin)
