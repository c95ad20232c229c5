"""Build FlashInfer's verify-attention kernel for an arch, the way FlashInfer's JIT builds it there.

SGLang's flashinfer backend verifies a DDTree tree with ``BatchPrefillWithPagedKVCacheWrapper`` (``fa2``, a
custom mask): FlashInfer JIT-builds one prefill module per (dtype, head dim) from templates
(``flashinfer.jit.attention.gen_batch_prefill_module``), one translation unit per mask mode; the custom
mask's is ``batch_prefill_paged_kernel_mask_2.cu``. We ask FlashInfer for that module's JIT spec and its
``build.ninja`` (``flashinfer.jit.cpp_ext.generate_ninja_build_for_op``) with FlashInfer's own compilation
context set to the arch (``FLASHINFER_CUDA_ARCH_LIST``: ``9.0a``, ``12.0f`` with nvcc >= 12.9, ``12.1a``, plain
below sm90, FlashInfer's choice), keep its variables and rules, and build only that translation unit's device
code, as a fatbinary (:func:`~ddtree_compat.static.nvcc.device_only`: ``-fatbin`` for ``-c``, every flag kept), into
our cache (``<cache>/flashinfer/<module>/<arch>-<key>/``), with nvcc as FlashInfer resolves it (``CUDA_HOME`` /
``CUDA_PATH`` / ``nvcc`` on PATH). The host pass and the link (libcudart) are not arch-specific and are skipped.

FlashInfer sizes the kernel's dynamic shared memory from the device it launches on (the tile count it picks
per arch at run time), so the static check covers the binary's static resources and its SASS; the device
tier runs the launch.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from unittest import mock

from ..arch import parse_arch
from .build import Build, BuildError, Unavailable
from .nvcc import device_only, publish_build, toolchain_reason

MASK_SOURCE = "batch_prefill_paged_kernel_mask_2.cu"  # FlashInfer's paged prefill with a custom mask (MaskMode 2)
FUNCTION = "BatchPrefillWithPagedKVCacheKernel"
THREADS = 128  # every CTA tile of FlashInfer's fa2 prefill runs NUM_WARPS_Q x NUM_WARPS_KV = 4 warps
NVCC_HINT = ("nvcc from pip: pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl, then CUDA_HOME to "
             "their nvidia/cu13 folder (or a CUDA toolkit's)")


def _flashinfer_version() -> str:
    try:
        return version("flashinfer-python")
    except PackageNotFoundError:
        return ""


def capture_build(dtype: str, head_dim: int, arch: str) -> tuple[str, Path, str]:
    """``(build.ninja text, the custom-mask source's path, module name)`` FlashInfer makes for ``arch``.

    Raises:
        ImportError: FlashInfer (or torch) is missing.
        RuntimeError: FlashInfer cannot build for the arch here (no nvcc, a CUDA too old for sm12x).
    """
    import torch
    from flashinfer.compilation_context import CompilationContext
    from flashinfer.jit import core
    from flashinfer.jit.attention.modules import gen_batch_prefill_module
    from flashinfer.jit.cpp_ext import generate_ninja_build_for_op

    major, minor = parse_arch(arch)
    normalized = CompilationContext._normalize_cuda_arch(major, minor)  # (12, "0f"): FlashInfer's own suffix
    target, listed = {normalized}, f"{normalized[0]}.{normalized[1]}"
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    with mock.patch.dict(os.environ, {"FLASHINFER_CUDA_ARCH_LIST": listed}), \
            mock.patch.object(core.current_compilation_context, "TARGET_CUDA_ARCHS", target):
        spec = gen_batch_prefill_module("fa2", dt, dt, dt, torch.int32, head_dim, head_dim, 0, False, False, False)
        text = generate_ninja_build_for_op(name=spec.name, sources=spec.sources, extra_cflags=spec.extra_cflags,
                                           extra_cuda_cflags=spec.extra_cuda_cflags,
                                           extra_ldflags=spec.extra_ldflags,
                                           extra_include_dirs=spec.extra_include_dirs,
                                           needs_device_linking=spec.needs_device_linking)
    source = next((s for s in spec.sources if s.name == MASK_SOURCE), None)
    if source is None:
        raise RuntimeError(f"FlashInfer's prefill module {spec.name} has no {MASK_SOURCE}: the static tier's "
                           "capture needs updating for this flashinfer")
    return text, source, spec.name


def _variable(text: str, name: str) -> str:
    m = re.search(rf"^{name} = (.*)$", text, re.M)
    return m.group(1).strip() if m else ""


def build_prefill(dtype: str, head_dim: int, arch: str, cache_dir: str) -> Build | Unavailable | BuildError:
    """Compile FlashInfer's custom-mask paged prefill for ``arch`` (cached). Never raises for a toolchain gap
    (:class:`Unavailable`, naming what to install) or an nvcc error (:class:`BuildError`)."""
    if not _flashinfer_version():
        return Unavailable("flashinfer-python is not installed (scripts/setup.sh installs the version the "
                           "installed SGLang pins)")
    try:
        text, source, module = capture_build(dtype, head_dim, arch)
    except ImportError as e:
        return Unavailable(f"cannot import FlashInfer's JIT ({type(e).__name__}: {e})".replace("\n", " ")[:500])
    except RuntimeError as e:  # FlashInfer's own "could not find nvcc" / "SM 12.x requires CUDA >= 12.9"
        return Unavailable(f"FlashInfer cannot build for {arch} here: {e}; {NVCC_HINT}".replace("\n", " ")[:600])
    nvcc = _variable(text, "nvcc").replace("$cuda_home", _variable(text, "cuda_home"))
    reason = toolchain_reason(nvcc, arch, "FlashInfer")
    if reason:
        return Unavailable(f"{reason}; {NVCC_HINT}")
    head = text[:text.index("\nbuild ")]  # variables and rules; our own build line follows
    obj = "paged_custom_mask.fatbin"
    ninja = device_only(f"{head}\nbuild {obj}: cuda_compile {source}\n", "cuda_compile")
    nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    key = hashlib.sha256("\0".join([ninja, source.read_text(), nvcc_version, _flashinfer_version()]).encode()
                         ).hexdigest()[:16]
    out = Path(cache_dir) / "flashinfer" / module / f"{arch}-{key}"
    config = " ".join(dict.fromkeys(re.findall(r"-gencode=\S+", text)))
    command = f"{nvcc} $cuda_cflags -fatbin {source} -o {obj}  (FlashInfer's build.ninja for {module})"
    start = time.perf_counter()
    failed = publish_build(out, {"build.ninja": ninja}, [obj], command)
    if failed is not None:
        return failed
    return Build(binary=str(out / obj), config=config, dynamic_smem=0, threads=THREADS, functions=FUNCTION,
                 command=command, seconds=time.perf_counter() - start)
