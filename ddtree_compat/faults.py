"""Fault classes for a kernel call that raised, read from the error text.

A CUDA fault is sticky: once a context has one, every later kernel in that process fails too, so a
classified fault also says whether the process's context is still usable (:func:`context_poisoned`).
"""

from __future__ import annotations

import re

FAULT_CLASSES = (
    "illegal-instruction",
    "illegal-memory-access",
    "misaligned-address",
    "device-side-assert",
    "launch-failure",
    "out-of-memory",
    "hang",
    "triton-compile-error",
    "nvcc-compile-error",
    "out-of-resources",
    "no-kernel-image",
    "other",
)

# (class, lower-case substrings); first match wins, so the specific ones come first.
_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("illegal-instruction", ("illegal instruction",)),
    ("no-kernel-image", ("no kernel image",)),
    ("illegal-memory-access", ("illegal memory access", "illegal address", "out of bounds")),
    ("misaligned-address", ("misaligned address",)),
    ("device-side-assert", ("device-side assert triggered", "device side assert triggered", "cudaerrorassert")),
    ("out-of-resources", ("outofresources", "out of resource", "too many resources requested")),
    ("out-of-memory", ("out of memory",)),
    ("hang", ("timeout", "timed out")),
    ("triton-compile-error", ("compilationerror", "compilation error", "triton.compiler")),
    ("launch-failure", ("unspecified launch failure", "launch failure", "cudaerrorlaunch")),
)


_PRIMARY = re.compile(r"cuda error: (.*?)(?: search for | cuda kernel errors|$)", re.IGNORECASE | re.DOTALL)


def classify(error_text: str) -> str:
    """Map an exception's text (type name included) to one of :data:`FAULT_CLASSES`.

    The primary ``CUDA error: <what>`` clause is read first: PyTorch appends boilerplate to every CUDA
    error (it mentions device-side assertions and launch blocking) that must not decide the class.
    """
    primary = _PRIMARY.search(error_text)
    for text in ((primary.group(1),) if primary else ()) + (error_text,):
        for name, needles in _PATTERNS:
            if any(n in text.lower() for n in needles):
                return name
    return "other"


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line, for results and failure messages."""
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:2000]


def context_poisoned() -> bool:
    """True when the current CUDA context has a sticky error (a ``synchronize`` raises)."""
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return False
    try:
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - any error here means the context is gone
        return True
    return False
