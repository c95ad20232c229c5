"""What every report shows, computed once from a (merged) results set.

A *column* is ``backend · arch`` (``interpret`` for the CPU interpreter; kernels other than
``verify_tree_greedy`` add ``:kernel`` to the backend); results from several files,
runners or GPUs of the same arch fall into the same column. A cell's *status* is its outcome, or
``xfail`` / ``xpass`` when a known issue covers it (:func:`ddtree_compat.known_issues.status`). A group
of cells (a table cell, a square of the summary picture) shows its worst status, in the order
:data:`WORST_FIRST`.

Where a kernel's cells go is its record's ``table`` (:func:`table_of`): ``matrix`` and ``ddtree`` cells have a
budget and a topology (the summary picture, and per kernel a budget x topology x layout table),
``attention`` cells a shape and a tile choice; static and e2e cells are tables of their own. The summary
table (:func:`summary_table`) has one row per kernel x backend and one column per arch, whatever the profile.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..outcomes import FAILED, OUTCOMES, WORST_FIRST
from .. import records
from ..contract import base_name
from ..arch import parse_arch
from ..errors import ArchError
from ..families.verify.records import VERIFY
from ..known_issues import source_for, status
from ..tiers import E2E, STATIC
from ..results import ResultRecord, Results



def backend_kernel(r: ResultRecord) -> str:
    """``backend`` for verify cells; other kernels add theirs: ``sglang-triton:accept_out_cache_loc``."""
    return r.backend if r.kernel == VERIFY else f"{r.backend}:{r.kernel}"


def column(r: ResultRecord) -> str:
    if r.tier in (STATIC, E2E):  # static cells: per backend and compile target; e2e: per server algorithm
        return f"{r.backend} · {r.arch} · {r.tier}"
    return f"{backend_kernel(r)} · {r.arch}"


def cell_status(r: ResultRecord) -> str:
    return status(r.outcome, r.known_issue)


def worst(statuses: Counter) -> str:
    """The worst status with a non-zero count. Raises ``ValueError`` on an empty counter."""
    for s in WORST_FIRST:
        if statuses[s]:
            return s
    raise ValueError("no cells")


@dataclass
class Summary:
    """Counts and groupings of a results set.

    Attributes:
        results: the loaded results (``envs``, ``records``).
        columns: sorted ``backend · arch`` names.
        outcomes: column -> Counter of outcomes (:data:`ddtree_compat.outcomes.OUTCOMES`).
        statuses: column -> Counter of statuses (outcomes with ``xfail``/``xpass`` split off).
        skips: ``(column, reason)`` -> cells.
        faults: ``(column, fault class)`` -> cells.
        known: ``(issue id, column, status)`` -> cells.
        known_info: issue id -> ``{"reason", "source", "strict"}`` (and ``"sources"``, one link per build, where
            the entry gives them) from the ``env`` lines (``strict`` absent in files written before it: strict).
        backends: column -> the backend its known-issue cells ran on (set only for such columns; a known issue's
            link is chosen by backend: :func:`known_rows`).
        failures: cells that failed without a known issue covering them.
        xpassed: cells that passed although a strict known issue covers them (the kernel looks fixed); a
            non-strict entry's pass (its bug depends on the draw or the build) is counted in ``known`` only.
    """

    results: Results
    columns: list[str] = field(default_factory=list)
    outcomes: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    statuses: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    skips: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)
    known: Counter = field(default_factory=Counter)
    known_info: dict[str, dict] = field(default_factory=dict)
    backends: dict[str, str] = field(default_factory=dict)
    failures: list[ResultRecord] = field(default_factory=list)
    xpassed: list[ResultRecord] = field(default_factory=list)

    @property
    def records(self) -> list[ResultRecord]:
        return self.results.records

    def total(self, key: str = "outcomes") -> Counter:
        """Counts over all columns (``key``: ``outcomes`` or ``statuses``)."""
        out: Counter = Counter()
        for c in getattr(self, key).values():
            out.update(c)
        return out

    def grouped(self, key) -> dict[tuple, Counter]:
        """``(key(record)..., column)`` -> Counter of statuses; ``key`` returns a tuple."""
        cells: dict[tuple, Counter] = defaultdict(Counter)
        for r in self.records:
            cells[(*key(r), column(r))][cell_status(r)] += 1
        return cells


def summarize(results: Results) -> Summary:
    """Count a results set (see :class:`Summary`)."""
    s = Summary(results)
    for env in results.envs.values():
        s.known_info.update(env.get("known_issues") or {})
    for r in results.records:
        col, st = column(r), cell_status(r)
        s.outcomes[col][r.outcome] += 1
        s.statuses[col][st] += 1
        if r.outcome == "skip":
            s.skips[(col, r.message)] += 1
        if r.outcome == "fault":
            s.faults[(col, r.fault_class or "unclassified")] += 1
        if r.known_issue and st != "skip":
            s.known[(r.known_issue, col, st)] += 1
            s.backends[col] = r.backend
        if st in FAILED:
            s.failures.append(r)
        elif st == "xpass" and strict(s, r.known_issue):
            s.xpassed.append(r)
    s.columns = sorted(s.outcomes)
    return s


def _implementations(e: dict) -> str:
    """The DDTree implementations under test, ``name (repo@commit)``; ``sglang.__version__`` does not name them."""
    impls = e.get("implementations") or {}
    return ", ".join(f"{i.get('name') or b} ({i.get('repo') or '?'}@{(i.get('commit') or '?')[:8]})"
                     for b, i in impls.items())


def env_rows(results: Results) -> list[list[object]]:
    """One row per ``env`` line: id, tier, GPUs, CUDA_VISIBLE_DEVICES, driver, CUDA, torch, triton,
    sglang (its distribution; ``none`` for a source tree on the path), flashinfer, sgl-kernel, the DDTree
    implementations, host, start time. Files written before a column existed show it empty."""
    rows = []
    for env_id, e in results.envs.items():
        gpus = ", ".join(f"{g['name']} ({g['arch']}, cc {g['cc']})" for g in e.get("gpus", [])) or "none"
        rows.append([env_id, e.get("tier"), gpus, e.get("cuda_visible_devices") or "", e.get("driver"),
                     e.get("cuda"), e.get("torch"), e.get("triton"), e.get("sglang") or "none",
                     e.get("flashinfer") or ("" if "flashinfer" not in e else "none"),
                     e.get("sgl_kernel") or ("" if "sgl_kernel" not in e else "none"), _implementations(e),
                     e.get("host"), e.get("started")])
    return rows


ENV_HEADER = ["env", "tier", "GPUs", "CUDA_VISIBLE_DEVICES", "driver", "CUDA", "torch", "triton", "sglang",
              "flashinfer", "sgl-kernel", "DDTree implementations", "host", "started"]


def shown_outcomes(s: "Summary") -> list[str]:
    """The outcome columns of the counts table: every kernel outcome, and ``error`` (the suite's own
    failures) only when a cell has it."""
    total = s.total()
    return [o for o in OUTCOMES if o != "error" or total["error"]]


COUNT_COLUMN = f"backend[:kernel] · arch (no kernel: {VERIFY}; · {STATIC} / · {E2E}: the whole backend)"
"""The counts table's first header (:func:`column`): a kernel-cell column names its kernel unless it is the verify
kernel; a static or e2e column (``backend · arch · tier``) holds every kernel or server of its backend."""


def count_header(s: "Summary") -> list[str]:
    return [COUNT_COLUMN, *shown_outcomes(s), "cells", "known issue: xfail", "xpass"]


def count_rows(s: Summary) -> list[list[object]]:
    """The counts table (header :func:`count_header`): per column, each outcome, cells, and how many were
    covered by known issues."""
    shown = shown_outcomes(s)
    rows = []
    for c in s.columns:
        rows.append([c, *(s.outcomes[c][o] for o in shown), sum(s.outcomes[c].values()),
                     s.statuses[c]["xfail"], s.statuses[c]["xpass"]])
    total, st = s.total(), s.total("statuses")
    rows.append(["all", *(total[o] for o in shown), len(s.records), st["xfail"], st["xpass"]])
    return rows


def strict(s: "Summary", issue: str) -> bool:
    """Whether known issue ``issue`` is strict (its pass means fixed); files written before ``strict`` was recorded,
    and ids no ``env`` line describes, count as strict (the manifest's default)."""
    return s.known_info.get(issue, {}).get("strict", True)


KNOWN_HEADER = ["issue", "backend · arch", "status", "strict", "cells", "reason", "source"]


def known_rows(s: Summary) -> list[list[object]]:
    """Cells covered by known issues: issue id, column, ``xfail``/``xpass``, whether the entry is strict (``yes``:
    an xpass means fixed; ``no``: the bug depends on the draw or the build, an xpass is expected), cells, reason,
    source link (the column's backend's, where the entry gives one per build)."""
    rows = []
    for (issue, col, st), n in sorted(s.known.items()):
        info = s.known_info.get(issue, {})
        link = source_for(info.get("source", ""), info.get("sources", {}), s.backends.get(col, ""))
        rows.append([issue, col, st, "yes" if strict(s, issue) else "no", n, info.get("reason", ""), link])
    return rows


def parts(counts: Counter) -> str:
    """``"2 wrong, 13 pass"``: each status with cells, worst first."""
    return ", ".join(f"{counts[o]} {o}" for o in WORST_FIRST if counts[o])


def kernel_run(r: ResultRecord) -> bool:
    """A kernel tier's cell (interpret or device), not a static or e2e one."""
    return r.tier not in (STATIC, E2E)


def table_of(r: ResultRecord) -> str:
    """The table a cell joins: ``static``, ``e2e``, or its kernel record's ``table`` (``matrix``, ``ddtree``,
    ``attention``); a label that is no record's (a CUDA-graph chain) by its topology (``ddtree-<logits>``)."""
    if r.tier in (STATIC, E2E):
        return r.tier
    record = records.get(r.kernel)
    if record is not None:
        return record.table
    return "ddtree" if r.topology.startswith("ddtree-") else "matrix"


TABLE_ORDER = ("matrix", "ddtree", "attention", STATIC, E2E)


def arch_key(arch: str) -> tuple:
    """Arches by compute capability, ``interpret`` (the CPU) and names of no arch (``nogpu``) last."""
    try:
        return (0, *parse_arch(arch), arch)
    except ArchError:
        return (1 if arch == "interpret" else 2, 0, 0, arch)


def kernel_key(label: str) -> tuple:
    """Kernels in registry order, a label after its kernel (``verify_tree_greedy@graph``), other labels last."""
    names = list(records.registry())
    base = base_name(label)
    return (names.index(base) if base in names else len(names), label)


def place(r: ResultRecord) -> str:
    """Where in its table a cell sits, for the summary table: ``spine b8``, ``emulated-sm120 h4g2d64-pre17-fp16``,
    a static specialization or an e2e configuration."""
    table = table_of(r)
    if table in ("matrix", "ddtree") and r.budget is not None:
        return f"{r.topology} b{r.budget}"
    if table == "attention":
        return f"{tiles_of(r)} {r.shape}"
    return r.case_id


def summary_label(r: ResultRecord) -> tuple[str, str, str]:
    """A summary-table row: ``(table, kernel, backend)``; verify attention's tile choices share one row."""
    table = table_of(r)
    return table, base_name(r.kernel) if table == "attention" else r.kernel, r.backend


@dataclass
class SummaryCell:
    """One cell of the summary table: the statuses of its cells and, per status, where those cells sit
    (:func:`place`, each place once)."""

    counts: Counter = field(default_factory=Counter)
    places: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, r: ResultRecord) -> None:
        st = cell_status(r)
        self.counts[st] += 1
        where = place(r)
        if where not in self.places[st]:
            self.places[st].append(where)

    @property
    def status(self) -> str:
        return worst(self.counts)

    def where(self, limit: int = 6) -> str:
        """Where the cells of each status worse than ``skip`` sit, worst first, at most ``limit`` places in all:
        ``fault: random b64; zero-accept: spine b8, spine b12`` (``""`` when none failed)."""
        groups, shown = [], 0
        for st in WORST_FIRST[:WORST_FIRST.index("skip")]:
            found = sorted(self.places.get(st, ()), key=lambda x: natural_key((x,)))
            if not found:
                continue
            room = max(limit - shown, 1)
            more = f" +{len(found) - room} more" if len(found) > room else ""
            groups.append(f"{st}: {', '.join(found[:room])}{more}")
            shown += min(len(found), room)
        return "; ".join(groups)


