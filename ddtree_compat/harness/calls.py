"""The one shape every check has: lay the case out and call the kernel under the fault rule, then judge outside it.

A check is ``fn(case, backend, device) -> judge``, decorated with :func:`check`:

* ``fn`` lays the case out in guarded buffers and calls the backend's kernel methods (or captures and replays them
  in a CUDA graph, :mod:`.graphs`); it returns its judge, ``judge() -> problems | Findings | Verdict``, without
  having compared anything.
* The fault rule: an exception the kernel raises (a call of one of the backend's kernel methods, a graph capture or
  replay, the device synchronize after them) is a classified ``fault`` (:func:`fault_verdict`; the suite's own
  adapter failing, :class:`~ddtree_compat.contract.AdapterError`, is an ``error``). ``fn`` gets the backend wrapped
  in :class:`KernelCalls`, which marks what its kernel methods raise (:class:`KernelRaised`); anything else ``fn``
  raises (laying the case out, an oracle value it needs to size a buffer) is the suite's own ``error``.
* The judge runs after the timing, outside the fault rule: whatever it raises (the oracle, the comparison) is an
  ``error`` of the suite, never a kernel fault. Problems are ``wrong`` (``zero-accept`` when a request the oracle
  accepts drafts for got 0), none is ``pass`` (:func:`verdict`).

Also :func:`call_once` (run, synchronized, timed), :func:`synchronize` (a no-op on the CPU).
"""

from __future__ import annotations

import functools
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from ..faults import classify, context_poisoned, describe
from ..outcomes import Verdict


