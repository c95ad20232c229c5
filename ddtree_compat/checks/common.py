"""What every check shares: waiting for the device, turning an exception into a ``fault`` verdict,
and spelling out integer differences."""

from __future__ import annotations

import torch

from ..faults import classify, context_poisoned, describe
from ..outcomes import Verdict
from .buffers import POISON


def synchronize(device: str) -> None:
    """Wait for ``device`` (a torch device string) when it is a CUDA device; no-op on the CPU."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def fault_verdict(exc: BaseException, accepted_expected: list[int] | None = None) -> Verdict:
    """The ``fault`` verdict of a kernel call that raised: its class, and whether the CUDA context survived.
    An :class:`~ddtree_compat.backends.sglang_locate.AdapterError` (the suite's own adapter failed) is an
    ``error`` instead, never counted as a kernel fault."""
    from ..backends.sglang_locate import AdapterError

    text = describe(exc)
    if isinstance(exc, AdapterError):
        return Verdict("error", f"the suite's adapter failed: {text}", accepted_expected=accepted_expected or [])
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