def summary_table(s: "Summary") -> tuple[list[str], list[tuple[tuple[str, str, str], list[SummaryCell | None]]]]:
    """The summary table: ``(arches, rows)``; a row is ``((table, kernel, backend), cells)``, a cell per arch
    (``None`` where none ran). Bounded by kernels x backends x arches: the same size for every profile."""
    arches = sorted({r.arch for r in s.records}, key=arch_key)
    cells: dict[tuple, SummaryCell] = defaultdict(SummaryCell)
    for r in s.records:
        cells[(summary_label(r), r.arch)].add(r)
    keys = sorted({k for k, _ in cells}, key=lambda k: (TABLE_ORDER.index(k[0]) if k[0] in TABLE_ORDER else 9,
                                                        kernel_key(k[1]), k[2]))
    return arches, [(k, [cells.get((k, a)) for a in arches]) for k in keys]


def kernels_with_cells(s: "Summary", tables: tuple[str, ...] = ("matrix", "ddtree")) -> list[str]:
    """The kernel labels with cells in these tables, in registry order."""
    return sorted({r.kernel for r in s.records if table_of(r) in tables}, key=kernel_key)


def kernel_matrix(s: "Summary", kernel: str, failing_only: bool = False
                  ) -> tuple[list[str], list[tuple[tuple, str, list[Counter | None]]]]:
    """One kernel's detail table: ``(columns, rows)``; columns ``backend · arch``, a row ``((budget, topology,
    layout), SGLang mode(s), a Counter of statuses per column)`` over plants and batch sizes (``None`` where
    the column has no such cell). ``failing_only``: only rows with a failure (:data:`FAILED`, ``error``) or a
    known issue's cell (``xfail``, ``xpass``): where the run's failures and known bugs sit."""
    recs = [r for r in s.records if r.kernel == kernel and kernel_run(r)]
    cols = sorted({f"{r.backend} · {r.arch}" for r in recs}, key=lambda c: (arch_key(c.rsplit(" · ", 1)[1]), c))
    cells: dict[tuple, Counter] = defaultdict(Counter)
    modes: dict[tuple, set] = defaultdict(set)
    for r in recs:
        key = (r.budget, r.topology, r.layout)
        cells[(key, f"{r.backend} · {r.arch}")][cell_status(r)] += 1
        modes[key].add(r.mode)
    bad = {*FAILED, "error", "xfail", "xpass"}
    keys = sorted(modes, key=lambda k: (k[0] if k[0] is not None else -1, natural_key(k[1:])))
    rows = [(k, "/".join(sorted(modes[k])), [cells.get((k, c)) for c in cols]) for k in keys]
    if failing_only:
        rows = [row for row in rows if any(c and any(c[b] for b in bad) for c in row[2])]
    return cols, rows


