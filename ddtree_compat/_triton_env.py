"""Import Triton if it is there (the fault injectors and other in-house kernels are optional)."""

from __future__ import annotations


def triton_or_none():
    """``(triton, triton.language)``, or ``(None, None)`` when Triton is not importable."""
    try:
        import triton
        import triton.language as tl
    except Exception:  # noqa: BLE001 - any import failure: kernels unavailable, backends skip
        return None, None
    return triton, tl
