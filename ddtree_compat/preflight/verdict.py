"""From the cells a plan ran to one screen of answers (:func:`answers`, :func:`render`): one line per concern,
``PASS``, ``FAIL`` or ``NOT CHECKED``, each with why; for a ``FAIL`` its first failing cell, the replay line, and
what would work: the plan's variants (:mod:`.plan`) whose every cell of that concern ran and passed. A change whose
cells did not all run and pass is not printed.

A deployment-shape cell of more requests than the configuration's ``--max-running-requests`` (a boundary batch
around a kernel's 2^31 / 2^32 limit) is beyond what the configuration serves: its failure is a *limit*, printed
under the line (how far ``--max-running-requests`` may be raised), never the configuration's failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..exitcodes import Exit
from ..outcomes import FAILED
from .plan import Concern, Plan, Variant

PASS, FAIL, NOT_CHECKED = "PASS", "FAIL", "NOT CHECKED"
FAILING = (*FAILED, "error")
"""Outcomes that make a concern FAIL: a kernel's failures, and the suite's own error (never a pass)."""
_TEST = re.compile(r"::(\w+)")


@dataclass(frozen=True)
class Answer:
    """One concern's line, and for a failure what to change."""

    concern: Concern
    verdict: str
    why: str
    first_failure: str = ""
    replay: str = ""
    suggestions: tuple[str, ...] = ()
    counts: dict = field(default_factory=dict)
    limits: tuple[str, ...] = ()
    """Failures beyond the configuration (deployment shapes above its ``--max-running-requests``), in words."""


def _test_of(record) -> str:
    m = _TEST.search(record.nodeid or "")
    return m.group(1) if m else ""


def _belongs(record, concern: Concern) -> bool:
    if _test_of(record) not in concern.tests or record.backend == "oracle":  # the oracle's cells check the reference
        return False
    if concern.backends and record.backend not in concern.backends:
        return False
    if concern.page is not None and record.kernel != "verify_tree_greedy" and f"-p{concern.page}-" not in \
            f"{record.case_id}-":
        return False
    return True


def _matches(record, variant: Variant, concern: Concern) -> bool:
    if not concern.by_budget:
        return True
    if record.budget != variant.budget:
        return False
    if concern.keyword:  # a family on its own grid: its budget is the variant's, its layout its own
        return True
    layout = (record.layout or "exact").split("-", 1)[0]  # commit's ``exact-p16``, attention's ``cap16-nodes-pg1``
    return record.block_size == variant.block_size and layout == variant.layout


def _counts(records) -> dict:
    out: dict[str, int] = {}
    for r in records:
        out[r.outcome] = out.get(r.outcome, 0) + 1
    return out


def _replay(record, env: str = "") -> str:
    """The cell's replay line (``env``: the variables it needs in front, the replica's)."""
    line = next((x.split("replay:", 1)[1].strip() for x in (record.message or "").splitlines() if "replay:" in x),
                f"python -m pytest '{record.nodeid}'" if record.nodeid else "")
    return f"{env} {line}" if env and line else line


def _failure(record) -> str:
    known = f" (known issue {record.known_issue})" if record.known_issue else ""
    first = (record.message or "").strip().splitlines()[0][:200] if record.message else ""
    return f"{record.kernel} · {record.backend} · {record.case_id}: {record.outcome}{known}" + (
        f": {first}" if first else "")


def _envelopes(ran) -> list[tuple[int, str]] | None:
    """Per failing deployment-shape kernel: ``(largest batch it passed below its first failure, in words)``;
    ``None`` when one of them passed no smaller batch."""
    by_kernel: dict[tuple, list] = {}
    for r in ran:
        by_kernel.setdefault((r.kernel, r.backend, r.shape), []).append(r)
    verified = []
    for (kernel, backend, _), rs in sorted(by_kernel.items()):
        bad = min((r.batch for r in rs if r.outcome in FAILING), default=None)
        if bad is None:
            continue
        passed = [r.batch for r in rs if r.outcome == "pass" and r.batch < bad]
        if not passed:
            return None
        verified.append((max(passed), f"{kernel.partition('@')[0]} on {backend}: {max(passed)} passes, {bad} fails"))
    return verified