def natural_key(key: tuple) -> list:
    """Sort key reading digit runs as numbers (``bs3-w9-c9`` before ``bs3-w16-c16``)."""
    return [int(t) if t.isdigit() else t for part in key for t in re.split(r"(\d+)", str(part))]


def static_rows(s: Summary) -> tuple[list[str], list[tuple[tuple, list[Counter | None]]]]:
    """The static tier's table: ``(archs, rows)``; a row is ``(backend, kernel, specialization)`` and,
    per compile-target arch, the Counter of statuses (``None`` where not compiled)."""
    recs = [r for r in s.records if r.tier == STATIC]
    archs = sorted({r.arch for r in recs}, key=arch_key)
    cells: dict[tuple, Counter] = {}
    for r in recs:
        cells.setdefault((r.backend, r.kernel, r.case_id, r.arch), Counter())[cell_status(r)] += 1
    keys = sorted({(r.backend, r.kernel, r.case_id) for r in recs}, key=natural_key)
    return archs, [(k, [cells.get((*k, a)) for a in archs]) for k in keys]


def attention_run(r: ResultRecord) -> bool:
    """A cell of a kernel whose record joins the verify-attention table."""
    record = records.get(r.kernel)
    return record is not None and record.table == "attention"


def tiles_of(r: ResultRecord) -> str:
    """A verify-attention cell's tile configuration: ``native`` or ``emulated-sm120``."""
    return r.kernel.partition("@")[2] or "native"


