"""What the top of every report says: what was tested, what was not and why, from which files, whether whole.

:func:`report_title` names the families, archs and tiers that ran; :func:`not_tested` gives one line per kernel family,
static kernel, DDTree implementation or backend that ran no cell, with why (a selection, a missing implementation,
the commonest skip reason); :func:`notices` and :func:`repairs` say when a run is partial or a torn line was cut.
A cell's family is its record's folder (:func:`family_of`). The last line of every report is :data:`FOOTER`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from .. import records
from ..results import ResultRecord, Results
from ..tiers import DEVICE_ONLY, DEVICE_TIER_ONLY, E2E, STATIC
from .summary import Summary, arch_key, kernel_run

FAMILY_TITLES = {"verify": "verify kernels", "commit": "KV-cache commit kernels", "attention": "verify attention",
                 "ddtree": "DDTree kernels", "sampling": "sampling verify", "linear": "linear attention (hybrid targets)",
                 "scale": "deployment shapes",
                 STATIC: "static builds", E2E: "end to end"}
"""What a report calls each kernel family (``ddtree_compat.families``) and the static and e2e tiers."""
SELECTION = "left out of the selection: -k, -m, --tests or --backend"
GLOSSARY = "docs/glossary.md"
"""The manual's page that defines every term a report prints, as a path in the ddtree-compat repository."""
FOOTER = (f"Terms used in this report (outcomes, tiers, topologies, layouts, columns) are defined in {GLOSSARY} of "
          "ddtree-compat.")
"""The footer of the Markdown and HTML reports. A report is read where it was written (a sweep's output folder, a CI
step summary, ``docs/results/``), so it names the page by its path in the repository rather than by a relative link,
which would resolve from one of those places only."""
REASON_CHARS = 200
"""A skip reason quoted at the top of a report is cut to this many characters."""


def family_of(r: ResultRecord) -> str:
    """The kernel family of a cell (its record's family folder), or its tier for a static or e2e cell; a record
    of a third party's (entry point) by its report table, a label no record has by its topology."""
    if r.tier in (STATIC, E2E):
        return r.tier
    record = records.get(r.kernel)
    if record is None:
        return "ddtree" if r.topology.startswith("ddtree-") else "verify"
    parts = record.case_type.__module__.split(".")
    return parts[2] if parts[:2] == ["ddtree_compat", "families"] and len(parts) > 2 else record.table


def _skipped(cells: list[ResultRecord]) -> str:
    """Why every one of ``cells`` skipped: the commonest reason, cut short, and how many others."""
    reasons = Counter(r.message.strip().splitlines()[0] if r.message.strip() else "no reason given" for r in cells)
    (top, n), others = reasons.most_common(1)[0], len(reasons) - 1
    top = top if len(top) <= REASON_CHARS else top[:REASON_CHARS - 3].rsplit(" ", 1)[0] + " ..."
    more = (f"; {others} other reason(s), listed in the report's \"Skips by reason\" (folded, near its end)"
            if others else "")
    return f"all {len(cells):,} cells skipped: {top}" + (f" ({n:,})" if others else "") + more


def device_only_split(cells: list[ResultRecord], gpu: bool) -> str:
    """Why skipped cells that need a GPU did not run, counted one way wherever a report says it (the deployment
    shapes' Not-tested line, the Envelope section): ``12 device only: no GPU in this run; 4 for another reason``.

    Args:
        cells: skipped cells; a message carrying :data:`~ddtree_compat.tiers.DEVICE_ONLY` (the deployment-shape
            checks' own skip) or :data:`~ddtree_compat.tiers.DEVICE_TIER_ONLY` (a CUDA kernel's skip off the GPU,
            :mod:`ddtree_compat.contract.backend`) counts as device only, any other (a missing module, a size larger
            than the GPU) as another reason.
        gpu: whether the run had a GPU (then the other reasons are said to include free memory).

    Returns:
        the counts as one clause; ``""`` for no cells.
    """
    device = sum(DEVICE_ONLY in r.message or DEVICE_TIER_ONLY in r.message for r in cells)
    why = [f"{device:,} device only" + ("" if gpu else ": no GPU in this run")] if device else []
    if len(cells) > device:
        why.append(f"{len(cells) - device:,} for another reason" + (", such as larger than this GPU's free memory"
                                                                   if gpu else ""))
    return "; ".join(why)


def _implementations_of(results: Results) -> dict[str, dict]:
    """The DDTree implementations the runs had, by backend name (``env`` lines' ``implementations``)."""
    out: dict[str, dict] = {}
    for env in results.envs.values():
        out.update(env.get("implementations") or {})
    return out


