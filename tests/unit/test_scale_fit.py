"""Deployment shapes on the user's card, on the CPU: every cell's whole footprint (the kernel's tensors as SGLang
allocates them, the check's own tensors and canary bands, each phase's temporaries, the adapter's copies) against
the free memory of a 32, 80, 96 and 141 GB card. A cell that fits runs; one that does not is a skip stating its size
and the card's free memory, never a pass and never our own out-of-memory ``error``."""

from __future__ import annotations

import pytest
import torch

from ddtree_compat.families.scale import boundaries as bd
from ddtree_compat.families.scale import checks as C
from ddtree_compat.families.scale import records as R
from ddtree_compat.families.scale.records import ScaleCase, scale_cases
from tests.unit.test_scale import SMALL

GIB = 2 ** 30
CARDS = {"RTX 5090 32 GB": 31.4, "H100 80 GB": 79.2, "RTX PRO 6000 96 GB": 94.9, "H200 141 GB": 139.8}
"""Each card's capacity in GiB as ``torch.cuda.mem_get_info`` reports its total."""
CONTEXT = 0.6
"""GiB a process holds before its first cell (the CUDA context with torch's, Triton's and the kernels' modules)."""
FREE = {card: int((cap - CONTEXT) * GIB) for card, cap in CARDS.items()}
"""Free memory at a cell's start, in bytes."""
CELLS = tuple(c for k in bd.KERNELS for c in scale_cases(k, "scale"))
"""Every cell of the ``scale`` profile (every vocabulary): the records' own cases, built on the CPU."""
KVCOPY = "kvcopy-ctx32768-bs128-above-2^32-el-k_buffer"
"""The cell whose judge ran out of memory on an H100 80 GB (a whole-pool count, 36 GiB of temporaries at once)."""


def _cell(case_id: str) -> ScaleCase:
    return next(c for c in CELLS if c.id == case_id)


def _adapters():
    """The backends whose adapters copy a cell (FlashInfer's paged copy; FA3's, through a DDTree build, with its page
    tables), and SGLang's own (no copy)."""
    from ddtree_compat.backends.ddtree_impl import DDTreeImplBackend
    from ddtree_compat.backends.flashinfer import FlashInferBackend

    return {"sglang": None, "flashinfer": FlashInferBackend(),
            "fa3": DDTreeImplBackend.__new__(DDTreeImplBackend)}  # its memory rule reads the case only


def test_the_profile_has_the_cells_it_had():
    assert len(CELLS) == 717 and len({c.id for c in CELLS}) == 717
    assert KVCOPY in {c.id for c in CELLS}


@pytest.mark.parametrize("card", CARDS)
def test_every_cell_runs_where_its_footprint_fits_and_else_skips_saying_its_size(card):
    free = FREE[card]
    for backend in _adapters().values():
        for case in CELLS:
            fp = case.footprint(C.adapter_nbytes(case, backend))
            reason = R.fit(case, fp, free)
            if fp.peak + R.HEADROOM <= free:
                assert reason is None, (card, case.id)
            else:
                assert reason.startswith(f"does not fit this GPU: needs {bd.gib(fp.peak)}, {bd.gib(free)} free on "
                                         "this GPU"), (card, case.id, reason)
                assert f"the kernel's tensors {case.tensors()[0][0]} " in reason


def _skips(free: int, backend=None) -> dict[str, int]:
    out: dict[str, int] = {}
    for case in CELLS:
        if R.fit(case, case.footprint(C.adapter_nbytes(case, backend)), free):
            out[case.kernel] = out.get(case.kernel, 0) + 1
    return out


def test_skips_per_card():
    """Cells that skip for size, per card (SGLang's own kernels; the attention cells through FlashInfer and FA3 add
    their copies of the pool). Fewer on each larger card; the KV copy and req_to_token cells skip on none."""
    counts = {card: sum(_skips(free).values()) for card, free in FREE.items()}
    assert counts == {"RTX 5090 32 GB": 230, "H100 80 GB": 116, "RTX PRO 6000 96 GB": 114, "H200 141 GB": 90}
    for backend in _adapters().values():
        per = [sum(_skips(free, backend).values()) for free in FREE.values()]
        assert per == sorted(per, reverse=True) and per[-1] < per[0]
        assert all("move_kv" not in _skips(free, backend) and "assign_req_to_token" not in _skips(free, backend)
                   for free in FREE.values())


