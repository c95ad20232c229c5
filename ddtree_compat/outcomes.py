"""Outcomes of a cell, and the verdict that carries one (torch-free: reports and the gate read these).

* ``pass``: every output element equals the oracle (untouched elements still poisoned), canaries and
  inputs intact; floats within the kernel's stated tolerance.
* ``wrong``: any other difference, an out-of-bounds write (canary) or a changed input.
* ``zero-accept``: the oracle accepts drafts but the kernel accepted none: the field symptom
  (``accept len 1.00``, ``avg_accepted_drafts=0.00``).
* ``fault``: the kernel call raised or its process died (class from :mod:`ddtree_compat.faults`).
* ``skip``: the backend, kernel or device is not available here (with the reason; counted, never a pass).
* ``error``: the suite's own adapter or harness failed (an import of ours, a wrong name, a signature
  mismatch in our call): reported apart, never counted as a kernel fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OUTCOMES = ("pass", "wrong", "zero-accept", "fault", "error", "skip")
"""Cell outcomes, in the order the counts tables show them."""
WORST_FIRST = ("fault", "error", "zero-accept", "wrong", "xpass", "xfail", "skip", "pass")
"""Statuses (outcomes plus the known-issue ``xfail`` / ``xpass``) from worst to best: a group of cells
shows its worst."""
FAILED = ("wrong", "zero-accept", "fault")


@dataclass
class Verdict:
    """The judged result of one cell.

    Attributes:
        outcome: one of :data:`OUTCOMES`.
        message: what was expected and what came back (empty on pass; the skip reason on skip).
        duration_s: wall seconds of the kernel call (synchronised), 0 when not run.
        accepted_expected: oracle's accepted drafts per request (verify and commit cells).
        accepted_got: the kernel's accepted drafts per request (``None`` when not run).
        fault_class: for ``fault``, one of :data:`ddtree_compat.faults.FAULT_CLASSES`.
        context_poisoned: for ``fault`` on CUDA, whether the process's context is now unusable.
        measured: figures the check measured besides the outcome (a sampling distribution cell: ``statistic``,
            ``p_value``, ``dof``, ``rows`` and ``alpha`` of its law test); ``{}`` for most cells.
    """

    outcome: str
    message: str = ""
    duration_s: float = 0.0
    accepted_expected: list[int] = field(default_factory=list)
    accepted_got: list[int] | None = None
    fault_class: str | None = None
    context_poisoned: bool = False
    measured: dict = field(default_factory=dict)
