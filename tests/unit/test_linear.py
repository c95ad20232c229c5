"""The linear-attention family: the oracle's rules on hand-worked trees, the reference column passing every case,
each broken variant called wrong on every case that can show it, the cases' geometry and bad input."""

import numpy as np
import pytest

from ddtree_compat import records
from ddtree_compat.contract import CaseContext
from ddtree_compat.backends.oracle_column import OracleBackend
from ddtree_compat.errors import CaseError
from ddtree_compat.impls import paths_from_env
from ddtree_compat.families.linear import oracle
from ddtree_compat.families.linear.records import (GEOMETRIES, KERNELS, LinearCase, geometry, linear_cases,
                                                   worker_capacity)
from ddtree_compat.families.linear.variants import CommitsWrongStep, ConvWindowShifted, TreeAsChain
from ddtree_compat.families.verify.records import make_case
from ddtree_compat.tiers import Target

CASES = linear_cases("interpret")


def run(kernel: str, case, backend):
    return records.get(kernel).runner()(case, backend, "cpu")


def test_a_node_starts_from_its_parent_never_a_sibling():
    rng = np.random.default_rng(0)
    d, h, hv, k = 4, 1, 2, 8
    q, kk, v = rng.normal(size=(d, h, k)), rng.normal(size=(d, h, k)), rng.normal(size=(d, hv, k))
    a, b = rng.normal(size=(d, hv)), rng.normal(size=(d, hv))
    A_log, dt = rng.normal(size=hv), rng.normal(size=hv)
    s0 = rng.normal(size=(hv, k, k))
    tree = [-1, 0, 0, 1]  # nodes 1 and 2 are siblings; 3 is 1's child
    _, states = oracle.gdn_verify(tree, s0, q, kk, v, a, b, A_log, dt)
    _, chain = oracle.gdn_verify([-1, 0, 1, 2], s0, q, kk, v, a, b, A_log, dt)
    one, _ = oracle.gdn_verify([-1], states[0], q[2:3], kk[2:3], v[2:3], a[2:3], b[2:3], A_log, dt)
    _, sibling = oracle.gdn_verify([-1], states[0], q[2:3], kk[2:3], v[2:3], a[2:3], b[2:3], A_log, dt)
    np.testing.assert_allclose(states[2], sibling[0], rtol=0, atol=1e-12)  # node 2 = root state + its own token
    assert not np.allclose(states[2], chain[2])  # the chain would have added node 1's token too
    np.testing.assert_allclose(states[1], chain[1], atol=1e-12)


def test_delta_step_by_hand():
    state = np.zeros((2, 2))
    k = np.array([1.0, 0.0])
    q = np.array([0.0, 1.0])
    out, new = oracle.delta_step(state, q, k, np.array([2.0, 3.0]), g=0.0, beta=0.5)
    np.testing.assert_allclose(new, [[1.0, 1.5], [0.0, 0.0]])  # k (v - k^T S) beta
    np.testing.assert_allclose(out, [0.0, 0.0])
    out, new2 = oracle.delta_step(new, k, k, np.array([2.0, 3.0]), g=np.log(0.5), beta=1.0)
    np.testing.assert_allclose(new2, [[2.0, 3.0], [0.0, 0.0]])  # decayed to (0.5, 0.75), then the delta fills it
    np.testing.assert_allclose(out, [2.0, 3.0])


def test_conv_window_follows_the_ancestors_then_the_persistent_window():
    window0 = np.array([[10.0, 20.0, 30.0]])  # one channel, W = 4
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    weight = np.array([[1.0, 10.0, 100.0, 1000.0]])
    out, windows = oracle.conv_verify([-1, 0, 0, 1], window0, x, weight, None, silu=False)
    np.testing.assert_array_equal(windows[0], [[20.0, 30.0, 1.0]])
    np.testing.assert_array_equal(windows[2], [[30.0, 1.0, 3.0]])  # its parent is the root, not its sibling 1
    np.testing.assert_array_equal(windows[3], [[1.0, 2.0, 4.0]])
    assert out[0, 3] == 30.0 + 10 * 1 + 100 * 2 + 1000 * 4
    assert oracle.parent_table([-1, 0, 0, 1]) == [0, 0, 0, 1]


def test_commit_copies_the_step_of_each_slot_and_skips_minus_one():
    persistent = np.zeros((1, 4, 2))
    scratch = np.arange(1 * 3 * 5 * 2, dtype=float).reshape(1, 3, 5, 2)
    got = oracle.committed(persistent, scratch, slots=[2, 0, 3], rows=[0, 1, 2], steps=[4, 1, -1])
    np.testing.assert_array_equal(got[0, 2], scratch[0, 0, 4])
    np.testing.assert_array_equal(got[0, 0], scratch[0, 1, 1])
    np.testing.assert_array_equal(got[0, 3], [0, 0])
    np.testing.assert_array_equal(got[0, 1], [0, 0])