def test_the_kv_copy_cell_that_ran_out_of_memory_on_an_h100_fits_it_now_and_skips_where_it_cannot():
    case = _cell(KVCOPY)
    fp = case.footprint()
    for card in CARDS:
        assert R.fit(case, fp, FREE[card]) is None, card  # 16.6 GiB: every card holds it
    reason = R.fit(case, fp, int(15 * GIB))  # a card with 15 GiB left by another process
    assert reason.startswith("does not fit this GPU: needs 16.6 GiB, 15.0 GiB free on this GPU (4.0 GiB of it left "
                             "as headroom): the kernel's tensors k_buffer [4194305, 8, 128] 8.0 GiB;"), reason


def test_an_attention_cell_skips_on_80_gb_with_its_size_and_runs_on_141_gb():
    case = _cell("attn-b64-ctx32768-bs1007-above-2^31-el-custom_mask")
    fp = case.footprint()
    reason = R.fit(case, fp, FREE["H100 80 GB"])
    assert reason.startswith(f"does not fit this GPU: needs {bd.gib(fp.peak)}, 78.6 GiB free on this GPU")
    assert "k_buffer [32997377, 8, 128] 62.9 GiB, v_buffer [32997377, 8, 128] 62.9 GiB, custom_mask [" in reason
    assert R.fit(case, fp, FREE["H200 141 GB"]) is None


def test_the_kv_copy_footprint_is_its_tensors_bands_and_the_judges_chunk_by_hand():
    """By hand for one cell: K and V pools of 2^32 + 1024 bf16 elements, the moved rows' int64 slots, five canary
    bands; the judge's peak is its count over one chunk of a pool (2^26 elements as a bool mask and its int64 copy)
    beside the moved rows' int16 pattern. Leaving the judge's chunk out would undercount by 576 MiB."""
    case = _cell(KVCOPY)
    pool = 128 * 32768 + 1
    moved = 128 * 17
    kv = pool * 8 * 128 * 2
    tensors = 2 * kv + 2 * moved * 8
    bands = 5 * R.ARENA_BAND  # every size here is a multiple of the 512-byte alignment
    judge = 2 * moved * 1024 + (2 ** 26) * 9  # the pattern kept for the judge; one chunk's count
    fp = case.footprint()
    assert fp.kernel == kv and fp.arena == tensors + bands
    assert fp.peak == tensors + bands + judge + R.ROUNDING
    assert fp.peak - fp.arena >= (2 ** 26) * 9 > 512 * 2 ** 20


def test_no_cells_footprint_is_under_its_kernels_tensors():
    for backend in _adapters().values():
        for case in CELLS:
            fp = case.footprint(C.adapter_nbytes(case, backend))
            assert fp.peak >= fp.arena + fp.judge >= fp.arena > fp.kernel == case.nbytes(), case.id
            assert fp.peak >= fp.arena + fp.adapter + fp.call


def test_the_arena_rule_is_what_the_arena_allocates():
    from ddtree_compat.harness import arena as A

    assert (R.ARENA_BAND, R.ARENA_ALIGN) == (A.BAND, A.ALIGN)
    for case in SMALL.values():
        a = A.Arena("cpu")
        a.take([(n, d, C.DTYPES[t]) for n, d, t in case.check().layout()])
        assert a.capacity == R.arena_nbytes(case.layout()), case.kernel


@pytest.mark.parametrize("kernel", list(bd.KERNELS))
def test_each_check_takes_exactly_its_layouts_tensors(kernel):
    from ddtree_compat.harness.arena import arena
    from tests.unit.references import reference_column

    case = SMALL[kernel].check()
    arena.cache_clear()
    try:
        assert getattr(C, kernel).judged(case, reference_column(kernel), "cpu").outcome == "pass"
        taken = arena("cpu")
        assert [n for n, _, side in taken.bands if side == "before"] == [n for n, _, _ in case.layout()]
        assert taken.capacity == R.arena_nbytes(case.layout())
    finally:
        arena.cache_clear()


