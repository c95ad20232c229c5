"""Build one of SGLang's tvm-ffi JIT modules for an arch, exactly as its ``load_jit`` would there.

SGLang (``sglang.kernels.jit.utils.compile``) turns a ``load_jit(...)`` call into a ``BuildSpec``
and generates a ``build.ninja`` from it (``ninja.generate``): the nvcc binary it resolves, the
flags ``-Xcompiler -fPIC -gencode=arch=compute_<T>,code=sm_<T> -DSGL_CUDA_ARCH=<N> -std=c++20 -O3
--expt-relaxed-constexpr``, the tvm-ffi and SGLang include dirs, and a generated ``cuda.cu`` wrapper
that includes the sources and exports the entry points. ``<T>`` is the arch with the suffix SGLang
picks (``90a``, ``100a``, ``120f`` with nvcc >= 12.9, ``121a``, plain below sm90).

We do not re-create any of that: under SGLang's own ``override_jit_cuda_arch(major, minor)`` we call
the module's loader and stop it at ``ninja.generate``, keeping the generated text and sources, then
run ninja on them for the device code only (:func:`device_only`: the compile rule's ``-c`` becomes
``-fatbin``, every flag kept). The host pass (g++ over tvm-ffi's C++20 headers, about three quarters of
the object's build time) and the link (libcudart) are not arch-specific and are skipped; the fatbin holds
the cubin the object embeds (the same SASS and resource usage, and the same arch name, ``sm_120f``:
checked with nvcc 13.0 for SGLang's tree module on four archs and FlashInfer's custom-mask prefill on sm120,
docs/tiers.md). Fatbins are cached under ``<cache>/nvcc/<module>/<arch>-<key>/``; the key hashes the
build file, the generated sources, the nvcc version and the sglang and tvm-ffi versions.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
import uuid
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from unittest import mock

from ..arch import parse_arch
from .build import Build, BuildError, Unavailable
from .triton_aot import describe, load_object

NINJA_TIMEOUT_S = 1800


class _Captured(Exception):
    """Raised from inside SGLang's ``ninja.generate`` to stop ``load_jit`` before it compiles."""


def capture_build(loader, arch: str, args: tuple = ()) -> tuple[str, dict[str, str]]:
    """``(build.ninja text, {generated file name: source})`` SGLang's ``load_jit`` makes for ``arch``; ``loader``: the
    places of the function that runs it (:func:`.triton_aot.load_object`).

    Raises:
        ImportError: SGLang's JIT utilities (or tvm-ffi) are missing.
        RuntimeError: the loader did not reach ``ninja.generate`` (SGLang changed how it builds).
    """
    from sglang.kernels.jit.utils import override_jit_cuda_arch
    from sglang.kernels.jit.utils.compile import ninja as sglang_ninja

    fn = load_object(loader)
    fn = getattr(fn, "__wrapped__", fn)  # cache_once: call the body, never a memoised module
    real_generate = sglang_ninja.generate
    captured: dict = {}

    def generate(spec):
        captured["text"] = real_generate(spec)
        captured["sources"] = {u.filename: u.source for u in spec.translation_units() if u.source is not None}
        raise _Captured

    major, minor = parse_arch(arch)
    with override_jit_cuda_arch(major, minor), mock.patch.object(sglang_ninja, "generate", generate):
        try:
            fn(*args)
        except _Captured:
            pass
    if "text" not in captured:
        raise RuntimeError(f"{describe(loader)} did not reach sglang's ninja.generate: the static tier's capture of "
                           "load_jit needs updating for this sglang")
    return captured["text"], captured["sources"]


def _variable(build_text: str, name: str) -> str:
    m = re.search(rf"^{name} = (.*)$", build_text, re.M)
    return m.group(1).strip() if m else ""


def cuda_objects(build_text: str) -> list[str]:
    """Targets of the ``compile_cuda`` rule in a SGLang ``build.ninja``."""
    return re.findall(r"^build (\S+): compile_cuda ", build_text, re.M)


