"""Deployment shapes on the CPU: the boundary derivation (shapes in, cells out), the case type, the profiles'
cells, and each kernel's check on small shapes against the reference column (pass) and against a kernel whose
offsets wrap at a small limit, as a 32-bit offset wraps at 2^31 (``wrong``, on the rows past the limit)."""

from __future__ import annotations

import pytest
import torch

from ddtree_compat import impls
from ddtree_compat.errors import CaseError
from ddtree_compat.families.scale import boundaries as bd
from ddtree_compat.families.scale import checks as C
from ddtree_compat.families.scale import oracle as O
from ddtree_compat.families.scale.records import RECORDS, ScaleCase, check_vocabs, scale_cases
from tests.unit.references import reference_column

# ---------------------------------------------------------------------------------------------- derivation


def test_the_field_vocabulary_crosses_2_31_elements_at_batch_509_for_budget_16():
    shape = bd.Shape(vocab=248320, budget=16)
    assert bd.crossing(bd.TARGET_PROBS, shape, 31) == 509  # 509 * 17 * 248320 = 2,148,804,..., > 2^31
    assert 508 * 17 * 248320 - 1 < 2 ** 31 <= 509 * 17 * 248320 - 1
    assert bd.crossing(bd.TARGET_PROBS, shape, 32) == 1018


def test_vllm_46560s_shape_is_past_the_2_31_boundary():
    """vLLM #46560: DFlash K = 15 (q = 16) at batch 963 and vocabulary 151936: 2.34e9 elements."""
    above = bd.crossing(bd.TARGET_PROBS, bd.Shape(vocab=151936, budget=15), 31)
    assert above <= 963 and 963 * 16 * 151936 > 2 ** 31


@pytest.mark.parametrize("kernel", list(bd.KERNELS))
def test_every_derived_cell_sits_on_its_side_of_its_limit(kernel):
    cells = bd.derived(kernel)
    assert cells
    for cell in cells:
        assert 1 <= cell.batch <= bd.MAX_BATCH
        if cell.side == "top":
            assert cell.batch == bd.MAX_BATCH
            assert all(bd.crossing(t, cell.shape, bits, unit) is None
                       or bd.crossing(t, cell.shape, bits, unit) > bd.MAX_BATCH
                       for t in bd.KERNELS[kernel].tensors for bits in bd.LIMITS
                       for unit in (("elements", "bytes") if t.byte_offsets else ("elements",)))
            continue
        t = next(t for t in bd.KERNELS[kernel].tensors if t.name == cell.tensor)
        scale = t.itemsize if cell.unit == "bytes" else 1
        last = t.numel(cell.shape, cell.batch) * scale - 1
        assert (last >= 2 ** cell.bits) == (cell.side == "above")
        other = cell.batch + (1 if cell.side == "below" else -1)
        if other >= 1:  # the batch on the other side crosses it the other way
            assert (t.numel(cell.shape, other) * scale - 1 >= 2 ** cell.bits) == (cell.side == "below")


def test_cells_are_one_per_batch_ascending_and_bytes_only_where_offsets_are_bytes():
    for kernel in bd.KERNELS:
        for shape in bd.KERNELS[kernel].shapes():
            batches = [c.batch for c in bd.boundaries(kernel, shape)]
            assert batches == sorted(set(batches))
    units = {c.unit for k in bd.KERNELS for c in bd.derived(k)}
    assert "bytes" in units
    assert {c.unit for c in bd.derived("move_kv") if c.side != "top"} >= {"bytes", "elements"}
    assert all(c.unit != "bytes" for k in bd.KERNELS if k != "move_kv" for c in bd.derived(k))


def test_greedy_verify_has_no_boundary_within_deployments_its_cells_sit_at_the_top():
    cells = bd.derived("verify_tree_greedy")
    assert {c.side for c in cells} == {"top"} and {c.batch for c in cells} == {bd.MAX_BATCH}


def test_a_tensor_that_does_not_grow_with_the_batch_has_no_crossing():
    fixed = bd.Indexed("fixed", lambda s, bs: (s.vocab, 4), 4)
    assert bd.crossing(fixed, bd.Shape(vocab=1 << 30), 31) is None


