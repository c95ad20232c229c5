"""SGLang's verify attention kernel compiled for an arch with the launch SGLang makes on that arch
(runs in the compile worker).

SGLang 0.5.23's target verify (Triton attention backend) calls ``extend_attention_fwd``
(``sglang.kernels.ops.attention.extend_attention``), which picks its tiles with
``_get_block_sizes_for_extend_attention`` from the device's compute capability, derives
``num_stages`` and the constexpr flags, and launches ``_fwd_kernel[grid](...)``. We do not restate any
of that: :func:`sglang_launch` calls ``extend_attention_fwd`` itself on small CPU tensors laid out as
the verify path lays them out (custom mask on, ``is_causal=True``, unit ``k_scale``/``v_scale``, page
size 1; see ``docs/verify-attention.md``), under :func:`ddtree_compat.families.attention.tiles.capability`
for the target arch, with ``_fwd_kernel`` replaced by a recorder that keeps the arguments and launches
nothing. :func:`signature_of` then types each argument the way Triton's JIT would at launch
(``native_specialize_impl``: ``*bf16``, ``i32``, ``fp32``; an integer 1 or ``None`` becomes a constexpr,
an integer multiple of 16 carries the divisibility hint), and :func:`compile_attention` hands that to
:func:`ddtree_compat.static.triton_aot.compile_kernel` for the arch. A later SGLang that changes its
tiles, stages or flags is compiled as it launches, with nothing here to update.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import replace
from unittest import mock

from ..families.attention.places import EXTEND_ATTENTION_KERNEL as FN
from .build import Build, BuildError, Unavailable
from .triton_aot import compile_kernel, describe, load_object
TILE_WORDS = ("BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV", "BLOCK_M", "BLOCK_N", "BLOCK_N_PREFIX")
# The verify batch the launch is recorded with: shapes only matter through strides and head counts.
BATCH, ROWS_PER_REQ, PREFIX, HEADS, KV_HEADS = 2, 4, 8, 8, 2  # GQA group 4 (kv_group_num stays a runtime i32)


@contextmanager
def _recorded(module):
    """Replace ``module._fwd_kernel`` by a recorder: ``fn[grid](*args, **kwargs)`` appends ``(args, kwargs)``."""
    calls: list[tuple[tuple, dict]] = []

    class _Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: calls.append((args, kwargs))

    with mock.patch.object(module, "_fwd_kernel", _Recorder()):
        yield calls


def sglang_launch(arch: str, head_dim: int, dtype: str) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of the ``_fwd_kernel`` launch ``extend_attention_fwd`` makes for a verify batch
    at ``head_dim`` (``Lq = Lv``) in ``dtype`` (``fp16``/``bf16``) on a CUDA device of ``arch``.

    Raises:
        ImportError: SGLang's extend attention is not importable.
        RuntimeError: it did not launch ``_fwd_kernel`` exactly once (SGLang changed its path).
    """
    import torch

    from ..families.attention import tiles

    module = tiles.extend_attention_module()
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    rows, slots = BATCH * ROWS_PER_REQ, BATCH * PREFIX
    q = torch.zeros(rows, HEADS, head_dim, dtype=dt)
    k, v = torch.zeros(rows, KV_HEADS, head_dim, dtype=dt), torch.zeros(rows, KV_HEADS, head_dim, dtype=dt)
    k_buffer, v_buffer = torch.zeros(slots, KV_HEADS, head_dim, dtype=dt), torch.zeros(slots, KV_HEADS, head_dim, dtype=dt)
    qo_indptr = torch.arange(BATCH + 1, dtype=torch.int32) * ROWS_PER_REQ
    kv_indptr = torch.arange(BATCH + 1, dtype=torch.int32) * PREFIX
    kv_indices = torch.arange(slots, dtype=torch.int64)
    block = ROWS_PER_REQ * (PREFIX + ROWS_PER_REQ)
    custom_mask = torch.ones(BATCH * block, dtype=torch.bool)
    mask_indptr = torch.arange(BATCH + 1, dtype=torch.int64) * block
    with tiles.capability(arch), _recorded(module) as calls:
        module.extend_attention_fwd(q, k, v, torch.empty_like(q), k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices,
                                    custom_mask, True, mask_indptr, ROWS_PER_REQ, 1.0, 1.0,
                                    sm_scale=1.0 / math.sqrt(head_dim), page_size=1)
    if len(calls) != 1:
        raise RuntimeError(f"extend_attention_fwd launched _fwd_kernel {len(calls)} times, expected once")
    return calls[0]