def test_cases_cover_the_field_shapes():
    assert {c.verify.budget for c in CASES} >= {8, 12, 15, 16, 32}
    assert any(c.verify.slots > c.verify.num_nodes for c in CASES)  # the worker's capacity above the live width
    assert {c.state_dtype for c in CASES} == {"fp32", "bf16"}
    assert worker_capacity(8) == worker_capacity(12) == 16 and worker_capacity(64) == 65
    device = linear_cases("device")
    assert {(c.key_heads, c.value_heads, c.state_dtype) for c in device} >= {(16, 48, "fp32"), (16, 48, "bf16"), (16, 32, "bf16"), (4, 12, "fp32"), (8, 16, "fp32")}
    assert len(linear_cases("device", full=True)) == 40
    assert all(c.head_dim == 128 and c.conv_kernel == 4 and c.io_dtype == "bf16" for c in device)
    assert geometry("qwen3.5-27b") == dict(key_heads=16, value_heads=48, head_dim=128, conv_kernel=4, tp=1)
    assert set(GEOMETRIES) == {"qwen3.5-27b", "qwen3-next-80b"}


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_reference_column_passes_every_case(kernel):
    cases = records.get(kernel).cases(CaseContext("default", (), "interpret"))
    assert cases
    for case in cases:
        verdict = run(kernel, case, OracleBackend())
        assert verdict.outcome == "pass", (case.id, verdict.message)


@pytest.mark.parametrize("kernel, variant, shows", [
    ("gdn_verify_tree", TreeAsChain, lambda c: not c.is_chain),
    ("ssm_state_commit", CommitsWrongStep, lambda c: True),
    ("conv_window_commit", CommitsWrongStep, lambda c: True),
    ("conv_verify_tree", ConvWindowShifted, lambda c: c.conv_kernel > 2),
])
def test_each_variant_is_wrong_wherever_it_can_show(kernel, variant, shows):
    shown = [c for c in CASES if shows(c)]
    assert shown
    for case in shown:
        verdict = run(kernel, case, variant())
        assert verdict.outcome == "wrong", (case.id, verdict.message)


@pytest.mark.parametrize("field, value", [("state_dtype", "fp8"), ("io_dtype", "int8"), ("head_dim", 96),
                                          ("conv_kernel", 5), ("value_heads", 3)])
def test_bad_geometry_is_a_case_error(field, value):
    good = dict(verify=make_case(8, "spine", "deep", 1), key_heads=2, value_heads=4, head_dim=128)
    with pytest.raises(CaseError, match=field if field != "value_heads" else "head geometry"):
        LinearCase(**{**good, field: value}).check()
    with pytest.raises(CaseError, match="unknown head geometry"):
        geometry("llama-3")
    with pytest.raises(CaseError, match="does not divide"):
        geometry("qwen3.5-27b", tp=5)


def test_case_json_round_trip():
    case = CASES[1]
    assert LinearCase.from_json(case.to_json()) == case


IMPL_PATHS = paths_from_env()
"""DDTREE_IMPLS as the run was given it (CI sets it; without it these tests skip, saying so)."""


@pytest.mark.parametrize("path", IMPL_PATHS or [pytest.param(None, marks=pytest.mark.skip(
    reason="DDTREE_IMPLS is not set: no DDTree implementation to read"))])
def test_each_tree_s_own_linear_kernels_are_declared_and_its_interpret_share_stated(path):
    from ddtree_compat import impls
    from ddtree_compat.backends.ddtree_impl import DDTreeImplBackend
    from ddtree_compat.contract import kernels_of
    from ddtree_compat.tiers import Target

    backend = DDTreeImplBackend(impls.describe(path))
    declared = set(kernels_of(backend))
    assert {"gdn_verify_tree", "gdn_verify_chain", "ssm_state_commit"} <= declared, declared
    assert "conv_verify_tree" not in declared  # its module imports the tree's own SGLang: not loadable by path
    case = next(c for c in CASES if c.verify.budget > 12)
    from ddtree_compat.contract import implementation

    refusal = implementation(backend, "gdn_verify_tree").refuse(Target("interpret", "cpu"), case)
    assert refusal and "device tier" in refusal  # the kernels themselves run in the main job's interpret tier