def attention_rows(s: Summary) -> tuple[list[str], list[tuple[tuple, list[Counter | None]]]]:
    """The verify-attention table: ``(tile columns, rows)``; a row is ``(backend · arch, shape)`` and, per
    tile configuration (``native`` first, then the emulated archs), the Counter of statuses over its trees,
    layouts and page sizes (``None`` where none ran)."""
    recs = [r for r in s.records if attention_run(r)]
    tiles = sorted({tiles_of(r) for r in recs}, key=lambda t: (t != "native", natural_key((t,))))
    cells: dict[tuple, Counter] = {}
    for r in recs:
        cells.setdefault((f"{r.backend} · {r.arch}", r.shape, tiles_of(r)), Counter())[cell_status(r)] += 1
    keys = sorted({(f"{r.backend} · {r.arch}", r.shape) for r in recs}, key=natural_key)
    return tiles, [(k, [cells.get((*k, t)) for t in tiles]) for k in keys]


def e2e_rows(s: Summary) -> tuple[list[str], list[tuple[tuple, list[Counter | None]]]]:
    """The e2e tier's table: ``(archs, rows)``; a row is ``(backend, attention backend, case id)`` (the
    server's algorithm, the attention backend it ran on, and its configuration and request phase) and, per
    arch, the Counter of statuses (``None`` where not run)."""
    recs = [r for r in s.records if r.tier == E2E]
    archs = sorted({r.arch for r in recs}, key=arch_key)
    cells: dict[tuple, Counter] = {}
    for r in recs:
        cells.setdefault((r.backend, r.attention, r.case_id, r.arch), Counter())[cell_status(r)] += 1
    keys = list(dict.fromkeys((r.backend, r.attention, r.case_id) for r in recs))
    return archs, [(k, [cells.get((*k, a)) for a in archs]) for k in keys]


