"""The one rule every check follows: call the kernel once, time it, an exception is a fault, problems are
``wrong`` (an accepted-drafts count of 0 where the oracle accepts more is ``zero-accept``).

* :func:`check`: turns ``fn(case, backend, device) -> problems`` into a record's ``run(case, backend,
  target) -> Verdict``;
* :func:`verdict`: problems (and accepted-drafts counts) to a :class:`~ddtree_compat.outcomes.Verdict`;
* :func:`fault_verdict`: an exception to a classified ``fault`` (the suite's own adapter failing is an
  ``error``, never a kernel fault);
* :func:`synchronize`: wait for a CUDA device (a no-op on the CPU).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from ..faults import classify, context_poisoned, describe
from ..outcomes import Verdict


def synchronize(device: str) -> None:
    """Wait for ``device`` (a torch device string) when it is a CUDA device; no-op on the CPU."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def fault_verdict(exc: BaseException, accepted_expected: Sequence[int] | None = None) -> Verdict:
    """The ``fault`` verdict of a kernel call that raised: its class, and whether the CUDA context survived.
    An :class:`~ddtree_compat.backends.sglang_locate.AdapterError` (the suite's own adapter failed) is an
    ``error`` instead, never counted as a kernel fault."""
    from ..backends.sglang_locate import AdapterError

    text = describe(exc)
    if isinstance(exc, AdapterError):
        return Verdict("error", f"the suite's adapter failed: {text}", accepted_expected=list(accepted_expected or []))
    return Verdict("fault", text, accepted_expected=list(accepted_expected or []), fault_class=classify(text),
                   context_poisoned=context_poisoned())


@dataclass
class Findings:
    """What a check found, when it knows the accepted-drafts counts (verify and commit rounds).

    Attributes:
        problems: one line per difference (empty strings are dropped).
        accepted_expected: the oracle's accepted drafts per request.
        accepted_got: the kernel's (``None``: the same as expected when there is no problem).
        prefix: put before the problems in the message (``padded-layout failure (...)``).
    """

    problems: list[str]
    accepted_expected: list[int] = field(default_factory=list)
    accepted_got: list[int] | None = None
    prefix: str = ""


def verdict(found: "Findings | Sequence[str]", duration: float = 0.0) -> Verdict:
    """``pass`` when nothing was found; else ``zero-accept`` when a request the oracle accepts drafts for
    got 0 (the field symptom, accept length 1.00), else ``wrong``; the message joins the problems."""
    if not isinstance(found, Findings):
        found = Findings(list(found))
    problems = [p for p in found.problems if p]
    expected = list(found.accepted_expected)
    got = list(found.accepted_got) if found.accepted_got is not None else (list(expected) if expected else None)
    if not problems:
        return Verdict("pass", duration_s=duration, accepted_expected=expected, accepted_got=got)
    detail = "; ".join(problems)
    zero = [b for b, (e, g) in enumerate(zip(expected, got or ())) if e > 0 and g == 0]
    if zero:
        return Verdict("zero-accept", f"{found.prefix}accepted drafts 0 where the oracle accepts "
                       f"{[expected[b] for b in zero]} (requests {zero}): the field symptom, accept length 1.00 / "
                       f"avg_accepted_drafts=0.00. {detail}", accepted_expected=expected, accepted_got=got)
    return Verdict("wrong", found.prefix + detail, accepted_expected=expected, accepted_got=got)


def call_once(call: Callable[[], object], device: str) -> tuple[object, float]:
    """Run ``call`` (the kernel launch, or a graph replay) once and wait for the device; its result and
    seconds. Exceptions propagate (the caller's :func:`check` makes them faults)."""
    synchronize(device)
    start = time.perf_counter()
    result = call()
    synchronize(device)
    return result, time.perf_counter() - start


def check(fn: Callable | None = None, *, accepted: Callable | None = None):
    """``fn(case, backend, device) -> problems | Findings | judge`` as a record's ``run(case, backend, target)
    -> Verdict``: run once, timed, on ``target.device``; an exception in ``fn`` (laying out, the call) is a
    classified fault (:func:`fault_verdict`); the findings become a verdict (:func:`verdict`). When ``fn``
    returns a callable ``judge() -> problems | Findings``, judging runs after the timing and outside the
    fault rule: an exception there is the suite's own error, never a kernel fault.

    ``target`` is a :class:`~ddtree_compat.tiers.Target` or a torch device string; keyword options go to ``fn``.

    Args:
        accepted: ``(case) -> accepted drafts per request``, recorded with a fault too.
    """

    def wrap(fn):
        @functools.wraps(fn)
        def run(case, backend, target, **options) -> Verdict:
            device = target if isinstance(target, str) else target.device
            expected = list(accepted(case)) if accepted else []
            try:
                found, duration = call_once(lambda: fn(case, backend, device, **options), device)
            except Exception as e:  # noqa: BLE001 - every kernel error is a classified fault
                return fault_verdict(e, expected)
            if callable(found):
                found = found()
            if isinstance(found, Findings):
                if not found.accepted_expected:
                    found.accepted_expected = expected
            else:
                found = Findings(list(found), expected)
            return verdict(found, duration)

        run.check = fn
        return run

    return wrap(fn) if fn is not None else wrap