def test_the_scale_profile_has_every_derived_cell_and_other_profiles_a_slice():
    for record in RECORDS:
        kernel = record.name.partition("@")[0]
        full = scale_cases(kernel, "scale")
        assert [c.batch for c in full] == [b.batch for b in bd.derived(kernel)]
        piece = scale_cases(kernel, "default")
        assert 1 <= len(piece) <= 2 and all(c.vocab in (0, 248320) for c in piece)
    only = scale_cases("tree_speculative_sampling", "scale", (151936,))
    assert {c.vocab for c in only} == {151936}


def test_bad_vocab_values_are_one_line_errors():
    assert check_vocabs(["151936", "248320", "151936"]) == (151936, 248320)
    for bad in ("qwen", "1", "-5", "1.5e5"):
        with pytest.raises(CaseError, match="--ddtree-vocab"):
            check_vocabs([bad])


# ---------------------------------------------------------------------------------------------- the case type


def test_a_scale_case_round_trips_through_json_and_checks_its_fields():
    case = scale_cases("tree_speculative_sampling", "default")[1]
    assert ScaleCase.from_json(case.to_json()) == case
    assert case.id.startswith("tree-v248320-b16-bs")
    assert case.coordinates()["shape"] == "v248320-b16"
    with pytest.raises(CaseError, match="kernel"):
        ScaleCase("not_a_kernel", 3).check()
    with pytest.raises(CaseError, match="vocab"):
        ScaleCase("tree_speculative_sampling", 3, budget=16).check()
    with pytest.raises(CaseError, match="batch"):
        ScaleCase("move_kv", 0, context=1024).check()
    with pytest.raises(CaseError):
        ScaleCase.from_json('{"schema": "ddtree-compat/scale-case/1", "kernel": "move_kv"}')


def test_the_plants_tokens_sit_in_the_last_columns_of_each_row_and_differ_between_requests():
    v = 248320
    toks = [O.token(b, i, v) for b in range(8) for i in range(17)]
    assert all(v - O.WINDOW <= t < v for t in toks)
    assert len({O.token(b, 1, v) for b in range(64)}) == 64
    assert O.token(0, 1, 16) in range(16)


# ---------------------------------------------------------------------------------------------- the checks on CPU

CPU = "cpu"

SMALL = {"tree_speculative_sampling": ScaleCase("tree_speculative_sampling", 5, vocab=64, budget=3),
         "chain_speculative_sampling": ScaleCase("chain_speculative_sampling", 5, vocab=64, budget=3),
         "ddtree_sample": ScaleCase("ddtree_sample", 5, vocab=64, budget=3),
         "verify_tree_greedy": ScaleCase("verify_tree_greedy", 5, budget=7),
         "assign_req_to_token": ScaleCase("assign_req_to_token", 5, context=64),
         "move_kv": ScaleCase("move_kv", 3, context=40),
         "ddtree_fa_full": ScaleCase("ddtree_fa_full", 4, budget=3, context=24),
         "verify_attention": ScaleCase("verify_attention", 4, budget=3, context=20),
         "ddtree_compile": ScaleCase("ddtree_compile", 4, budget=3, context=12),
         "ddtree_fa_suffix": ScaleCase("ddtree_fa_suffix", 4, budget=3, context=24),
         "ddtree_build": ScaleCase("ddtree_build", 5, budget=8),
         "ddtree_prune": ScaleCase("ddtree_prune", 7, budget=32),
         "ddtree_follow": ScaleCase("ddtree_follow", 5, budget=7),
         "verify_attention_cascade": ScaleCase("verify_attention_cascade", 4, budget=3, context=20)}


def test_every_kernel_with_scale_cells_has_a_small_case_here_and_a_tag():
    from ddtree_compat.families.scale.records import TAGS

    assert set(SMALL) == set(bd.KERNELS) == set(TAGS) and len(set(TAGS.values())) == len(TAGS)


@pytest.mark.parametrize("kernel", list(bd.KERNELS))
def test_the_reference_column_passes_each_kernels_plant(kernel):
    verdict = getattr(C, kernel).judged(SMALL[kernel].check(), reference_column(kernel), CPU)
    assert verdict.outcome == "pass", verdict.message


IMPL_KERNELS = ("ddtree_build", "ddtree_prune", "ddtree_compile", "ddtree_fa_suffix", "ddtree_fa_full", "ddtree_follow",
                "ddtree_sample")
