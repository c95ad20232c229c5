"""One device allocation the deployment-shape cells carve their tensors from, reused from cell to cell: a cell of
32 GiB after one of 16 GiB grows it once, the next cells of up to that size allocate nothing. Each tensor sits
between two canary bands (:data:`BAND` bytes of :data:`CANARY_BYTE`), checked after the call.

The arena is per device and per process (:func:`arena`), a cache like torch's own allocator: it holds memory, never
a result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import torch

BAND = 4096
CANARY_BYTE = 0xA7
ALIGN = 512


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass
class Arena:
    device: str
    buffer: torch.Tensor | None = None
    bands: list[tuple[str, int, str]] = field(default_factory=list)  # (tensor name, band offset, before / after)

    @property
    def capacity(self) -> int:
        return 0 if self.buffer is None else self.buffer.numel()

    def take(self, specs: list[tuple[str, tuple[int, ...], torch.dtype]]) -> dict[str, torch.Tensor]:
        """Views for ``specs`` (name, shape, dtype), each between canary bands; contents undefined (the caller
        fills them). Grows the allocation when the cell needs more than it holds."""
        offsets, at = [], BAND
        for name, shape, dtype in specs:
            n = 1
            for d in shape:
                n *= d
            offsets.append(at)
            at = _aligned(at + n * torch.empty((), dtype=dtype).element_size()) + BAND
        if at > self.capacity:
            self.buffer = None
            torch.cuda.empty_cache()
            self.buffer = torch.empty(at, dtype=torch.uint8, device=self.device)
        self.bands = []
        views = {}
        for (name, shape, dtype), start in zip(specs, offsets):
            size = torch.empty((), dtype=dtype).element_size()
            n = 1
            for d in shape:
                n *= d
            self.buffer[start - BAND:start].fill_(CANARY_BYTE)
            self.buffer[start + n * size:_aligned(start + n * size) + BAND].fill_(CANARY_BYTE)
            self.bands += [(name, start - BAND, "before"), (name, start + n * size, "after")]
            views[name] = self.buffer[start:start + n * size].view(dtype).view(shape)
        return views

    def damaged(self) -> list[str]:
        """One line per tensor whose canary bands changed (an out-of-bounds write)."""
        bad = []
        for name, start, side in self.bands:
            changed = int((self.buffer[start:start + BAND] != CANARY_BYTE).sum())
            if changed:
                bad.append(f"{name}: {changed} canary byte(s) overwritten {side} it")
        return bad


@cache
def arena(device: str) -> Arena:
    return Arena(device)