def safe_batch(ran) -> list[str]:
    """For failing deployment-shape cells: the largest ``--max-running-requests`` below every failing kernel's
    first failure that each of them passed (its envelope's verified batch), when every one has such a batch."""
    verified = _envelopes(ran)
    if not verified:
        return []
    n = min(b for b, _ in verified)
    return [f"--max-running-requests {n}: every failing kernel passed there ({'; '.join(t for _, t in verified)})"]


def limits(ran, beyond, cap: int) -> tuple[str, ...]:
    """The failures of deployment-shape cells above the configuration's ``--max-running-requests`` ``cap``: how far
    it may be raised (the largest batch every failing kernel passed), and the first such failure."""
    verified = _envelopes(ran)
    first = _failure(min(beyond, key=lambda r: r.batch))[:200]
    if verified:
        n = min(b for b, _ in verified)
        return (f"raise --max-running-requests no further than {n} "
                f"({'; '.join(t for _, t in verified)}); first failure above {cap}: {first}",)
    return (f"{len(beyond)} cells above --max-running-requests {cap} fail; first: {first}",)


_ROWS = re.compile(r"-rows(\d+)")


def requests_of(record) -> int | None:
    """How many requests a cell stands for: a deployment-shape cell's batch, a linear-attention deployment case's
    verify size (``-rows<N>``: its requests are the last of ``N``); ``None`` for the others."""
    if _test_of(record) == "deployment":
        return record.batch or 0
    m = _ROWS.search(record.case_id or "")
    return int(m.group(1)) if m else None


ROOT = Path(__file__).resolve().parents[2]
"""The checkout preflight runs from (an installed wheel: its site-packages): the root of the sweep's test files (the
paths of ``collect_error`` lines) and of the e2e tier's."""


def _uncollected(concern: Concern, collect_errors) -> list[tuple[str, str]]:
    """The test files that could not be collected and define one of ``concern``'s tests (a file that cannot be
    read is taken to: its cells are missing either way)."""
    out = []
    for path, error in collect_errors:
        try:
            text = (ROOT / path).read_text()
        except OSError:
            text = None
        if text is None or any(re.search(rf"^\s*def {re.escape(t)}\(", text, re.M) for t in concern.tests):
            out.append((path, error))
    return out


def _speculative(record) -> bool:
    """An e2e cell of the configuration's own (speculative) servers, not of the target-only reference, which is never
    an answer about the configuration itself."""
    from ..e2e.configs import is_target_only

    return not is_target_only(record.backend)


def _replica_unanswered(concern: Concern, ran, counts: dict, stop: str) -> Answer:
    """The ``e2e`` line when no cell failed but the configuration's own servers did not all answer: the replica was
    stopped at its time limit, or only its target-only reference ran. Never a ``PASS``."""
    spec = sum(map(_speculative, ran))
    done = f"{spec} cells of its speculative servers and {len(ran) - spec} of the target-only reference passed"
    why = f"{stop}: {done}" if stop else f"no cell of the configuration's speculative servers ran ({done})"
    return Answer(concern, NOT_CHECKED, why, counts=counts)


