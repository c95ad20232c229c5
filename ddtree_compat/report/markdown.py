"""Markdown report (fit for a CI step summary): at a glance, then the rest collapsed.

Visible: the title (what was tested), the results file(s) it comes from, what a reader must know first (a
partial run, torn lines), what was not tested and why, a line of totals, the summary picture (when its file name is given), the summary table (rows:
kernel · backend; columns: arch; a cell ``✅ 1145`` when all passed, else each status's count worst first and
where the failing cells sit: ``❌ 16 zero-accept, 1129 pass · zero-accept: spine b8, spine b12``), the failures and
the known issues. Collapsed (``<details>``): environment, counts per ``backend · arch`` column, skips by
reason, faults by class, the static tier's specializations that did not pass on every arch, verify
attention by shape and tile choice, the e2e tier, the distribution cells' law tests (statistic, dof, p-value, N,
alpha; only when a cell measured one), and per kernel its budget x topology x layout rows with failures or
known issues.
A line under the summary table says what each mark means (:data:`LEGEND`); the last line points to the glossary
(:data:`~.coverage.FOOTER`).

The size does not grow with the profile beyond the collapsed tables' rows (each at most
``max_rows``).
"""

from __future__ import annotations

from collections import Counter

from ..outcomes import WORST_FIRST
from ..results import Results
from .coverage import FOOTER, GLOSSARY, device_only_split, not_tested, notices, repairs, report_title, sources
from .deployment import (CONCURRENCY_HEADER, CONCURRENCY_TITLE, ENVELOPE_HEADER, ENVELOPE_TITLE, concurrency_rows,
                         envelope_rows)
from .summary import (DISTRIBUTION_HEADER, ENV_HEADER, FAILED, KNOWN_HEADER, MATRIX_HEADER, Summary, SummaryCell,
                      attention_rows, count_header, count_rows, distribution_rows, e2e_rows, env_rows, kernel_matrix,
                      kernels_with_cells, known_rows, parts, replay_command, static_rows, summarize, summary_table)



LEGEND = ("✅ all passed · ⚠ no failure, but some cells skipped (their reasons: *Skips by reason*) · ⏭ all skipped "
          "· ❌ a wrong answer, fault or error · 🔶 only failures a known issue expects · ⭐ a pass a known issue did "
          "not expect · empty: no cell of that kernel and backend on that arch · a `matrix` row ran its kernel, on a "
          "GPU (its arch's column) or in Triton's interpreter (`interpret`); a `static` row compiled it for each arch, "
          "on any host")


def _mark(counts: Counter) -> str:
    total = sum(counts.values())
    if counts["pass"] == total:
        return "✅"
    if counts["skip"] == total:
        return "⏭"
    if any(counts[o] for o in (*FAILED, "error")):
        return "❌"
    if counts["xpass"]:
        return "⭐"
    if counts["xfail"]:
        return "🔶"
    return "⚠"


def _cell(counts: Counter) -> str:
    total = sum(counts.values())
    if counts["pass"] == total:
        return f"✅ {total}"
    if counts["skip"] == total:
        return f"⏭ {total} skip"
    return f"{_mark(counts)} {parts(counts)}"


def summary_cell(cell: SummaryCell | None) -> str:
    """A summary-table cell: :func:`_cell` plus where the worst status's cells sit."""
    if cell is None:
        return ""
    where = cell.where()
    return _cell(cell.counts) + (f" · {where}" if where else "")


def _table(header: list[str], rows: list[list[object]], max_rows: int | None = None) -> list[str]:
    shown = rows if max_rows is None else rows[:max_rows]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in shown]
    if len(shown) < len(rows):
        out.append(f"| ... {len(rows) - len(shown)} more rows | " + " | " * (len(header) - 1))
    return out + [""]


