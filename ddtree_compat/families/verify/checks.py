"""Run one verify case on one backend and judge it against the oracle (outcomes:
:mod:`ddtree_compat.outcomes`), in the buffers SGLang lays a verify batch out in.

The expected outputs come from the tree-level oracle (:func:`.oracle.verify_greedy`, a walk of the parent
array) laid out as the kernel writes them (:func:`expected_outputs`); the ``oracle`` backend is the kernel
contract's second statement (a walk of the EAGLE links in the buffers), so its column checks the layout and
the harness, not the oracle against itself.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from ...harness.buffers import POISON, Guarded, canary_report, element_diff
from ...harness.calls import Findings, check
from .oracle import PADDING_SLOT, to_eagle
from .records import VerifyCase


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
    out = {name: torch.full((bs, cap), PADDING_SLOT, dtype=torch.int64) for name in VerifyBuffers.INPUTS}
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
    :func:`.oracle.verify_greedy`), laid out as SGLang's kernels write them: request ``b``'s
    accepted path ``p`` (node indices) gives ``accept_index[b, j] = b * C + p[j]``,
    ``accept_token_num[b] = len(p) - 1`` and ``predicts[b * C + p[j]] = target_predict[p[j]]`` (the next
    path token, the bonus token at the last); every other element stays POISON. Independent of the
    ``oracle`` backend's walk of the EAGLE links (:func:`.oracle.verify_greedy_eagle`).
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


def judge(case: VerifyCase, bufs: VerifyBuffers, inputs_before: dict[str, torch.Tensor]) -> Findings:
    """Compare the buffers after a call with the oracle: every output element, the canaries, the inputs."""
    want = expected_outputs(case)
    got = {name: getattr(bufs, name).view.cpu() for name in VerifyBuffers.OUTPUTS}
    problems = [element_diff(name, got[name], want[name]) for name in VerifyBuffers.OUTPUTS
                if not torch.equal(got[name], want[name])]
    problems += canary_report(bufs.guarded())
    problems += [f"input {name} was modified" for name, before in inputs_before.items()
                 if not torch.equal(getattr(bufs, name).view.cpu(), before)]
    return Findings(problems, accepted_expected(case), got["accept_token_num"].tolist())


def accepted_expected(case: VerifyCase) -> list[int]:
    """The oracle's accepted drafts per request."""
    return [r.accepted_drafts for r in case.expected()]


@check(accepted=accepted_expected)
def run_verify(case: VerifyCase, backend, device: str):
    """Lay out ``case`` on ``device``, call ``backend.verify_tree_greedy`` once, judge the result
    (:func:`~ddtree_compat.harness.calls.check`: an exception is a ``fault``, a difference ``wrong`` or
    ``zero-accept``). Skips (backend unavailable) are the caller's to decide
    (:func:`ddtree_compat.contract.unavailable`)."""
    bufs = make_verify_buffers(case, device)
    inputs_before = {name: getattr(bufs, name).view.cpu().clone() for name in VerifyBuffers.INPUTS}
    backend.verify_tree_greedy(*bufs.views().values())  # positional, kernel argument order
    return lambda: judge(case, bufs, inputs_before)
