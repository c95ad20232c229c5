"""The device's negative controls (``tests/e2e/planted/sitecustomize.py``): the mask plant flips exactly one
visibility bit per request and patches rancy-ddtree-v2's ``ddtree_utils`` when that module is imported (loaded by
file path here: its module level needs only torch and numpy); the GDN plant tells the hybrid backend top-k 1."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).with_name("planted")
# by file path, under a name of its own: an interpreter whose site already imported a sitecustomize (a Debian or
# Ubuntu system Python has /usr/lib/python3.X/sitecustomize.py) would give that one to `import sitecustomize`, and
# the import error would end a collection of the whole suite (`pytest -m sm120` at the root collected nothing)
_spec = importlib.util.spec_from_file_location("ddtree_planted_sitecustomize", HERE / "sitecustomize.py")
_planted = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_planted)
flip_one_bit = _planted.flip_one_bit


def test_one_bit_flipped_per_request_with_a_sibling():
    vis = torch.eye(6, dtype=torch.bool).expand(3, 6, 6).clone()
    out = flip_one_bit(vis, torch.tensor([6, 2, 4]))
    assert int((out ^ vis).sum()) == 2 and bool(out[0, 1, 5]) and bool(out[2, 1, 3])
    assert torch.equal(vis, torch.eye(6, dtype=torch.bool).expand(3, 6, 6))  # the input is not changed


def test_the_ddtree_tree_gets_patched(tmp_path):
    from ddtree_compat.impls import ENV, describe, paths_from_env

    utils = "sglang/srt/speculative/ddtree_utils.py"
    found = [describe(p) for p in paths_from_env() if "rancy-ddtree-v2" in p]
    tree = next((i.package.parent for i in found if i is not None and (i.package.parent / utils).exists()), None)
    if tree is None:
        pytest.skip(f"no rancy-ddtree-v2 tree among {ENV}: a checkout of github.com/Rancy-Wang/sglang, branch "
                    f"ddtree-v2, commit 433c58ed (set {ENV}=/path/to/it; CI unpacks its copy with "
                    "scripts/unpack-ddtree-impls.sh)")
    pkg = tmp_path / "sglang" / "srt" / "speculative"
    pkg.mkdir(parents=True)
    for d in (tmp_path / "sglang", tmp_path / "sglang/srt", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "ddtree_utils.py").write_text((tree / "sglang/srt/speculative/ddtree_utils.py").read_text())
    log = tmp_path / "planted.log"
    code = ("import sglang.srt.speculative.ddtree_utils as u; "
            "print(u.compile_ddtree_tree.__module__, u.compile_ddtree_tree.__qualname__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": f"{HERE}:{tmp_path}", "DDTREE_PLANTED_LOG": str(log), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "sitecustomize" in r.stdout and "planted ddtree visibility flip" in log.read_text()


def test_the_gdn_backend_gets_told_top_k_1(tmp_path):
    """``DDTREE_PLANT=gdn-chain``: the hybrid backend module is patched on import (a stand-in module with SGLang's
    class name and attribute), and SGLang's own module still defines what the patch wraps."""
    pkg = tmp_path / "sglang" / "srt" / "layers" / "attention"
    pkg.mkdir(parents=True)
    for d in (tmp_path / "sglang", tmp_path / "sglang/srt", tmp_path / "sglang/srt/layers", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "hybrid_linear_attn_backend.py").write_text(
        "class MambaAttnBackendBase:\n    def __init__(self, topk):\n        self.topk = topk\n")
    log = tmp_path / "planted.log"
    code = ("from sglang.srt.layers.attention.hybrid_linear_attn_backend import MambaAttnBackendBase as B; "
            "print(B(4).topk, B(0).topk)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": f"{HERE}:{tmp_path}", "DDTREE_PLANT": "gdn-chain",
                            "DDTREE_PLANTED_LOG": str(log), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["1", "0"] and "planted gdn verify as one chain" in log.read_text()
    spec = importlib.util.find_spec("sglang")
    if spec is None:
        pytest.skip("sglang is not installed: its hybrid backend's source is not checked")
    src = Path(spec.origin).parent / "srt/layers/attention/hybrid_linear_attn_backend.py"
    if not src.exists():
        pytest.skip(f"sglang at {src.parent} has no hybrid_linear_attn_backend.py")
    text = src.read_text()
    assert "class MambaAttnBackendBase(" in text and "self.topk = " in text
