"""Which backends a run has: the built-ins, entry points, the DDTree implementations found, and
``module:object`` specs; how a replay line names a backend again."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from ..errors import BackendError
from ..contract import kernels_of
from .ddtree_impl import SPEC_PREFIX, DDTreeImplBackend, backends_for, from_spec, spec_of

ENTRY_POINT_GROUP = "ddtree_compat.backends"
BUILTIN = {
    "oracle": "ddtree_compat.backends.oracle_column:OracleBackend",
    "sglang-triton": "ddtree_compat.backends.sglang_triton:SGLangTritonBackend",
    "sglang-cuda": "ddtree_compat.backends.sglang_cuda:SGLangCudaBackend",
    "sglang-torch": "ddtree_compat.backends.sglang_torch:SGLangTorchBackend",
    "flashinfer": "ddtree_compat.backends.flashinfer:FlashInferBackend",
}


def registered() -> dict[str, str]:
    """Backend name -> ``module:object``: built-ins, then entry points (a built-in name is not overridden)."""
    specs = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        specs.setdefault(ep.name, ep.value)
    return specs


def _load(spec: str, where: str):
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise BackendError(where, spec, "a registered name or module:object", "not module:object")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise BackendError(where, spec, "an importable module:object", f"cannot load ({type(e).__name__}: {e})")
    backend = obj() if isinstance(obj, type) else obj
    if not isinstance(getattr(backend, "name", None), str) or not kernels_of(backend):
        raise BackendError(where, spec, "an object with a name and implements (one KernelImpl per kernel, "
                           "ddtree_compat.contract.KernelImpl)", "not a backend")
    missing = [k for k in kernels_of(backend) if not callable(getattr(backend, k, None))]
    if missing:
        raise BackendError(where, spec, "a method for every kernel it implements", f"no method {missing[0]}")
    return backend


def replay_spec(backend) -> str:
    """What ``--backend`` needs to load this backend again: its registered name, ``ddtree-impl:PATH`` for a
    DDTree implementation, else ``module:Class``."""
    if isinstance(backend, DDTreeImplBackend):
        return spec_of(backend)
    spec = registered().get(backend.name)
    cls = type(backend)
    if spec == f"{cls.__module__}:{cls.__qualname__}":
        return backend.name
    return f"{cls.__module__}:{cls.__qualname__}"


def resolve(selection: list[str] | None, impl_paths: list[str] | tuple = ()) -> list:
    """Backends for a run: each item a registered name, a DDTree implementation's name (of ``impl_paths``
    or the installed sglang, :mod:`ddtree_compat.impls`), ``ddtree-impl:PATH`` or ``module:object``;
    ``None`` or ``[]`` = every registered backend and every DDTree implementation found.

    Loading a built-in imports only our adapter, never SGLang (adapters import lazily), so a missing
    SGLang is a skip at test time, not an error here.

    Raises:
        BackendError: unknown name, or a spec that does not load to a backend.
        DDTreeInputError: an ``impl_paths`` entry that is no DDTree SGLang tree.
    """
    specs = registered()
    found = {b.name: b for b in backends_for(list(impl_paths))}
    chosen = selection or [*specs, *found]
    backends = []
    for item in chosen:
        if item in specs:
            backends.append(_load(specs[item], "--ddtree-backend"))
        elif item in found:
            backends.append(found[item])
        elif item.startswith(SPEC_PREFIX):
            backends.append(from_spec(item))
        elif ":" in item:
            backends.append(_load(item, "--ddtree-backend"))
        else:
            raise BackendError("--ddtree-backend", item, ", ".join([*specs, *found]) + ", ddtree-impl:PATH or "
                               "module:object", "unknown backend")
    names = [b.name for b in backends]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise BackendError("--ddtree-backend", dup, "each backend once", "duplicate backend name")
    return backends
