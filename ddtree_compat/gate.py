"""The upgrade gate: compare a candidate results set with a baseline, cell by cell.

A cell is ``(kernel, backend, arch, case_id)``; where a set holds it more than once (two GPUs of one
arch, appended reruns) its worst outcome counts. A cell *ran* on a side when its outcome there is
``pass``, ``wrong``, ``zero-accept`` or ``fault`` (not ``skip``, ``error`` or missing); it is *compared*
when it ran on both. Between baseline and candidate a cell is

* **regressed**: ``pass`` before, anything else after (``wrong``, ``zero-accept``, ``fault``, ``error``,
  ``skip``, or ``missing`` from the candidate): the gate fails (exit 1);
* **fixed**: ``wrong``, ``zero-accept`` or ``fault`` before, ``pass`` after;
* **newly covered**: not run before (``skip``, ``error``, missing), ``pass`` after: coverage, not a fix;
* **changed**: another change of outcome (``wrong`` -> ``fault``, ``skip`` -> ``wrong``, ...);
* **new**: only in the candidate (counted apart from newly covered when the baseline has no line).

The gate refuses to pass on nothing. Per ``backend · kernel · arch`` it counts the cells compared; a
group that ran on one side and not on the other is **not compared** (the message says which side lacked
it and its skip reasons), and so is a whole comparison with no compared cell: the verdict is then
NOT COMPARED (exit 3) unless something regressed (exit 1); so is a backend that ran on one side only,
and one that ran on neither side when no backend under test (anything but :data:`REFERENCE_BACKENDS`) was
compared: two runs where every SGLang cell skipped are not a PASS on the strength of the oracle's cells. A
backend or group that ran on neither side while a backend under test was compared (two CPU runs include
``sglang-cuda``, which runs on the device tier only) is listed, not counted.

Typical use, before an SGLang upgrade (tox envs ``sglang-pinned`` and ``sglang-candidate``)::

    python -m ddtree_compat diff results/gate/pinned.jsonl results/gate/candidate.jsonl
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .outcomes import WORST_FIRST
from .report.coverage import FOOTER, GLOSSARY
from .results import Results

CellKey = tuple[str, str, str, str]
GroupKey = tuple[str, str, str]  # backend, kernel, arch
MISSING = "missing"
RAN = ("pass", "wrong", "zero-accept", "fault")
EXIT_REGRESSED, EXIT_NOT_COMPARED = 1, 3
REFERENCE_BACKENDS = ("oracle",)
"""The suite's own statement of each kernel, not a system under test: its cells alone never make a PASS."""


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
    shrunk: list[str] = field(default_factory=list)  # envelopes that shrank (deployment shapes): regressions too
    fixed: list[Change] = field(default_factory=list)
    covered: list[Change] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    new: list[Change] = field(default_factory=list)
    unchanged: int = 0
    groups: dict[GroupKey, "GroupCount"] = field(default_factory=dict)
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
        return bool(self.regressed or self.shrunk)

    @property
    def compared(self) -> int:
        return sum(g.compared for g in self.groups.values())

    @property
    def not_compared(self) -> list[str]:
        """One sentence per group that ran on one side only, per backend with no runnable cell on a side,
        and one when nothing at all was compared."""
        out = [g.why() for g in self.groups.values() if g.one_sided]
        tested = any(g.compared for k, g in self.groups.items() if k[0] not in REFERENCE_BACKENDS)
        for backend in sorted({k[0] for k in self.groups}):
            mine = [g for k, g in self.groups.items() if k[0] == backend]
            ran = {"baseline": any(g.ran_baseline for g in mine), "candidate": any(g.ran_candidate for g in mine)}
            if not any(ran.values()) and tested:
                continue  # ran on neither side while a system under test was compared: listed, not counted
            for side, skips in (("baseline", "skips_baseline"), ("candidate", "skips_candidate")):
                if not ran[side]:
                    reason = next((r for g in mine for r in getattr(g, skips)), "no line at all")
                    out.append(f"{backend}: the {side} has no cell of it that ran ({reason[:200]})")
        if not self.compared:
            out.append("no cell ran on both sides: there is nothing to compare")
        return list(dict.fromkeys(out))

    @property
    def exit_status(self) -> int:
        """0 pass, :data:`EXIT_REGRESSED`, or :data:`EXIT_NOT_COMPARED`."""
        if self.failed:
            return EXIT_REGRESSED
        return EXIT_NOT_COMPARED if self.not_compared else 0


@dataclass
class GroupCount:
    """How one ``backend · kernel · arch`` group fared on each side.

    Attributes:
        key: ``(backend, kernel, arch)``.
        compared: cells that ran on both sides.
        ran_baseline, ran_candidate: cells that ran on each side.
        cells_baseline, cells_candidate: cells each side has a line for.
        skips_baseline, skips_candidate: the first skip / error reasons of each side.
    """

    key: GroupKey
    compared: int = 0
    ran_baseline: int = 0
    ran_candidate: int = 0
    cells_baseline: int = 0
    cells_candidate: int = 0
    skips_baseline: list = field(default_factory=list)
    skips_candidate: list = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.key[0]} · {self.key[1]} · {self.key[2]}"

    @property
    def one_sided(self) -> bool:
        return bool(self.ran_baseline) != bool(self.ran_candidate)

    def why(self) -> str:
        side, other, n, skips = (("the candidate", "the baseline", self.ran_baseline, self.skips_candidate)
                                 if self.ran_baseline else
                                 ("the baseline", "the candidate", self.ran_candidate, self.skips_baseline))
        lacked = f"{side} ran none of them" + (f" ({skips[0][:200]})" if skips else " (no line at all)")
        return f"{self.label}: {n} cell(s) ran in {other}; {lacked}"


