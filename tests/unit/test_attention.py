"""Verify attention: layout, reference, profiles, and checks that fail when they should (mutants, poison,
canaries, the tile-choice check, skips), emulation's patch and restore, report table."""

import math
from collections import Counter
from dataclasses import replace

import pytest
import torch

from ddtree_compat.families.attention.variants import AttentionCausal, AttentionMisreadsPrefixToken, AttentionSeesAll, AttentionWritesPastRows, AttentionWrongKVHead
from ddtree_compat.arch import TILE_ARCHES
from ddtree_compat.families.attention.checks import DTYPES, TOLERANCES, build, run_attention, verify_attention_reference
from ddtree_compat.families.attention.records import DEVICE_AXES, NATIVE, PADDINGS, TILES, AttentionCase, _tree, attention_cases
from ddtree_compat.backends.oracle_column import OracleBackend
from ddtree_compat.harness.buffers import FLOAT_POISON_BITS, Guarded
from ddtree_compat.errors import CaseError
from ddtree_compat.families.verify.oracle import ancestor_mask
from ddtree_compat.results import ResultRecord, Results
from ddtree_compat.report import render_markdown
from ddtree_compat.tiers import Target

CPU = Target("interpret", "cpu")
SMALL = dict(heads=4, group=2, head_dim=64, prefix=17, dtype="fp16", page_size=16)
EXACT = AttentionCase(_tree(16, "bf-peaked", 3, None), **SMALL)
NODES = AttentionCase(_tree(8, "spine", 3, 16), padding="nodes", **SMALL)
TAIL = AttentionCase(_tree(12, "random", 2, 16), padding="tail", stale=True, **{**SMALL, "page_size": 1})
CASES = [EXACT, NODES, TAIL, AttentionCase(_tree(4, "random", 5, None), **{**SMALL, "prefix": 0, "dtype": "bf16"})]