def test_deployment_cases_sit_on_each_side_of_the_scratch_s_2_31_and_2_32_elements():
    from ddtree_compat.families.linear.records import deployment_cases, deployment_rows

    per = 16 * 48 * 128 * 128  # a scratch row of the Qwen3.5 / 3.6-27B layer at capacity 16
    assert deployment_rows(16, 48, 128, 31) == (170, 171, 172) and deployment_rows(16, 48, 128, 32) == (341, 342, 343)
    for bits, (_, rows, start) in ((31, (170, 171, 172)), (32, (341, 342, 343))):
        assert rows * per - 1 >= 2 ** bits > (rows - 1) * per - 1  # the last element's offset passes at `rows`
        assert (start - 1) * per >= 2 ** bits > (start - 2) * per  # the last row starts past it at `start`
    cases = deployment_cases()
    assert {c.rows for c in cases} == {170, 171, 172, 341, 342, 343} and all(c.verify.batch == 2 and c.serial for c in cases)
    assert {(c.verify.budget, c.verify.slots) for c in cases} == {(15, 16), (8, 16)}
    assert all(c.id.endswith(f"-rows{c.rows}") for c in cases) and len({c.id for c in cases}) == len(cases)


def test_a_deployment_case_off_the_gpu_is_a_skip_stating_its_scratch():
    from ddtree_compat.families.linear.checks import gdn_verify_tree
    from ddtree_compat.families.linear.records import deployment_cases

    case = max(deployment_cases(), key=lambda c: c.rows)
    verdict = gdn_verify_tree(case, None, "cpu")
    assert verdict.outcome == "skip" and "16.1 GiB" in verdict.message and "device only" in verdict.message


def test_poison_kept_names_a_write_outside_the_entries_the_verify_writes():
    import torch

    from ddtree_compat.families.linear.checks import poison_kept
    from ddtree_compat.harness.buffers import Guarded

    g = Guarded.float_bits((1, 4, 3, 2), torch.float32, "cpu")
    g.view[0, 2, :2] = 1.0  # the verify's own entries: row 2, steps 0..1
    assert poison_kept("scratch", g, [(0, 2, 2)]) == []
    g.view[0, 1, 0, 1] = 0.5  # a row of no request
    assert poison_kept("scratch", g, [(0, 2, 2)]) == [
        "scratch: 1 element(s) written where the verify must leave them (first in layer 0, row 1)"]
    g.view[0, 1, 0, 1] = float("nan")  # a computed NaN is not the poison
    assert poison_kept("scratch", g, [(0, 2, 2)]) != []


def test_flashinfer_s_gdn_column_takes_only_what_sglang_sends_it(monkeypatch):
    """SGLang runs FlashInfer's GDN verify on SM90 with an fp32 state pool and on SM100 with bf16, on chains; every
    other cell of the column is a skip saying which kernel SGLang runs there instead, and a host where SGLang's
    FlashInferGDNKernel cannot be made (no FlashInfer GDN kernels) is a skip with SGLang's own reason."""
    from dataclasses import replace

    from ddtree_compat.backends import flashinfer
    from ddtree_compat.backends.flashinfer import _refuse_gdn

    class Unavailable:
        def __init__(self):
            raise RuntimeError("FlashInfer GDN kernels are not available.")

    monkeypatch.setattr(flashinfer, "locate", lambda places: (Unavailable, "stand-in"))
    fp32 = next(c for c in linear_cases("device") if c.state_dtype == "fp32" and not c.rows)
    assert _refuse_gdn(Target("device", "cuda:0", "sm90", "gpu"), fp32) == (
        "SGLang's FlashInferGDNKernel cannot be made here: FlashInfer GDN kernels are not available.")
    monkeypatch.setattr(flashinfer, "locate", lambda places: (object, "stand-in"))
    from ddtree_compat.families.linear.records import deployment_cases

    case = next(c for c in linear_cases("device") if c.state_dtype == "fp32" and not c.rows)
    sm90, sm100, sm120 = (Target("device", "cuda:0", arch, "gpu") for arch in ("sm90", "sm100", "sm120"))
    assert _refuse_gdn(sm90, case) is None
    assert "SM90 and SM100 only" in _refuse_gdn(sm120, case) and "Triton" in _refuse_gdn(sm120, case)
    assert "bf16 state pool" in _refuse_gdn(sm100, case)
    assert _refuse_gdn(sm100, replace(case, state_dtype="bf16")) is None
    assert "fp32 state pool" in _refuse_gdn(sm90, replace(case, state_dtype="bf16"))
    rows = next(c for c in deployment_cases() if c.state_dtype == "fp32")
    assert "batch order" in _refuse_gdn(sm90, rows)
