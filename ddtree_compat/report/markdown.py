"""Markdown report (fit for a CI step summary): environment, counts, skips by reason, faults by class,
known issues, the matrix, failures.

Matrix rows are ``budget x topology x layout`` (``exact``, or ``cap16``: buffers padded to capacity 16);
columns ``backend x arch`` (``interpret`` for the CPU interpreter). A cell aggregates its plants and
batch sizes: ``✅ 15`` when all 15 passed, otherwise the count of each status, worst first; ``🔶``
marks failures a known issue expects (xfail), ``⭐`` passes a known issue did not expect (xpass).
"""

from __future__ import annotations

from collections import Counter

from ..results import Results
from .summary import (count_header, ENV_HEADER, FAILED, KNOWN_HEADER, Summary, attention_rows, count_rows, e2e_rows,
                      env_rows, known_rows, matrix_columns, matrix_rows, parts, replay_command, static_rows, summarize)


def _cell(counts: Counter) -> str:
    total = sum(counts.values())
    if counts["pass"] == total:
        return f"✅ {total}"
    if counts["skip"] == total:
        return "⏭ skip"
    if any(counts[o] for o in FAILED):
        mark = "❌"
    elif counts["xpass"]:
        mark = "⭐"
    elif counts["xfail"]:
        mark = "🔶"
    else:
        mark = "⚠"
    return f"{mark} {parts(counts)}"


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out + [""]


def _known_section(s: Summary) -> list[str]:
    rows = [[*row[:-1], f"[source]({row[-1]})" if row[-1] else ""] for row in known_rows(s)]
    if not rows:
        return []
    return ["## Known issues (strict xfail; xpass = fixed, update the manifest)", ""] + _table(KNOWN_HEADER, rows)


def render_markdown(results: Results, title: str = "DDTree compatibility matrix", max_failures: int = 40) -> str:
    """Render ``results`` (one or several merged files) as one Markdown document."""
    s = summarize(results)
    lines = [f"# {title}", "", "## Environment", ""]
    lines += _table(ENV_HEADER, env_rows(results))
    lines += ["## Counts", ""]
    lines += _table(count_header(s), count_rows(s))
    if s.skips:
        lines += ["## Skips by reason", ""]
        lines += _table(["backend · arch", "reason", "cells"], [[c, m, n] for (c, m), n in sorted(s.skips.items())])
    if s.faults:
        lines += ["## Faults by class", ""]
        lines += _table(["backend · arch", "class", "cells"], [[c, f, n] for (c, f), n in sorted(s.faults.items())])
    lines += _known_section(s)

    rows = [[*key, mode, *(_cell(c) if c else "" for c in cells)] for key, mode, cells in matrix_rows(s)]
    if rows:
        lines += ["## Matrix (rows: budget x topology; cells aggregate plants and batch sizes)", ""]
        lines += _table(["budget", "topology", "layout", "SGLang mode", *matrix_columns(s)], rows)
    archs, static = static_rows(s)
    if static:
        lines += ["## Static tier (AOT compile per arch: resources and SASS; rows: backend x kernel x "
                  "specialization)", ""]
        lines += _table(["backend", "kernel", "specialization", *archs],
                        [[*key, *(_cell(c) if c else "" for c in cells)] for key, cells in static])
    tiles, attention = attention_rows(s)
    if attention:
        lines += ["## Verify attention (rows: backend · arch x shape; columns: tile choice, `emulated-<arch>` = that "
                  "arch's choice run on this target; cells aggregate trees, layouts and page sizes)", ""]
        lines += _table(["backend · arch", "shape", *tiles],
                        [[*key, *(_cell(c) if c else "" for c in cells)] for key, cells in attention])
    archs, e2e = e2e_rows(s)
    if e2e:
        lines += ["## End to end (a real SGLang server per configuration; rows: server x request phase)", ""]
        lines += _table(["backend", "configuration-phase", *archs],
                        [[*key, *(_cell(c) if c else "" for c in cells)] for key, cells in e2e])
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
    return "\n".join(lines) + "\n"
