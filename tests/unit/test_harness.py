"""The checks fail when they should: mutant backends, poison, canaries, faults, skips."""

import pytest

from ddtree_compat.families.verify.variants import OffByOne, OutOfBounds, SkipsPredicts, WritesTail, ZeroAccept
from ddtree_compat.faultinject import Raises
from ddtree_compat.contract import implementation, unavailable
from ddtree_compat.backends.registry import resolve
from ddtree_compat.backends.oracle_column import OracleBackend
from ddtree_compat.harness.buffers import CANARY_BAND, POISON
from ddtree_compat.families.verify.checks import make_verify_buffers
from ddtree_compat.families.verify.records import grid, make_case
from ddtree_compat.errors import BackendError
from ddtree_compat.faults import FAULT_CLASSES, classify
from ddtree_compat.families.verify.checks import run_verify
from ddtree_compat.tiers import Target

CPU = Target("interpret", "cpu")
DEEP = make_case(8, "spine", "deep", 3)
SIBLING = make_case(16, "bf-peaked", "sibling", 3)


@pytest.mark.parametrize("case", [DEEP, SIBLING, make_case(0, "spine", "none", 1), make_case(8, "spine", "deep", 3, capacity=16)],
                         ids=lambda c: c.id)
def test_oracle_backend_passes(case):
    v = run_verify(case, OracleBackend(), CPU)
    assert v.outcome == "pass", v.message
    assert v.accepted_got == v.accepted_expected


@pytest.mark.parametrize("mutant, outcome, words", [
    (ZeroAccept, "zero-accept", "accept length 1.00"),
    (SkipsPredicts, "wrong", "predicts"),
    (WritesTail, "wrong", "accept_index"),
    (OutOfBounds, "wrong", "canary of accept_token_num"),
    (OffByOne, "wrong", "accept_token_num"),
    (Raises, "fault", "illegal instruction"),
])
def test_mutants_are_caught(mutant, outcome, words):
    v = run_verify(SIBLING, mutant(), CPU)
    assert v.outcome == outcome
    assert words in v.message


def test_fault_class_recorded():
    assert run_verify(DEEP, Raises(), CPU).fault_class == "illegal-instruction"


def test_zero_accept_only_when_drafts_were_planted():
    none_case = make_case(8, "spine", "none", 3)
    assert run_verify(none_case, ZeroAccept(), CPU).outcome == "pass"


def test_buffers_are_poisoned_and_banded():
    bufs = make_verify_buffers(SIBLING, "cpu")
    assert (bufs.predicts.view == POISON).all() and (bufs.accept_index.view == POISON).all()
    assert bufs.predicts.storage.numel() == bufs.predicts.view.numel() + 2 * CANARY_BAND
    assert bufs.predicts.damaged_canaries() == []
    bufs.predicts.storage[0] = 0
    assert bufs.predicts.damaged_canaries() == [-CANARY_BAND]


@pytest.mark.parametrize("text, cls", [
    ("CUDA error: an illegal instruction was encountered", "illegal-instruction"),
    ("CUDA error: no kernel image is available for execution on the device", "no-kernel-image"),
    ("CUDA error: an illegal memory access was encountered", "illegal-memory-access"),
    ("CUDA error: misaligned address", "misaligned-address"),
    ("RuntimeError: CUDA error: device-side assert triggered", "device-side-assert"),
    ("CUDA error: unspecified launch failure", "launch-failure"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate", "out-of-memory"),
    ("OutOfResources: out of resource: shared memory, Required: 262144", "out-of-resources"),
    ("triton.compiler.errors.CompilationError: at 12:4", "triton-compile-error"),
    ("Failed: Timeout >300.0s", "hang"),
    ("ValueError: something else", "other"),
    # PyTorch's boilerplate mentions device-side assertions on every CUDA error: the primary clause decides.
    ("AcceleratorError: CUDA error: unspecified launch failure Search for `cudaErrorLaunchFailure' in https://docs."
     " CUDA kernel errors might be asynchronously reported... Compile with `TORCH_USE_CUDA_DSA` to enable "
     "device-side assertions.", "launch-failure"),
    ("AcceleratorError: CUDA error: device-side assert triggered Search for `cudaErrorAssert' ... Compile with "
     "`TORCH_USE_CUDA_DSA` to enable device-side assertions.", "device-side-assert"),
])
def test_fault_classes(text, cls):
    assert cls in FAULT_CLASSES and classify(text) == cls


def test_backend_resolution():
    assert [b.name for b in resolve(None)][:3] == ["oracle", "sglang-triton", "sglang-cuda"]
    assert [b.name for b in resolve(["ddtree_compat.families.verify.variants:ZeroAccept"])] == ["mutant-zero-accept"]
    with pytest.raises(BackendError, match="field '--ddtree-backend' = 'cutlass'.*allowed: oracle"):
        resolve(["cutlass"])
    with pytest.raises(BackendError, match="cannot load"):
        resolve(["no.such.module:Thing"])
    with pytest.raises(BackendError, match="not a backend"):
        resolve(["ddtree_compat.cases:PLANTS"])


def test_sglang_triton_interpret_matches_oracle_on_a_grid_slice(sglang_missing):
    """The real SGLang Triton kernel under TRITON_INTERPRET. Skips where SGLang (or a module it imports)
    is not installed, naming it, or off the interpret tier; an adapter whose places the installed SGLang
    does not have fails here (``Absent``), never a skip."""
    (triton,) = resolve(["sglang-triton"])
    reason = sglang_missing(implementation(triton, "verify_tree_greedy").places) or unavailable(
        triton, "verify_tree_greedy", CPU)
    if reason:
        pytest.skip(reason)
    for case in [c for c in grid() if c.budget in (8, 12)][::9]:
        v = run_verify(case, triton, CPU)
        assert v.outcome == "pass", (case.id, v.message)


def test_a_check_that_gives_memory_back_keeps_its_fault_when_the_context_is_poisoned(monkeypatch):
    """After a kernel's illegal memory access, giving the cache back raises too: the cell stays the kernel's fault
    (its worker is then replaced), never the suite's error."""
    import torch

    from ddtree_compat.harness.calls import check

    class Backend:
        name = "b"

    def poisoned():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", poisoned)

    @check(release=True)
    def kernel_faults(case, backend, device):
        from ddtree_compat.harness.calls import kernel_running

        with kernel_running():
            poisoned()

    verdict = kernel_faults(None, Backend(), "cpu")
    assert verdict.outcome == "fault" and verdict.fault_class == "illegal-memory-access", verdict
