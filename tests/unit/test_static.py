"""The static tier's machinery: limits table, cuobjdump parsing, arch loading rules, SASS rules, the
capture of SGLang's JIT build, the verdicts, and the plugin end to end (planted over-sized kernel)."""

import json
from collections import Counter

import pytest

from ddtree_compat.arch import ARCHES
from ddtree_compat.contract import KernelImpl
from ddtree_compat.families.verify.records import make_case
from ddtree_compat.faultinject import OversizedSmem
from ddtree_compat.static import sass
from ddtree_compat.static.kernels import (SGLANG_FILL_ACCEPT_TRITON, SGLANG_FRONT_OUT_TRITON, SGLANG_MOVE_KV_TRITON,
                                          SGLANG_VERIFY_ATTENTION, SGLANG_VERIFY_TRITON, Build, Spec)
from ddtree_compat.static.limits import Usage, limits_for, over_limits
from ddtree_compat.arch import STATIC_ARCHES
from ddtree_compat.static.runner import StaticCell, build, judge, run_static, static_cells

KB = 1024


def test_every_arch_has_a_limits_row_and_the_static_targets_are_known():
    assert all(limits_for(a).smem_per_block > 0 for a in ARCHES) and set(STATIC_ARCHES) <= set(ARCHES)
    assert limits_for("sm120").smem_per_block == 101376 and limits_for("sm90").smem_per_block == 232448
    assert limits_for("sm80").smem_per_block == 166912 and limits_for("sm89").smem_per_block == 101376


@pytest.mark.parametrize("usage, arch, phrases", [
    (Usage(40, 0, 128 * KB, 256), "sm120", ["shared memory 131072 B > 101376 B per block"]),
    (Usage(40, 0, 128 * KB, 256), "sm90", []),
    (Usage(40, 2 * KB, 98 * KB, 128), "sm89", ["shared memory 102400 B > 101376 B per block"]),
    (Usage(255, 0, 0, 512), "sm90", ["registers 255 x 512 threads = 130560 > 65536 per block"]),
    (Usage(24, 0, 0, 2048), "sm100", ["threads 2048 > 1024 per block"]),
])
def test_over_limits(usage, arch, phrases):
    assert over_limits(usage, arch) == phrases


FATBIN = """
Fatbin elf code:
================
arch = sm_80
   e    880    400  0  4      NOBITS       43    0        d .nv.shared._Z1kPf
Resource usage:
 Common:
  GLOBAL:0
 Function _Z1kPf:
  REG:10 STACK:16 SHARED:1024 LOCAL:8 CONSTANT[0]:360 TEXTURE:0 SURFACE:0 SAMPLER:0

\tcode for sm_80
\t\tFunction : _Z1kPf
        /*0000*/                   MOV R1, c[0x0][0x28] ;                  /* 0x00000a0000017a02 */
        /*0010*/              @!P0 STL [R1], R2 ;                          /* 0x0000000201007387 */
        /*0020*/                   LDL R3, [R1] ;                          /* 0x0000000001037983 */

Fatbin elf code:
================
arch = sm_90a
    f    880      0  0  1        NOBITS        3    0        0 .nv.shared.reserved.0
   0x8            0x400              0x4  OBJECT  WEAK  DEFAULT  -   0  .nv.reservedSmem.cap
Resource usage:
 Function _Z1kPf:
  REG:12 STACK:0 SHARED:2048 LOCAL:0 CONSTANT[0]:536 TEXTURE:0 SURFACE:0 SAMPLER:0

\tcode for sm_90a
\t\tFunction : _Z1kPf
        /*0000*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], R24 ;   /* 0x0000000000187b82 */
        /*0010*/               @P1 WARPGROUP.ARRIVE ;                    /* 0x0000000000007b82 */

Fatbin ptx code:
================
arch = sm_120
        /*0000*/                   NOTANOPCODE ;
"""


def test_parse_fatbin_resources_opcodes_reserved_smem_and_skips_ptx():
    sm80, sm90 = sass.parse(FATBIN)
    assert (sm80.arch, sm90.arch) == ("sm_80", "sm_90a")
    k80, k90 = sm80.functions["_Z1kPf"], sm90.functions["_Z1kPf"]
    assert (k80.regs, k80.stack, k80.shared, k80.local, k80.local_traffic) == (10, 16, 1024, 8, 2)
    assert k80.opcodes == Counter({"MOV": 1, "STL": 1, "LDL": 1})
    assert (sm80.static_smem(k80), sm90.reserved_smem, sm90.static_smem(k90)) == (1024, 1024, 1024)
    assert k90.opcodes == Counter({"HGMMA": 1, "WARPGROUP": 1})


@pytest.mark.parametrize("cubin, target, ok", [
    ("sm_80", "sm86", True), ("sm_80", "sm89", True), ("sm_86", "sm80", False), ("sm_80", "sm90", False),
    ("sm_90a", "sm90", True), ("sm_90a", "sm100", False), ("sm_100a", "sm103", False),
    ("sm_100f", "sm103", True), ("sm_120f", "sm121", True), ("sm_120a", "sm121", False),
    ("sm_121a", "sm121", True), ("sm_120f", "sm100", False), ("sm_120", "sm121", True),
])
def test_which_cubin_an_arch_loads(cubin, target, ok):
    assert sass.runs_on(cubin, target) is ok


