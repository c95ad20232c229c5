"""Shared availability checks for the SGLang adapters."""

from __future__ import annotations

import importlib
import os

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