"""The deployment-shape kernels a DDTree implementation's own Triton wrappers run (FA3's are CUDA only)."""
IMPL_PATHS = impls.paths_from_env()
"""DDTREE_IMPLS as the run was given it (read at import: the unit tests' fixture clears DDTREE_* for inner sessions)."""


@pytest.mark.parametrize("kernel", IMPL_KERNELS)
def test_each_implementations_triton_kernel_passes_its_scale_layout_at_small_shapes(kernel):
    """The deployment-shape cell's layout (every request planted, outputs poisoned, the arena's canary bands) at a
    small shape, run by each DDTree implementation's own Triton wrapper under Triton's interpreter: the adapter's
    call is right before a GPU is spent on the cells at full size. Skips without an implementation (DDTREE_IMPLS)
    or without the interpreter (a GPU host runs the cells themselves)."""
    import os

    from ddtree_compat.backends.ddtree_impl import backends_for

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("runs under Triton's interpreter (a host without a GPU); a GPU host runs the scale cells")
    found = [b for b in backends_for(IMPL_PATHS) if kernel in {i.kernel for i in b.implements}]
    if not found:
        pytest.skip(f"no DDTree implementation with {kernel} (DDTREE_IMPLS=PATH[:PATH...])")
    for backend in found:
        verdict = getattr(C, kernel).judged(SMALL[kernel].check(), backend, CPU)
        assert verdict.outcome == "pass", (backend.name, verdict.message)


class _Wrapping:
    """A kernel whose offsets into one tensor wrap at ``limit`` elements, as a 32-bit offset wraps at 2^31: it reads
    (or writes) element ``i - limit`` where it should use ``i``. The reference otherwise."""

    def __init__(self, backend, tensor_arg: int, limit: int, write: bool = False):
        self.backend, self.arg, self.limit, self.write = backend, tensor_arg, limit, write

    def __getattr__(self, name):
        method = getattr(self.backend, name)
        if name not in bd.KERNELS:
            return method

        def call(*args, **kwargs):
            args = list(args)
            t = args[self.arg]
            flat = t.reshape(-1)
            if not self.write:
                seen = flat.clone()
                seen[self.limit:] = flat[:flat.numel() - self.limit]
                args[self.arg] = seen.view(t.shape)
                return method(*args, **kwargs)
            scratch = flat.clone()
            args[self.arg] = scratch.view(t.shape)
            method(*args, **kwargs)
            changed = (scratch != flat).nonzero().flatten()
            wrapped = torch.where(changed >= self.limit, changed - self.limit, changed)
            flat[wrapped] = scratch[changed]

        return call


WRAPPED = {"tree_speculative_sampling": (9, False), "chain_speculative_sampling": (9, False),
           "ddtree_sample": (0, False), "assign_req_to_token": (1, True), "ddtree_fa_full": (4, True),
           "verify_attention": (5, False), "ddtree_compile": (9, True), "ddtree_fa_suffix": (1, False),
           "ddtree_build": (1, False), "ddtree_prune": (7, True), "ddtree_follow": (0, False),
           "verify_attention_cascade": (5, False)}
"""Per kernel, the argument whose offsets wrap (the probabilities, req_to_token, the page table) and whether the
kernel writes it."""