def test_sass_rules_by_exact_arch():
    fn = sass.Function("k", opcodes=Counter({"HGMMA": 4, "UTCHMMA": 2, "UTMALDG": 1, "FFMA": 9}))
    assert set(sass.illegal_instructions(fn, "sm90")) == {"UTCHMMA (tcgen05 (tensor memory MMA))"}
    assert set(sass.illegal_instructions(fn, "sm100")) == {"HGMMA (wgmma (Hopper warpgroup MMA))"}
    assert len(sass.illegal_instructions(fn, "sm120")) == 2
    assert len(sass.illegal_instructions(fn, "sm80")) == 3  # TMA is sm90+ too


def _planted(arch):
    entry = OversizedSmem.PLANTED
    return StaticCell(arch, OversizedSmem.name, entry, entry.specialize(None, arch))


def _built(cell, cache):
    built = build(cell, cache)
    if not isinstance(built, Build):
        pytest.skip(f"cannot compile here: {built}")
    try:
        return built, sass.inspect(built.binary, cache=True)
    except sass.ToolUnavailable as e:
        pytest.skip(str(e))


def test_real_sass_wgmma_on_sm90_and_tcgen05_on_sm100_are_illegal_elsewhere(ddtree_static_cache):
    """The planted tl.dot kernel compiles to wgmma (HGMMA) on sm90 and tcgen05 (UTC*) on sm100."""
    (_, (sm90,)), (_, (sm100,)) = _built(_planted("sm90"), ddtree_static_cache), _built(_planted("sm100"), ddtree_static_cache)
    (k90,), (k100,) = sm90.functions.values(), sm100.functions.values()
    assert k90.opcodes["HGMMA"] and not sass.illegal_instructions(k90, "sm90")
    assert any("wgmma" in k for k in sass.illegal_instructions(k90, "sm120"))
    assert any(k.startswith("UTCHMMA") for k in sass.illegal_instructions(k100, "sm120"))
    assert not sass.illegal_instructions(k100, "sm103") and sass.illegal_instructions(k100, "sm90")


def test_judge_no_kernel_image_and_illegal_instruction(ddtree_static_cache):
    cell90 = _planted("sm90")
    built, cubins = _built(cell90, ddtree_static_cache)
    # the sm90 binary shipped to an sm120 card: no cubin it can load
    v = judge(StaticCell("sm120", cell90.backend, cell90.entry, cell90.spec), built, cubins)
    assert (v.outcome, v.fault_class) == ("fault", "no-kernel-image") and "sm_90a" in v.message
    # the same SASS labelled loadable on sm120 (a misrouted cubin): wgmma is caught before resources
    relabelled = [sass.Cubin("sm_120a", cubins[0].functions, cubins[0].reserved_smem)]
    v = judge(StaticCell("sm120", cell90.backend, cell90.entry, cell90.spec), built, relabelled)
    assert (v.outcome, v.fault_class) == ("fault", "illegal-instruction") and "HGMMA" in v.message


def test_missing_cuobjdump_is_a_skip_with_reason(monkeypatch, tmp_path):
    monkeypatch.setenv(sass.TOOL_ENV, str(tmp_path / "no-cuobjdump"))
    sass.find_cuobjdump.cache_clear()
    try:
        v = run_static(_planted("sm120"), tmp_path)
    finally:
        monkeypatch.undo()
        sass.find_cuobjdump.cache_clear()
    assert v.outcome == "skip" and "does not run as cuobjdump" in v.message


def test_specializations_come_from_the_cases():
    cases = [make_case(8, "spine", "deep", 3), make_case(8, "spine", "deep", 3), make_case(12, "spine", "deep", 1)]
    assert [s.id for s in SGLANG_VERIFY_TRITON.specs(cases, "sm120")] == ["bs3-w9-c9", "bs1-w13-c13"]
    assert dict(SGLANG_VERIFY_TRITON.specs(cases, "sm90")[0].constexprs) == {
        "batch_size": 3, "num_speculative_tokens": 9, "num_draft_tokens": 9}
    assert [s.id for s in SGLANG_FILL_ACCEPT_TRITON.specs(cases, "sm90")] == ["n32", "n16"]

    class Backend:
        name, implements = "b", (KernelImpl("verify_tree_greedy", "triton", static=(SGLANG_VERIFY_TRITON,)),)

    cells = static_cells([Backend()], cases, ("sm120", "sm90"))
    assert [c.id for c in cells] == ["static-sm120-b-verify_tree_greedy-bs3-w9-c9", "static-sm120-b-verify_tree_greedy-bs1-w13-c13",
                                     "static-sm90-b-verify_tree_greedy-bs3-w9-c9", "static-sm90-b-verify_tree_greedy-bs1-w13-c13"]


def test_a_heavy_build_runs_on_its_default_archs_outside_the_full_profile():
    """FlashInfer's verify kernel (~30 s a build): sm120 only in the default profile (CI), every arch in ``full``."""
    from ddtree_compat.backends.flashinfer import FlashInferBackend

    cases = [make_case(8, "spine", "deep", 3)]

    def archs(profile, kernel):
        return {c.arch for c in static_cells([FlashInferBackend()], cases, profile=profile) if c.entry.kernel == kernel}

    assert archs("default", "verify_attention") == {"sm120"} and archs("full", "verify_attention") == set(STATIC_ARCHES)
    assert archs("default", "gdn_verify_chain") == {"sm90"}  # FlashInfer's GDN kernel (the fold's: full profile)
    assert archs("full", "gdn_verify_chain") == set(STATIC_ARCHES)


def _gdn_cell(entry, arch: str, batch: int = 8, width: int = 16):
    spec = next(s for s in entry.specs((), arch) if f"-h16v48d128-t{width}-bs{batch}" in s.id)
    return StaticCell(arch, "flashinfer", entry, spec)


