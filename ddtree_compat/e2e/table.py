"""The DDTree sweep as one table: per configuration and phase, the accept length expected in advance and, per
implementation (a column each), the accept length measured, the client throughput and the verdict.

Reads the e2e tier's result lines (tier ``e2e``; ``.jsonl`` or ``.jsonl.gz``, several files at once: one per
implementation). The implementation is the part of the backend after ``@`` (``sglang-ddtree@rancy-ddtree-v2``,
:mod:`ddtree_compat.identity`); the expectation comes from the configuration's construction
(:func:`.configs.expected_accept` over every profile's plan), not from the results; the measured figures
are those the judge printed in the verdict message (``log X`` is the ``Decode batch`` lines' mean accept
length over the phase, ``N tok/s`` the client throughput).

    python -m ddtree_compat.e2e.table docs/results/2026-12-01-sm90-e2e-ddtree.jsonl.gz -o table.md
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ..results import load
from ..tiers import E2E
from .configs import FIXED_PROFILES, expected_accept, is_target_only, plan

_LOG = re.compile(r"log ([0-9.]+|n/a) over")
_META = re.compile(r"meta_info accept length ([0-9.]+|n/a)")
_TPS = re.compile(r"([0-9.]+) tok/s")
_OUTCOME_MARK = {"pass": "pass", "wrong": "**wrong**", "zero-accept": "**zero-accept**", "fault": "**fault**",
                 "skip": "skip"}


def _configs() -> dict:
    out = {}
    for p in FIXED_PROFILES:
        for c in plan(p):
            out.setdefault(c.id, c)
            out.setdefault(c.shape_id, c)  # results recorded before the attention backend was part of the id
    return out


_EXCEPTION = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception)\b.*)$", re.M)


def _cause(message: str, excerpt: str = "") -> str:
    """A short cause for a failed cell: the exception that ended the server log's traceback if there is one
    (a server that died at start), else the first clause of the verdict message."""
    found = _EXCEPTION.findall(excerpt or "")
    if found:
        return ("died before ready: " if "before it was ready" in message else "") + found[-1].strip()[:140]
    return message.split(". [", 1)[0].split("; ", 1)[0][:140]


def rows(paths: list[str | Path]) -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` of the table for the e2e result lines in ``paths``."""
    configs = _configs()
    cells: dict[tuple[str, str], dict[str, object]] = {}
    impls: list[str] = []
    order: list[tuple[str, str]] = []
    for path in paths:
        for r in load([path]).records:
            if r.tier != E2E or is_target_only(r.backend):
                continue
            impl = r.backend.split("@", 1)[1] if "@" in r.backend else "(unnamed)"
            if impl not in impls:
                impls.append(impl)
            phase = r.case_id.rsplit("-", 1)[1]
            key = (r.case_id[: -len(phase) - 1], phase)
            if key not in cells:
                order.append(key)
            cells.setdefault(key, {})[impl] = r
    header = ["configuration", "phase", "B", "block", "mode", "graphs", "draft", "expected"]
    for impl in impls:
        header += [f"{impl}: measured (log / meta_info)", f"{impl}: tok/s", f"{impl}: verdict"]
    out = []
    for cid, phase in order:
        c = configs.get(cid)
        exp = f"{expected_accept(c):.2f}" if c is not None else "?"
        row = [cid, phase, str(c.budget if c is not None and c.budget is not None else
                               (c.draft_tokens - 1 if c is not None and c.draft_tokens else "")),
               str(c.block_size or "") if c is not None else "", (c.mode or "linear") if c is not None else "",
               ("on" if c.cuda_graph else "off") if c is not None else "", c.draft.agree.name if c is not None and c.draft else "",
               exp]
        for impl in impls:
            r = cells[(cid, phase)].get(impl)
            if r is None:
                row += ["", "", ""]
                continue
            log, meta, tps = _LOG.search(r.message), _META.search(r.message), _TPS.search(r.message)
            measured = f"{log.group(1) if log else 'n/a'} / {meta.group(1) if meta else 'n/a'}" if (log or meta) else "-"
            verdict = _OUTCOME_MARK.get(r.outcome, r.outcome)
            if r.outcome != "pass":
                verdict += f" ({r.fault_class})" if r.fault_class else ""
                verdict += f": {_cause(r.message, r.log_excerpt)}"
            row += [measured, tps.group(1) if tps else "-", verdict.replace("|", "/")]
        out.append(row)
    return header, out


def markdown(paths: list[str | Path]) -> str:
    header, body = rows(paths)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ddtree_compat.e2e.table", description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="e2e result files (.jsonl or .jsonl.gz), one per implementation")
    ap.add_argument("-o", "--output", help="write the Markdown table here (default: stdout)")
    args = ap.parse_args(argv)
    text = markdown(args.results)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
