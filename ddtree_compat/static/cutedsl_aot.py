"""Build the CuTe DSL GDN verify kernels SGLang runs for an arch, on a machine without that GPU, as they build on one.

Two calls (``CALLS``), each made exactly as SGLang 0.5.23 makes it in chain verify:

* ``ring``: SGLang's own CuTe DSL kernel (``gated_delta_rule_mtp`` of ``cutedsl_gdn_mtp_ring``, ring mode), which
  its ReplaySSM fold runs when FlashInfer's verify has a bf16 state
  (:data:`~ddtree_compat.families.linear.places.CUTEDSL_GDN_MTP_RING`).
* ``flashinfer-mtp``: SGLang's ``FlashInferGDNKernel().target_verify(...)``, which runs FlashInfer's CuTe DSL
  ``gated_delta_rule_mtp`` (SM90 with an fp32 state pool, SM100 with bf16).

CuTe DSL compiles a kernel when it is first called, for the GPU it runs on: ``sm_<cc>a`` from sm90 on, plain
``sm_<cc>`` below (``CUTE_DSL_ARCH`` names another, and FlashInfer's GDN kernels honour it as their target).

Each build runs in a child process of its own (``python -m ddtree_compat.static.cutedsl_aot``): CuTe DSL reads
``CUTE_DSL_ARCH`` once per process, and SGLang's and FlashInfer's modules read the GPU's SM count and compute
capability, which the child answers as the arch would (so they make their own per-arch choices: packed FMA from
SM100 on, the state pool on SM100). The child makes the call at the spec's shapes with CPU tensors that say they
live on the GPU (the kernel is compiled, never launched), takes the cubin CuTe DSL compiled for the first kernel and
the launch it asked for (threads, dynamic shared memory), and stops there. The cubin goes to our cache
(``<cache>/cutedsl/<arch>-<key>/``) and is judged like every static cell.

Outcomes: the cubin; :class:`~ddtree_compat.static.build.Unavailable` where the build cannot be tried here
(nvidia-cutlass-dsl not installed, an SGLang without the kernel, an arch SGLang never runs it on);
:class:`~ddtree_compat.static.build.BuildError` ``cutedsl-compile-error`` when CuTe DSL's compiler rejects the kernel
for the arch. Anything else the child raises (our arguments refused by SGLang's wrapper) is the suite's error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..arch import parse_arch
from .build import Build, BuildError, Unavailable

CUTEDSL_DIST = "nvidia-cutlass-dsl"
JOB_TIMEOUT_S = 600
ANSWER_RC = 3
"""The child's exit status for an answer on its last stdout line (a skip or the compiler's rejection); argparse's
own usage errors exit 2, and stay the suite's error."""
RING_LEN_EXTRA = 1
"""The ring holds ``T + 1`` steps (SGLang sizes it from ``--linear-replayssm-cache-len``; the kernel needs ``>= T``)."""


def cute_target(arch: str) -> str:
    """The target CuTe DSL compiles for on a GPU of ``arch``: ``sm_90a``, ``sm_120a``; ``sm_80`` below sm90."""
    major, minor = parse_arch(arch)
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


def _versions() -> str:
    out = []
    for dist in (CUTEDSL_DIST, "sglang", "flashinfer-python"):
        try:
            out.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            out.append(f"no {dist}")
    return ", ".join(out)


CALLS = {
    "ring": "its own CuTe DSL kernel, as its ReplaySSM fold runs it behind FlashInfer's bf16-state GDN verify "
            "(--enable-linear-replayssm)",
    "flashinfer-mtp": "FlashInfer's GDN verify, as SGLang's FlashInferGDNKernel runs it",
}


