"""The verify-attention backends beside SGLang's Triton kernel, on the CPU: FlashInfer's adapter (the case's
buffers as a paged KV cache: each request's keys read back through the page table are its prefix then its
tree rows; the graph call's capture and live layouts; its errors as the suite's ``error``) and FA3 through a
DDTree implementation's FA metadata (who declares it, where it runs)."""

from dataclasses import replace

import pytest
import torch

from ddtree_compat.contract import unavailable
from ddtree_compat.backends.flashinfer import FlashInferBackend, graph_layouts
from ddtree_compat.families.attention.paging import gather_keys, paged_layout, request_pages
from ddtree_compat.contract.places import AdapterError
from ddtree_compat.families.attention.checks import build, verify_attention_reference
from ddtree_compat.families.attention.records import (CASCADE_KERNEL, GRAPH_KERNEL, KERNEL, AttentionCase, _tree,
                                                      attention_cases, captured_batch)
from ddtree_compat.harness.calls import fault_verdict
from ddtree_compat.tiers import Target

SMALL = dict(heads=4, group=2, head_dim=64, prefix=17, dtype="fp16")
CASES = [AttentionCase(_tree(16, "bf-peaked", 3, None), page_size=16, **SMALL),
         AttentionCase(_tree(8, "spine", 3, 16), padding="nodes", page_size=16, **SMALL),
         AttentionCase(_tree(12, "random", 2, 16), padding="tail", stale=True, page_size=1, **SMALL),
         AttentionCase(_tree(4, "random", 5, None), page_size=16, **{**SMALL, "prefix": 32}),
         AttentionCase(_tree(4, "random", 5, None), page_size=1, **{**SMALL, "prefix": 0})]


def _args(lay):
    return (lay.k, lay.v, lay.k_buffer, lay.v_buffer, lay.qo_indptr, lay.kv_indptr, lay.kv_indices, lay.custom_mask,
            lay.mask_indptr)


def _attend(layout, lay, case, q_rows, rows_per_request, requests):
    """Attention computed through the paged layout (FlashInfer's addressing), float32, per request."""
    out = []
    mi = [0, *torch.tensor([n * k for n, k in zip([rows_per_request] * requests, layout.kv_lens)]).cumsum(0).tolist()]
    for b in range(requests):
        keys, values = gather_keys(layout, b, case.page_size)
        block = layout.mask[mi[b]:mi[b + 1]].view(rows_per_request, layout.kv_lens[b])
        out.append(verify_attention_reference(q_rows[b * rows_per_request:(b + 1) * rows_per_request], keys, values,
                                              block, lay.sm_scale))
    return torch.cat(out)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_paged_layout_reads_back_prefix_then_tree_rows(case):
    lay = build(case, "cpu")
    before = {name: t.clone() for name, t in zip(("k", "v", "k_buffer", "v_buffer"), _args(lay)[:4])}
    layout = paged_layout(*_args(lay), case.page_size)
    qo, kv = lay.qo_indptr.tolist(), lay.kv_indptr.tolist()
    for b in range(case.verify.batch):
        keys, values = gather_keys(layout, b, case.page_size)
        slots = lay.kv_indices[kv[b]:kv[b + 1]]
        assert torch.equal(keys, torch.cat([lay.k_buffer[slots], lay.k[qo[b]:qo[b + 1]]])), f"request {b}"
        assert not keys.isnan().any() and not values.isnan().any(), "a NaN slot of the pool was paged in"
        assert torch.equal(values, torch.cat([lay.v_buffer[slots], lay.v[qo[b]:qo[b + 1]]]))
        assert 1 <= layout.last_page_len[b] <= case.page_size
    for name, t in zip(("k", "v", "k_buffer", "v_buffer"), _args(lay)[:4]):
        assert torch.equal(t.nan_to_num(), before[name].nan_to_num()), f"{name} was modified"
    n = case.tokens_per_request
    assert torch.allclose(_attend(layout, lay, case, lay.q, n, case.verify.batch), lay.reference, atol=1e-3)