def signature_of(fn, args: tuple, kwargs: dict) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, object], ...]]:
    """``(signature, constexprs)`` for :func:`~ddtree_compat.static.triton_aot.compile_kernel`, typed as
    Triton 3.6's JIT types a launch with these arguments (parameter defaults included)."""
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import native_specialize_impl

    bound = dict(zip(fn.arg_names, args))
    bound.update({k: v for k, v in kwargs.items() if k in fn.arg_names})
    signature, constexprs = [], []
    for p in fn.params:
        value = bound[p.name] if p.name in bound else p.default
        if p.is_constexpr:
            constexprs.append((p.name, value))
            continue
        kind, key = native_specialize_impl(BaseBackend, value, False, True, True)
        if kind == "constexpr":
            constexprs.append((p.name, value))
        else:
            signature.append((p.name, kind + (":16" if key == "D" and not kind.startswith("*") else "")))
    return tuple(signature), tuple(constexprs)


def typed_launch(arch: str, head_dim: int, dtype: str, overrides: tuple[tuple[str, int], ...] = ()
                 ) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, object], ...], dict]:
    """``(signature, constexprs, launch kwargs)`` of the ``_fwd_kernel`` launch SGLang makes on ``arch``
    (:func:`sglang_launch`, ``overrides`` applied), typed by :func:`signature_of`. Runs where
    ``TRITON_INTERPRET`` is unset (the compile worker: :func:`ddtree_compat.static.runner.in_worker`).

    Raises:
        Absent, MissingDependency: this SGLang has no ``_fwd_kernel``, or a module it imports is not installed
            (:mod:`ddtree_compat.contract.places`).
        RuntimeError: ``_fwd_kernel`` is no compilable ``@triton.jit`` function here (the interpreter is on),
            or SGLang did not launch it once. Anything else raised is ours, and propagates.
    """
    fn = load_object(FN)
    if not hasattr(fn, "params"):
        raise RuntimeError(f"{describe(FN)} is a {type(fn).__name__}, not a compilable @triton.jit function "
                           "(TRITON_INTERPRET=1 in this process?)")
    args, kwargs = sglang_launch(arch, head_dim, dtype)
    kwargs = {**kwargs, **dict(overrides)}
    signature, constexprs = signature_of(fn, args, {k: v for k, v in kwargs.items() if not k.startswith("num_")})
    return signature, constexprs, kwargs


def compile_attention(head_dim: int, dtype: str, overrides: tuple[tuple[str, int], ...], arch: str,
                      cache_dir: str) -> Build | Unavailable | BuildError:
    """Compile ``_fwd_kernel`` for ``arch`` as SGLang launches it there for a verify batch at ``head_dim``.

    ``overrides`` replace launch values (``(("BLOCK_M", 128), ("num_warps", 8))``): a tile config SGLang
    does not choose, for tests. The :class:`Build`'s ``config`` names the tiles, warps and stages. A kernel this
    SGLang lacks, or a module it needs not installed, is :class:`Unavailable`; any other failure to record or
    type the launch raises (ours).
    """
    from ..contract import Absent, MissingDependency

    try:
        signature, constexprs, kwargs = typed_launch(arch, head_dim, dtype, overrides)
    except (Absent, MissingDependency) as e:
        return Unavailable(f"cannot record SGLang's _fwd_kernel launch for {arch}: {e}"[:500])
    built = compile_kernel(FN, signature, constexprs, kwargs.get("num_warps"), kwargs.get("num_stages"), arch,
                           cache_dir)
    if isinstance(built, Build):
        tiles = ", ".join(f"{w}={kwargs[w]}" for w in TILE_WORDS if w in kwargs)
        built = replace(built, config=f"{tiles}, {built.config}")
    return built