def _blocks(lay):
    qo, kv, mi = lay.qo_indptr.tolist(), lay.kv_indptr.tolist(), lay.mask_indptr.tolist()
    for b in range(len(qo) - 1):
        n, p = qo[b + 1] - qo[b], kv[b + 1] - kv[b]
        yield b, n, p, lay.custom_mask[mi[b]:mi[b] + n * (p + n)].view(n, p + n).to(torch.bool)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_layout_is_sglangs_target_verify_layout(case):
    lay = build(case, "cpu")
    v, n = case.verify, case.tokens_per_request
    assert lay.qo_indptr.dtype == lay.kv_indptr.dtype == torch.int32
    assert lay.kv_indices.dtype == lay.mask_indptr.dtype == torch.int64
    assert lay.custom_mask.dtype == (torch.uint8 if case.stale else torch.bool)
    assert lay.qo_indptr.tolist() == [b * n for b in range(v.batch + 1)] and lay.max_len_extend == n
    sizes = [n * (p + n) for p in case.prefix_lens]
    assert lay.mask_indptr.tolist() == [sum(sizes[:b]) for b in range(v.batch + 1)]
    assert (lay.custom_mask.numel() > sum(sizes)) == case.stale
    assert (lay.kv_indices.numel() > sum(case.prefix_lens)) == case.stale
    for b, rows, prefix, block in _blocks(lay):
        d = v.num_nodes
        assert prefix == case.prefix_lens[b] and block[:, :prefix].all()
        assert torch.equal(block[:d, prefix:prefix + d], torch.from_numpy(ancestor_mask(v.requests[b].tree)))
        assert not block[:d, prefix + d:].any()  # real rows never see padding nodes
        assert torch.equal(block[:, prefix:], block[:, prefix:].tril())  # causal-compatible (is_causal=True)
        assert block[:, prefix:].diagonal().all()  # every row sees itself
    slots = lay.kv_indices[:sum(case.prefix_lens)]
    assert len(set(slots.tolist())) == slots.numel()
    assert not torch.isnan(lay.k_buffer[slots].float()).any()
    unused = torch.ones(lay.k_buffer.shape[0], dtype=torch.bool)
    unused[slots] = False
    assert torch.isnan(lay.k_buffer[unused].float()).all() and torch.isnan(lay.v_buffer[unused].float()).all()
    if case.stale:  # the stale tail points at NaN slots
        assert unused[lay.kv_indices[slots.numel():]].all()
    if case.page_size > 1:  # whole pages per request, tokens contiguous inside a page
        at = 0
        for prefix in case.prefix_lens:
            own = slots[at:at + prefix]
            at += prefix
            t = torch.arange(prefix)
            assert torch.equal(own % case.page_size, t % case.page_size)
            for first in range(0, prefix, case.page_size):
                assert len(set((own[first:first + case.page_size] // case.page_size).tolist())) == 1
    rows = v.batch * v.slots
    assert lay.q.shape == (rows, case.heads, case.head_dim) and lay.k.shape == (rows, case.kv_heads, case.head_dim)
    if case.padding == "tail":  # rows past qo_indptr[-1] are NaN inputs
        assert torch.isnan(lay.q[v.batch * n:].float()).all() and not torch.isnan(lay.q[:v.batch * n].float()).any()
    assert (lay.o.view.view(torch.int16) == FLOAT_POISON_BITS[DTYPES[case.dtype]]).all()


def test_reference_is_sdpa_with_grouped_heads():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(5, 8, 16, generator=g), torch.randn(9, 2, 16, generator=g), torch.randn(9, 2, 16, generator=g)
    visible = torch.rand(5, 9, generator=g) < 0.6
    visible[:, 4:] = torch.eye(5, dtype=torch.bool) | visible[:, 4:]
    out = verify_attention_reference(q, k, v, visible, 0.25)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.double().transpose(0, 1), k.double().repeat_interleave(4, dim=1).transpose(0, 1),
        v.double().repeat_interleave(4, dim=1).transpose(0, 1), attn_mask=visible, scale=0.25).transpose(0, 1)
    assert out.dtype == torch.float32 and torch.allclose(out.double(), want, atol=1e-6)
    # query head h reads KV head h // G: heads 0-3 see KV head 0 only
    v2 = v.clone()
    v2[:, 1] += 100
    assert torch.equal(verify_attention_reference(q, k, v2, visible, 0.25)[:, :4], out[:, :4])


def test_reference_refuses_a_row_that_sees_nothing():
    q, k = torch.zeros(2, 1, 16), torch.zeros(3, 1, 16)
    with pytest.raises(CaseError, match="empty row"):
        verify_attention_reference(q, k, k, torch.tensor([[1, 0, 0], [0, 0, 0]], dtype=torch.bool), 1.0)


@pytest.mark.parametrize("case", [*CASES, *attention_cases("interpret")], ids=lambda c: c.id)
def test_oracle_backend_passes(case):
    v = run_attention(replace(case, tiles=NATIVE), OracleBackend(), CPU)
    assert v.outcome == "pass", v.message
    assert v.message.startswith("max |err| ")


@pytest.mark.parametrize("mutant, case, words", [
    (AttentionCausal, EXACT, "output element(s) off"),
    (AttentionSeesAll, NODES, "output element(s) off"),
    (AttentionWrongKVHead, EXACT, "output element(s) off"),
    (AttentionWritesPastRows, TAIL, "past qo_indptr[-1]"),
    # one prefix token of 1000 read from the wrong slot: still far outside the bf16 tolerance
    (AttentionMisreadsPrefixToken,
     AttentionCase(_tree(8, "spine", 2, None), **{**SMALL, "prefix": 1000, "dtype": "bf16"}), "max |err|"),
], ids=lambda x: getattr(x, "__name__", None) or getattr(x, "id", None) or str(x)[:20])
def test_mutants_are_caught(mutant, case, words):
    v = run_attention(case, mutant(), CPU)
    assert v.outcome == "wrong" and words in v.message, v.message


class _Writes(OracleBackend):
    """Test-only: writes ``o`` with ``fill(o)`` instead of attention."""

    def __init__(self, fill):
        self.fill = fill

    def verify_attention(self, q, k, v, o, *args, **kwargs):
        self.fill(o)


def test_unwritten_nan_and_out_of_bounds_writes_are_caught():
    skips = run_attention(EXACT, _Writes(lambda o: o[:-1].zero_()), CPU)
    assert skips.outcome == "wrong" and "unwritten" in skips.message
    nan = run_attention(EXACT, _Writes(lambda o: o.fill_(float("nan"))), CPU)
    assert nan.outcome == "wrong" and f"{o_count(EXACT)} NaN" in nan.message

    def past_end(o):
        torch.as_strided(o, (o.numel() + 1,), (1,))[-1] = 0

    assert "canary of o changed" in run_attention(EXACT, _Writes(past_end), CPU).message


def o_count(case):
    return case.verify.batch * case.tokens_per_request * case.heads * case.head_dim


def test_modified_input_is_caught():
    class ScribblesMask(OracleBackend):
        def verify_attention(self, q, k, v, o, k_buffer, v_buffer, qo, kv, kvi, custom_mask, *args, **kwargs):
            super().verify_attention(q, k, v, o, k_buffer, v_buffer, qo, kv, kvi, custom_mask, *args, **kwargs)
            custom_mask[-1] = not bool(custom_mask[-1])

    assert "input custom_mask was modified" in run_attention(EXACT, ScribblesMask(), CPU).message


class _Tiled(OracleBackend):
    """Test-only: declares tile emulation, reports ``launched`` as its launch, raises ``error`` if given."""

    attention_tiles = True

    def __init__(self, launched=None, error=None):
        self.launched, self.error = launched, error

    def attention_tile_choice(self, tiles, head_dim):
        return {"BLOCK_DMODEL": 64, "BLOCK_DPE": 0, "BLOCK_DV": 64, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4}

    def verify_attention(self, *args, tiles="native", **kwargs):
        if self.error:
            raise self.error
        super().verify_attention(*args, tiles=tiles, **kwargs)
        return self.launched


def test_a_launch_that_ignores_the_emulated_choice_is_wrong():
    case = replace(EXACT, tiles="sm120")
    good = {"BLOCK_DMODEL": 64, "BLOCK_DV": 64, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4}
    assert run_attention(case, _Tiled(good), CPU).outcome == "pass"
    v = run_attention(case, _Tiled({**good, "BLOCK_M": 128}), CPU)
    assert v.outcome == "wrong" and "did not use emulated-sm120's tile choice" in v.message
    assert run_attention(case, _Tiled(None), CPU).outcome == "wrong"


def test_emulated_config_out_of_resources_is_a_classified_skip_native_is_a_fault():
    oor = RuntimeError("OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 101376")
    v = run_attention(replace(EXACT, tiles="sm90"), _Tiled(error=oor), CPU)
    assert (v.outcome, v.fault_class) == ("skip", "out-of-resources") and "emulated-sm90 tiles" in v.message
    v = run_attention(EXACT, _Tiled(error=oor), CPU)
    assert (v.outcome, v.fault_class) == ("fault", "out-of-resources")


def test_tolerances_are_4u_and_stated():
    assert TOLERANCES["fp16"].atol == 4 * 2 ** -11 and TOLERANCES["bf16"].atol == 4 * 2 ** -8
    assert set(TOLERANCES) == set(DTYPES) and all(t.reason for t in TOLERANCES.values())


def test_json_round_trip_and_bad_fields():
    for case in (*CASES, replace(TAIL, tiles="sm120")):
        assert AttentionCase.from_json(case.to_json()) == case
    with pytest.raises(CaseError, match="invalid GQA"):
        replace(EXACT, heads=6, group=4).check()
    with pytest.raises(CaseError, match="capacity"):
        replace(NODES, padding="").check()
    with pytest.raises(CaseError, match="tile configuration"):
        replace(EXACT, tiles="sm75").check()
    with pytest.raises(CaseError, match="schema"):
        AttentionCase.from_json('{"schema": "other"}')


def test_an_emulated_arch_with_no_cell_of_its_own_runs_the_first_cells_shape(monkeypatch):
    """An arch added to the table with tile emulation needs no interpret cell to be covered (docs/extending.md)."""
    from ddtree_compat.families.attention import records

    monkeypatch.setattr(records, "TILES", (*TILES, "sm999"))
    cases = records._interpret_cases()
    added = [c for c in cases if c.tiles == "sm999"]
    assert len(added) == 1 and replace(added[0], tiles=cases[0].tiles) == cases[0]


def test_interpret_profile_covers_what_ci_must():
    cases = attention_cases("interpret")
    running = [c for c in cases if c.dtype == "fp16"]  # bf16 skips for Triton backends on the interpreter
    assert {c.tiles for c in running} == set(TILES)
    nodes = {c.verify.num_nodes for c in running}
    assert {9, 13} <= nodes and max(nodes) > 64  # odd D; D over two 64-row tiles
    assert {c.padding for c in running} >= set(PADDINGS)
    assert any(c.verify.batch == c.verify.num_nodes for c in running)  # bs == D
    assert {0, 1, 17} <= {c.prefix for c in running} and any(c.prefix > 128 for c in running)
    assert {1, 16} == {c.page_size for c in running} and any(c.stale for c in running)
    assert {1, 2, 4, 8} <= {c.group for c in running} and {64, 128, 256} == {c.head_dim for c in running}
    assert any(c.dtype == "bf16" for c in cases)


def test_device_profile_covers_every_axis_value_and_tile_choice():
    cases = attention_cases("device")
    for axis, values in DEVICE_AXES.items():
        assert {getattr(c, axis) for c in cases} == set(values), axis
    per_tiles = Counter(c.tiles for c in cases)
    assert set(per_tiles) == set(TILES) and min(per_tiles.values()) >= 150
    assert {c.padding for c in cases} == {"", *PADDINGS}
    assert any(c.verify.batch == c.verify.num_nodes == 5 for c in cases)
    assert len({c.id for c in cases}) == len(cases)
    assert attention_cases("device") == cases  # deterministic


def test_float_guard_poison_and_canaries():
    g = Guarded.poisoned_float((3, 4), torch.float16, "cpu")
    assert torch.isnan(g.view).all() and g.damaged_canaries() == []
    g.view[0, 0] = 1.0
    assert g.damaged_canaries() == []
    g.storage[-1] = 0
    assert g.damaged_canaries() == [12 + 31]


def test_emulation_patches_sglang_and_restores(monkeypatch, sglang_missing):
    from ddtree_compat.families.attention import tiles
    from ddtree_compat.families.attention.places import EXTEND_ATTENTION

    reason = sglang_missing(EXTEND_ATTENTION)  # SGLang or a module it imports not installed; else fail here
    if reason:
        pytest.skip(f"SGLang's extend attention cannot import here: {reason}")
    m = tiles.extend_attention_module()
    before = (m._is_cuda, getattr(m, "CUDA_CAPABILITY", "absent"))
    with tiles.capability("sm120"):
        assert (m._is_cuda, m.CUDA_CAPABILITY) == (True, (12, 0))
        inside = m._get_block_sizes_for_extend_attention(64, 64)
    assert (m._is_cuda, getattr(m, "CUDA_CAPABILITY", "absent")) == before
    choice = tiles.tile_choice("sm120", 64)
    assert tuple(choice.values()) == tuple(inside)
    for arch in TILE_ARCHES:
        for dim in (64, 128, 256):
            t = tiles.tile_choice(arch, dim)
            assert t["BLOCK_DMODEL"] == dim and all(math.log2(t[k]).is_integer() for k in ("BLOCK_M", "BLOCK_N"))


def test_interpreter_scalar_index_restores_the_hook():
    interpreter = pytest.importorskip("triton.runtime.interpreter")
    from ddtree_compat._triton_env import interpreter_scalar_index

    original = interpreter._patch_lang_tensor
    with interpreter_scalar_index():
        assert interpreter._patch_lang_tensor is not original
    assert interpreter._patch_lang_tensor is original


def test_report_has_an_attention_table():
    def rec(backend, kernel, shape, outcome):
        return ResultRecord(kernel=kernel, tier="device", backend=backend, arch="sm90", case_id="c", outcome=outcome,
                            budget=8, topology="spine", shape=shape)

    results = Results({}, [rec("sglang-triton", "verify_attention", "h8g4d64-pre17-fp16", "pass"),
                           rec("sglang-triton", "verify_attention@emulated-sm120", "h8g4d64-pre17-fp16", "wrong"),
                           rec("sglang-triton", "verify_attention@emulated-sm80", "h8g4d64-pre17-fp16", "pass"),
                           rec("oracle", "verify_attention", "h8g4d64-pre17-fp16", "pass")])
    text = render_markdown(results)
    assert "| backend · arch | shape | native | emulated-sm80 | emulated-sm120 |" in text
    assert "| sglang-triton · sm90 | h8g4d64-pre17-fp16 | ✅ 1 | ✅ 1 | ❌ 1 wrong |" in text
