"""A backend, declared once: who implements the kernels under test, and where each can run.

A backend is a :class:`Backend` (or any object with the same two attributes):

* ``name``: its column in the matrix (``sglang-triton``);
* ``implements``: one :class:`KernelImpl` per kernel it has: the kernel's record name
  (:class:`~ddtree_compat.contract.record.KernelRecord`), the runtime it runs on (where it can run), where the
  kernel is kept (:class:`~ddtree_compat.contract.places.Place`), and its static-tier entries. The backend has a
  method of the kernel's name (signatures in the family's ``checks.py``).

Where a kernel can run is answered in one place, :func:`unavailable`, from that declaration (the way
FlashInfer's backends declare their supported compute capabilities once and tests ask them): a
reason string makes the cell a *skip* with that reason, counted in the results, never a pass.

The built-in backends live one per file in :mod:`ddtree_compat.backends`; third parties register theirs with an
entry point in the group ``ddtree_compat.backends`` (``name = "pkg.module:BackendClass"``) or per run with
``--ddtree-backend pkg.module:object`` (:mod:`ddtree_compat.backends.registry`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Callable

from ..tiers import DEVICE_TIER_ONLY, Target
from . import places
from .record import base_name

RUNTIMES = ("host", "triton", "cuda", "torch")


@dataclass(frozen=True)
class KernelImpl:
    """One kernel of a backend, and where it can run.

    Attributes:
        kernel: the kernel's record name (``verify_tree_greedy``); the backend's method of that name runs it.
        runtime: ``host`` (Python on any real target; reads tensors back, so never inside a CUDA
            graph), ``triton`` (compiled on the device tier, interpreted on the interpret tier),
            ``cuda`` (a compiled CUDA kernel: the device tier only), ``torch`` (torch ops: any tier).
        what: the implementation in words, for skip reasons (``SGLang's Triton verify_tree_greedy_triton``).
        places: where the kernel may live (:class:`.places.Place`, first found wins): none found
            is a skip that says where the suite looked; a place whose module lacks a dependency here, a
            skip naming it.
        refuse: ``(target, case) -> reason | None``: cases this implementation cannot run on a target
            (bf16 under Triton's interpreter).
        static: static-tier entries (:mod:`ddtree_compat.static.kernels`) compiled for every arch.
        build_key: ``case -> key`` for a kernel built on first use (a JIT module per template instance): cells
            with one key share one build, and :mod:`ddtree_compat.plugin.schedule` starts the first cell of each
            key with the long tests, so the builds overlap the small cells instead of stalling every worker that
            reaches one. ``None``: built ahead of time, or one build for every case.
    """

    kernel: str
    runtime: str
    what: str = ""
    places: tuple = ()
    refuse: Callable | None = None
    static: tuple = ()
    build_key: Callable | None = None

    @property
    def graph_capturable(self) -> bool:
        return self.runtime != "host"


class Backend:
    """Base of the built-in backends: ``name`` and ``implements`` (see the module docstring)."""

    name = ""
    implements: tuple[KernelImpl, ...] = ()


def implementation(backend, kernel: str) -> KernelImpl | None:
    """The backend's implementation of a kernel name or label (``verify_tree_greedy@graph``), or ``None``."""
    name = base_name(kernel)
    return next((i for i in getattr(backend, "implements", ()) if i.kernel == name), None)


def kernels_of(backend) -> tuple[str, ...]:
    """The kernels this backend implements, in its declaration's order."""
    return tuple(i.kernel for i in getattr(backend, "implements", ()))


def with_static(implements: tuple[KernelImpl, ...], kernel: str, static: tuple) -> tuple[KernelImpl, ...]:
    """``implements`` with ``kernel``'s static entries replaced (for a backend derived from another)."""
    return tuple(replace(i, static=static) if i.kernel == kernel else i for i in implements)


def interpreter_on() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _cuda_reason() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    return None


def _runtime_reason(impl: KernelImpl, target: Target) -> str | None:
    if impl.runtime == "host":
        return None
    if impl.runtime == "cuda":
        return None if target.tier == "device" else (f"{impl.what or 'a CUDA kernel'} {DEVICE_TIER_ONLY} "
                                                     f"(a CUDA GPU; this target is {target.tier})")
    if impl.runtime == "triton":
        if target.tier == "interpret" and not interpreter_on():
            return "interpret tier needs TRITON_INTERPRET=1 set before Triton is imported"
        if target.tier == "device" and interpreter_on():
            return "TRITON_INTERPRET=1 is set: the device tier needs compiled Triton"
    return None


def unavailable(backend, kernel: str, target: Target, case=None) -> str | None:
    """Why ``backend`` cannot run ``kernel`` (a name or label) on ``target`` (for ``case``, when given),
    or ``None`` when it can. The one answer to "runs here?", read from the backend's declaration."""
    impl = implementation(backend, kernel)
    if impl is None:
        return f"{backend.name} has no {base_name(kernel)} kernel"
    if target.fake:
        return f"{target.arch} is a DDTREE_FAKE_GPUS entry: no device to run on"
    reason = _runtime_reason(impl, target)
    if not reason and target.tier == "device" and impl.runtime != "host":
        reason = _cuda_reason()
    if not reason and impl.places:
        reason = places.reason(impl.places)  # AdapterError (ours) propagates: an error, not a skip
    if not reason and case is not None and impl.refuse is not None:
        reason = impl.refuse(target, case)
    return reason


def backend_unavailable(backend, target: Target) -> str | None:
    """``None`` when at least one of the backend's kernels can run on ``target``, else the first reason."""
    reasons = [unavailable(backend, k, target) for k in kernels_of(backend)]
    return None if any(r is None for r in reasons) else (reasons[0] if reasons else f"{backend.name} has no kernel")
