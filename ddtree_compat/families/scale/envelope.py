"""The envelope: per kernel x backend x arch x shape (vocabulary, budget, context), the largest batch verified correct
and the first batch that is not, read from a results file's deployment-shape cells (the derived boundary cells and the
batches the bisection probed). Torch-free: the report, the gate and the ``envelope`` command read it.

What a user needs before setting ``--max-running-requests``: below ``verified`` every batch that ran passed; at
``first_bad`` the kernel faulted or wrote wrong rows. :func:`probe` is the bisection's next batch between them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from .records import BAD, SUFFIX, ScaleCase


@dataclass(frozen=True)
class Envelope:
    """One kernel x backend x arch x shape.

    Attributes:
        verified: the largest batch that passed below every failing one (``None``: none passed).
        first_bad: the smallest batch that did not pass (``None``: every batch that ran passed).
        outcome: ``first_bad``'s outcome; replay: its case file (or pytest node) to replay it.
        tested: the largest batch that ran; cells: the cells that ran (pass or a kernel failure); skipped: the cells
            that did not (a skip, or an ``error`` of the suite's own).
    """

    kernel: str
    backend: str
    arch: str
    group: str
    verified: int | None
    first_bad: int | None
    outcome: str = ""
    replay: str = ""
    tested: int = 0
    cells: int = 0
    skipped: int = 0
    skip_reason: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.kernel, self.backend, self.arch, self.group

    @property
    def gap(self) -> bool:
        """A batch between the verified one and the first failing one has not run: the bisection has work."""
        return self.first_bad is not None and (self.verified or 0) + 1 < self.first_bad

    def case_at(self, batch: int) -> ScaleCase:
        """The case of this shape at ``batch`` (a bisection probe)."""
        dims = {k: int(v) for k, v in re.findall(r"(v|b|ctx)(\d+)", self.group)}
        return ScaleCase(self.kernel.removesuffix(SUFFIX), batch, dims.get("v", 0), dims.get("b", 0),
                         dims.get("ctx", 0), "bisect", "bisect").check()

    @property
    def verdict(self) -> str:
        """``verified to 4096``, ``508 / fault at 509``, ``no batch passed``."""
        if self.first_bad is None:
            return f"verified to {self.tested}" if self.cells else "not run"
        if self.verified is None:
            return f"{self.outcome} at {self.first_bad} (no batch passed)"
        return f"{self.verified} / {self.outcome} at {self.first_bad}"


def is_scale(r) -> bool:
    return r.kernel.endswith(SUFFIX)


def envelopes(records: Iterable) -> list[Envelope]:
    """The envelopes of every deployment-shape cell's group in ``records`` (one verdict per cell: pass the latest
    verdicts), in kernel, backend, arch, shape order."""
    groups: dict[tuple, list] = {}
    for r in records:
        if is_scale(r):
            groups.setdefault((r.kernel, r.backend, r.arch, r.shape), []).append(r)
    out = []
    for (kernel, backend, arch, group), rs in sorted(groups.items()):
        ran = sorted((r for r in rs if r.outcome == "pass" or r.outcome in BAD), key=lambda r: r.batch)
        skipped = [r for r in rs if r.outcome not in ("pass", *BAD)]  # skips, and the suite's own errors
        bad = next((r for r in ran if r.outcome in BAD), None)
        passed = [r.batch for r in ran if r.outcome == "pass" and (bad is None or r.batch < bad.batch)]
        out.append(Envelope(kernel, backend, arch, group, max(passed) if passed else None,
                            bad.batch if bad else None, bad.outcome if bad else "",
                            (bad.case_path or bad.nodeid) if bad else "", max((r.batch for r in ran), default=0),
                            len(ran), len(skipped), skipped[0].message[:200] if skipped else ""))
    return out


def probe(env: Envelope) -> int | None:
    """The bisection's next batch: the middle of the gap, or ``None`` when there is none."""
    if not env.gap:
        return None
    return ((env.verified or 0) + env.first_bad) // 2


def shrunk(before: Envelope, after: Envelope) -> str | None:
    """Why ``after`` is a smaller envelope than ``before`` (a regression of the upgrade gate), or ``None``: ``after``
    fails at a batch the baseline verified, or below the baseline's own first failure. A failure past everything the
    baseline ran is not a shrink (the baseline never tested there), nor is a shape the baseline ran no cell of."""
    if after.first_bad is None or not before.cells:
        return None
    safe = before.verified if before.first_bad is not None else before.tested
    if safe is not None and after.first_bad <= safe:
        return f"{after.outcome} at batch {after.first_bad} (the baseline verified to {safe})"
    if before.first_bad is not None and after.first_bad < before.first_bad:
        return f"{after.outcome} at batch {after.first_bad} (the baseline first failed at {before.first_bad})"
    return None
