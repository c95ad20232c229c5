"""The upgrade gate: compare a candidate results set with a baseline, cell by cell.

A cell is ``(kernel, backend, arch, case_id)``; where a set holds it more than once (two GPUs of one
arch, appended reruns) its worst outcome counts. Between baseline and candidate a cell is

* **regressed**: ``pass`` before, anything else after (``wrong``, ``zero-accept``, ``fault``, ``skip``,
  or ``missing`` from the candidate): the gate fails;
* **fixed**: anything but ``pass`` before, ``pass`` after;
* **changed**: another change of outcome (``wrong`` -> ``fault``, ``skip`` -> ``wrong``, ...);
* **new**: only in the candidate.

Typical use, before an SGLang upgrade (tox envs ``sglang-pinned`` and ``sglang-candidate``)::

    python -m ddtree_compat diff results/gate/pinned.jsonl results/gate/candidate.jsonl
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .outcomes import WORST_FIRST
from .results import Results

CellKey = tuple[str, str, str, str]
MISSING = "missing"


@dataclass(frozen=True)
class Change:
    """One cell whose outcome differs: ``key`` is ``(kernel, backend, arch, case_id)``."""

    key: CellKey
    before: str
    after: str
    message: str = ""

    @property
    def column(self) -> str:
        return f"{self.key[1]} · {self.key[2]}"


@dataclass
class GateResult:
    """What :func:`compare` found. ``failed`` is true when any cell regressed."""

    regressed: list[Change] = field(default_factory=list)
    fixed: list[Change] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    new: list[Change] = field(default_factory=list)
    unchanged: int = 0
    baseline_columns: set[str] = field(default_factory=set)
    candidate_columns: set[str] = field(default_factory=set)
    baseline_tiers: set[str] = field(default_factory=set)
    candidate_tiers: set[str] = field(default_factory=set)

    @property
    def disjoint(self) -> bool:
        """No ``backend · arch`` column in common: every baseline cell reads as missing (a comparison of
        runs on different archs or tiers, most likely not what was meant)."""
        return bool(self.baseline_columns) and not (self.baseline_columns & self.candidate_columns)

    @property
    def tiers_differ(self) -> bool:
        """The files cover different tiers (``device`` vs ``interpret`` + ``static``, ...): the cells of a
        tier only one file has read as missing or new."""
        return bool(self.baseline_tiers and self.candidate_tiers) and self.baseline_tiers != self.candidate_tiers

    @property
    def failed(self) -> bool:
        return bool(self.regressed)


def cells(results: Results) -> dict[CellKey, tuple[str, str]]:
    """``(kernel, backend, arch, case_id)`` -> ``(worst outcome, its message)``."""
    out: dict[CellKey, tuple[str, str]] = {}
    for r in results.records:
        key = (r.kernel, r.backend, r.arch, r.case_id)
        if key not in out or WORST_FIRST.index(r.outcome) < WORST_FIRST.index(out[key][0]):
            out[key] = (r.outcome, r.message)
    return out


def compare(baseline: Results, candidate: Results) -> GateResult:
    """Classify every cell of either set (see the module docstring)."""
    before, after = cells(baseline), cells(candidate)
    g = GateResult(baseline_columns={f"{k[1]} · {k[2]}" for k in before},
                   candidate_columns={f"{k[1]} · {k[2]}" for k in after},
                   baseline_tiers={r.tier for r in baseline.records}, candidate_tiers={r.tier for r in candidate.records})
    for key in sorted(before.keys() | after.keys()):
        b = before.get(key, (MISSING, ""))[0]
        a, message = after.get(key, (MISSING, ""))
        if a == b:
            g.unchanged += 1
        elif b == MISSING:
            g.new.append(Change(key, b, a, message))
        elif b == "pass":
            g.regressed.append(Change(key, b, a, message))
        elif a == "pass":
            g.fixed.append(Change(key, b, a))
        else:
            g.changed.append(Change(key, b, a, message))
    g.regressed.sort(key=lambda c: (WORST_FIRST + (MISSING,)).index(c.after))  # faults first; stable
    return g


def _section(title: str, changes: list[Change], limit: int) -> list[str]:
    if not changes:
        return []
    moves = Counter((c.column, c.before, c.after) for c in changes)
    lines = [f"## {title} ({len(changes)})", "", "| backend · arch | before | after | cells |", "|---|---|---|---|"]
    lines += [f"| {col} | {b} | {a} | {n} |" for (col, b, a), n in sorted(moves.items())]
    lines.append("")
    for c in changes[:limit]:
        detail = f": {c.message[:200]}" if c.message else ""
        lines.append(f"- `{c.key[3]}` ({c.column}, {c.key[0]}): {c.before} -> {c.after}{detail}")
    if len(changes) > limit:
        lines.append(f"- ... and {len(changes) - limit} more")
    return lines + [""]


def warnings(g: GateResult) -> list[str]:
    """Why a comparison may not be the one meant (one sentence each; empty when the files line up)."""
    out = []
    if g.disjoint:
        out.append(f"the two files share no backend · arch column (baseline: {', '.join(sorted(g.baseline_columns))}; "
                   f"candidate: {', '.join(sorted(g.candidate_columns))}), so every baseline cell reads as missing. "
                   "Compare runs of the same arch and tier.")
    if g.tiers_differ:
        out.append(f"the two files cover different tiers (baseline: {', '.join(sorted(g.baseline_tiers))}; candidate: "
                   f"{', '.join(sorted(g.candidate_tiers))}): the cells of a tier only one file has read as missing "
                   "or new. Compare runs of the same tiers.")
    return out


def render_markdown(g: GateResult, baseline: str, candidate: str, limit: int = 50) -> str:
    """The gate's verdict as Markdown (fit for a CI step summary)."""
    verdict = (f"**FAIL**: {len(g.regressed)} cell(s) regressed" if g.failed
               else "**PASS**: no cell regressed")
    lines = ["# SGLang upgrade gate", "", f"Baseline `{baseline}`, candidate `{candidate}`.", "",
             f"{verdict}; {len(g.fixed)} fixed, {len(g.changed)} changed otherwise, {len(g.new)} new, "
             f"{g.unchanged} unchanged.", ""]
    for warning in warnings(g):
        lines += [f"> **Warning**: {warning}", ""]
    lines += _section("Regressed (pass -> anything else)", g.regressed, limit)
    lines += _section("Fixed (-> pass)", g.fixed, limit)
    lines += _section("Changed otherwise", g.changed, limit)
    lines += _section("New in the candidate", g.new, limit)
    return "\n".join(lines)
