"""Run one verify case on one backend and judge it against the oracle.

Outcomes (the matrix's vocabulary):

* ``pass``: every output element equals the oracle (untouched elements still poisoned), canaries and
  inputs intact.
* ``zero-accept``: the oracle accepts drafts but the backend accepted none: the field symptom
  (``accept len 1.00``, ``avg_accepted_drafts=0.00``).
* ``wrong``: any other difference, an out-of-bounds write (canary) or a changed input.
* ``fault``: the call raised (class from :func:`ddtree_compat.faults.classify`).
* ``skip``: the backend cannot run on this target (with the reason).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .backends import Backend
from .buffers import POISON, VerifyBuffers, canary_report, expected_outputs, make_verify_buffers
from .cases import VerifyCase
from .faults import classify, context_poisoned, describe
from .tiers import Target

OUTCOMES = ("pass", "wrong", "zero-accept", "fault", "skip")


@dataclass
class Verdict:
    """The judged result of one (target, backend, case) cell.

    Attributes:
        outcome: one of :data:`OUTCOMES`.
        message: what was expected and what came back (empty on pass).
        duration_s: wall seconds of the kernel call (synchronised), 0 when not run.
        accepted_expected: oracle's accepted drafts per request.
        accepted_got: backend's ``accept_token_num`` per request (``None`` when not run).
        fault_class: for ``fault``, one of :data:`ddtree_compat.faults.FAULT_CLASSES`.
        context_poisoned: for ``fault`` on CUDA, whether the process's context is now unusable.
    """

    outcome: str
    message: str = ""
    duration_s: float = 0.0
    accepted_expected: list[int] = field(default_factory=list)
    accepted_got: list[int] | None = None
    fault_class: str | None = None
    context_poisoned: bool = False


def synchronize(device: str) -> None:
    """Wait for ``device`` (a torch device string) when it is a CUDA device; no-op on the CPU."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def fault_verdict(exc: BaseException, accepted_expected: list[int] | None = None) -> Verdict:
    """The ``fault`` verdict of a kernel call that raised: its class, and whether the CUDA context survived."""
    text = describe(exc)
    return Verdict("fault", text, accepted_expected=accepted_expected or [], fault_class=classify(text),
                   context_poisoned=context_poisoned())


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


def judge(case: VerifyCase, bufs: VerifyBuffers, inputs_before: dict[str, torch.Tensor]) -> Verdict:
    """Compare the buffers after a call with the oracle; see the module docstring for outcomes."""
    want = expected_outputs(case)
    got = {name: getattr(bufs, name).view.cpu() for name in VerifyBuffers.OUTPUTS}
    accepted_expected = [r.accepted_drafts for r in case.expected()]
    accepted_got = got["accept_token_num"].tolist()
    problems = []
    for name in VerifyBuffers.OUTPUTS:
        if not torch.equal(got[name], want[name]):
            problems.append(element_diff(name, got[name], want[name]))
    problems += canary_report(bufs.guarded())
    for name, before in inputs_before.items():
        if not torch.equal(getattr(bufs, name).view.cpu(), before):
            problems.append(f"input {name} was modified")
    if not problems:
        return Verdict("pass", accepted_expected=accepted_expected, accepted_got=accepted_got)
    zero = [b for b, (e, g) in enumerate(zip(accepted_expected, accepted_got)) if e > 0 and g == 0]
    detail = "; ".join(problems)
    if zero:
        msg = (f"accepted drafts 0 where the oracle accepts {[accepted_expected[b] for b in zero]} "
               f"(requests {zero}): the field symptom, accept length 1.00 / avg_accepted_drafts=0.00. {detail}")
        return Verdict("zero-accept", msg, accepted_expected=accepted_expected, accepted_got=accepted_got)
    return Verdict("wrong", detail, accepted_expected=accepted_expected, accepted_got=accepted_got)


def run_verify(case: VerifyCase, backend: Backend, target: Target) -> Verdict:
    """Lay out ``case`` on ``target.device``, call ``backend.verify_tree_greedy`` once, judge the result.

    Never raises for a kernel failure: an exception becomes a ``fault`` verdict. Skips (backend
    unavailable) are the caller's to decide, via ``backend.unavailable_reason(target)``.
    """
    accepted_expected = [r.accepted_drafts for r in case.expected()]
    try:
        bufs = make_verify_buffers(case, target.device)
        inputs_before = {name: getattr(bufs, name).view.cpu().clone() for name in VerifyBuffers.INPUTS}
        synchronize(target.device)
        start = time.perf_counter()
        backend.verify_tree_greedy(*bufs.views().values())  # positional, kernel argument order
        synchronize(target.device)
        duration = time.perf_counter() - start
    except Exception as e:  # noqa: BLE001 - every kernel error is a classified fault
        return fault_verdict(e, accepted_expected)
    verdict = judge(case, bufs, inputs_before)
    verdict.duration_s = duration
    return verdict
