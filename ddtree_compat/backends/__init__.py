"""Backends: the kernels under test behind one small interface.

A backend is an object with

* ``name``: ``str``, its column in the matrix (``sglang-triton``);
* ``unavailable_reason(target) -> str | None``: ``None`` when it can run on the
  :class:`~ddtree_compat.tiers.Target`, else why not (the test is then a *skip* with that reason,
  counted in the results, never a pass);
* ``verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index,
  retrive_next_token, retrive_next_sibling, target_predict) -> None``: SGLang's greedy tree verify,
  writing the three outputs in place. Shapes and dtypes (``bs`` requests, ``C`` node slots each,
  ``S = accept_width``): ``predicts`` int32 ``[bs*C]``; ``accept_index`` int32 ``[bs, S]``;
  ``accept_token_num`` int32 ``[bs]``; the five inputs int64 ``[bs, C]``, on the target's device.
  Contract: see :func:`ddtree_compat.oracle.verify_greedy_eagle` (elements off the accepted path are
  left as they were).
* optional ``verify_attention(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
  mask_indptr, max_len_extend, sm_scale, page_size, tiles="native") -> dict | None``: the target
  forward's attention over ``[prefix + tree rows]`` under the ancestor-only mask, laid out as SGLang's
  target verify does (SGLang ``extend_attention_fwd``; layout and shapes in
  :mod:`ddtree_compat.attention`), writing ``o`` in place; returns the launch's tile configuration
  (or ``None``). ``tiles`` names an arch whose tile choice to emulate; a backend that can emulate one
  sets ``attention_tiles = True`` and has ``attention_tile_choice(tiles, head_dim) -> dict``.
* optional ``static_kernels``: a tuple of :mod:`ddtree_compat.static.kernels` entries (Triton
  kernels, tvm-ffi CUDA modules) the backend launches; the static tier compiles each for every arch
  (``tests/kernels/test_static.py``).

Built-ins live one per file here. Third parties register theirs with an entry point in the group
``ddtree_compat.backends`` (``name = "pkg.module:BackendClass"``) or per run with
``--ddtree-backend pkg.module:object``.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

from ..errors import BackendError
from ..tiers import Target

ENTRY_POINT_GROUP = "ddtree_compat.backends"
BUILTIN = {
    "oracle": "ddtree_compat.backends.oracle:OracleBackend",
    "sglang-triton": "ddtree_compat.backends.sglang_triton:SGLangTritonBackend",
    "sglang-cuda": "ddtree_compat.backends.sglang_cuda:SGLangCudaBackend",
    "sglang-torch": "ddtree_compat.backends.sglang_torch:SGLangTorchBackend",
}
VERIFY_KERNEL = "verify_tree_greedy"
COMMIT_KERNELS = ("accept_out_cache_loc", "front_out_cache_loc", "commit_outputs", "bonus_tokens",
                  "assign_req_to_token", "move_kv")
ATTENTION_KERNEL = "verify_attention"


@runtime_checkable
class Backend(Protocol):
    """Required: ``name`` and ``unavailable_reason``. Kernels are optional methods: a backend is
    parametrized only for the kernels it has (``verify_tree_greedy`` and/or the commit kernels of
    :mod:`ddtree_compat.commit`); ``kernel_unavailable_reason(target, kernel)``, when present,
    refines availability per kernel."""

    name: str

    def unavailable_reason(self, target: Target) -> str | None: ...


def kernels_of(backend: Backend) -> tuple[str, ...]:
    """The kernels this backend implements, in suite order."""
    return tuple(k for k in (VERIFY_KERNEL, *COMMIT_KERNELS, ATTENTION_KERNEL) if callable(getattr(backend, k, None)))


def kernel_unavailable_reason(backend: Backend, target: Target, kernel: str) -> str | None:
    """Why ``backend`` cannot run ``kernel`` on ``target`` (``None``: it can). A kernel label with an
    ``@`` suffix (``verify_tree_greedy@graph``, ``verify_attention@emulated-sm120``) asks about its base."""
    refine = getattr(backend, "kernel_unavailable_reason", None)
    return refine(target, kernel.split("@")[0]) if refine else backend.unavailable_reason(target)


def registered() -> dict[str, str]:
    """Backend name -> ``module:object``: built-ins, then entry points (a built-in name is not overridden)."""
    specs = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        specs.setdefault(ep.name, ep.value)
    return specs


def _load(spec: str, where: str) -> Backend:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise BackendError(where, spec, "a registered name or module:object", "not module:object")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise BackendError(where, spec, "an importable module:object", f"cannot load ({type(e).__name__}: {e})")
    backend = obj() if isinstance(obj, type) else obj
    if not isinstance(backend, Backend) or not kernels_of(backend):
        raise BackendError(where, spec, "an object with name, unavailable_reason and a kernel method "
                           "(verify_tree_greedy, accept_out_cache_loc, verify_attention, ...)", "not a backend")
    return backend


def replay_spec(backend: Backend) -> str:
    """What ``--backend`` needs to load this backend again: its registered name, else ``module:Class``."""
    spec = registered().get(backend.name)
    cls = type(backend)
    if spec == f"{cls.__module__}:{cls.__qualname__}":
        return backend.name
    return f"{cls.__module__}:{cls.__qualname__}"


def resolve(selection: list[str] | None) -> list[Backend]:
    """Backends for a run: each item a registered name or ``module:object``; ``None`` or ``[]`` = all registered.

    Loading a built-in imports only our adapter, never SGLang (adapters import lazily), so a missing
    SGLang is a skip at test time, not an error here.

    Raises:
        BackendError: unknown name, or a spec that does not load to a backend.
    """
    specs = registered()
    chosen = selection or list(specs)
    backends = []
    for item in chosen:
        if item in specs:
            backends.append(_load(specs[item], "--ddtree-backend"))
        elif ":" in item:
            backends.append(_load(item, "--ddtree-backend"))
        else:
            raise BackendError("--ddtree-backend", item, ", ".join(specs) + ", or module:object", "unknown backend")
    names = [b.name for b in backends]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise BackendError("--ddtree-backend", dup, "each backend once", "duplicate backend name")
    return backends