def test_the_cutedsl_gdn_kernels_are_skips_where_sglang_never_runs_them_or_cutedsl_is_missing(tmp_path, monkeypatch):
    """FlashInfer's GDN verify runs on SM90 with an fp32 state and SM100 with bf16; SGLang's own CuTe DSL fold kernel
    only behind the bf16 one. Elsewhere (sm120 for both, sm90 for the fold) the cell says the Triton kernel verifies
    there; without nvidia-cutlass-dsl it names the package. None of these builds."""
    from ddtree_compat.static import cutedsl_aot
    from ddtree_compat.static.build import Unavailable
    from ddtree_compat.static.kernels import FLASHINFER_GDN_MTP_CUTEDSL as MTP, SGLANG_GDN_FOLD_CUTEDSL as RING

    assert RING.routed == ((10, "bf16"),) and MTP.routed == ((9, "fp32"), (10, "bf16"))
    assert [s.id for s in RING.specs((), "sm100")][:3] == ["ring-h16v48d128-t4-bs1", "ring-h16v48d128-t4-bs8",
                                                           "ring-h16v48d128-t4-bs32"]
    assert _gdn_cell(MTP, "sm90").spec.id == "mtp-h16v48d128-t16-bs8-fp32"
    assert _gdn_cell(MTP, "sm100").spec.id == "mtp-h16v48d128-t16-bs8-bf16"
    for entry, arch in ((RING, "sm120"), (RING, "sm90"), (MTP, "sm120"), (MTP, "sm89")):
        cell = _gdn_cell(entry, arch)
        got = cutedsl_aot.build_gdn(entry.call, cell.spec.constexprs, arch, str(tmp_path), entry.routed)
        assert isinstance(got, Unavailable) and f"{arch} verifies with the Triton GDN kernel" in got.reason, got

    def no_dist(name):
        raise cutedsl_aot.PackageNotFoundError(name)

    monkeypatch.setattr(cutedsl_aot, "version", no_dist)
    cell = _gdn_cell(RING, "sm100")
    got = cutedsl_aot.build_gdn("ring", cell.spec.constexprs, "sm100", str(tmp_path), RING.routed)
    assert isinstance(got, Unavailable) and "nvidia-cutlass-dsl is not installed" in got.reason
    assert not (tmp_path / "cutedsl").exists()
    assert cutedsl_aot.cute_target("sm120") == "sm_120a" and cutedsl_aot.cute_target("sm86") == "sm_86"


@pytest.mark.parametrize("which, arch, batch, variant", [
    ("ring", "sm100", 1, "gdn_decode_bf16state_mtp_ilp4_kernel"),
    ("mtp", "sm90", 8, "gdn_verify_kernel_mtp"),
])
def test_a_cutedsl_gdn_kernel_is_compiled_for_its_arch_on_a_cpu_and_judged(tmp_path, which, arch, batch, variant):
    """The real build, on this CPU: CuTe DSL compiles the kernel SGLang's call reaches for the arch (the fold's ILP-4
    variant at one request on sm100; FlashInfer's fp32-state MTP kernel on sm90, through SGLang's
    FlashInferGDNKernel.target_verify), and the cubin is judged like every static cell (registers, shared memory,
    threads, SASS for the arch). The sweep's default cell builds FlashInfer's at 8 requests on sm90."""
    pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed (scripts/setup.sh installs it)")
    from ddtree_compat.static.kernels import FLASHINFER_GDN_MTP_CUTEDSL, SGLANG_GDN_FOLD_CUTEDSL

    entry = {"ring": SGLANG_GDN_FOLD_CUTEDSL, "mtp": FLASHINFER_GDN_MTP_CUTEDSL}[which]
    cell = _gdn_cell(entry, arch, batch)
    verdict = run_static(cell, tmp_path)
    if verdict.outcome == "skip":
        pytest.skip(verdict.message)
    assert verdict.outcome == "pass", verdict.message
    assert variant in verdict.message and f"(cubin sm_{arch[2:]}a)" in verdict.message
    assert "threads 128/1024" in verdict.message
    again = run_static(cell, tmp_path)  # from the cache: the same verdict, no build
    assert again.outcome == "pass" and again.message == verdict.message
    assert not list(tmp_path.rglob("cutlass_*.cubin"))  # CuTe DSL's own copies are not left behind


def test_commit_and_attention_specializations():
    cases = [make_case(8, "spine", "deep", 3), make_case(12, "spine", "deep", 5)]
    assert [(s.id, dict(s.constexprs)) for s in SGLANG_FRONT_OUT_TRITON.specs(cases, "sm120")] == [
        ("c13-bs8", {"pool_len": 13, "bs_upper": 8})]
    moves = SGLANG_MOVE_KV_TRITON.specs(cases, "sm90")
    assert [(s.id, s.num_warps, s.num_stages) for s in moves] == [
        ("t128-w4-n256", 4, 2), ("t256-w4-n256", 4, 2), ("t512-w8-n128", 8, 2)]
    assert [s.id for s in SGLANG_VERIFY_ATTENTION.specs(cases, "sm120")] == ["d64-bf16", "d128-bf16", "d256-bf16"]
    func, args = SGLANG_VERIFY_ATTENTION.job(Spec("x", (("head_dim", 128), ("BLOCK_M", 16)), num_warps=2), "sm120", "/c")
    assert func.__name__ == "compile_attention" and args == (128, "bf16", (("BLOCK_M", 16), ("num_warps", 2)), "sm120", "/c")