def cells(results: Results) -> dict[CellKey, tuple[str, str]]:
    """``(kernel, backend, arch, case_id)`` -> ``(worst outcome, its message)`` (a label's ``@variant`` kept)."""
    out: dict[CellKey, tuple[str, str]] = {}
    for r in results.records:
        key = (r.kernel, r.backend, r.arch, r.case_id)
        if key not in out or WORST_FIRST.index(r.outcome) < WORST_FIRST.index(out[key][0]):
            out[key] = (r.outcome, r.message)
    return out


def compare(baseline: Results, candidate: Results, backends: tuple[str, ...] = ()) -> GateResult:
    """Classify every cell of either set (see the module docstring); ``backends``: only these."""
    before, after = cells(baseline), cells(candidate)
    if backends:
        before = {k: v for k, v in before.items() if k[1] in backends}
        after = {k: v for k, v in after.items() if k[1] in backends}
    g = GateResult(baseline_columns={f"{k[1]} · {k[2]}" for k in before},
                   candidate_columns={f"{k[1]} · {k[2]}" for k in after},
                   baseline_tiers={r.tier for r in baseline.records}, candidate_tiers={r.tier for r in candidate.records})
    for key in sorted(before.keys() | after.keys()):
        b, b_message = before.get(key, (MISSING, ""))
        a, message = after.get(key, (MISSING, ""))
        group = g.groups.setdefault((key[1], key[0], key[2]), GroupCount((key[1], key[0], key[2])))
        group.cells_baseline += b != MISSING
        group.cells_candidate += a != MISSING
        group.ran_baseline += b in RAN
        group.ran_candidate += a in RAN
        group.compared += b in RAN and a in RAN
        if b in ("skip", "error") and len(group.skips_baseline) < 3:
            group.skips_baseline.append(f"{b}: {b_message}")
        if a in ("skip", "error") and len(group.skips_candidate) < 3:
            group.skips_candidate.append(f"{a}: {message}")
        if a == b:
            g.unchanged += 1
        elif b == MISSING:
            g.new.append(Change(key, b, a, message))
        elif b == "pass":
            g.regressed.append(Change(key, b, a, message))
        elif a == "pass" and b in RAN:
            g.fixed.append(Change(key, b, a))
        elif a == "pass":
            g.covered.append(Change(key, b, a))
        else:
            g.changed.append(Change(key, b, a, message))
    g.regressed.sort(key=lambda c: (WORST_FIRST + (MISSING,)).index(c.after))  # faults first; stable
    g.shrunk = shrunk_envelopes(baseline, candidate, backends)
    return g


def shrunk_envelopes(baseline: Results, candidate: Results, backends: tuple[str, ...] = ()) -> list[str]:
    """One line per deployment-shape envelope (kernel x backend x arch x shape) smaller in the candidate: a first
    failing batch below the baseline's, or a largest verified batch that fell (the bisection's probes are cells of
    their own, so a shrink also shows where no derived cell changed)."""
    from .families.scale.envelope import envelopes, shrunk

    before = {e.key: e for e in envelopes(baseline.records) if not backends or e.backend in backends}
    out = []
    for e in envelopes(candidate.records):
        why = shrunk(before[e.key], e) if e.key in before else None
        if why:
            out.append(f"{e.kernel} {e.backend} · {e.arch} {e.group}: {why}")
    return out


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
    if g.failed:
        verdict = f"**FAIL**: {len(g.regressed)} cell(s) regressed" + (
            f", {len(g.shrunk)} envelope(s) shrank" if g.shrunk else "")
    elif g.not_compared:
        verdict = f"**NOT COMPARED**: {len(g.not_compared)} group(s) could not be compared, no cell regressed"
    else:
        verdict = "**PASS**: no cell regressed"
    lines = ["# SGLang upgrade gate", "", f"Baseline `{baseline}`, candidate `{candidate}`.", "",
             f"{verdict}; {g.compared} cell(s) compared; {len(g.fixed)} fixed, {len(g.covered)} newly covered, "
             f"{len(g.changed)} changed otherwise, {len(g.new)} new, {g.unchanged} unchanged.", ""]
    for warning in warnings(g):
        lines += [f"> **Warning**: {warning}", ""]
    if g.not_compared:
        lines += ["## Not compared", ""] + [f"- {why}" for why in g.not_compared] + [""]
    lines += ["## Compared per backend · kernel · arch", "",
              "| backend · kernel · arch | compared | ran (baseline) | ran (candidate) | cells (baseline) | "
              "cells (candidate) |", "|---|---|---|---|---|---|"]
    lines += [f"| {c.label} | {c.compared} | {c.ran_baseline} | {c.ran_candidate} | {c.cells_baseline} | "
              f"{c.cells_candidate} |" for c in sorted(g.groups.values(), key=lambda c: c.key)] + [""]
    neither = [c.label for c in g.groups.values() if not c.ran_baseline and not c.ran_candidate]
    if neither:
        lines += [f"Ran on neither side (not failed): {', '.join(sorted(neither))}.", ""]
    if g.shrunk:
        lines += [f"## Envelopes that shrank ({len(g.shrunk)}): a smaller largest safe batch", ""]
        lines += [f"- {line}" for line in g.shrunk[:limit]] + [""]
    lines += _section("Regressed (pass -> anything else)", g.regressed, limit)
    lines += _section("Fixed (-> pass)", g.fixed, limit)
    lines += _section("Newly covered (not run before -> pass)", g.covered, limit)
    lines += _section("Changed otherwise", g.changed, limit)
    lines += _section("New in the candidate", g.new, limit)
    lines += ["---", "", FOOTER.replace(GLOSSARY, f"`{GLOSSARY}`")]
    return "\n".join(lines)
