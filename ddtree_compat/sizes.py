"""Sizes in words for the messages of memory-aware cells (torch-free: the pure boundary derivations use it too)."""

from __future__ import annotations


def gib(nbytes: int) -> str:
    """``nbytes`` as ``16.0 GiB`` (at least 1 GiB) or ``3.2 MiB`` (below it), binary units, one decimal."""
    return f"{nbytes / 2 ** 30:.1f} GiB" if nbytes >= 2 ** 30 else f"{nbytes / 2 ** 20:.1f} MiB"