def test_attention_launch_is_recorded_from_sglang_per_arch(ddtree_static_cache, sglang_missing):
    """The compiled launch is the one ``extend_attention_fwd`` makes: sm120's own tiles, verify flags,
    Triton's JIT typing (strides carry the divisibility hint, ``None`` pointers are constexprs). Typed in
    the compile worker, where ``TRITON_INTERPRET`` is unset, so CPU runs (interpreter on) check it too."""
    from ddtree_compat.families.attention import tiles
    from ddtree_compat.families.attention.places import EXTEND_ATTENTION
    from ddtree_compat.static import attention_aot
    from ddtree_compat.static.runner import in_worker

    reason = sglang_missing(EXTEND_ATTENTION)  # SGLang or a module it imports not installed; else fail here
    if reason:
        pytest.skip(f"SGLang's extend attention is not importable here: {reason}")
    sig, consts, kwargs = in_worker(ddtree_static_cache, attention_aot.typed_launch, "sm120", 128, "bf16")
    chosen = tiles.tile_choice("sm120", 128)
    assert (kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs["num_warps"]) == (chosen["BLOCK_M"], chosen["BLOCK_N"], chosen["num_warps"])
    assert kwargs["num_stages"] == 1 and kwargs["USE_CUSTOM_MASK"] is True and kwargs["IS_CAUSAL"] is True
    sig, consts = dict(sig), dict(consts)
    assert sig["Q_Extend"] == "*bf16" and sig["mask_ptr"] == "*u1" and sig["stride_qbs"] == "i32:16"
    assert sig["sm_scale"] == "fp32" and sig["kv_group_num"] == "i32"
    assert consts["LSE_Extend"] is None and consts["PAGE_SIZE"] == 1 and consts["Lq"] == 128


@pytest.mark.parametrize("arch, gencode, define", [
    ("sm120", "-gencode=arch=compute_120f,code=sm_120f", "-DSGL_CUDA_ARCH=1200"),
    ("sm121", "-gencode=arch=compute_121a,code=sm_121a", "-DSGL_CUDA_ARCH=1210"),
    ("sm90", "-gencode=arch=compute_90a,code=sm_90a", "-DSGL_CUDA_ARCH=900"),
    ("sm80", "-gencode=arch=compute_80,code=sm_80", "-DSGL_CUDA_ARCH=800"),
])
def test_sglang_jit_build_is_captured_per_arch(arch, gencode, define):
    from ddtree_compat.static import nvcc

    try:
        text, sources = nvcc.capture_build("sglang.kernels.ops.speculative.tree:_jit_tree_module", arch)
    except ImportError as e:
        pytest.skip(f"SGLang's JIT build is not importable here: {e}")
    flags = text.split("cudaflags = ")[1].splitlines()[0].split()
    assert gencode in flags and define in flags and "-std=c++20" in flags and "--expt-relaxed-constexpr" in flags
    assert nvcc.cuda_objects(text) == ["cuda_0.o"]
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(verify_tree_greedy, (verify_tree_greedy));" in sources["cuda.cu"]
    assert "speculative/tree.cuh" in sources["cuda.cu"]


JIT_NINJA = """cudaflags = -Xcompiler -fPIC -gencode=arch=compute_120f,code=sm_120f -DSGL_CUDA_ARCH=1200 -O3

rule compile_cuda
  depfile = $out.d
  command = $nvcc -MD -MF "$out.d" $cudaflags -c "$in" -o "$out"

rule link
  command = $cxx $in $ldflags -o "$out"

build cuda_0.o: compile_cuda cuda.cu

build m.so: link cuda_0.o
"""


def test_a_jit_build_is_narrowed_to_its_device_code_with_every_flag_kept():
    from ddtree_compat.static.nvcc import cuda_objects, device_only

    text = device_only(JIT_NINJA, "compile_cuda")
    assert '$cudaflags -fatbin "$in" -o "$out"' in text and " -c " not in text
    assert cuda_objects(text) == ["cuda_0.fatbin"]
    assert text.replace("-fatbin", "-c").replace("cuda_0.fatbin:", "cuda_0.o:") == JIT_NINJA  # nothing else moved
    assert device_only(text.replace("-fatbin", "-c"), "compile_cuda") == text  # a .fatbin target stays one
    with pytest.raises(RuntimeError, match="compile_cuda"):  # a JIT that builds otherwise: ours to update
        device_only(JIT_NINJA.replace(" -c ", " "), "compile_cuda")


def test_the_device_only_build_holds_the_cubin_the_object_embeds(tmp_path):
    """``nvcc -fatbin`` (what the static tier builds) and ``nvcc -c`` (what SGLang's JIT builds) under the same
    flags give the same cubins as a static verdict reads them (arch name, each function's resources and SASS opcode
    counts), here for an arch-family target (``sm_120f``) and a plain one. The kernel has a loop the compiler
    schedules and a shared-memory array."""
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH (the static tier's builds skip the same way)")
    (tmp_path / "k.cu").write_text(
        "__global__ void scan(const float* x, float* y, int n) {\n"
        "  __shared__ float tile[256];\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  tile[threadIdx.x] = i < n ? x[i] : 0.f;\n"
        "  __syncthreads();\n"
        "  float acc = 0.f;\n"
        "  for (int k = 0; k <= threadIdx.x; ++k) acc += tile[k] * (k + 1);\n"
        "  if (i < n) y[i] = acc;\n"
        "}\n")
    listed = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True).stdout
    codes = [code for code in ("120f", "80") if f"compute_{code.rstrip('f')}" in listed]
    if not codes:
        pytest.skip(f"{nvcc} targets neither sm120 nor sm80 (--list-gpu-arch: {' '.join(listed.split()[-4:])} ...)")
    for code in codes:
        flags = ["-Xcompiler", "-fPIC", f"-gencode=arch=compute_{code},code=sm_{code}", "-O3"]
        for mode, out in (("-c", "k.o"), ("-fatbin", "k.fatbin")):
            subprocess.run([nvcc, *flags, mode, "k.cu", "-o", f"{code}-{out}"], cwd=tmp_path, check=True)
        try:
            whole, device = (sass.inspect(tmp_path / f"{code}-{f}") for f in ("k.o", "k.fatbin"))
        except sass.ToolUnavailable as e:
            pytest.skip(str(e))
        assert [c.arch for c in device] == [c.arch for c in whole] == [f"sm_{code}"]
        assert device[0].functions == whole[0].functions and device[0].reserved_smem == whole[0].reserved_smem