def _details(title: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{title}</summary>", "", *body, "</details>", ""] if body else []


def _known_section(s: Summary) -> list[str]:
    rows = [[*row[:-1], f"[source]({row[-1]})" if row[-1] else ""] for row in known_rows(s)]
    if not rows:
        return []
    return ["## Known issues (xfail: failed as the manifest expects; xpass of a strict entry: fixed, narrow or remove "
            "it; of a non-strict one: this draw or build missed the bug)", ""] + _table(KNOWN_HEADER, rows)


def _totals(s: Summary) -> str:
    statuses = s.total("statuses")
    rerun = (f"; {s.results.superseded} older verdict(s) of re-run cells left out (the latest counts)"
             if s.results.superseded else "")
    return f"{len(s.records)} cells from {len(s.results.envs)} environment(s): {parts(statuses)}{rerun}."


def _rest(s: Summary, max_rows: int) -> list[str]:
    """The collapsed sections."""
    lines = _details("Environment", _table(ENV_HEADER, env_rows(s.results)))
    lines += _details("Counts by backend · arch", _table(count_header(s), count_rows(s)))
    if s.skips:
        lines += _details("Skips by reason", _table(["backend · arch", "reason", "cells"],
                                                     [[c, m, n] for (c, m), n in sorted(s.skips.items())], max_rows))
    if s.faults:
        lines += _details("Faults by class", _table(["backend · arch", "class", "cells"],
                                                     [[c, f, n] for (c, f), n in sorted(s.faults.items())], max_rows))
    archs, static = static_rows(s)
    unfit = [(key, cells) for key, cells in static if any(c and c["pass"] != sum(c.values()) for c in cells)]
    if unfit:
        kinds = ", ".join(k for k in WORST_FIRST
                          if k != "pass" and any(c and c[k] for _, cells in unfit for c in cells))
        lines += _details(f"Static tier: the {len(unfit)} of {len(static)} specializations that did not pass on "
                          f"every arch ({kinds} on some or all; AOT compile: resources and SASS)",
                          _table(["backend", "kernel", "specialization", *archs],
                                 [[*key, *(_cell(c) if c else "" for c in cells)] for key, cells in unfit], max_rows))
    tiles, attention = attention_rows(s)
    if attention:
        lines += _details("Verify attention: shape x tile choice (`emulated-<arch>`: that arch's choice run on this "
                          "target; cells aggregate trees, layouts and page sizes)",
                          _table(["backend · arch", "shape", *tiles],
                                 [[*key, *(_cell(c) if c else "" for c in cells)] for key, cells in attention], max_rows))
    archs, e2e = e2e_rows(s)
    if e2e:
        lines += _details("End to end (a real SGLang server per configuration; rows: server x request phase)",
                          _table(["backend", "attention", "configuration-phase", *archs],
                                 [[*key, *(_cell(c) if c else "" for c in cells)] for key, cells in e2e], max_rows))
    law = distribution_rows(s)
    if law:
        lines += _details(f"Distribution cells ({len(law)}: the law test of N rows; wrong when the p-value is below alpha)",
                          _table(DISTRIBUTION_HEADER, law, max_rows))
    for kernel in kernels_with_cells(s):
        cols, rows = kernel_matrix(s, kernel, failing_only=True)
        if rows:
            lines += _details(f"{kernel}: its {len(rows)} budget x topology x layout row(s) with failures or known "
                              "issues (xfail, xpass)",
                              _table([*MATRIX_HEADER, *cols],
                                     [[*key, mode, *(_cell(c) if c else "" for c in cells)] for key, mode, cells in rows],
                                     max_rows))
    return lines


def _top(s: Summary) -> list[str]:
    """The lines under the title: the results file(s), notices (a partial run, torn lines), what was not tested."""
    lines = [f"Results: `{sources(s.results)}`", ""] if s.results.sources else []
    notes = [f"- ⚠ **{n}**" for n in notices(s.results)] + [f"- {n}" for n in repairs(s.results)]
    if notes:
        lines += [*notes, ""]
    missing = not_tested(s)
    if missing:
        lines += ["**Not tested:**", "", *(f"- {line}" for line in missing), ""]
    return lines


def render_markdown(results: Results, title: str | None = None, max_failures: int = 40,
                    picture: str | None = None, max_rows: int = 200, envelope_picture: str | None = None) -> str:
    """Render ``results`` (one or several merged files) as one Markdown document; ``title``: default, what was
    tested (:func:`~.coverage.report_title`); ``picture``: the summary picture's path as the document links it
    (``None``: no picture); ``max_rows`` bounds each collapsed table."""
    s = summarize(results)
    lines = [f"# {title or report_title(s)}", "", *_top(s), _totals(s), ""]
    if picture:
        lines += [f"![summary picture: worst outcome per budget x topology, by arch, kernel and backend]({picture})", ""]
    archs, rows = summary_table(s)
    lines += ["## Summary (rows: kernel · backend; columns: arch; after `·`: where the failing cells sit)", ""]
    lines += _table(["table", "kernel", "backend", *archs], [[*key, *map(summary_cell, cells)] for key, cells in rows])
    lines += [LEGEND, ""]
    envelope = envelope_rows(s)
    if envelope:
        lines += [f"## {ENVELOPE_TITLE}", ""]
        lines += _table(ENVELOPE_HEADER, envelope, max_rows)
        if envelope_picture:
            lines += ["", f"![envelope: largest batch verified per kernel and shape]({envelope_picture})"]
        lines.append("")
    elif any(r.kernel.endswith("@scale") for r in s.records):
        scale = [r for r in s.records if r.kernel.endswith("@scale")]
        gpu = any(e.get("gpus") for e in s.results.envs.values())
        lines += ["## Envelope (deployment shapes)", "", f"No deployment-shape cell ran here: all {len(scale)} skipped "
                  f"({device_only_split(scale, gpu)}; each reason under Skips by reason), so no envelope.", ""]
    concurrency = concurrency_rows(s)
    if concurrency:
        lines += [f"## {CONCURRENCY_TITLE}", ""]
        lines += _table(CONCURRENCY_HEADER, concurrency, max_rows)
    lines += [f"## Failures ({len(s.failures)})", ""]
    for r in s.failures[:max_failures]:
        replay = f"`{replay_command(r)}`" if r.case_path else ""
        lines.append(f"- **{r.outcome}** `{r.nodeid or r.case_id}` ({r.backend} · {r.arch}): {r.message[:400]} {replay}")
        if r.log_excerpt:  # e2e: the server log around the fault
            lines += ["", "  ```", *("  " + ln for ln in r.log_excerpt.splitlines()[:20]), "  ```"]
    if len(s.failures) > max_failures:
        lines.append(f"- ... and {len(s.failures) - max_failures} more")
    if not s.failures:
        lines.append("None" + (" beyond known issues." if s.known else "."))
    if s.xpassed:
        lines += ["", f"{len(s.xpassed)} cell(s) passed although a strict known issue covers them (XPASS(strict)): "
                      "the kernel looks fixed; narrow or remove the entry."]
    lines.append("")
    lines += _known_section(s)
    lines += _rest(s, max_rows)
    lines += ["---", "", FOOTER.replace(GLOSSARY, f"`{GLOSSARY}`")]
    return "\n".join(lines) + "\n"