def device_only(build_text: str, rule: str) -> str:
    """``build_text`` (a ``build.ninja`` of SGLang's or FlashInfer's JIT) with its ``rule`` compiling device code
    alone: the rule's ``-c`` becomes ``-fatbin`` and every target of the rule is named ``<stem>.fatbin``; every
    flag, include and define stays as the JIT wrote it. ``-fatbin`` writes the fatbinary that ``-c`` embeds in
    the object (its cubins named by arch as there, ``sm_120f``; a bare ``-cubin``'s ELF header would say
    ``sm=120``), without the host compile.

    Raises:
        RuntimeError: the rule, or its ``-c``, is not there (the JIT changed how it builds).
    """
    block = re.search(rf"^rule {re.escape(rule)}\n(?:  .*\n)*?  command = (.*)$", build_text, re.M)
    if block is None or len(re.findall(r"(?<=\s)-c(?=\s)", block.group(1))) != 1:
        raise RuntimeError(f"no rule {rule!r} with one '-c' in the JIT's build.ninja: the static tier's device-only "
                           "build needs updating for this version")
    command = re.sub(r"(?<=\s)-c(?=\s)", "-fatbin", block.group(1))
    text = build_text[:block.start(1)] + command + build_text[block.end(1):]
    return re.sub(rf"^build (\S+?)(?:\.o|\.fatbin)?: {re.escape(rule)} ",
                  lambda m: f"build {m.group(1)}.fatbin: {rule} ", text, flags=re.M)


def _pkg_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "none"


def toolchain_reason(nvcc: str, arch: str, who: str = "SGLang") -> str | None:
    """Why ``nvcc`` (as ``who``'s JIT resolved it) cannot build for ``arch`` here, or ``None``."""
    if not nvcc or not os.path.isfile(nvcc):
        return f"nvcc not found at {nvcc or '?'} ({who} resolves CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda)"
    if shutil.which("ninja") is None:
        return f"ninja not found on PATH ({who}'s JIT builds through ninja: pip install ninja)"
    major, minor = parse_arch(arch)
    listed = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60).stdout.split()
    if f"compute_{major}{minor}" not in listed:
        return f"{nvcc} cannot target {arch} (--list-gpu-arch: {' '.join(listed[-4:])} ...)"
    return None


def publish_build(out: Path, files: dict[str, str], targets: list[str], command: str) -> BuildError | None:
    """Run ninja for ``targets`` over ``files`` (``build.ninja`` among them) in a staging folder beside ``out``,
    then publish it as ``out`` whole (``out/build.ninja`` marks a finished build: an existing one is reused).
    Returns the nvcc error, if any."""
    if (out / "build.ninja").is_file():
        return None
    staging = out.parent / f".staging-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    try:
        for name, text in files.items():
            if name != "build.ninja":
                (staging / name).write_text(text)
        (staging / "build.ninja").write_text(files["build.ninja"])
        r = subprocess.run(["ninja", "-f", "build.ninja", *targets], cwd=staging, capture_output=True, text=True,
                           timeout=NINJA_TIMEOUT_S)
        if r.returncode != 0:
            return BuildError("nvcc-compile-error", f"{command}\n{(r.stdout + r.stderr)[-4000:]}")
        try:
            staging.rename(out)
        except OSError:  # another worker published the same build first
            if not (out / "build.ninja").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return None


def missing_headers(headers: tuple[tuple[str, str], ...]) -> str | None:
    """Why a JIT module's header-only dependencies are not here (``None``: they are): the first
    ``(package, distribution)`` of ``headers`` with no installed package."""
    import importlib.util

    for package, distribution in headers:
        if importlib.util.find_spec(package) is None:
            return (f"{distribution} is not installed: SGLang's JIT build of this module reads its headers "
                    f"({package}/data/include; pip install {distribution})")
    return None