def _no_cell(family: str, results: Results) -> str:
    """Why a family has no cell at all in ``results``."""
    if family not in ("scale", STATIC, E2E) and results.envs and all(
            e.get("profile") == "scale" for e in results.envs.values()):
        return "not in the scale profile (the deployment-shape cells alone)"
    if family == "ddtree" and not _implementations_of(results):
        said = [e["not_tested"]["ddtree"] for e in results.envs.values() if (e.get("not_tested") or {}).get("ddtree")]
        return said[0] if said else "no DDTree implementation in these results (--ddtree-impl PATH), or " + SELECTION
    if family == STATIC:
        return f"no static cell (--ddtree-static off, or {SELECTION})"
    if results.collect_errors:
        files = ", ".join(path for path, _ in results.collect_errors)
        return f"no cell: the suite could not collect {files} (its line above says why), or {SELECTION}"
    return f"no cell ({SELECTION})"


@dataclass(frozen=True)
class Untested:
    """One thing a run did not test: ``subject`` (``DDTree kernels``, ``sglang-cuda's kernel cells on interpret``),
    ``verdict`` (``not tested``, or ``none ran (only its static builds did)``) and ``why`` (the commonest skip reason,
    a missing implementation, a selection)."""

    subject: str
    verdict: str
    why: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.verdict} — {self.why}"


NOT_TESTED = "not tested"
NOT_COLLECTED = "not collected"


def not_tested(s: Summary) -> list[str]:
    """:func:`untested` as the report's lines: ``DDTree kernels: not tested — no DDTree implementation found``."""
    return [str(u) for u in untested(s)]


def untested(s: Summary) -> list[Untested]:
    """One item per kernel family, the static tier, DDTree implementation or backend that ran no cell (none
    that was not skipped), and why (as lines: ``DDTree kernels: not tested — no DDTree implementation found (...)``,
    ``sglang-cuda: not tested — all 2,304 cells skipped: ...``; in a static tier that built something, each backend's
    kernel that built nothing (``Static builds of sglang-cuda sgl_kernel_ops: ...``: sgl-kernel not installed).
    Families come from the records' folders
    (:data:`ddtree_compat.records.FAMILIES`); the e2e tier only when it has cells)."""
    FAMILIES = records.FAMILIES
    by_family, by_backend = _grouped(s.records, family_of), _grouped(s.records, lambda r: r.backend)
    lines = [Untested(path, NOT_COLLECTED, f"{error} (the suite's own error: none of its cells ran)")
             for path, error in s.results.collect_errors]
    families = [*FAMILIES, *sorted(set(by_family) - {*FAMILIES, STATIC, E2E}), STATIC,
                *([E2E] if by_family.get(E2E) else [])]
    for family in families:
        cells = by_family.get(family, [])
        if _ran(cells):
            continue
        if family == "scale" and cells:  # the GPU-only family: counted as the Envelope section counts it
            gpu = any(e.get("gpus") for e in s.results.envs.values())
            why = (f"all {len(cells):,} cells skipped ({device_only_split(cells, gpu)}; each reason in the report's "
                   "\"Skips by reason\")")
        else:
            why = _skipped(cells) if cells else _no_cell(family, s.results)
        title = FAMILY_TITLES.get(family, family)
        lines.append(Untested(title[:1].upper() + title[1:], NOT_TESTED, why))
    if _ran(by_family.get(STATIC, [])):  # else the static tier's own line says it
        for (backend, kernel), cells in _grouped(by_family[STATIC], lambda r: (r.backend, r.kernel)).items():
            if not _ran(cells):
                lines.append(Untested(f"Static builds of {backend} {kernel}", NOT_TESTED, _skipped(cells)))
    lines += _untested_kernels(s, {f for f, cells in by_family.items() if not _ran(cells)})
    impls = _implementations_of(s.results)
    for name in sorted(impls):  # its kernel cells, and its e2e servers' (backend ``sglang-ddtree@<name>``)
        cells = by_backend.get(name, []) + [r for r in by_family.get(E2E, []) if r.backend.endswith(f"@{name}")]
        if not _ran(cells):
            i = impls[name]
            what = f"{name} (DDTree implementation, {i.get('repo') or '?'}@{(i.get('commit') or '?')[:8]})"
            lines.append(Untested(what, NOT_TESTED, _skipped(cells) if cells else f"no cell ({SELECTION})"))
    for backend, cells in by_backend.items():
        if backend not in impls and not _ran(cells):
            lines.append(Untested(backend, NOT_TESTED, _skipped(cells)))
    return lines


def _ran(cells: list[ResultRecord]) -> bool:
    """Whether any of ``cells`` ran (an outcome other than ``skip``)."""
    return any(r.outcome != "skip" for r in cells)


def _grouped(cells, key) -> dict:
    """``cells`` by ``key(cell)``, the keys sorted."""
    out: dict = defaultdict(list)
    for r in cells:
        out[key(r)].append(r)
    return dict(sorted(out.items()))


