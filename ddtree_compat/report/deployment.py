"""The two deployment tables: the envelope of the deployment-shape cells (per kernel x shape, the largest batch verified
correct and the first that is not: :func:`envelope_rows`) and the e2e servers' deployment concurrency (per server
configuration, the largest number of concurrent requests served losslessly and the first fault:
:func:`concurrency_rows`). How to read both: ``docs/results.md``.
"""

from __future__ import annotations

from collections import defaultdict

from ..results import ResultRecord
from ..tiers import E2E
from .summary import Summary, arch_key, natural_key, replay_command

CONCURRENCY_HEADER = ["server", "attention", "configuration", "arch", "concurrencies run",
                      "largest served losslessly", "first not (outcome)", "first fault", "replay"]
CONCURRENCY_TITLE = ("Deployment concurrency (e2e: per server configuration, the largest number of concurrent requests "
                     "served losslessly, the first that was not, and the first whose server faulted)")

def _phase_outcome(r: ResultRecord) -> str:
    return f"{r.batch} ({r.outcome}{f', known issue {r.known_issue}' if r.known_issue else ''})"


def concurrency_rows(s: Summary) -> list[list[object]]:
    """The e2e tier's deployment concurrency: per server configuration (server, the attention backend it ran on,
    configuration, arch; header :data:`CONCURRENCY_HEADER`), the request phases run (concurrent requests, ascending),
    the largest that passed (served losslessly, accepting drafts as its draft designs) below the first that did not
    (``none`` when the first phase did not), that phase with its outcome, the first phase whose server faulted
    (where a server faults is what ``--max-running-requests`` must stay below, even past a zero-accept phase), and
    the replay line of the fault, else of the first phase that did not pass. Skipped phases are left out; ``[]``
    without an e2e cell that ran."""
    groups: dict[tuple, list[ResultRecord]] = defaultdict(list)
    for r in s.records:
        if r.tier == E2E and r.outcome != "skip":
            # an e2e cell's id is ``<configuration id>-<phase>`` (``e2e.session``), phase names without a dash
            groups[(r.backend, r.attention, r.case_id.rsplit("-", 1)[0], r.arch)].append(r)
    rows = []
    for key in sorted(groups, key=lambda k: (k[0], k[1], natural_key((k[2],)), arch_key(k[3]))):
        cells = sorted(groups[key], key=lambda r: r.batch)
        bad = next((r for r in cells if r.outcome != "pass"), None)
        fault = next((r for r in cells if r.outcome == "fault"), None)
        served = [r.batch for r in cells if bad is None or r.batch < bad.batch]
        shown = fault or bad
        rows.append([*key, ", ".join(str(r.batch) for r in cells), str(served[-1]) if served else "none",
                     _phase_outcome(bad) if bad else "", str(fault.batch) if fault else "",
                     replay_command(shown) if shown else ""])
    return rows


ENVELOPE_TITLE = ("Envelope (deployment shapes: per kernel x shape, the largest batch verified correct and the first "
                  "that is not; skipped: cells that did not run, their reasons under Skips by reason)")
ENVELOPE_HEADER = ["kernel", "backend · arch", "shape", "largest batch verified", "first failing batch", "outcome",
                   "cells run (skipped)", "replay"]


def envelope_rows(s: Summary) -> list[list[str]]:
    """One row per deployment-shape group (:func:`ddtree_compat.families.scale.envelope.envelopes`): the largest
    batch verified correct below every failing one, the first failing batch, its outcome and replay line; ``[]``
    when no deployment-shape cell ran (none in the results, or every one skipped: a CPU box)."""
    from ..families.scale.envelope import envelopes

    rows = []
    found = envelopes(s.records)
    if not any(e.cells for e in found):
        return []
    for e in found:
        bad = next((r for r in s.records if r.kernel == e.kernel and r.backend == e.backend and r.arch == e.arch
                    and r.shape == e.group and r.batch == e.first_bad), None) if e.first_bad else None
        rows.append([e.kernel.partition("@")[0], f"{e.backend} · {e.arch}", e.group,
                     "-" if e.verified is None and not e.cells else str(e.verified or "none") +
                     ("" if e.first_bad else f" (all {e.cells} ran)"),
                     str(e.first_bad or ""), e.outcome, f"{e.cells} ({e.skipped})",
                     (replay_command(bad) or bad.nodeid) if bad else ""])
    return rows
