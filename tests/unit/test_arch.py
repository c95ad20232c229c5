"""Arch names, exact/family predicates, and marker gating with faked detection."""

import pytest

from ddtree_compat.arch import FAKE_ENV, Gpu, arch_name, detect_gpus, family, parse_arch
from ddtree_compat.errors import ArchError


@pytest.mark.parametrize("name, cc", [("sm80", (8, 0)), ("sm86", (8, 6)), ("sm89", (8, 9)), ("sm90", (9, 0)),
                                      ("sm100", (10, 0)), ("sm103", (10, 3)), ("sm120", (12, 0)), ("sm121", (12, 1))])
def test_names_round_trip(name, cc):
    assert parse_arch(name) == cc and arch_name(*cc) == name


def test_exact_and_family_predicates_not_ge():
    sm120, sm121, sm100 = Gpu(0, "a", 12, 0), Gpu(0, "b", 12, 1), Gpu(0, "c", 10, 0)
    assert sm120.is_arch("sm120") and not sm121.is_arch("sm120")
    assert sm121.in_family("blackwell-rtx") and sm120.in_family("blackwell-rtx")
    assert not sm100.in_family("blackwell-rtx") and not sm120.in_family("blackwell")
    assert family("sm130") == "sm13x"  # an unknown arch still gets a family of its own


@pytest.mark.parametrize("bad", ["sm1234", "ampere", "sm_90", "90", ""])
def test_bad_arch_names(bad):
    with pytest.raises(ArchError, match="allowed"):
        parse_arch(bad)


def test_fake_detection(monkeypatch):
    monkeypatch.setenv(FAKE_ENV, "sm120,sm121")
    gpus = detect_gpus()
    assert [g.arch for g in gpus] == ["sm120", "sm121"] and all(g.fake for g in gpus)


def _selected(pytester, fake, marker, case):
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-m", marker, "--ddtree-case", str(case),
                                           "--ddtree-results=", "-p", "no:cacheprovider")
    return [line for line in result.outlines if "::test_verify[" in line]


def test_sm120_host_selects_device_cells(pytester, verify_suite, monkeypatch):
    monkeypatch.setenv(FAKE_ENV, "sm120")
    picked = _selected(pytester, "sm120", "sm120", verify_suite)
    assert len(picked) == 3 and all("[sm120-" in line for line in picked)  # one per backend
    assert _selected(pytester, "sm120", "sm121", verify_suite) == []
    assert _selected(pytester, "sm120", "sm90", verify_suite) == []
    assert len(_selected(pytester, "sm120", "blackwell_rtx", verify_suite)) == 3


def test_sm121_host_is_not_an_sm120_host(pytester, verify_suite, monkeypatch):
    monkeypatch.setenv(FAKE_ENV, "sm121")
    assert _selected(pytester, "sm121", "sm120", verify_suite) == []
    assert len(_selected(pytester, "sm121", "sm121", verify_suite)) == 3


def test_fake_gpu_cells_skip_with_reason(pytester, verify_suite, monkeypatch):
    monkeypatch.setenv(FAKE_ENV, "sm120")
    result = pytester.runpytest_subprocess("--ddtree-case", str(verify_suite), "--ddtree-results=r.jsonl", "-rs")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*DDTREE_FAKE_GPUS entry: no device to run on*"])


def test_unknown_fake_arch_is_a_usage_error(pytester, verify_suite, monkeypatch):
    monkeypatch.setenv(FAKE_ENV, "sm12x")
    result = pytester.runpytest_subprocess("--ddtree-case", str(verify_suite))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*field 'arch' = 'sm12x'*allowed: sm<major><minor>*"])


def test_a_host_without_an_nvidia_driver_is_detected_without_torch(monkeypatch):
    """No NVML and no NVIDIA driver on Linux: no GPU, and torch is never imported to ask (every pytest process
    would pay for it). The same check with a device node present asks torch."""
    import sys
    from pathlib import Path

    import ddtree_compat.arch as arch

    monkeypatch.delenv(FAKE_ENV, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(arch, "_nvml_gpus", lambda: None)
    asked = []
    monkeypatch.setattr(arch, "_torch_gpus", lambda: asked.append("torch") or [])
    monkeypatch.setattr(Path, "exists", lambda self: False)
    monkeypatch.setattr(Path, "glob", lambda self, pattern: iter(()))
    assert detect_gpus() == [] and asked == []
    monkeypatch.setattr(Path, "glob", lambda self, pattern: iter([self / "nvidia0"]))
    assert detect_gpus() == [] and asked == ["torch"]
