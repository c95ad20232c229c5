"""Shared availability checks for the SGLang adapters."""

from __future__ import annotations

import functools
import importlib
import os
from typing import Callable

from ..tiers import Target


def import_error(module: str) -> str | None:
    """``None`` if ``module`` imports, else a one-line reason naming the missing piece."""
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure makes the backend unavailable
        return f"cannot import {module}: {type(e).__name__}: {e}".replace("\n", " ")
    return None


def device_reason(target: Target) -> str | None:
    """Why a device target cannot run a CUDA kernel here, or ``None``."""
    if target.fake:
        return f"{target.arch} is a DDTREE_FAKE_GPUS entry: no device to run on"
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    return None


def interpreter_on() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def interpreter_reason(kernel: str, probe: Callable[[], None]) -> str | None:
    """``None`` if ``probe()`` (one tiny launch of ``kernel``) runs under Triton's interpreter, else why not.

    Cached per kernel name for the process. Triton 3.6's interpreter turns a loaded scalar into a
    one-element array; with NumPy >= 2.4, ``range()`` over it (a data-dependent loop count, as in
    SGLang's ``assign_extend_cache_locs``) raises "only 0-dimensional arrays can be converted".
    """
    try:
        probe()
    except Exception as e:  # noqa: BLE001 - any failure: the kernel cannot run interpreted here
        import numpy
        import triton

        return (f"Triton {triton.__version__}'s interpreter cannot run {kernel} with NumPy {numpy.__version__}: "
                f"{type(e).__name__}: {e}").replace("\n", " ")[:400]
    return None