def answer(plan: Plan, concern: Concern, records, replica_env: str = "",
           collect_errors: tuple[tuple[str, str], ...] = (), replica_stop: str = "") -> Answer:
    """One concern's answer from the records of a run (``replica_env``: the variables that replay an ``e2e`` cell,
    ``DDTREE_E2E_PROFILE=replica DDTREE_E2E_REPLICA=FILE``; ``collect_errors``: the test files the run could not
    collect, ``(path, error)``: a concern they leave without a cell says so; ``replica_stop``: why the replica
    stopped before every cell ran, ``""`` when it finished)."""
    if concern.unchecked:
        return Answer(concern, NOT_CHECKED, concern.unchecked)
    mine = [r for r in records if _belongs(r, concern)]
    deployed = [r for r in mine if _matches(r, plan.deployed, concern)] if plan.variants else mine
    counts = _counts(deployed)
    ran = [r for r in deployed if r.outcome != "skip"]
    failed = [r for r in ran if r.outcome in FAILING]
    beyond_cap: tuple[str, ...] = ()
    cap = plan.max_running_requests
    if cap:
        beyond = [r for r in failed if (requests_of(r) or 0) > cap]
        if beyond:
            failed = [r for r in failed if (requests_of(r) or 0) <= cap]
            beyond_cap = limits(ran, beyond, cap) if concern.name == "deployment" else (
                f"{len(beyond)} cells of verifies of more than --max-running-requests {cap} requests fail; first: "
                f"{_failure(min(beyond, key=requests_of))[:200]}",)
    where = plan.deployed.label() if plan.variants and concern.by_budget else ""
    note = f"; {concern.note}" if concern.note else ""
    if failed:
        first = failed[0]
        suggestions = []
        for v in plan.variants[1:]:
            alt = [r for r in mine if _matches(r, v, concern)]
            if alt and all(r.outcome == "pass" for r in alt):
                suggestions.append(f"{v.change}: {len(alt)} cells pass ({v.label()})")
        if concern.name == "deployment":
            suggestions += safe_batch(ran)
        why = f"{len(failed)} of {len(ran)} cells failed at {where or 'this configuration'}{note}"
        replay = _replay(first, replica_env if concern.name == "e2e" else "")
        return Answer(concern, FAIL, why, _failure(first), replay, tuple(suggestions), counts, beyond_cap)
    if concern.name == "e2e" and (replica_stop or (ran and not any(_speculative(r) for r in ran))):
        return _replica_unanswered(concern, ran, counts, replica_stop)
    missing = _uncollected(concern, collect_errors) if not ran else []
    if missing:
        files = "; ".join(f"{path} ({error})" for path, error in missing)
        return Answer(concern, NOT_CHECKED, f"the suite could not collect {files}: none of its cells ran", counts=counts)
    if not ran:
        skips = sorted({(r.message or "no reason given").splitlines()[0][:160] for r in deployed}, key=len)
        more = f" (and {len(skips) - 1} other reasons)" if len(skips) > 1 else ""
        why = (f"no cell of it ran: {skips[0]}{more}") if skips else \
            f"no cell of it exists at {where or 'this configuration'}"
        return Answer(concern, NOT_CHECKED, why + note, counts=counts)
    skipped = counts.get("skip", 0)
    passed = len(ran) - sum(1 for r in ran if r.outcome in FAILING)
    why = f"{passed} cells pass" + (f", {skipped} skip" if skipped else "") + (f" at {where}" if where else "")
    return Answer(concern, PASS, why + note, counts=counts, limits=beyond_cap)


def answers(plan: Plan, records, replica_env: str = "", collect_errors=(), replica_stop: str = "") -> list[Answer]:
    """Every concern's :func:`answer`, in the plan's order."""
    return [answer(plan, c, records, replica_env, tuple(collect_errors), replica_stop) for c in plan.concerns]


def exit_status(result: list[Answer]) -> Exit:
    """0 every check passed, 1 a check failed, 3 nothing could be checked (NOT CHECKED lines alone leave 0 when
    something passed: they are said, never counted as passes)."""
    verdicts = [a.verdict for a in result]
    if FAIL in verdicts:
        return Exit.FAILED
    if PASS not in verdicts:
        return Exit.NOT_COMPARED
    return Exit.OK


def render(plan: Plan, result: list[Answer], header: list[str]) -> str:
    """The screen: the configuration read, one line per concern, then what to change for each failure."""
    lines = list(header) + list(plan.notes) + [""]
    width = max(len(a.concern.title) for a in result)
    for a in result:
        lines.append(f"{a.verdict:<11}  {a.concern.title:<{width}}  {a.why}")
        if a.verdict == FAIL:
            lines.append(f"{'':13}first failing cell: {a.first_failure}")
            if a.replay:
                lines.append(f"{'':13}replay: {a.replay}")
            if a.suggestions:
                lines += [f"{'':13}what would work: {s}" for s in a.suggestions]
            else:
                lines.append(f"{'':13}what would work: nothing this run checked passes; no change is suggested")
        lines += [f"{'':13}limit: {s}" for s in a.limits]
    return "\n".join(lines) + "\n"