@pytest.mark.parametrize("kernel", list(WRAPPED))
def test_offsets_that_wrap_past_a_limit_are_called_wrong_on_the_rows_past_it(kernel):
    case = SMALL[kernel].check()
    name = next(t for t in bd.KERNELS[kernel].tensors).name
    numel = next(t for t in bd.KERNELS[kernel].tensors).numel(case.shape, case.batch)
    arg, write = WRAPPED[kernel]
    broken = _Wrapping(reference_column(kernel), arg, numel * 3 // 5, write)
    verdict = getattr(C, kernel).judged(case, broken, CPU)
    assert verdict.outcome in ("wrong", "zero-accept"), (name, verdict.message)
    assert "differ" in verdict.message or "nonzero" in verdict.message


def test_the_arena_reuses_its_allocation_and_names_a_write_past_a_tensor():
    from ddtree_compat.harness.arena import Arena

    a = Arena("cpu")
    t = a.take([("x", (4, 8), torch.float32), ("y", (16,), torch.int64)])
    first = a.buffer.data_ptr()
    assert a.damaged() == []
    a.buffer[a.bands[1][1]] = 0  # the byte just past x
    assert a.damaged() == ["x: 1 canary byte(s) overwritten after it"]
    a.take([("z", (2, 2), torch.float32)])
    assert a.buffer.data_ptr() == first and a.damaged() == []  # smaller: the same allocation, fresh bands
    assert t["x"].shape == (4, 8) and t["y"].dtype == torch.int64


def test_paged_layout_nbytes_is_what_the_paged_layout_of_a_scale_cell_allocates():
    """The FlashInfer and FA3 adapters copy a cell's KV pool into their paged layout: the memory check counts it."""
    from ddtree_compat.backends.oracle_column import OracleBackend
    from ddtree_compat.families.attention import paging

    laid = []

    class Paging(OracleBackend):
        def verify_attention(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                             mask_indptr, max_len_extend, sm_scale, page_size, tiles="native"):
            laid.append(paging.paged_layout(k, v, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                                            mask_indptr, page_size))
            return super().verify_attention(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices,
                                            custom_mask, mask_indptr, max_len_extend, sm_scale, page_size)

    case = SMALL["verify_attention"].check()
    assert C.verify_attention.judged(case, Paging(), CPU).outcome == "pass"
    [layout] = laid
    allocated = sum(t.nbytes for t in (layout.k_cache, layout.v_cache, layout.kv_indptr, layout.kv_indices,
                                       layout.last_page_len))
    assert C.paged_copy_nbytes(case) == allocated
    from ddtree_compat.backends.flashinfer import FlashInferBackend

    assert C.adapter_nbytes(case, FlashInferBackend()) == allocated  # FlashInfer's adapter allocates no more


@pytest.mark.parametrize("kernel", ["verify_attention", "verify_attention_cascade"])
def test_a_cell_whose_adapter_copies_cannot_fit_is_a_skip_that_says_their_size(monkeypatch, kernel):
    from ddtree_compat.backends.ddtree_impl import DDTreeImplBackend

    case = SMALL[kernel].check()
    adapter = C.adapter_nbytes(case, DDTreeImplBackend.__new__(DDTreeImplBackend))  # its rule reads the case only
    assert adapter > 2 * next(b for name, _, b in case.tensors() if name == "k_buffer")  # the pool's copy and more
    need = case.footprint(adapter).peak
    assert need >= case.footprint().arena + adapter  # the call holds the copies beside the cell's tensors
    monkeypatch.setattr(C, "free_bytes", lambda device: need + C.HEADROOM - 1)
    verdict = getattr(C, kernel)(case, DDTreeImplBackend.__new__(DDTreeImplBackend), "cuda:0")
    assert verdict.outcome == "skip" and verdict.message.startswith(f"does not fit this GPU: needs {C.gib(need)}, ")
    assert f"the adapter's own copies {C.gib(adapter)}" in verdict.message
    from ddtree_compat.backends.oracle_column import OracleBackend

    fa3 = DDTreeImplBackend.__new__(DDTreeImplBackend)  # its memory rule reads the case only
    assert C.adapter_nbytes(case, OracleBackend()) == 0 and C.adapter_nbytes(SMALL["ddtree_sample"].check(), fa3) == 0


def test_a_cell_that_fits_the_gpu_alone_waits_for_other_workers_memory(monkeypatch):
    """Two workers on an 80 GB card: a 16 GiB cell beside another worker's 60 GiB one waits for it to give its
    memory back (H100, 2026-12-07: 129 sampler cells skipped as "does not fit" at 15 GiB free), and says so if the
    memory never comes."""
    case = SMALL["chain_speculative_sampling"].check()
    need = case.footprint().peak
    frees = iter([need, need + C.HEADROOM])  # busy, then the other worker's cell ends
    monkeypatch.setattr(C, "free_bytes", lambda device: next(frees))
    monkeypatch.setattr(C, "release", lambda device: None)
    monkeypatch.setattr("time.sleep", lambda seconds: None)
    free, waited = C.wait_for_memory("cuda:0", case.footprint())
    assert free == need + C.HEADROOM
    monkeypatch.setattr(C, "free_bytes", lambda device: need)
    free, waited = C.wait_for_memory("cuda:0", case.footprint(), wait_s=0.0)
    assert free == need and waited >= 0.0