def test_toolchain_gaps_are_reasons(tmp_path):
    from ddtree_compat.static import nvcc, triton_aot

    assert "nvcc not found" in nvcc.toolchain_reason(str(tmp_path / "nvcc"), "sm120")
    from ddtree_compat.contract import Place

    absent = (Place("sglang.no_such_module", "kernel", "launch", "no release"),)
    got = triton_aot.compile_kernel(absent, (), (), None, None, "sm120", str(tmp_path))
    assert got.reason.startswith("cannot import sglang.no_such_module.kernel") and "absent in sglang" in got.reason
    with pytest.raises(ModuleNotFoundError):  # a name of ours that does not import: an error, not a skip
        triton_aot.compile_kernel("no.such.module:kernel", (), (), None, None, "sm120", str(tmp_path))


def test_a_kernel_of_another_signature_is_a_skip_naming_the_difference(tmp_path, monkeypatch):
    """A copy of a kernel whose parameters differ from the specialization's (a DDTree tree's older GDN kernel, without
    0.5.23's ``USE_LOWER_BOUND``) is not built, and says why: the suite's specialization does not fit it, which is
    no fault of the kernel."""
    pytest.importorskip("triton")
    from ddtree_compat.static import triton_aot
    from ddtree_compat.static.build import Unavailable

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # as in the static tier's compile workers
    src = tmp_path / "older_kernel.py"
    src.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                   "def kernel(x_ptr, N: tl.constexpr):\n    tl.store(x_ptr + tl.arange(0, N), 1.0)\n")
    ref = f"{src}::kernel"
    extra = triton_aot.compile_kernel(ref, (("x_ptr", "*fp32"),), (("N", 16), ("USE_LOWER_BOUND", False)), None,
                                      None, "sm90", str(tmp_path))
    assert isinstance(extra, Unavailable) and "no parameter(s) ['USE_LOWER_BOUND']" in extra.reason
    unset = triton_aot.compile_kernel(ref, (("x_ptr", "*fp32"),), (), None, None, "sm90", str(tmp_path))
    assert isinstance(unset, Unavailable) and "parameters the suite does not set: ['N']" in unset.reason


# ------------------------------------------------------------------------------------------ plugin
STATIC_TEST = """
def test_static(ddtree_static_cell, ddtree_check_static):
    ddtree_check_static(ddtree_static_cell)
"""


def _run(pytester, cache, *args):
    pytester.makepyfile(test_static_cells=STATIC_TEST)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--ddtree-static-cache={cache}", *args)


def test_sm120_on_a_cpu_machine_selects_static_cells(pytester, verify_suite, ddtree_static_cache):
    result = _run(pytester, ddtree_static_cache, "--collect-only", "-q", "-m", "sm120", "--ddtree-case", str(verify_suite),
                  "--ddtree-results=")
    picked = [line for line in result.outlines if "::test_static[" in line]
    assert sorted(p.split("[")[1] for p in picked) == [
        "static-sm120-flashinfer-verify_attention-d128-bf16]",
        "static-sm120-sglang-cuda-sgl_kernel_ops-build_tree_kernel_efficient]",
        "static-sm120-sglang-cuda-sgl_kernel_ops-merge_state_v2]",
        "static-sm120-sglang-cuda-sgl_kernel_ops-segment_packbits]",
        "static-sm120-sglang-cuda-sgl_kernel_ops-top_k_renorm_prob]",
        "static-sm120-sglang-cuda-sgl_kernel_ops-top_p_renorm_prob]",
        "static-sm120-sglang-cuda-sgl_kernel_ops-tree_speculative_sampling_target_only]",
        "static-sm120-sglang-cuda-sgl_kernel_ops-verify_tree_greedy]",
        "static-sm120-sglang-cuda-tree_speculative_sampling-jit-speculative_sampling-v4-det]",
        "static-sm120-sglang-cuda-verify_tree_greedy-jit-speculative_tree]",
        "static-sm120-sglang-triton-chain_speculative_sampling-v151936-s8-block]",
        "static-sm120-sglang-triton-conv_verify_tree-dim10240-w4-d13]",
        "static-sm120-sglang-triton-conv_verify_tree-dim10240-w4-d9]",
        "static-sm120-sglang-triton-fill_accept_out_cache_loc-n32]",
        "static-sm120-sglang-triton-front_out_cache_loc-c9-bs4]",
        "static-sm120-sglang-triton-gdn_verify_chain-h16v48d128-t16-bv32]",
        "static-sm120-sglang-triton-gdn_verify_tree-h16v48d128-t16-bv32]",
        "static-sm120-sglang-triton-move_kv-t128-w4-n256]",
        "static-sm120-sglang-triton-move_kv-t256-w4-n256]",
        "static-sm120-sglang-triton-move_kv-t512-w8-n128]",
        "static-sm120-sglang-triton-verify_attention-d128-bf16]",
        "static-sm120-sglang-triton-verify_attention-d256-bf16]",
        "static-sm120-sglang-triton-verify_attention-d64-bf16]",
        "static-sm120-sglang-triton-verify_tree_greedy-bs3-w9-c9]"]
    assert _run(pytester, ddtree_static_cache, "--collect-only", "-q", "-m", "sm120", "--ddtree-case", str(verify_suite),
                "--ddtree-static=off").ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_planted_oversized_kernel_through_the_plugin(pytester, verify_suite, ddtree_static_cache):
    result = _run(pytester, ddtree_static_cache, "-m", "static and (sm120 or sm90)", "--ddtree-case", str(verify_suite),
                  "--ddtree-backend=ddtree_compat.faultinject:OversizedSmem", "--ddtree-results=r.jsonl")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*out of resources: oversized_smem_kernel (mutant-oversized-smem) bm128-bn128-bk128-s4 "
        "[[]num_warps=8, num_stages=4[]] on sm120 (cubin sm_120a): shared memory 131072 B > 101376 B per block*",
        "*static cells: 1 pass, 0 wrong, 0 zero-accept, 1 fault, 0 skip*"])
    lines = [json.loads(x) for x in (pytester.path / "r.jsonl").read_text().splitlines()]
    got = {(r["arch"], r["tier"], r["outcome"], r["fault_class"], r["case_id"]) for r in lines if r["kind"] == "result"}
    assert got == {("sm120", "static", "fault", "out-of-resources", "bm128-bn128-bk128-s4"),
                   ("sm90", "static", "pass", None, "bm128-bn128-bk128-s4")}