def _gate(monkeypatch, free: int):
    """The cells' memory gate on a stand-in GPU of ``free`` bytes: a cell it lets through stops at the device's peak
    counter (``ran``)."""

    class Ran(Exception):
        pass

    def ran(device=None):
        raise Ran

    monkeypatch.setattr(C, "free_bytes", lambda device: free)
    monkeypatch.setattr(C, "_make_room", lambda device, fp, free: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", ran)
    return Ran


@pytest.mark.parametrize("card", ["RTX 5090 32 GB", "H100 80 GB", "H200 141 GB"])
def test_the_gate_runs_the_cells_that_fit_and_skips_the_rest(monkeypatch, card):
    from tests.unit.references import reference_column

    ran = _gate(monkeypatch, FREE[card])
    picked = [CELLS[i] for i in range(0, len(CELLS), 7)] + [_cell(KVCOPY)]
    for case in picked:
        fits = case.footprint().peak + R.HEADROOM <= FREE[card]
        if fits:
            with pytest.raises(ran):
                getattr(C, case.kernel)(case, reference_column(case.kernel), "cuda:0")
        else:
            verdict = getattr(C, case.kernel)(case, reference_column(case.kernel), "cuda:0")
            assert verdict.outcome == "skip" and verdict.message.startswith("does not fit this GPU: needs "), case.id


def test_our_own_out_of_memory_is_a_skip_stating_the_size_and_the_kernels_stays_a_fault(monkeypatch):
    """Memory another process took after the cell's start: the layout, the adapter's copies or the judge running out
    is a size skip; the kernel's own allocation running out is the fault rule's."""
    from ddtree_compat.contract import AdapterError
    from tests.unit.references import reference_column

    case = SMALL["move_kv"].check()
    oom = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 32.00 GiB.")

    def no_room(*args):
        raise oom

    with monkeypatch.context() as m:
        m.setattr(C, "_take", no_room)
        verdict = C.move_kv.judged(case, reference_column("move_kv"), "cpu")
    assert verdict.outcome == "skip" and verdict.message.startswith(
        "does not fit this GPU: the suite's own layout ran out of memory (needs ")

    with monkeypatch.context() as m:
        m.setattr(C, "_count_nonzero", no_room)
        verdict = C.move_kv.judged(case, reference_column("move_kv"), "cpu")
    assert verdict.outcome == "skip" and "the suite's own judge ran out of memory" in verdict.message

    class Copies(type(reference_column("move_kv"))):
        def move_kv(self, *args):
            try:
                raise oom
            except torch.cuda.OutOfMemoryError as e:
                raise AdapterError(f"an adapter: {e}") from e

    verdict = C.move_kv.judged(case, Copies(), "cpu")
    assert verdict.outcome == "skip" and "the suite's own adapter ran out of memory" in verdict.message

    class Kernel(type(reference_column("move_kv"))):
        def move_kv(self, *args):
            raise oom

    assert C.move_kv.judged(case, Kernel(), "cpu").outcome == "fault"


@pytest.mark.parametrize("kernel", list(bd.KERNELS))
def test_a_configurations_own_cell_has_a_footprint_too(kernel):
    """Preflight's cells are a configuration's own batch and shape (budget 15, a 256k context), not the grid's."""
    axes = bd.KERNELS[kernel].axes
    for batch in (1, 256, 3000):
        case = ScaleCase(kernel, batch, 248320 if "vocab" in axes else 0, 15 if "budget" in axes else 0,
                         262144 if "context" in axes else 0).check()
        fp = case.footprint()
        assert fp.peak >= fp.arena > fp.kernel == case.nbytes()
        assert R.arena_nbytes(case.layout()) == fp.arena


class _WritesNothing:
    """A kernel that writes nothing: every judge then walks its failure path too (its largest temporaries)."""

    implements = ()

    def __getattr__(self, name):
        if name in bd.KERNELS:
            return lambda *args, **kwargs: None
        raise AttributeError(name)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="measures CUDA allocations (run it on a GPU host)")
@pytest.mark.parametrize("kernel", list(bd.KERNELS))
def test_on_the_gpu_a_cells_peak_allocation_is_within_its_footprint(kernel):
    """The smallest ``scale`` cell of each kernel, laid out, called and judged on the GPU with a fresh arena: torch's
    peak allocation is no more than the footprint counts (the judge's count casts to int64 on CUDA only)."""
    from ddtree_compat.harness.arena import arena

    device = "cuda:0"
    case = min(scale_cases(kernel, "scale"), key=lambda c: c.footprint().peak)
    if case.footprint().peak + R.HEADROOM > C.free_bytes(device):
        pytest.skip(f"{case.id} needs {bd.gib(case.footprint().peak)}")
    arena(device).buffer = None
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    verdict = getattr(C, kernel).judged(case, _WritesNothing(), device)
    peak = torch.cuda.max_memory_allocated(device) - base
    arena(device).buffer = None
    torch.cuda.empty_cache()
    assert verdict.outcome in ("wrong", "zero-accept"), verdict.message
    assert peak <= case.footprint().peak, (case.id, peak, case.footprint())