def _untested_kernels(s: Summary, untested_families: set[str]) -> list[Untested]:
    """The kernel tiers' cells (interpret, device) that never ran, below the family lines: a backend whose every
    kernel cell skipped although its static builds ran (``sglang-cuda's kernel cells on interpret: none ran (only
    its static builds did) — ...``), a kernel of a backend that ran others (``sglang-triton assign_req_to_token on
    interpret: ...``), and the CUDA-graph cells (labels ``kernel@graph``) in one line when none ran. Families listed
    whole are not repeated."""
    kernel_cells = [r for r in s.records if kernel_run(r) and family_of(r) not in untested_families]
    graphs = [r for r in kernel_cells if r.kernel.endswith("@graph")]
    ran_static = {r.backend for r in s.records if r.tier == STATIC and r.outcome != "skip"}
    lines: list[Untested] = []
    plain = [r for r in kernel_cells if not r.kernel.endswith("@graph")]
    for backend, cells in _grouped(plain, lambda r: r.backend).items():
        tiers = "/".join(sorted({r.tier for r in cells}))
        if not _ran(cells):
            if backend in ran_static:  # else the backend's own line says it
                apart = sum(1 for r in s.records if r.backend == backend and kernel_run(r)) - len(cells)
                elsewhere = (f" (its other {apart:,} kernel cells are counted in the CUDA-graph line or their "
                             "family's line)" if apart else "")
                lines.append(Untested(f"{backend}'s kernel cells on {tiers}", "none ran (only its static builds did)",
                                      _skipped(cells) + elsewhere))
            continue
        for kernel, mine in _grouped(cells, lambda r: r.kernel).items():
            if not _ran(mine):
                lines.append(Untested(f"{backend} {kernel} on {tiers}", NOT_TESTED, _skipped(mine)))
    if graphs and not _ran(graphs):
        lines.append(Untested("CUDA-graph cells (kernel@graph)", NOT_TESTED, _skipped(graphs)))
    return lines


def is_ddtree_server(r: ResultRecord) -> bool:
    """An e2e cell of a server that builds DDTree trees: DDTREE (topology ``ddtree-<mode>``) or DDTree inside the
    DFlash worker (``block-ddtree``)."""
    return r.topology.startswith(("ddtree-", "block-ddtree"))


def report_title(s: Summary) -> str:
    """What was tested, in the title: ``DDTree compatibility matrix: DDTree kernels, verify kernels, ... on sm90;
    static builds for 9 archs``, or, with no DDTree kernel, no cell of a DDTree implementation and no DDTree server run,
    ``SGLang kernel matrix (DDTree kernels not tested): ...``."""
    FAMILIES = records.FAMILIES
    ran = {family_of(r) for r in s.records if r.outcome != "skip"}
    if not ran:
        return "Kernel compatibility: nothing ran (every cell skipped)"
    kernels = [f for f in (*FAMILIES, *sorted(ran - {*FAMILIES, STATIC, E2E})) if f in ran]
    archs = sorted({r.arch for r in s.records if kernel_run(r) and r.outcome != "skip"}, key=arch_key)
    parts_ = [f"{', '.join(FAMILY_TITLES.get(f, f) for f in kernels)} on {', '.join(archs)}"] if kernels else []
    if STATIC in ran:
        n = len({r.arch for r in s.records if r.tier == STATIC and r.outcome != "skip"})
        parts_.append(f"static builds for {n} arch{'s' if n > 1 else ''}")
    if E2E in ran:
        parts_.append("end to end")
    impls = _implementations_of(s.results)  # a DDTree tree's own kernels, at any shape (its scale cells too)
    ddtree = "ddtree" in ran or any(
        r.outcome != "skip" and (r.backend in impls or (r.tier == E2E and is_ddtree_server(r))) for r in s.records)
    head = "DDTree compatibility matrix" if ddtree else "SGLang kernel matrix (DDTree kernels not tested)"
    return f"{head}: {'; '.join(parts_)}"


def sources(results: Results) -> str:
    """The results files a report comes from, by file name: ``2026-12-04-cpu-default.jsonl``."""
    from pathlib import Path

    names = [Path(p).name for p in results.sources]
    return ", ".join(names) if len(names) <= 4 else f"{', '.join(names[:4])} and {len(names) - 4} more"


def notices(results: Results) -> list[str]:
    """What a reader must know before the counts: a partial run (cells selected without a result line), torn lines
    left out."""
    out = []
    if results.partial:
        out.append(f"Partial run: {results.done:,} of {results.planned:,} cells; continue with "
                   "python -m ddtree_compat sweep --resume (pytest: --ddtree-resume), with the same selection")
    return out + [str(t) for t in results.torn]


def repairs(results: Results) -> list[str]:
    """The torn last lines a later run cut before appending (its ``repair`` lines), one line each."""
    return [f"{r['path']}: a torn last line ({r.get('cut_bytes')} bytes at byte {r.get('at_byte')}: a writer killed "
            "mid-line) was cut before more lines were appended" for r in results.repairs]