def test_static_cells_render_in_the_report(tmp_path):
    from ddtree_compat.report import render_markdown
    from ddtree_compat.results import ResultRecord, ResultsWriter, environment, load

    path = tmp_path / "r.jsonl"
    w = ResultsWriter(path, environment("interpret", "default"))
    for arch, outcome in (("sm90", "pass"), ("sm120", "fault")):
        w.write(ResultRecord(kernel="oversized_smem_kernel", tier="static", backend="mutant", arch=arch,
                             case_id="bm128", outcome=outcome, layout="",
                             fault_class="out-of-resources" if outcome == "fault" else None))
    w.write(ResultRecord(kernel="other_kernel", tier="static", backend="mutant", arch="sm90", case_id="x",
                         outcome="skip", layout=""))
    md = render_markdown(load([path]))
    # the heading names what did not pass, worst first (a skip is not mistaken for a failure, nor hidden)
    assert "Static tier: the 2 of 2 specializations that did not pass on every arch (fault, skip on some or all;" in md
    assert "| backend | kernel | specialization | sm90 | sm120 |" in md
    assert "| mutant | oversized_smem_kernel | bm128 | ✅ 1 | ❌ 1 fault |" in md
    assert "| mutant · sm120 · static | 0 | 0 | 0 | 1 | 0 | 1 |" in md


def test_a_hung_compile_worker_is_killed_not_left_running(tmp_path):
    import os
    import time
    from types import SimpleNamespace

    from ddtree_compat.static import runner

    def cell(func, *args):
        return SimpleNamespace(spec=None, arch="sm90", entry=SimpleNamespace(job=lambda spec, arch, cache: (func, args)))

    pid = runner.build(cell(os.getpid), cache_dir=tmp_path)
    assert isinstance(pid, int) and pid != os.getpid()  # the compile worker's process
    hung = runner.build(cell(time.sleep, 600), cache_dir=tmp_path, timeout=2)
    assert isinstance(hung, runner.BuildError) and "timed out" in hung.text
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the hung compile worker outlived its cell"
    assert runner.build(cell(os.getpid), cache_dir=tmp_path) != pid  # a fresh worker takes over
    runner.shutdown_pools()
    assert not runner._POOLS


def test_an_sm120_answer_from_a_cpu_box_says_what_it_leaves_out(pytester, verify_suite, ddtree_static_cache):
    """``-m sm120`` without an sm120 GPU: the summary names what did not run (device cells, sgl-kernel's prebuilt
    libraries) and whether FlashInfer's verify kernel was built for sm120 here or why not."""
    from ddtree_compat.static.flashinfer_aot import build_prefill
    from ddtree_compat.static.build import Unavailable

    result = _run(pytester, ddtree_static_cache, "-q", "-m", "sm120", "--ddtree-case", str(verify_suite),
                  "--ddtree-backend=oracle", "--ddtree-results=")
    result.stdout.fnmatch_lines(["-m 'sm120': no sm120 GPU on this host (detected: none)",
                                 "  ran here: nothing for sm120 (every selected cell skipped)",
                                 "  not run: every sm120 device cell *",
                                 "  FlashInfer's verify kernel: not checked (no such static cell selected*",
                                 "  sgl-kernel's prebuilt libraries: not checked*",
                                 "  the rest, on a host with an sm120 GPU: python -m ddtree_compat sweep -- -m sm120"])
    arch_lines = result.stdout.str().split("-m 'sm120': ")[1].split("\n")[:6]
    assert max(map(len, arch_lines)) <= 120 and "DDTree" not in "".join(arch_lines)  # short; no absent implementation
    result = _run(pytester, ddtree_static_cache, "-q", "-m", "sm120 and static", "--ddtree-case", str(verify_suite),
                  "--ddtree-backend=flashinfer", "--ddtree-results=")
    here = build_prefill("bf16", 128, "sm120", ddtree_static_cache)  # what this host can do (cached build)
    if isinstance(here, Unavailable):
        result.stdout.fnmatch_lines(["*FlashInfer's verify kernel: not checked (1 static cell(s) skipped*"])
    else:
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["  ran here: 1 static-build cell(s): SGLang's kernels compiled for sm120 *",
                                     "  FlashInfer's verify kernel: checked in 1 static cell(s) (registers, static "
                                     "smem, SASS; its dynamic smem only on the device)"])
        assert "emulated here" not in result.stdout.str()  # no tile choice was emulated in this run


