"""Kernel buffers with poison and canary bands, laid out the way SGLang lays out a verify batch.

Every tensor handed to a kernel is a view into a larger allocation: ``CANARY_BAND`` elements of
:data:`CANARY` on each side, so an out-of-bounds write shows as a changed canary. Outputs are filled
with :data:`POISON` before the call, so an element the kernel should have written but did not keeps
the poison and fails the comparison; elements the contract says stay untouched must still hold it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from ..cases import VerifyCase
from ..oracle import PADDING_SLOT, to_eagle

POISON = -0x2DD7EE  # never a token, index or count; fits int32
CANARY = 0x5CA9A7  # distinct from POISON and from -1 padding
CANARY_BAND = 32
PADDING = PADDING_SLOT  # node slots past D in buffers sized for capacity C
# 2-byte float outputs (attention): poison and canaries are bit patterns in an int16 allocation. The poison
# is a quiet NaN with a payload no arithmetic produces (computed NaNs are canonical: 0x7E00 / 0x7FC0), so
# "never written" and "wrote NaN" stay apart; the canary is a finite value no attention output reaches.
FLOAT_POISON_BITS = {torch.float16: 0x7E5A, torch.bfloat16: 0x7FDA}
FLOAT_CANARY_BITS = 0x5CA9  # fp16 298.25, bf16 ~3.8e17


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

    def damaged_canaries(self) -> list[int]:
        """Offsets (negative: before the view, ``>= numel``: after) of canary elements that changed."""
        s = self.storage.cpu()
        n = self.view.numel()
        bad = (s[:CANARY_BAND] != self.canary).nonzero().flatten().tolist()
        after = (s[CANARY_BAND + n:] != self.canary).nonzero().flatten().tolist()
        return [i - CANARY_BAND for i in bad] + [n + i for i in after]


def canary_report(guards: dict[str, Guarded]) -> list[str]:
    """One line per guarded tensor whose canary bands changed (an out-of-bounds write), naming it."""
    return [f"out-of-bounds write: canary of {name} changed at offsets {g.damaged_canaries()[:8]}"
            for name, g in guards.items() if g.damaged_canaries()]


@dataclass
class VerifyBuffers:
    """The eight tensors of ``verify_tree_greedy`` (SGLang names and dtypes; ``bs`` requests, ``C`` slots).

    Outputs (poisoned):
        predicts: int32 ``[bs * C]``.
        accept_index: int32 ``[bs, accept_width]``.
        accept_token_num: int32 ``[bs]``.
    Inputs:
        candidates, retrive_index, retrive_next_token, retrive_next_sibling, target_predict:
        int64 ``[bs, C]``; ``retrive_index[b, k] = b * C + k``; padding slots ``k >= D`` are -1
        (``target_predict`` padding too).
    """

    predicts: Guarded
    accept_index: Guarded
    accept_token_num: Guarded
    candidates: Guarded
    retrive_index: Guarded
    retrive_next_token: Guarded
    retrive_next_sibling: Guarded
    target_predict: Guarded

    OUTPUTS = ("predicts", "accept_index", "accept_token_num")
    INPUTS = ("candidates", "retrive_index", "retrive_next_token", "retrive_next_sibling", "target_predict")

    def views(self) -> dict[str, torch.Tensor]:
        """Name -> tensor, in the kernels' argument order."""
        return {f.name: getattr(self, f.name).view for f in fields(self)}

    def guarded(self) -> dict[str, Guarded]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def eagle_inputs(case: VerifyCase) -> dict[str, torch.Tensor]:
    """The case's five int64 ``[bs, C]`` input tensors on the CPU (padding -1)."""
    bs, cap, d = case.batch, case.slots, case.num_nodes
    out = {name: torch.full((bs, cap), PADDING, dtype=torch.int64) for name in VerifyBuffers.INPUTS}
    for b, req in enumerate(case.requests):
        eagle = to_eagle(req.tree)
        out["candidates"][b, :d] = torch.tensor(eagle.candidates)
        out["retrive_index"][b, :d] = torch.tensor(eagle.retrive_index) + b * cap
        out["retrive_next_token"][b, :d] = torch.tensor(eagle.retrive_next_token)
        out["retrive_next_sibling"][b, :d] = torch.tensor(eagle.retrive_next_sibling)
        out["target_predict"][b, :d] = torch.tensor(req.target_predict)
    return out


def make_verify_buffers(case: VerifyCase, device: str | torch.device) -> VerifyBuffers:
    """Allocate guarded, poisoned buffers for ``case`` on ``device``."""
    bs, cap = case.batch, case.slots
    inputs = eagle_inputs(case)
    outputs = {
        "predicts": torch.full((bs * cap,), POISON, dtype=torch.int32),
        "accept_index": torch.full((bs, case.width), POISON, dtype=torch.int32),
        "accept_token_num": torch.full((bs,), POISON, dtype=torch.int32),
    }
    return VerifyBuffers(**{k: Guarded.of(v, device) for k, v in {**outputs, **inputs}.items()})


def expected_outputs(case: VerifyCase) -> dict[str, torch.Tensor]:
    """The three outputs as the kernel must leave them (int32, CPU): oracle values, POISON where untouched.

    From the tree-level walk of each request's parent array (:meth:`VerifyCase.expected`,
    :func:`ddtree_compat.oracle.verify_greedy`), laid out as SGLang's kernels write them: request ``b``'s
    accepted path ``p`` (node indices) gives ``accept_index[b, j] = b * C + p[j]``,
    ``accept_token_num[b] = len(p) - 1`` and ``predicts[b * C + p[j]] = target_predict[p[j]]`` (the next
    path token, the bonus token at the last); every other element stays POISON. Independent of the
    ``oracle`` backend's walk of the EAGLE links (:func:`ddtree_compat.oracle.verify_greedy_eagle`).
    """
    cap, width = case.slots, case.width
    predicts = torch.full((case.batch * cap,), POISON, dtype=torch.int32)
    accept_index = torch.full((case.batch, width), POISON, dtype=torch.int32)
    accept_token_num = torch.zeros(case.batch, dtype=torch.int32)
    for b, (request, result) in enumerate(zip(case.requests, case.expected())):
        for j, node in enumerate(result.path):
            accept_index[b, j] = b * cap + node
            predicts[b * cap + node] = request.target_predict[node]
        accept_token_num[b] = result.accepted_drafts
    return {"predicts": predicts, "accept_index": accept_index, "accept_token_num": accept_token_num}
