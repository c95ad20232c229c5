"""Ahead-of-time Triton compiles for an arch this host does not have (runs in the compile worker).

``triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", cc, 32))``
runs Triton's whole pipeline (TTIR, TTGIR, LLVM IR, PTX, ptxas) for compute capability ``cc``
without a GPU. Under ``TRITON_INTERPRET=1``, ``@triton.jit`` makes interpreter objects that cannot be
compiled, so the worker process unsets it before importing any kernel
(:func:`ddtree_compat.static.runner.init_worker`).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import time
from pathlib import Path

from ..arch import parse_arch
from ..imports import missing as missing_module
from .build import Build, BuildError, Unavailable

# ptxas's words for "this ptxas cannot target that arch": a toolchain gap, not a kernel fault.
_UNSUPPORTED = ("is not defined for option 'gpu-name'", "unsupported gpu architecture", "not a supported target")


def load_object(ref):
    """The object a reference names: a tuple of :class:`~ddtree_compat.contract.Place` s -> the first the installed
    SGLang has (:func:`~ddtree_compat.contract.locate`: its own imports, no ``sglang/__init__``);
    ``"pkg.module:attr"`` -> that attribute; ``"/path/to/file.py::attr"`` -> ``attr`` of that file, loaded by path
    (a DDTree implementation's kernel module, :func:`ddtree_compat.impls.load_module`).

    Raises:
        Absent, MissingDependency: no place is in this SGLang, or its module needs one not installed here.
        AdapterError, ImportError, AttributeError: anything else (ours).
    """
    if isinstance(ref, tuple):
        from ..contract import locate

        return locate(ref)[0]
    if "::" in ref:
        from ..impls import load_module

        path, _, attr = ref.partition("::")
        return getattr(load_module(Path(path)), attr)
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def describe(ref) -> str:
    """A reference as :func:`load_object` takes it, in words: places joined by ``|``, else the string."""
    return " | ".join(map(str, ref)) if isinstance(ref, tuple) else ref


def compile_kernel(fn_ref, signature: tuple[tuple[str, str], ...], constexprs: tuple[tuple[str, int], ...],
                   num_warps: int | None, num_stages: int | None, arch: str, cache_dir: str) -> Build | Unavailable | BuildError:
    """Compile one specialization of a Triton kernel for ``arch``; write the cubin under ``cache_dir``. ``fn_ref``:
    the kernel as :func:`load_object` takes it.

    Returns a :class:`Build` (dynamic shared memory = Triton's ``metadata.shared``, threads =
    ``num_warps * 32``), :class:`Unavailable` (Triton not installed; an SGLang kernel this SGLang does not
    have, or whose module needs one not installed here; a copy of the kernel whose parameters differ from the
    specialization's, an older or newer version; ptxas cannot target the arch) or :class:`BuildError`
    (the compiler rejected the kernel). Never raises for those; anything else (a name of ours that does not
    import, :class:`~ddtree_compat.contract.places.AdapterError`) raises: an error of the suite.
    """
    from ..contract import Absent, MissingDependency

    reason = missing_module("triton")
    if reason:
        return Unavailable(reason)
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    try:
        fn = load_object(fn_ref)
    except (Absent, MissingDependency) as e:
        return Unavailable(f"cannot import {describe(fn_ref)}: {e}".replace("\n", " ")[:500])
    if not hasattr(fn, "arg_names") or not hasattr(fn, "cache_key"):
        return Unavailable(f"{describe(fn_ref)} is a {type(fn).__name__}, not a compilable @triton.jit function "
                           "(TRITON_INTERPRET=1 in the compile worker?)")
    declared = dict(signature)
    types = {n: t.partition(":")[0] for n, t in declared.items()}
    consts = dict(constexprs)
    missing = [n for n in fn.arg_names if n not in types and n not in consts]
    unknown = [n for n in (*types, *consts) if n not in fn.arg_names]
    if missing or unknown:  # another version of the kernel than the one the specialization was written for
        said = "; ".join(filter(None, (f"parameters the suite does not set: {missing}" if missing else "",
                                        f"no parameter(s) {unknown}" if unknown else "")))
        return Unavailable(f"{describe(fn_ref)} has another signature than the suite's specialization of it ({said}): "
                           "this SGLang's copy of the kernel is another version; its cells are not built")
    sig = {n: types.get(n, "constexpr") for n in fn.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names)
             if types.get(n, "").startswith("*") or declared.get(n, "").endswith(":16")}
    major, minor = parse_arch(arch)
    options = {k: v for k, v in (("num_warps", num_warps), ("num_stages", num_stages)) if v is not None}
    start = time.perf_counter()
    try:
        compiled = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                                  target=GPUTarget("cuda", major * 10 + minor, 32), options=options)
    except Exception as e:  # noqa: BLE001 - the compiler's error is the result
        text = f"{type(e).__name__}: {e}"
        if any(u in text.lower() for u in _UNSUPPORTED):
            return Unavailable(f"triton {triton.__version__} cannot target {arch}: {text[:400]}")
        return BuildError("triton-compile-error", text[:4000])
    seconds = time.perf_counter() - start
    cubin = compiled.asm["cubin"]
    out = Path(cache_dir) / "cubins" / f"{hashlib.sha256(cubin).hexdigest()[:24]}.cubin"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(cubin)
        os.replace(tmp, out)
    md = compiled.metadata
    call = (f"triton.compile(ASTSource({describe(fn_ref)}, constexprs={consts}), target=GPUTarget('cuda', "
            f"{major * 10 + minor}, 32), options={options})")
    return Build(binary=str(out), config=f"num_warps={md.num_warps}, num_stages={md.num_stages}",
                 dynamic_smem=int(md.shared), threads=md.num_warps * 32, functions=md.name, command=call, seconds=seconds)