def test_a_known_issue_turns_a_static_fault_into_an_xfail(pytester, verify_suite, ddtree_static_cache):
    """Static cells are keyed by arch, backend and kernel in the known-issues manifest (the sm121 sgl-kernel entry
    uses this): the planted oversized kernel's sm120 fault becomes an xfail, its sm90 pass stays a pass."""
    manifest = pytester.path / "known.toml"
    manifest.write_text('[[issue]]\nid = "planted-smem"\narch = ["sm120"]\nbackend = ["mutant-oversized-smem"]\n'
                        'kernel = ["oversized_smem_kernel"]\nreason = "planted"\nsource = "https://example.org/x"\n')
    result = _run(pytester, ddtree_static_cache, "-m", "static and (sm120 or sm90)", "--ddtree-case", str(verify_suite),
                  "--ddtree-backend=ddtree_compat.faultinject:OversizedSmem", "--ddtree-results=",
                  f"--ddtree-known-issues={manifest}")
    result.assert_outcomes(passed=1, xfailed=1)


def _count_tool_calls(monkeypatch) -> Counter:
    """Counts this process's cuobjdump / nvdisasm runs by kind: ``sass`` (one file disassembled), ``batch``
    (``nvdisasm --binary``), ``resources`` (``cuobjdump -elf -res-usage``, no disassembly)."""
    calls, real = Counter(), sass.subprocess.run

    def run(argv, *a, **kw):
        kind = "sass" if "-sass" in argv else "batch" if "--binary" in argv else "resources" if "-res-usage" in argv else "other"
        calls[kind] += 1
        return real(argv, *a, **kw)

    monkeypatch.setattr(sass.subprocess, "run", run)
    return calls


def test_a_batch_reads_each_cubin_as_cuobjdump_reads_it_alone(ddtree_static_cache, tmp_path, monkeypatch):
    """``inspect_batch``: one ``nvdisasm --binary`` per arch over several cubins gives each file exactly what
    ``inspect`` parses from ``cuobjdump -sass`` of that file alone: resources, reserved shared memory and every
    opcode count (sm90's wgmma kernel, sm100's tcgen05 one, two kernels on sm120)."""
    cells = [_planted("sm90"), _planted("sm100"), _planted("sm120"),
             StaticCell("sm120", "sglang-triton", SGLANG_FILL_ACCEPT_TRITON, Spec("n16", (("size_upper", 16),)))]
    copies = []
    for k, cell in enumerate(cells):
        built = build(cell, ddtree_static_cache)
        if not isinstance(built, Build):
            pytest.skip(f"cannot compile here: {built}")
        copies.append(tmp_path / f"{k}.cubin")
        copies[-1].write_bytes(open(built.binary, "rb").read())
    try:
        alone = [sass._to_json(sass.inspect(p)) for p in copies]
    except sass.ToolUnavailable as e:
        pytest.skip(str(e))
    calls = _count_tool_calls(monkeypatch)
    assert sass.inspect_batch([*copies, tmp_path / "x.o"]) == len(copies)
    assert calls == Counter(resources=len(copies), batch=3), calls  # sm90, sm100, sm120: one start each
    tool = sass.find_cuobjdump()
    assert [sass._memo(p, tool).read_text() for p in copies] == alone
    assert json.loads(alone[0])[0]["functions"][0]["opcodes"]["HGMMA"] > 0
    calls.clear()
    assert sass.inspect_batch(copies) == 0 and not calls  # cached files are not read again
    assert [sass._to_json(sass.inspect(p, cache=True)) for p in copies] == alone and not calls