def test_paged_layout_refuses_a_prefix_not_paged_by_the_page_size():
    with pytest.raises(ValueError, match="not paged by 16"):
        request_pages([16, 17, 40], 5, 16, 100)
    assert request_pages([32, 33], 20, 16, 100) == ([2, 100], 101)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_graph_layouts_capture_at_capacity_and_replay_the_live_requests(case):
    lay = build(case, "cpu")
    n, cap_rows, batch = case.tokens_per_request, case.verify.slots, captured_batch(case.verify.batch)
    qo_cap, cap, qo_live, live = graph_layouts(*_args(lay), n, case.page_size, cap_rows, batch)
    assert qo_cap.tolist() == list(range(0, (batch + 1) * cap_rows, cap_rows))
    assert qo_live.tolist() == list(range(0, (batch + 1) * n, n))
    assert live.k_cache.shape[0] <= cap.k_cache.shape[0] and live.kv_indices.numel() <= cap.kv_indices.numel()
    live_rows = case.verify.batch * n
    q = torch.cat([lay.q[:live_rows], torch.zeros(batch * n - live_rows, *lay.q.shape[1:], dtype=lay.q.dtype)])
    got = _attend(live, lay, case, q, n, batch)
    assert torch.allclose(got[:live_rows], lay.reference, atol=1e-3)
    for b in range(case.verify.batch, batch):  # padding requests: no prefix, their own rows, causal
        assert live.kv_lens[b] == n
        assert torch.equal(live.mask[sum(n * k for k in live.kv_lens[:b]):][:n * n].view(n, n),
                           torch.ones(n, n, dtype=torch.bool).tril())


def test_graph_layouts_refuse_a_batch_larger_than_captured():
    case = CASES[0]
    lay = build(case, "cpu")
    with pytest.raises(ValueError, match="do not fit"):
        graph_layouts(*_args(lay), case.tokens_per_request, 16, case.verify.slots, case.verify.batch - 1)


def test_captured_batch_is_the_smallest_that_holds_the_live_one():
    assert [captured_batch(b) for b in (1, 2, 3, 4, 5, 6, 8, 9)] == [1, 2, 4, 4, 8, 8, 8, 16]


def test_an_adapter_failure_is_the_suites_error_not_a_kernel_fault():
    case = CASES[0]
    lay = build(case, "cpu")
    with pytest.raises(AdapterError) as raised:
        FlashInferBackend().verify_attention_graph(*lay.args(), page_size=16, capacity=case.verify.slots,
                                                   captured_batch=1)
    assert fault_verdict(raised.value).outcome == "error"


def test_runs_on_the_device_tier_only_and_says_so():
    backend = FlashInferBackend()
    for kernel in (KERNEL, GRAPH_KERNEL):
        reason = unavailable(backend, kernel, Target("interpret", "cpu"))
        assert reason and "device tier only" in reason and "FlashInfer" in reason
    assert attention_cases("interpret")  # the same cases as every verify-attention backend


def test_fa3_verify_attention_is_declared_by_implementations_with_fa_metadata(tmp_path):
    from ddtree_compat.backends.ddtree_impl import FA3, DDTreeImplBackend, _fa3_cascade_refuse, _fa3_refuse
    from ddtree_compat.impls import DDTreeImpl

    def impl(*functions):
        return DDTreeImpl("x", tmp_path, kernel_module=tmp_path / "ddtree.py", kernel_functions=frozenset(functions))

    with_fa = DDTreeImplBackend(impl("build_ddtree_fa_full_metadata_triton", "build_ddtree_fa_suffix_metadata_triton",
                                     "build_ddtree_tree_triton"))
    without = DDTreeImplBackend(impl("build_ddtree_tree_triton"))
    declared = [i for i in with_fa.implements if i.kernel in (KERNEL, CASCADE_KERNEL)]
    assert [i.kernel for i in declared] == [KERNEL, CASCADE_KERNEL]
    assert all(i.places == FA3 and i.runtime == "cuda" for i in declared)
    assert not {KERNEL, CASCADE_KERNEL} & {i.kernel for i in without.implements}
    no_prefix = replace(CASES[2], prefix=0)
    assert "without a prefix" in _fa3_cascade_refuse(Target("device", "cuda:0", arch="sm90"), no_prefix)
    assert "sm90 only" in _fa3_refuse(Target("device", "cuda:0", arch="sm120"), CASES[0])
    assert "page size 1 only" in _fa3_refuse(Target("device", "cuda:0", arch="sm90"), CASES[0])
    assert _fa3_refuse(Target("device", "cuda:0", arch="sm90"), CASES[2]) is None
