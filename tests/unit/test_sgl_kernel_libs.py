"""sgl-kernel's prebuilt libraries in the static tier, on a stand-in package and a stand-in cuobjdump: the file
sgl-kernel's own loader picks per arch, a cubin the arch loads (CUDA's rules: ``sm_120a`` is sm120's alone),
each op's kernel in it, and the skip without sgl-kernel."""

import sys
import textwrap

import pytest

from ddtree_compat.static import sass
from ddtree_compat.static.build import Spec, Unavailable
from ddtree_compat.static.sgl_kernel_libs import SglKernelLibrary, library_for

# A loader written for this test, shaped like sgl-kernel's (capability lookup, then a file per family).
LOAD_UTILS = '''
import importlib.util
from pathlib import Path

def _get_compute_capability():
    raise RuntimeError("the test must answer this")

def _load_architecture_specific_ops():
    sub = "hopper" if _get_compute_capability() == 90 else "rest"
    path = Path(__file__).parent / sub / "common_ops.abi3.so"
    spec = importlib.util.spec_from_file_location("common_ops", str(path))
    return spec
'''
CUOBJDUMP = '''#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release 13.5, V13.5.37" ;;
  -lelf) echo "ELF file    1: common_ops.1.sm_80.cubin"; echo "ELF file    2: common_ops.2.sm_120a.cubin";
         echo "ELF file    3: common_ops.3.sm_90a.cubin" ;;
  -lptx) echo "cuobjdump info    : File 'x' does not contain device code" ;;
  -res-usage) echo " Function _Z16VerifyTreeGreedyIilEvPT_:"; echo "  REG:22 STACK:0"
              if [ "$3" = sm_120a ]; then echo " Function _Z24merge_attn_states_kernelIfLj128E:"; fi ;;
esac
'''


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    package = tmp_path / "sgl_kernel"
    for sub in ("hopper", "rest"):
        (package / sub).mkdir(parents=True)
        (package / sub / "common_ops.abi3.so").write_bytes(b"\0")
    (package / "__init__.py").write_text("raise ImportError('importing sgl_kernel loads a library')\n")
    (package / "load_utils.py").write_text(textwrap.dedent(LOAD_UTILS))
    tool = tmp_path / "cuobjdump"
    tool.write_text(CUOBJDUMP)
    tool.chmod(0o755)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "sgl_kernel", raising=False)
    monkeypatch.setenv(sass.TOOL_ENV, str(tool))
    sass.find_cuobjdump.cache_clear()
    yield package
    sass.find_cuobjdump.cache_clear()


def test_the_library_is_the_one_sgl_kernels_loader_picks(stand_in):
    assert library_for("sm90") == stand_in / "hopper" / "common_ops.abi3.so"
    assert library_for("sm120") == stand_in / "rest" / "common_ops.abi3.so"
    assert "sgl_kernel" not in sys.modules  # located and asked, never imported


def test_an_op_passes_where_a_cubin_loads_and_holds_its_kernel(stand_in):
    entry = SglKernelLibrary()
    ok = entry.check(Spec("verify_tree_greedy"), "sm86")  # sm_80 loads on sm86
    assert ok.outcome == "pass" and "sm_80 cubin" in ok.message
    assert entry.check(Spec("merge_state_v2"), "sm120").outcome == "pass"
    missing = entry.check(Spec("merge_state_v2"), "sm86")
    assert missing.outcome == "fault" and missing.fault_class == "no-kernel-image" and "no merge_attn" in missing.message
    none = entry.check(Spec("verify_tree_greedy"), "sm121")  # sm_120a is sm120's alone; no PTX
    assert none.outcome == "fault" and none.fault_class == "no-kernel-image" and "no PTX" in none.message


def test_without_sgl_kernel_the_cells_skip_and_say_what_to_install(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    reason = library_for("sm120")
    assert isinstance(reason, Unavailable) and "sglang-kernel" in reason.reason
