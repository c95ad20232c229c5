"""Guarded buffers, the one buffer system every family's checks use.

Every tensor handed to a kernel is a view into a larger allocation: ``CANARY_BAND`` elements of
:data:`CANARY` on each side, so an out-of-bounds write shows as a changed canary. Outputs are filled
with :data:`POISON` before the call, so an element the kernel should have written but did not keeps
the poison and fails the comparison; elements the contract says stay untouched must still hold it.

* :class:`Guarded`: one allocation with its canary bands (integer, 2-byte float bits, or bool bytes);
* :class:`Out`: a poisoned output allocation and the slice of it a kernel gets (writes outside the slice
  show, as in a worker's ``[:bs, :q]`` slice of a ``[max_bs, B + 1]`` buffer);
* :class:`Inputs`: guarded inputs, checked unchanged after the call;
* :func:`compare` and :func:`element_diff`: integer differences spelled out, POISON named.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

POISON = -0x2DD7EE  # never a token, index or count; fits int32
CANARY = 0x5CA9A7  # distinct from POISON and from -1 padding
CANARY_BAND = 32
BOOL_POISON = 0x5A  # a byte no bool store writes (stores write 0 or 1)
BOOL_CANARY = 0xA7
# 2-byte float outputs (attention): poison and canaries are bit patterns in an int16 allocation. The poison
# is a quiet NaN with a payload no arithmetic produces (computed NaNs are canonical: 0x7E00 / 0x7FC0), so
# "never written" and "wrote NaN" stay apart; the canary is a finite value no attention output reaches.
FLOAT_POISON_BITS = {torch.float16: 0x7E5A, torch.bfloat16: 0x7FDA}
FLOAT_CANARY_BITS = 0x5CA9  # fp16 298.25, bf16 ~3.8e17
FLOAT32_POISON_BITS = 0x7FC5A5A5  # fp32: a quiet NaN with a payload no arithmetic produces (computed NaN: 0x7FC00000)
FLOAT32_CANARY_BITS = 0x4A5CA9A7  # fp32 ~3.6e6, finite, far above any recurrent state
_BITS = {torch.float16: (torch.int16, FLOAT_POISON_BITS[torch.float16], FLOAT_CANARY_BITS),
         torch.bfloat16: (torch.int16, FLOAT_POISON_BITS[torch.bfloat16], FLOAT_CANARY_BITS),
         torch.float32: (torch.int32, FLOAT32_POISON_BITS, FLOAT32_CANARY_BITS)}


def poison_bits(dtype: torch.dtype) -> int:
    """The poison of a float buffer held as bits (:meth:`Guarded.float_bits`) of ``dtype``."""
    return _BITS[dtype][1]


@dataclass
class Guarded:
    """A tensor view with canary bands on both sides of its storage.

    Attributes:
        storage: flat ``[CANARY_BAND + numel + CANARY_BAND]`` allocation.
        view: the tensor the kernel sees (contiguous, the requested shape).
        canary: the band value (in ``storage``'s dtype; bits for :meth:`poisoned_float`).
    """

    storage: torch.Tensor
    view: torch.Tensor
    canary: int = CANARY

    @classmethod
    def of(cls, values: torch.Tensor, device: str | torch.device) -> "Guarded":
        n = values.numel()
        storage = torch.full((n + 2 * CANARY_BAND,), CANARY, dtype=values.dtype, device=device)
        view = storage[CANARY_BAND:CANARY_BAND + n].view(values.shape)
        view.copy_(values.to(device))
        return cls(storage, view)

    @classmethod
    def poisoned(cls, n: int, dtype: torch.dtype, device: str | torch.device) -> "Guarded":
        """A flat integer output of ``n`` elements, every one :data:`POISON`."""
        return cls.of(torch.full((n,), POISON, dtype=dtype), device)

    @classmethod
    def of_bool(cls, values: torch.Tensor, device: str | torch.device) -> "Guarded":
        """A bool tensor's bytes (``storage`` uint8) inside bands of :data:`BOOL_CANARY`; ``view`` is uint8
        (``view.view(torch.bool)`` is what the kernel gets)."""
        n = values.numel()
        storage = torch.full((n + 2 * CANARY_BAND,), BOOL_CANARY, dtype=torch.uint8)
        storage[CANARY_BAND:CANARY_BAND + n].view(values.shape).copy_(values.to(torch.uint8))
        storage = storage.to(device)
        return cls(storage, storage[CANARY_BAND:CANARY_BAND + n].view(values.shape), canary=BOOL_CANARY)

    @classmethod
    def poisoned_float(cls, shape: tuple[int, ...], dtype: torch.dtype, device: str | torch.device) -> "Guarded":
        """A 2-byte float output (fp16 / bf16) of ``shape``, every element :data:`FLOAT_POISON_BITS`, inside
        bands of :data:`FLOAT_CANARY_BITS`. ``storage`` is int16 (compare bits, not values: the poison
        is a NaN); ``view`` is ``storage`` reinterpreted as ``dtype``.

        Raises:
            KeyError: ``dtype`` is not fp16 or bf16.
        """
        n = 1
        for d in shape:
            n *= d
        storage = torch.full((n + 2 * CANARY_BAND,), FLOAT_CANARY_BITS, dtype=torch.int16, device=device)
        storage[CANARY_BAND:CANARY_BAND + n] = FLOAT_POISON_BITS[dtype]
        return cls(storage, storage[CANARY_BAND:CANARY_BAND + n].view(dtype).view(shape), canary=FLOAT_CANARY_BITS)

    @classmethod
    def float_bits(cls, shape: tuple[int, ...], dtype: torch.dtype, device: str | torch.device,
                   values: torch.Tensor | None = None) -> "Guarded":
        """A float tensor of ``shape`` (fp16, bf16 or fp32) held as bits: ``storage`` is the same-width integer
        type, bands of a finite canary; the body is ``values`` (cast to ``dtype``) or, without them, every element
        a NaN poison with a payload no arithmetic produces. ``view`` is the body reinterpreted as ``dtype``.

        Raises:
            KeyError: another dtype.
        """
        bits, poison, canary = _BITS[dtype]
        n = 1
        for d in shape:
            n *= d
        storage = torch.full((n + 2 * CANARY_BAND,), canary, dtype=bits, device=device)
        view = storage[CANARY_BAND:CANARY_BAND + n].view(dtype).view(shape)
        if values is None:
            storage[CANARY_BAND:CANARY_BAND + n] = poison
        else:
            view.copy_(values.to(device=device, dtype=dtype))
        return cls(storage, view, canary=canary)

    def damaged_canaries(self) -> list[int]:
        """Offsets (negative: before the view, ``>= numel``: after) of canary elements that changed."""
        n = self.view.numel()  # the bands alone come to the host (a deployment-sized body stays on the device)
        bad = (self.storage[:CANARY_BAND].cpu() != self.canary).nonzero().flatten().tolist()
        after = (self.storage[CANARY_BAND + n:].cpu() != self.canary).nonzero().flatten().tolist()
        return [i - CANARY_BAND for i in bad] + [n + i for i in after]


def canary_report(guards: dict[str, Guarded]) -> list[str]:
    """One line per guarded tensor whose canary bands changed (an out-of-bounds write), naming it."""
    return [f"out-of-bounds write: canary of {name} changed at offsets {g.damaged_canaries()[:8]}"
            for name, g in guards.items() if g.damaged_canaries()]


@dataclass
class Out:
    """A poisoned, guarded output allocation and the slice of it a kernel gets.

    Attributes:
        name: for messages.
        guard: the allocation (``guard.view`` has the allocation's shape; uint8 for bool outputs).
        index: the slice the kernel gets (``...`` for all of it).
        boolean: the kernel sees ``torch.bool``.
        flat: the kernel gets the slice flattened (a 1-D prefix of a flat buffer).
    """

    name: str
    guard: Guarded
    index: object
    boolean: bool = False

    @classmethod
    def alloc(cls, name: str, shape: tuple[int, ...], index, dtype: torch.dtype, device: str) -> "Out":
        boolean = dtype == torch.bool
        n = 1
        for d in shape:
            n *= d
        storage_dtype = torch.uint8 if boolean else dtype
        canary, poison = (BOOL_CANARY, BOOL_POISON) if boolean else (CANARY, POISON)
        storage = torch.full((n + 2 * CANARY_BAND,), canary, dtype=storage_dtype, device=device)
        storage[CANARY_BAND:CANARY_BAND + n] = poison
        return cls(name, Guarded(storage, storage[CANARY_BAND:CANARY_BAND + n].view(shape), canary=canary), index,
                   boolean)

    @property
    def arg(self) -> torch.Tensor:
        view = self.guard.view[self.index]
        return view.view(torch.bool) if self.boolean else view

    def expected(self, values: torch.Tensor) -> torch.Tensor:
        """The whole storage as it must be: bands, poison, and ``values`` in the slice."""
        want = self.guard.storage.new_full(self.guard.storage.shape, self.guard.canary).cpu()
        want[CANARY_BAND:CANARY_BAND + self.guard.view.numel()] = BOOL_POISON if self.boolean else POISON
        body = want[CANARY_BAND:CANARY_BAND + self.guard.view.numel()].view(self.guard.view.shape)
        body[self.index] = values.to(body.dtype)
        return want

    def problems(self, values) -> list[str]:
        """Differences from ``values`` in the slice, writes outside it, canary damage; one line each kind."""
        want = self.expected(torch.as_tensor(values))
        got = self.guard.storage.cpu()
        if torch.equal(got, want):
            return []
        body = slice(CANARY_BAND, CANARY_BAND + self.guard.view.numel())
        inside = torch.zeros(self.guard.view.shape, dtype=torch.bool)
        inside[self.index] = True
        g = got[body].view(self.guard.view.shape)
        w = want[body].view(self.guard.view.shape)
        out = []
        bad_in = ((g != w) & inside).nonzero().tolist()
        bad_out = ((g != w) & ~inside).nonzero().tolist()
        poison = BOOL_POISON if self.boolean else POISON

        def show(i):
            v, e = g[tuple(i)].item(), w[tuple(i)].item()
            return f"{self.name}{i}={'POISON' if v == poison else v} (want {'untouched' if e == poison else e})"

        if bad_in:
            out.append(f"{self.name}: {len(bad_in)} element(s) differ: " + ", ".join(show(i) for i in bad_in[:6]))
        if bad_out:
            out.append(f"{self.name}: {len(bad_out)} write(s) outside the slice the kernel got "
                       f"{tuple(self.arg.shape)} of its {tuple(self.guard.view.shape)} buffer: "
                       + ", ".join(show(i) for i in bad_out[:6]))
        damaged = self.guard.damaged_canaries()
        if damaged:
            out.append(f"out-of-bounds write: canary of {self.name} changed at offsets {damaged[:8]}")
        return out


class Inputs:
    """Guarded input tensors, checked unchanged after the call."""

    def __init__(self, device: str):
        self.device = device
        self.guards: dict[str, tuple[Guarded, torch.Tensor, bool]] = {}

    def add(self, name: str, values, dtype: torch.dtype) -> torch.Tensor:
        t = torch.as_tensor(values, dtype=torch.uint8 if dtype == torch.bool else dtype)
        g = Guarded.of_bool(t, self.device) if dtype == torch.bool else Guarded.of(t, self.device)
        self.guards[name] = (g, g.storage.cpu().clone(), dtype == torch.bool)
        return g.view.view(torch.bool) if dtype == torch.bool else g.view

    def problems(self) -> list[str]:
        return [f"input {name} was modified" for name, (g, before, _) in self.guards.items()
                if not torch.equal(g.storage.cpu(), before)]


def compare(name: str, got, want) -> list[str]:
    """``[]`` when ``got`` (a returned tensor or list) equals ``want`` element for element, else one line:
    a shape mismatch, or the first differences."""
    got, want = torch.as_tensor(got), torch.as_tensor(want)
    if got.device == want.device and got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want):
        return []  # equal where both are (a device's pools stay there when they match)
    got = got.cpu()
    want = want.cpu().to(got.dtype) if got.dtype != torch.bool else want.cpu()
    if tuple(got.shape) != tuple(want.shape):
        return [f"{name}: shape {tuple(got.shape)} (want {tuple(want.shape)})"]
    if torch.equal(got, want.to(got.dtype)):
        return []
    bad = (got != want.to(got.dtype)).nonzero().tolist()
    return [f"{name}: {len(bad)} element(s) differ: " + ", ".join(
        f"{name}{i}={got[tuple(i)].item()} (want {want[tuple(i)].item()})" for i in bad[:6])]


def element_diff(name: str, got: torch.Tensor, want: torch.Tensor, limit: int = 6) -> str:
    """``N element(s) differ: name[i]=got (want w), ...``: the first ``limit`` differences (POISON and
    untouched spelled out)."""
    bad = (got != want).nonzero().tolist()
    shown = ", ".join(
        f"{name}{list(i)}={'POISON' if got[tuple(i)] == POISON else int(got[tuple(i)])}"
        f" (want {'untouched' if want[tuple(i)] == POISON else int(want[tuple(i)])})"
        for i in bad[:limit]
    )
    more = f" (+{len(bad) - limit} more)" if len(bad) > limit else ""
    return f"{len(bad)} element(s) differ: {shown}{more}"