def test_a_batch_that_cannot_be_read_writes_nothing_and_raises_nothing(ddtree_static_cache, tmp_path, monkeypatch):
    """Left to ``inspect``, with nothing written: a cubin whose code sections do not match its functions (here cut
    short); an nvdisasm that outlasts its timeout; one that exits non-zero. None of them raises."""
    import subprocess

    built = build(_planted("sm120"), ddtree_static_cache)
    if not isinstance(built, Build):
        pytest.skip(f"cannot compile here: {built}")
    try:
        sass.find_cuobjdump()
    except sass.ToolUnavailable as e:
        pytest.skip(str(e))
    data = open(built.binary, "rb").read()
    (tmp_path / "cut.cubin").write_bytes(data[: len(data) // 2])
    (tmp_path / "whole.cubin").write_bytes(data)
    assert sass.inspect_batch([tmp_path / "cut.cubin"]) == 0
    real = sass.subprocess.run

    def slow(argv, *a, **kw):
        if "--binary" in argv:
            raise subprocess.TimeoutExpired(argv, kw.get("timeout"))
        return real(argv, *a, **kw)

    monkeypatch.setattr(sass.subprocess, "run", slow)
    assert sass.inspect_batch([tmp_path / "whole.cubin"]) == 0

    def failing(argv, *a, **kw):
        return real([*argv[:-1], str(tmp_path / "no-such-file")], *a, **kw) if "--binary" in argv else real(argv, *a, **kw)

    monkeypatch.setattr(sass.subprocess, "run", failing)
    assert sass.inspect_batch([tmp_path / "whole.cubin"]) == 0
    assert not list(tmp_path.glob("*.json"))
    monkeypatch.undo()
    assert sass.inspect_batch([tmp_path / "whole.cubin"]) == 1  # the same file, read whole once nvdisasm runs


def test_claims_give_a_job_to_one_process_and_make_others_wait_for_it(tmp_path):
    import subprocess
    import sys
    import threading
    import time

    from ddtree_compat.static.claims import Claims

    claims = Claims.for_run(tmp_path, "run-1")
    assert claims.take("a") and not claims.take("a")
    threading.Timer(0.3, claims.finish, ["a"]).start()
    start = time.monotonic()
    claims.wait("a", timeout=10)
    assert 0.25 < time.monotonic() - start < 5  # claimed by a live process (this one): waits for its .done
    start = time.monotonic()
    claims.wait("never-claimed", timeout=10)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (claims.root / "b.claim").write_text(gone.stdout.strip())
    claims.wait("b", timeout=10)  # its claimant is gone: the caller builds it
    assert time.monotonic() - start < 1
    claims.wait("a", timeout=10)  # done
    assert Claims.for_run(tmp_path, "run-2").root != claims.root


def test_a_warmed_group_gives_the_verdicts_of_cells_built_alone(tmp_path, monkeypatch):
    """Cells of one group (fill_accept's specializations on sm90 and sm120, and the planted kernel, which must
    stay out of resources on sm120) judged after ``warm``: the same verdicts as built alone, and their cubins are
    not disassembled again here (the warm's batch cached them). One cache (one compile worker): the inspections
    cached by the cells built alone are removed before the warm."""
    from ddtree_compat.static.claims import Claims
    from ddtree_compat.static.runner import shutdown_pools

    specs = [Spec(f"n{n}", (("size_upper", n),)) for n in (16, 32, 64)]
    groups = [[StaticCell(a, "sglang-triton", SGLANG_FILL_ACCEPT_TRITON, s) for s in specs] for a in ("sm90", "sm120")]
    groups.append([_planted("sm120")])
    try:
        alone = [[run_static(c, tmp_path) for c in g] for g in groups]
        if any(v.outcome == "skip" for g in alone for v in g):
            pytest.skip(next(v.message for g in alone for v in g if v.outcome == "skip"))
        memos = list((tmp_path / "cubins").glob("*.json"))
        assert len(memos) == 7
        for memo in memos:
            memo.unlink()
        claims = Claims.for_run(tmp_path, "run")
        calls = _count_tool_calls(monkeypatch)
        warmed = [[run_static(c, tmp_path, group=g if k == 0 else (), claims=claims) for k, c in enumerate(g)]
                  for g in groups]
    finally:
        shutdown_pools()
    assert [[(v.outcome, v.fault_class, v.message) for v in g] for g in warmed] == \
        [[(v.outcome, v.fault_class, v.message) for v in g] for g in alone]
    assert warmed[2][0].fault_class == "out-of-resources"
    assert calls["sass"] == 0, calls
    assert len(list(claims.root.glob("*.done"))) == 7


def test_a_process_warms_each_group_once_and_never_a_group_of_one(tmp_path):
    from ddtree_compat.plugin.static import StaticRun, group_key
    from ddtree_compat.static.claims import Claims

    cases = [make_case(8, "spine", "deep", 3), make_case(12, "spine", "deep", 1)]

    class Backend:
        name, implements = "b", (KernelImpl("verify_tree_greedy", "triton", static=(SGLANG_VERIFY_TRITON, SGLANG_FRONT_OUT_TRITON)),)

    cells = static_cells([Backend()], cases, ("sm120", "sm90"))
    groups: dict = {}
    for c in cells:
        groups.setdefault(group_key(c), []).append(c)
    run = StaticRun(Claims.for_run(tmp_path, "r"), groups)
    verify = [c for c in cells if c.entry is SGLANG_VERIFY_TRITON]
    assert run.first_of_group(verify[1]) == verify[:2]  # sm120's two specializations
    assert run.first_of_group(verify[0]) == [] and run.first_of_group(verify[2]) == verify[2:]
    assert all(run.first_of_group(c) == [] for c in cells if c.entry is SGLANG_FRONT_OUT_TRITON)  # one spec an arch


def test_a_session_without_static_cells_plans_none_and_says_why(pytester):
    """``--ddtree-static=off``: the static test is one skip saying why, and no planned cell (pytest's empty parameter
    set had counted as one planned cell that never wrote a result line: every device report read "partial, 18,627 of
    18,628 cells")."""
    import json
    from pathlib import Path

    pytester.makepyfile(test_static=(Path(__file__).parents[1] / "kernels" / "test_static.py").read_text())
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0", "-rs",
                                           "--ddtree-static=off", "--ddtree-results=r.jsonl",
                                           "test_static.py::test_static")
    result.assert_outcomes(skipped=1)
    assert "no static cell in this session: --ddtree-static off" in result.stdout.str()
    written = pytester.path / "r.jsonl"
    lines = [json.loads(ln) for ln in written.read_text().splitlines()] if written.exists() else []
    assert sum(ln.get("cells", 0) for ln in lines if ln["kind"] == "plan") == 0
