"""Run one verify case on one backend and judge it against the oracle (outcomes:
:mod:`ddtree_compat.outcomes`).

The expected outputs come from the tree-level oracle (:func:`ddtree_compat.oracle.verify_greedy`, a
walk of the parent array) laid out as the kernel writes them (:func:`ddtree_compat.checks.buffers.expected_outputs`);
the ``oracle`` backend is the kernel contract's second statement (a walk of the EAGLE links in the
buffers), so its column checks the layout and the harness, not the oracle against itself.
"""

from __future__ import annotations

import time

import torch

from ..cases import VerifyCase
from ..outcomes import Verdict
from ..tiers import Target
from .buffers import VerifyBuffers, canary_report, expected_outputs, make_verify_buffers
from .common import element_diff, fault_verdict, synchronize

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


def run_verify(case: VerifyCase, backend, target: Target) -> Verdict:
    """Lay out ``case`` on ``target.device``, call ``backend.verify_tree_greedy`` once, judge the result.

    Never raises for a kernel failure: an exception becomes a ``fault`` verdict. Skips (backend
    unavailable) are the caller's to decide (:func:`ddtree_compat.backends.unavailable`).
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
