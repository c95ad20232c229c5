"""SGLang's per-arch tile choice for extend attention: evaluated for any arch, emulated on any device.

In sglang 0.5.23 (``sglang.kernels.ops.attention.extend_attention``) ``extend_attention_fwd`` calls
``_get_block_sizes_for_extend_attention(Lq, Lv)`` on every call. That function reads two module
globals at call time, ``_is_cuda`` and ``CUDA_CAPABILITY`` (set once, at import, from
``torch.cuda.get_device_capability()``; absent on a CPU host), and returns ``(BLOCK_DMODEL, BLOCK_DPE,
BLOCK_DV, BLOCK_M, BLOCK_N, num_warps)``, with its own branches for major 12 (sm120/sm121), major 10,
Hopper, sm86/sm89 and sm80. ``extend_attention_fwd`` then launches ``_fwd_kernel[grid](...,
BLOCK_M=..., BLOCK_N=..., num_warps=...)``, another module global looked up at call time.

So, for the duration of one call, :func:`capability` patches those two globals
(``unittest.mock.patch.multiple``, restored on exit, created and removed again where the module has
none) and SGLang's own code picks another arch's tiles; nothing of its table is copied here.
:func:`tile_choice` evaluates that choice; :func:`record_launch` wraps ``_fwd_kernel`` to record the
tile arguments the launch really received, so the harness can check the emulated choice reached the
kernel (a future SGLang that caches the choice at import would show as a mismatch, not pass silently).

Running arch X's tiles on another device checks X's *code path* (its tile sizes, masked tails, warp
count) functionally; it says nothing about X's hardware (its shared memory, its SASS). Results say
``emulated-<arch>``. A config that does not fit the present device raises Triton's out-of-resources
error: that is a fact about the device, recorded as a skip with class ``out-of-resources``.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from unittest import mock

from ...arch import parse_arch
from ...contract import locate
from .places import EXTEND_ATTENTION
NATIVE = "native"
TILE_KEYS = ("BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV", "BLOCK_M", "BLOCK_N", "num_warps")
LAUNCH_KEYS = (*TILE_KEYS, "BLOCK_N_PREFIX", "num_stages", "PAGE_SIZE")


def extend_attention_module():
    """The module of the installed SGLang's ``extend_attention_fwd`` (:data:`.places.EXTEND_ATTENTION`).

    Raises:
        Absent, MissingDependency: this SGLang does not have it, or a module it imports is not installed
            (:mod:`ddtree_compat.contract.places`; skip reasons, and only these).
        AdapterError: anything else (ours, reported as an error).
    """
    fn, _ = locate(EXTEND_ATTENTION)
    return sys.modules[fn.__module__]


def emulation_unavailable_reason() -> str | None:
    """Why arch emulation cannot work with the installed module, or ``None``."""
    m = extend_attention_module()
    if getattr(m, "_is_hip", False):
        return "SGLang runs its ROCm branch here: CUDA tile choices cannot be emulated"
    if not callable(getattr(m, "_get_block_sizes_for_extend_attention", None)) or not hasattr(m, "_fwd_kernel"):
        return f"{m.__name__} has no _get_block_sizes_for_extend_attention / _fwd_kernel (SGLang changed)"
    return None


@contextmanager
def capability(arch: str | None):
    """While active, SGLang's extend-attention module picks tiles as on a CUDA device of ``arch``
    (``"sm120"``); ``None`` or ``"native"`` leaves it as imported (this host's own choice).

    Raises:
        ArchError: ``arch`` is not an arch name.
        RuntimeError: the module runs its ROCm branch or lacks the hooks (:func:`emulation_unavailable_reason`).
    """
    if arch in (None, NATIVE):
        yield
        return
    major, minor = parse_arch(arch)
    reason = emulation_unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    with mock.patch.multiple(extend_attention_module(), create=True, _is_cuda=True, CUDA_CAPABILITY=(major, minor)):
        yield


def tile_choice(arch: str | None, head_dim: int, v_head_dim: int | None = None) -> dict[str, int]:
    """SGLang's tile choice for ``arch`` (``None``/``"native"``: this host) at head_dim ``Lq``/``Lv``:
    ``{BLOCK_DMODEL, BLOCK_DPE, BLOCK_DV, BLOCK_M, BLOCK_N, num_warps}``, from its own function."""
    m = extend_attention_module()
    with capability(arch):
        values = m._get_block_sizes_for_extend_attention(head_dim, v_head_dim or head_dim)
    return dict(zip(TILE_KEYS, (int(v) for v in values)))


@contextmanager
def record_launch():
    """While active, every ``_fwd_kernel[grid](...)`` launch appends ``{grid, BLOCK_M, BLOCK_N, ...,
    num_warps, num_stages, PAGE_SIZE}`` (the keyword arguments it received) to the yielded list."""
    m = extend_attention_module()
    real = m._fwd_kernel
    launches: list[dict] = []

    class _Recorder:
        def __getitem__(self, grid):
            launcher = real[grid]

            def launch(*args, **kwargs):
                launches.append({"grid": tuple(int(g) for g in grid),
                                 **{k: kwargs[k] for k in LAUNCH_KEYS if k in kwargs}})
                return launcher(*args, **kwargs)

            return launch

    with mock.patch.object(m, "_fwd_kernel", _Recorder()):
        yield launches