def build_gdn(call: str, shape: tuple[tuple[str, object], ...], arch: str, cache_dir: str,
              routed: tuple[tuple[int, str], ...]):
    """Build ``call``'s kernel for ``shape`` (``B``, ``T``, ``H``, ``HV``, ``K`` and the ``state`` dtype) and
    ``arch``.

    ``routed``: the ``(arch major, state dtype)`` pairs where SGLang makes this call; elsewhere the cell is a skip
    that says which kernel verifies there. ``shape`` sizes the call: ``B`` requests of ``T`` draft tokens, ``H`` key
    and ``HV`` value heads of dim ``K`` (= V), bf16 activations, a state pool of ``state`` (``fp32`` / ``bf16``).

    Returns:
        :class:`Build` (the cubin under ``<cache_dir>/cutedsl/<arch>-<key>/``; ``seconds`` 0 on a cache hit),
        :class:`Unavailable` (not routed, no nvidia-cutlass-dsl, an SGLang or FlashInfer without the call), or
        :class:`BuildError` (``cutedsl-compile-error``; ``hang`` past :data:`JOB_TIMEOUT_S`).

    Raises:
        RuntimeError: the child failed otherwise (our arguments, or our recorder): the suite's error."""
    major, state = parse_arch(arch)[0], dict(shape)["state"]
    if (major, state) not in routed:
        where = ", ".join(f"SM{m}0 with a {st} state" for m, st in routed)
        return Unavailable(f"SGLang runs {CALLS[call]} on {where} only; {arch} verifies with the Triton GDN kernel "
                           "(its own static cells)")
    try:
        version(CUTEDSL_DIST)
    except PackageNotFoundError:
        return Unavailable(f"{CUTEDSL_DIST} is not installed here (pip install {CUTEDSL_DIST}; scripts/setup.sh "
                           "installs the version SGLang pins)")
    key = hashlib.sha256(repr((call, shape, arch, _versions())).encode()).hexdigest()[:16]
    out = Path(cache_dir).resolve() / "cutedsl" / f"{arch}-{key}"
    done = out / "build.json"
    start, built_now = time.perf_counter(), not done.is_file()
    if built_now:
        out.mkdir(parents=True, exist_ok=True)
        package_root = str(Path(__file__).resolve().parents[2])  # importable from the build folder, installed or not
        env = dict(os.environ, CUTE_DSL_ARCH=cute_target(arch), CUTE_DSL_KEEP_CUBIN="1",
                   PYTHONPATH=os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p))
        cmd = [sys.executable, "-m", __name__, "--call", call, "--arch", arch, "--out", str(out),
               *(f"--{k}={v}" for k, v in shape)]
        try:  # in the build folder: CuTe DSL writes the cubins it keeps into the working directory
            proc = subprocess.run(cmd, env=env, cwd=out, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return BuildError("hang", f"CuTe DSL did not finish the build in {JOB_TIMEOUT_S} s")
        if proc.returncode == ANSWER_RC:  # the child's answer: a skip, or the compiler's rejection
            answer = json.loads(proc.stdout.strip().splitlines()[-1])
            if "unavailable" in answer:
                return Unavailable(answer["unavailable"])
            return BuildError("cutedsl-compile-error", answer["rejected"])
        if proc.returncode != 0 or not done.is_file():
            raise RuntimeError(f"the CuTe DSL build job failed (rc {proc.returncode}): "
                               f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    facts = json.loads(done.read_text())
    return Build(binary=str(out / "kernel.cubin"), config=facts["config"], dynamic_smem=facts["smem"],
                 threads=facts["threads"], functions="kernel_cutlass_gdn", command=facts["command"],
                 seconds=time.perf_counter() - start if built_now else 0.0)


# ---- the child: one build, in its own process


def _fake_gpu(arch: str):
    """Patches that make torch answer SGLang's and FlashInfer's modules as a GPU of ``arch`` would (nothing is
    launched)."""
    import types
    from unittest import mock

    major, minor = parse_arch(arch)
    props = types.SimpleNamespace(multi_processor_count=132, major=major, minor=minor, name=f"({arch}, not present)",
                                  total_memory=80 << 30)
    stream = types.SimpleNamespace(cuda_stream=0)
    return (mock.patch("torch.cuda.get_device_properties", return_value=props),
            mock.patch("torch.cuda.get_device_capability", return_value=(major, minor)),
            mock.patch("torch.cuda.current_stream", return_value=stream),
            mock.patch("torch.cuda.current_device", return_value=0),
            mock.patch("torch.cuda.is_available", return_value=True))


class _OnGpu:
    """A CPU tensor's DLPack that says it is on the GPU: CuTe DSL then types it as global memory, as it types a
    CUDA tensor. Only its shape, strides, dtype and alignment reach the compiler."""

    KDL_CUDA = 2

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack_device__(self):
        return (self.KDL_CUDA, 0)

    def __dlpack__(self, *args, max_version=None, **kwargs):
        import ctypes

        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        if max_version is not None and max_version[0] >= 1:  # DLManagedTensorVersioned: 32 bytes before its tensor
            capsule, name, tensor_at = self.tensor.__dlpack__(max_version=max_version), b"dltensor_versioned", 32
        else:  # DLManagedTensor: the tensor first
            capsule, name, tensor_at = self.tensor.__dlpack__(), b"dltensor", 0
        ctypes.c_int32.from_address(get(capsule, name) + tensor_at + 8).value = self.KDL_CUDA  # DLTensor.device
        return capsule


class _Compiled(Exception):
    """Raised in place of running the kernel, once it is compiled."""


class _CompileOnly:
    """Stands in for ``cute.compile`` (called, or indexed with options first as FlashInfer calls it): compiles (the
    parent sets ``CUTE_DSL_KEEP_CUBIN``, so the result holds its cubin), records it, and stops the call there."""

    def __init__(self, real, seen: dict):
        self.real, self.seen = real, seen

    def _run(self, compile_fn, *a, **kw):
        try:
            self.seen["compiled"] = compile_fn(*a, **kw)
        except Exception as e:  # noqa: BLE001 - CuTe DSL's compiler rejected the kernel for the arch
            if "ours" in self.seen:  # our launch recorder failed inside the trace: the suite's error
                raise self.seen["ours"] from e
            self.seen["rejected"] = f"{type(e).__name__}: {e}"
        raise _Compiled

    def __call__(self, *a, **kw):
        return self._run(self.real, *a, **kw)

    def __getitem__(self, options):
        return lambda *a, **kw: self._run(self.real[options], *a, **kw)


def _activations(b: int, t: int, h: int, hv: int, d: int) -> dict:
    import torch

    bf16 = torch.bfloat16
    return dict(q=torch.zeros(b, t, h, d, dtype=bf16), k=torch.zeros(b, t, h, d, dtype=bf16),
                v=torch.zeros(b, t, hv, d, dtype=bf16), a=torch.zeros(b, t, hv, dtype=bf16),
                b=torch.zeros(b, t, hv, dtype=bf16))


def _ring_call(b: int, t: int, h: int, hv: int, d: int, state: str):
    """SGLang's fold kernel with the arguments its ReplaySSM fold passes (a bf16 state pool with a slot per request
    and a spare, the per-layer ring views)."""
    import torch

    from ..contract.places import locate
    from ..families.linear.places import CUTEDSL_GDN_MTP_RING

    fn, place = locate(CUTEDSL_GDN_MTP_RING)
    bf16, slots, ring = torch.bfloat16, b + 1, t + RING_LEN_EXTRA
    kwargs = dict(A_log=torch.zeros(hv), dt_bias=torch.zeros(hv), **_activations(b, t, h, hv, d),
                  initial_state_source=torch.zeros(slots, hv, d, d, dtype=bf16),
                  initial_state_indices=torch.arange(1, b + 1, dtype=torch.int32), use_qk_l2norm_in_kernel=True,
                  disable_state_update=True, cache_ring=True,
                  replayssm_rawv=torch.zeros(slots, hv, ring, d, dtype=bf16),
                  replayssm_rawk=torch.zeros(slots, h, ring, d, dtype=bf16),
                  replayssm_g=torch.zeros(slots, hv, ring), replayssm_beta=torch.zeros(slots, hv, ring))
    return (lambda: fn(**kwargs)), str(place), [sys.modules[fn.__module__]]


def _flashinfer_call(b: int, t: int, h: int, hv: int, d: int, state: str):
    """SGLang's ``FlashInferGDNKernel().target_verify(...)`` at top-k 1, as its GDN backend calls it: the flattened
    tokens of ``b`` requests of ``t`` draft tokens, the state pool and the verify scratch (a row per request)."""
    import torch

    from ..contract.places import locate
    from ..families.linear.places import FLASHINFER_GDN

    cls, place = locate(FLASHINFER_GDN)
    sglang_module = sys.modules[cls.__module__]
    sglang_module.is_cuda = lambda: True  # SGLang asks before it loads FlashInfer's GDN kernels
    try:
        import flashinfer.gdn_kernels.device_target as target
    except ImportError as e:
        _answer(unavailable=f"this FlashInfer has no GDN compile target to name off a GPU "
                            f"(flashinfer.gdn_kernels.device_target): {e}")
    try:
        kernel = cls()
    except (ImportError, RuntimeError) as e:
        _answer(unavailable=f"SGLang's FlashInferGDNKernel cannot be made here: {type(e).__name__}: {e}")
    if not kernel.supports_target_verify:
        _answer(unavailable="SGLang's FlashInferGDNKernel does not verify on this arch (supports_target_verify)")

    def on_this_target(device):  # FlashInfer takes its target from the operands' device: the arch, from CUTE_DSL_ARCH
        return target._resolve(0)

    modules = [m for n, m in list(sys.modules.items()) if n.startswith("flashinfer") and m is not None]
    by_device = target.gdn_device_target
    for module in modules:  # the target module itself among them
        if getattr(module, "gdn_device_target", None) is by_device:
            module.gdn_device_target = on_this_target
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[state]
    acts = {k: v.reshape(1, b * t, *v.shape[2:]) if k in "qkv" else v.reshape(b * t, -1)
            for k, v in _activations(b, t, h, hv, d).items()}
    slots = b + 1
    pool = torch.zeros(slots, hv, d, d, dtype=dtype)
    scratch = torch.zeros(slots, t, hv, d, d, dtype=dtype)
    rows = torch.arange(1, b + 1, dtype=torch.int32)

    def run():
        kernel.target_verify(torch.zeros(hv), torch.zeros(hv), acts["q"], acts["k"], acts["v"], acts["a"], acts["b"],
                             ssm_states=pool, cache_indices=rows,
                             query_start_loc=torch.arange(0, b * t + 1, t, dtype=torch.int32),
                             intermediate_states_buffer=scratch, intermediate_state_indices=rows, cache_steps=t,
                             retrieve_parent_token=None)

    return run, f"{place}().target_verify", [sglang_module, *modules]


CALL_OF = {"ring": _ring_call, "flashinfer-mtp": _flashinfer_call}


def _answer(**kv) -> None:
    print(json.dumps(kv))
    sys.exit(ANSWER_RC)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="one CuTe DSL build of a GDN verify kernel SGLang runs (internal)")
    parser.add_argument("--call", required=True, choices=sorted(CALL_OF))
    parser.add_argument("--arch", required=True)
    parser.add_argument("--out", required=True, type=Path)
    for name in ("B", "T", "H", "HV", "K"):
        parser.add_argument(f"--{name}", type=int, required=True)
    parser.add_argument("--state", required=True, choices=("fp32", "bf16"))
    args = parser.parse_args(argv)
    try:
        import cutlass.cute as cute
        import cutlass.cute.runtime as cute_runtime
        from cutlass.cutlass_dsl.cutlass import KernelLauncher
    except ImportError as e:
        _answer(unavailable=f"{CUTEDSL_DIST} cannot be imported here: {e}")
    from contextlib import ExitStack
    from unittest import mock

    import torch

    from ..contract.places import Absent, MissingDependency

    seen: dict = {}
    real_launch, real_from = KernelLauncher.launch, cute_runtime.from_dlpack

    def launch(self, *a, **kw):
        try:  # the trace's own values, read after the compile (a staged value has no truth value here)
            seen["launch"] = (kw["block"], kw.get("smem", 0))
        except Exception as e:  # noqa: BLE001 - kept, raised by _CompileOnly as the suite's error
            seen["ours"] = e
            raise
        return real_launch(self, *a, **kw)

    def from_dlpack(x, *a, **kw):
        return real_from(_OnGpu(x) if isinstance(x, torch.Tensor) else x, *a, **kw)

    with ExitStack() as stack:
        for patch in _fake_gpu(args.arch):
            stack.enter_context(patch)
        try:
            run, place, modules = CALL_OF[args.call](args.B, args.T, args.H, args.HV, args.K, args.state)
        except (Absent, MissingDependency) as e:
            _answer(unavailable=str(e))
        stack.enter_context(mock.patch.object(cute, "compile", _CompileOnly(cute.compile, seen)))
        stack.enter_context(mock.patch.object(KernelLauncher, "launch", launch))
        for module in (cute_runtime, *modules):
            if getattr(module, "from_dlpack", None) is real_from:
                stack.enter_context(mock.patch.object(module, "from_dlpack", from_dlpack))
        started = time.perf_counter()
        try:
            run()
        except _Compiled:
            pass
        if "rejected" in seen:
            _answer(rejected=seen["rejected"][:4000])
        if "compiled" not in seen:
            raise RuntimeError(f"{place} returned without compiling a CuTe DSL kernel")
        compiled, launched = seen["compiled"], seen.get("launch", ((0,), 0))
    kernels = list(getattr(compiled, "kernel_info", {}) or {})
    block, smem = launched
    threads = 1
    for n in block:
        threads *= int(n)
    try:  # a Python int in the trace; a value the trace computes is set at launch, not read here
        smem, smem_said = int(smem), f"{int(smem)} B dynamic smem"
    except Exception:  # noqa: BLE001 - CuTe DSL raises its own error type for a staged value
        smem, smem_said = 0, "dynamic smem computed at launch (not counted)"
    kernel = kernels[0].split("_tensor")[0].removeprefix("kernel_cutlass_") if kernels else "?"
    (args.out / "kernel.cubin").write_bytes(compiled.artifacts.CUBIN)
    for kept in args.out.glob("cutlass_*.cubin"):  # CuTe DSL's own copies (kept cubins), in the working directory
        kept.unlink()
    (args.out / "build.json").write_text(json.dumps({
        "config": f"{kernel}, {threads} threads, {smem_said} ({cute_target(args.arch)}, {_versions()})",
        "smem": smem, "threads": threads,
        "command": f"CUTE_DSL_ARCH={cute_target(args.arch)} {place}(...) as SGLang calls it in chain verify, "
                   f"B={args.B} T={args.T} H={args.H} HV={args.HV} K=V={args.K} {args.state} state, compiled in "
                   f"{time.perf_counter() - started:.1f} s"}))


if __name__ == "__main__":
    main()