def synchronize(device: str) -> None:
    """Wait for ``device`` (a torch device string) when it is a CUDA device; no-op on the CPU."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


class KernelRaised(Exception):
    """What the kernel under test raised (its call, its graph's capture or replay, the synchronize after it),
    carried out of a check so the fault rule sees it: :attr:`error` is the original exception."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


@contextmanager
def kernel_running():
    """While active, an exception is the kernel's: re-raised as :class:`KernelRaised` (the fault rule's)."""
    try:
        yield
    except KernelRaised:
        raise
    except Exception as e:  # noqa: BLE001 - whatever a kernel raises is classified by the fault rule
        raise KernelRaised(e) from e


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class KernelCalls:
    """A backend as a check holds it: its kernel methods (the kernels it implements,
    :func:`~ddtree_compat.contract.kernels_of`) run under :func:`kernel_running` and are followed by a device
    synchronize (not while a CUDA graph is being captured), so a kernel's asynchronous error surfaces as the
    kernel's; every other attribute is the backend's own."""

    def __init__(self, backend, device: str):
        from ..contract import kernels_of

        self.__dict__.update(_backend=backend, _device=device, _kernels=frozenset(kernels_of(backend)))

    def __getattr__(self, name: str):
        attr = getattr(self._backend, name)
        if name not in self._kernels or not callable(attr):
            return attr

        @functools.wraps(attr)
        def call(*args, **kwargs):
            with kernel_running():
                out = attr(*args, **kwargs)
                if not _capturing():
                    synchronize(self._device)
            return out

        return call

    def __setattr__(self, name: str, value) -> None:
        setattr(self._backend, name, value)


def fault_verdict(exc: BaseException, accepted_expected: Sequence[int] | None = None) -> Verdict:
    """The ``fault`` verdict of a kernel call that raised: its class, and whether the CUDA context survived.
    An :class:`~ddtree_compat.contract.AdapterError` (the suite's own adapter failed) is an ``error`` instead,
    never counted as a kernel fault."""
    from ..contract import AdapterError

    text = describe(exc)
    if isinstance(exc, AdapterError):
        return Verdict("error", f"the suite's adapter failed: {text}", accepted_expected=list(accepted_expected or []))
    return Verdict("fault", text, accepted_expected=list(accepted_expected or []), fault_class=classify(text),
                   context_poisoned=context_poisoned())


def own_error(what: str, exc: BaseException, accepted_expected: Sequence[int] | None = None) -> Verdict:
    """The ``error`` verdict of the suite's own code raising (``what``: where), naming the line that raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename.rpartition('ddtree_compat/')[2]}:{frames[-1].lineno}" if frames else ""
    return Verdict("error", f"the suite's own {what} raised{where}: {describe(exc)}",
                   accepted_expected=list(accepted_expected or []))


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


ZERO_SHOWN = 8
"""Requests a ``zero-accept`` message names (then how many in all: a deployment-shape batch has thousands)."""


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
        more = f" ... {len(zero)} of {len(expected)} requests" if len(zero) > ZERO_SHOWN else ""
        shown = zero[:ZERO_SHOWN]
        return Verdict("zero-accept", f"{found.prefix}accepted drafts 0 where the oracle accepts "
                       f"{[expected[b] for b in shown]} (requests {shown}{more}): the field symptom, accept length "
                       f"1.00 / avg_accepted_drafts=0.00. {detail}", accepted_expected=expected, accepted_got=got)
    return Verdict("wrong", found.prefix + detail, accepted_expected=expected, accepted_got=got)


def call_once(call: Callable[[], object], device: str) -> tuple[object, float]:
    """Run ``call`` (the kernel launch, or a graph replay) once between two device synchronizes; its result and
    seconds. Exceptions propagate; those of the synchronizes are the kernel's (:class:`KernelRaised`)."""
    with kernel_running():
        synchronize(device)
    start = time.perf_counter()
    result = call()
    with kernel_running():
        synchronize(device)
    return result, time.perf_counter() - start


def check(fn: Callable | None = None, *, accepted: Callable | None = None, release: bool = False):
    """``fn(case, backend, device) -> judge`` as a record's ``run(case, backend, target) -> Verdict`` (the module
    docstring has the rule): ``fn`` runs once, timed, on ``target.device``, with the backend wrapped in
    :class:`KernelCalls`; what its kernel raises is a classified fault (:func:`fault_verdict`), anything else it
    raises an ``error`` of the suite; then its judge runs outside the fault rule (an exception there is an ``error``
    too). ``judge()`` returns problems, :class:`Findings` or a finished :class:`~ddtree_compat.outcomes.Verdict`.

    ``target`` is a :class:`~ddtree_compat.tiers.Target` or a torch device string; keyword options go to ``fn``.

    Args:
        accepted: ``(case) -> accepted drafts per request`` (the oracle's), recorded with a fault too.
        release: hand the memory the cell's tensors held back to the GPU once it is judged
            (``torch.cuda.empty_cache``): for families whose cells take gigabytes, so that parallel workers on one
            card need the sum of what their cells hold at once, not the sum of each worker's largest cell.

    Raises:
        TypeError: ``fn`` returned no judge (a check of another shape: a bug of the suite).
    """

    def wrap(fn):
        @functools.wraps(fn)
        def run(case, backend, target, **options) -> Verdict:
            device = target if isinstance(target, str) else target.device
            try:
                expected = list(accepted(case)) if accepted else []
            except Exception as e:  # noqa: BLE001 - the oracle's accepted drafts: ours
                return own_error("oracle (accepted drafts)", e)
            calls = KernelCalls(backend, device)
            try:
                judge, duration = call_once(lambda: fn(case, calls, device, **options), device)
            except KernelRaised as e:
                return fault_verdict(e.error, expected)
            except Exception as e:  # noqa: BLE001 - laying the case out is the suite's own code
                return own_error("check (laying the case out)", e, expected)
            if not callable(judge):
                raise TypeError(f"{fn.__module__}.{fn.__qualname__} returned {type(judge).__name__}, not its judge: "
                                "a check calls the kernel and returns judge() (ddtree_compat.harness.calls)")
            try:
                found = judge()
            except Exception as e:  # noqa: BLE001 - the judge (the oracle, the comparison) is ours
                return own_error("judge (the oracle or the comparison)", e, expected)
            if isinstance(found, Verdict):
                found.duration_s = duration
                return found
            if isinstance(found, Findings):
                if not found.accepted_expected:
                    found.accepted_expected = expected
            else:
                found = Findings(list(found), expected)
            return verdict(found, duration)

        run.check = fn
        if not release:
            return run

        @functools.wraps(fn)
        def releasing(case, backend, target, **options) -> Verdict:
            try:
                return run(case, backend, target, **options)
            finally:  # the cell's tensors are gone with run's frame
                if torch.cuda.is_initialized():
                    try:
                        torch.cuda.empty_cache()
                    except RuntimeError:  # a kernel's fault poisoned the context: its verdict says so, and the
                        pass              # worker is replaced (fault containment); nothing is left to give back

        releasing.check = fn
        return releasing

    return wrap(fn) if fn is not None else wrap