MATRIX_HEADER = ["budget", "topology", "layout", "SGLang mode"]
"""The first columns of a kernel's budget x topology x layout table (then one column per ``backend · arch``)."""
DISTRIBUTION_HEADER = ["kernel · backend · arch", "case", "outcome", "statistic", "dof", "p-value", "N", "alpha"]


def distribution_rows(s: Summary) -> list[list[object]]:
    """One row per cell whose ``measured`` holds a law test (a sampling distribution cell: ``statistic``,
    ``p_value``, ``dof``, ``rows``, ``alpha``; header :data:`DISTRIBUTION_HEADER`): the p-value to 3 significant
    digits, ``alpha`` as written (``1e-06``). ``[]`` when no cell measured one."""
    recs = sorted((r for r in s.records if "p_value" in (r.measured or {})),
                  key=lambda r: (kernel_key(r.kernel), r.backend, arch_key(r.arch), natural_key((r.case_id,))))
    return [[f"{r.kernel} · {r.backend} · {r.arch}", r.case_id, r.outcome,
             *(_figure(r.measured, key, fmt) for key, fmt in _MEASURED)] for r in recs]


_MEASURED = (("statistic", ".2f"), ("dof", "g"), ("p_value", ".3g"), ("rows", ","), ("alpha", "g"))
"""The law test's figures in :data:`DISTRIBUTION_HEADER`'s order, each with its format."""


def _figure(measured: dict, key: str, fmt: str) -> str:
    """``measured[key]`` formatted, or ``""`` where the line lacks it (or it is not a number)."""
    value = measured.get(key)
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def replay_command(r: ResultRecord) -> str:
    """The command that replays a failed cell: ``python -m ddtree_compat replay CASE --backend NAME ...``
    (:func:`ddtree_compat.records.replay_cli`), else its pytest cell (e2e, or a kernel label no record replays,
    such as ``verify_tree_greedy@graph``), or ``""`` without a case file or node id."""
    if r.tier == E2E:
        return f"pytest {shlex.quote(r.nodeid)}" if r.nodeid else ""
    if not r.case_path:
        return ""
    cli = records.replay_cli(r.case_path, r.backend, r.kernel, "interpret" if r.tier == "interpret" else None)
    if cli is None:  # a test's own round (a CUDA-graph chain, ...): no record replays it
        return f"pytest {shlex.quote(r.nodeid)} --ddtree-tier {r.tier}" if r.nodeid else ""
    return cli