TOOLKIT_HEADERS = {"curand.h": ("nvidia-curand", "nvidia/cu13/include")}
"""CUDA toolkit headers a JIT module includes that a minimal toolkit (nvcc and the runtime only, as on a CPU CI box)
lacks: ``header -> (the distribution that ships it, its include folder inside site-packages)``."""


def toolkit_include(nvcc: str, header: str) -> tuple[str | None, str | None]:
    """``(extra include folder or None, why not here or None)`` for a toolkit ``header``: the toolkit's own
    (``<nvcc>/../include``, ``targets/*/include``) needs nothing; else the distribution of :data:`TOOLKIT_HEADERS`
    where installed."""
    from importlib.metadata import PackageNotFoundError, distribution

    root = Path(nvcc).resolve().parent.parent
    if (root / "include" / header).is_file() or any(root.glob(f"targets/*/include/{header}")):
        return None, None
    dist, folder = TOOLKIT_HEADERS[header]
    try:
        where = Path(distribution(dist).locate_file(folder))
    except PackageNotFoundError:
        where = None
    if where is None or not (where / header).is_file():
        return None, (f"the CUDA toolkit at {root} has no {header} and {dist} is not installed (pip install {dist}): "
                      "this module includes it")
    return str(where), None


def build_module(loader, function: str, threads: int, arch: str, cache_dir: str, args: tuple = (),
                 headers: tuple[tuple[str, str], ...] = (), toolkit: tuple[str, ...] = ()
                 ) -> Build | Unavailable | BuildError:
    """Compile a SGLang JIT module's CUDA objects for ``arch`` (cached); ``args``: the loader's (the module's
    template parameters); ``headers``: its header-only dependencies (:func:`missing_headers`); ``toolkit``: the
    CUDA toolkit headers it includes that a minimal toolkit lacks (:func:`toolkit_include`: the include folder of
    the distribution that ships them is added to SGLang's flags). Never raises for a toolchain gap or a missing
    dependency (:class:`Unavailable`) or an nvcc error (:class:`BuildError`)."""
    why = missing_headers(headers)
    if why:
        return Unavailable(why)
    try:
        text, sources = capture_build(loader, arch, args)
    except ImportError as e:
        return Unavailable(f"cannot import SGLang's JIT build ({type(e).__name__}: {e})".replace("\n", " ")[:500])
    nvcc = _variable(text, "nvcc").strip("'\"")
    reason = toolchain_reason(nvcc, arch)
    if reason:
        return Unavailable(reason)
    for header in toolkit:
        extra, why = toolkit_include(nvcc, header)
        if why:
            return Unavailable(why)
        if extra:
            text = re.sub(r"^(cudaflags = .*)$", lambda m: f"{m.group(1)} -I{extra}", text, count=1, flags=re.M)
    text = device_only(text, "compile_cuda")  # (a RuntimeError here is ours to update: an error, never a fault)
    objects = cuda_objects(text)
    if len(objects) != 1:
        return BuildError("nvcc-compile-error", f"expected one CUDA object in SGLang's build.ninja, got {objects}")
    nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    key = hashlib.sha256("\0".join([text, *sorted(f"{k}\n{v}" for k, v in sources.items()), nvcc_version,
                                    _pkg_version("sglang"), _pkg_version("apache-tvm-ffi")]).encode()).hexdigest()[:16]
    module = re.search(r"^build (\S+)\.so: link", text, re.M)
    out = Path(cache_dir) / "nvcc" / (module.group(1) if module else "module") / f"{arch}-{key}"
    flags = _variable(text, "cudaflags")
    config = " ".join(f for f in flags.split() if f.startswith(("-gencode", "-DSGL_CUDA_ARCH")))
    command = f"{nvcc} {flags} -fatbin {' '.join(sources) or '?'} -o {objects[0]}"
    start = time.perf_counter()
    failed = publish_build(out, {**sources, "build.ninja": text}, objects, command)
    if failed is not None:
        return failed
    seconds = time.perf_counter() - start
    return Build(binary=str(out / objects[0]), config=config, dynamic_smem=0, threads=threads,
                 functions=function, command=command, seconds=seconds)
