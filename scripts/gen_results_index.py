"""Write docs/results/README.md, the results archive's index, from the results files themselves.

    python scripts/gen_results_index.py            # rewrite docs/results/README.md
    python scripts/gen_results_index.py --check    # exit 1 if it differs from what the files give (a unit test runs it)
    python scripts/gen_results_index.py --results-dir DIR --out FILE

One row per run: a results file (``.jsonl`` / ``.jsonl.gz`` with ``env`` and ``result`` lines), or several that one
report names on its ``Results:`` line, or a report whose results file was not kept. Each row says the date (from
the file name), the GPU, SGLang and the DDTree implementations (the ``env`` lines), the command, what ran (tiers,
profile and test files of the ``result`` lines), the cells by status (counted as ``report`` counts them: one verdict
per cell, worst first), and links to its report, page, picture and the files named after it (logs, tables,
captures). A field the files do not hold says ``not recorded``: the command, for one, comes from an ``env`` line's
``command`` or, failing that, from a command its report quotes on its ``Results:`` line. Files that belong to no run
are listed at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ddtree_compat.errors import ResultsFileError  # noqa: E402
from ddtree_compat.known_issues import status  # noqa: E402
from ddtree_compat.report.summary import parts  # noqa: E402
from ddtree_compat.results import load  # noqa: E402

RESULTS_DIR = ROOT / "docs" / "results"
NOT_RECORDED = "not recorded"
RESULTS_SUFFIXES = (".jsonl.gz", ".jsonl")
REPORT_TITLES = ("# DDTree compatibility matrix", "# SGLang kernel matrix")
COMMAND_WORDS = ("bash ", "python -m ddtree_compat", "python3 -m ddtree_compat", "pytest ")
DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})-")


def stem_of(name: str) -> str:
    """``2026-12-01-sm90-ddtree.jsonl.gz`` -> ``2026-12-01-sm90-ddtree``."""
    for suffix in RESULTS_SUFFIXES + (".tar.gz", ".log.gz", ".md", ".html", ".png", ".txt", ".log"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name.rsplit(".", 1)[0]


def is_results_name(name: str) -> bool:
    return name.endswith(RESULTS_SUFFIXES)


class Run:
    """One row: the results files of one run (none for a report whose file was not kept), and its report."""

    def __init__(self, stem: str):
        self.stem = stem
        self.files: list[Path] = []
        self.report: Path | None = None
        self.attached: list[Path] = []
        self.results = None  # the loaded files (ddtree_compat.results.Results), read once

    def sort_key(self) -> tuple:
        """By date, then by name with its numbers as numbers (``-run3`` before ``-run10``)."""
        return (self.date, [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", self.stem)])

    @property
    def date(self) -> str:
        m = DATE.match(self.stem)
        return m.group(1) if m else NOT_RECORDED


def report_results_names(text: str) -> list[str]:
    """The results files a report names on its ``Results:`` line (``Results: `a.jsonl.gz, b.jsonl.gz` ...``)."""
    for line in text.splitlines()[:6]:
        if line.startswith("Results: `"):
            named = line[len("Results: `"):].split("`", 1)[0]
            return [n.strip() for n in named.split(",") if n.strip()]
    return []


def report_command(text: str) -> str | None:
    """A command the report quotes on its ``Results:`` line (reports of device runs often say how they ran)."""
    for line in text.splitlines()[:6]:
        if line.startswith("Results: `"):
            for quoted in re.findall(r"`([^`]+)`", line)[1:]:
                if any(w in quoted for w in COMMAND_WORDS):
                    return quoted
    return None


def report_env_table(text: str) -> list[dict]:
    """The rows of a report's environment table (``| env | tier | GPUs | ...``), as header -> value."""
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if line.startswith("| env |"):
            header = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            for row in lines[n + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(header, (c.strip() for c in row.strip("|").split("|")))))
            return rows
    return []


def report_counts(text: str) -> str | None:
    """``18627: 44 skip, 18583 pass`` from the report's ``N cells from K environment(s): ...`` line."""
    m = re.search(r"^(\d+) cells from \d+ environment\(s\): ([^;.\n]+)", text, re.M)
    return f"{m.group(1)}: {m.group(2)}" if m else None


def report_title_scope(text: str) -> str | None:
    """What a report's title says was tested (``verify kernels, ... on sm90`` after the title's colon)."""
    title = text.split("\n", 1)[0]
    return title.split(": ", 1)[1].strip() if ": " in title else None


def is_report(path: Path) -> bool:
    return path.suffix == ".md" and path.read_text(errors="replace").startswith(REPORT_TITLES)


def collect(results_dir: Path, out: Path) -> tuple[list[Run], list[Path]]:
    """Group the folder's files into runs; returns ``(runs, files of no run)``."""
    files = sorted(p for p in results_dir.iterdir() if p.is_file() and not p.name.startswith(".")
                   and p.resolve() != out.resolve())
    loaded: dict[str, object] = {}
    for p in files:
        if is_results_name(p.name):
            try:
                loaded[p.name] = load([p])
            except ResultsFileError:
                pass  # a timeline or other JSON lines, not a results file: attached below
    runs: dict[str, Run] = {}
    owner: dict[str, Run] = {}
    reports = [p for p in files if is_report(p)]
    for report in reports:  # a report that names its results files: one run of them all
        names = [n for n in report_results_names(report.read_text()) if n in loaded]
        if names:
            run = runs.setdefault(stem_of(report.name), Run(stem_of(report.name)))
            run.report = report
            for n in names:
                run.files.append(results_dir / n)
                owner[n] = run
    for name in loaded:
        if name not in owner:
            stem = stem_of(name)
            run = runs.setdefault(stem, Run(stem))
            run.files.append(results_dir / name)
            owner[name] = run
    for report in reports:
        stem = stem_of(report.name)
        if stem in runs:
            runs[stem].report = report
        elif not _attach_by_environment(report, runs, loaded):
            runs[stem] = Run(stem)  # a report whose results file was not kept
            runs[stem].report = report
    placed = {p.name for run in runs.values() for p in run.files + ([run.report] if run.report else [])}
    stems = sorted(runs, key=len, reverse=True)
    loose = []
    for p in files:
        if p.name in placed:
            continue
        stem = next((s for s in stems if p.name.startswith(s + "-") or p.name.startswith(s + ".")), None)
        if stem is None:
            loose.append(p)
        else:
            runs[stem].attached.append(p)
    for run in runs.values():
        if len(run.files) == 1:
            run.results = loaded[run.files[0].name]
        elif run.files:
            run.results = load(run.files)
    return sorted(runs.values(), key=Run.sort_key), loose


def _attach_by_environment(report: Path, runs: dict[str, Run], loaded: dict) -> bool:
    """A report of older form (no ``Results:`` line) named after none of the files: the report of the runs whose
    stems start with its own and whose every ``env_id`` its environment table lists."""
    stem = stem_of(report.name)
    env_ids = {row.get("env") for row in report_env_table(report.read_text())}
    matches = [run for s, run in runs.items() if s.startswith(stem + "-") and run.report is None and run.files
               and all(set(loaded[f.name].envs) <= env_ids for f in run.files)]
    if not matches:
        return False
    merged = Run(stem)
    merged.report = report
    for run in matches:
        merged.files += run.files
        del runs[run.stem]
    runs[stem] = merged
    return True


def _gpus(envs: list[dict]) -> str:
    names = Counter()
    for env in envs:
        seen = {(g.get("index"), g.get("name"), g.get("fake")) for g in env.get("gpus") or []}
        for _, name, fake in seen:
            label = (name or "?").removeprefix("NVIDIA ")
            names[label + (" (fake)" if fake else "")] = max(names[label], len(seen))
    if not names:
        return "none (CPU)"
    archs = sorted({g.get("arch") for env in envs for g in env.get("gpus") or [] if g.get("arch")})
    return ", ".join(sorted(names)) + (f" ({', '.join(archs)})" if archs else "")


def _software(envs: list[dict], records=()) -> str:
    """``sglang 0.5.23; rancy-ddtree-v2 433c58ed``: the ``env`` lines' versions and DDTree implementations (an e2e file
    written before ``env`` named them: the implementation its servers' backends name, ``sglang-ddtree@NAME``)."""
    sglang = sorted({str(e["sglang"]) for e in envs if e.get("sglang")})
    impls = []
    for env in envs:
        for backend, impl in sorted((env.get("implementations") or {}).items()):
            name = impl.get("name") or backend
            commit = (impl.get("commit") or "")[:8]
            label = name if not commit or commit in name else f"{name} {commit}"
            if label not in impls:
                impls.append(label)
    if not impls:
        impls = sorted({r.backend.split("@", 1)[1] for r in records if "@" in r.backend})
    bits = []
    if sglang:
        bits.append("sglang " + ", ".join(sglang))
    if impls:
        bits.append(", ".join(impls))
    return "; ".join(bits) or NOT_RECORDED


def _ran(records) -> str:
    """``device · test_commit, test_verify``: the tiers and test files of the cells (``replay`` for the envelope's
    probes, whose node id is their replay command)."""
    tiers = sorted({r.tier for r in records})
    tests = set()
    for r in records:
        path = (r.nodeid or "").split("::")[0]
        if path.endswith(".py"):
            tests.add(path.rsplit("/", 1)[-1].removesuffix(".py"))
        elif path:
            tests.add("replay")
    return " · ".join([", ".join(tiers), ", ".join(sorted(tests))]) if tests else ", ".join(tiers)


def link(path: Path, out: Path, text: str) -> str:
    """A Markdown link to ``path`` from the index's folder."""
    rel = Path(os.path.relpath(path.resolve(), out.parent.resolve()))
    return f"[{text}]({rel.as_posix()})"


def row(run: Run, out: Path) -> str:
    report_text = run.report.read_text(errors="replace") if run.report else ""
    files = [link(p, out, p.name) for p in run.files] or ["results file not kept"]
    if run.files:
        results = run.results
        envs = list(results.envs.values())
        profiles = sorted({str(e.get("profile")) for e in envs if e.get("profile")})
        ran = _ran(results.records) + (f" · profile {', '.join(profiles)}" if profiles else "")
        counts = Counter(status(r.outcome, r.known_issue) for r in results.records)
        cells = f"{len(results.records)}: {parts(counts)}"
        if results.partial:
            cells += f" (partial: {results.done} of {results.planned})"
        gpu, software = _gpus(envs), _software(envs, results.records)
        command = next((e["command"] for e in envs if e.get("command")), None)
    else:
        table = report_env_table(report_text)
        ran = report_title_scope(report_text) or NOT_RECORDED
        cells = report_counts(report_text) or NOT_RECORDED
        gpu = ", ".join(sorted({re.sub(r", cc [\d.]+\)", ")", r.get("GPUs", "").removeprefix("NVIDIA "))
                                for r in table} - {""})) or NOT_RECORDED
        software = ", ".join(sorted({"sglang " + r["sglang"] for r in table if r.get("sglang")})) or NOT_RECORDED
        command = None
    command = command or report_command(report_text)
    more = []
    if run.report:
        more.append(link(run.report, out, "report"))
    for p in sorted(run.attached):
        text = p.name[len(run.stem):].lstrip("-.") or p.name
        more.append(link(p, out, {"html": "page", "png": "picture"}.get(text, text)))
    cmd = f"`{command}`" if command else NOT_RECORDED
    cols = [run.date, "<br>".join(files), gpu, software, cmd, ran, cells, " · ".join(more) or "-"]
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cols) + " |"


def render(results_dir: Path, out: Path) -> str:
    runs, loose = collect(results_dir, out)
    lines = [
        "# Results archive",
        "",
        "<!-- generated by scripts/gen_results_index.py from the files in this folder: do not edit; rerun it -->",
        "",
        "Every run kept here, one row each, read from its results files (`env` and `result` lines) and its report. "
        "Cells are counted as `python -m ddtree_compat report` counts them: one verdict per cell, worst first "
        "(`xfail` / `xpass`: a known issue covers the cell). What the runs found: [findings](../findings.md); how to "
        "read a report: [results](../results.md).",
        "",
        "| date | results | GPU | SGLang · DDTree implementations | command | ran (tier · tests · profile) | cells "
        "| report and files |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [row(run, out) for run in runs]
    if loose:
        lines += ["", "Files of no run above (write-ups, logs and timelines whose results file was not kept): "
                  + ", ".join(link(p, out, p.name) for p in loose) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--out", type=Path, default=None, help="default: README.md in --results-dir")
    parser.add_argument("--check", action="store_true", help="exit 1 if --out differs from what it would be")
    args = parser.parse_args(argv)
    out = args.out or args.results_dir / "README.md"
    text = render(args.results_dir, out)
    if args.check:
        if not out.is_file() or out.read_text() != text:
            print(f"{out} is out of date: run python scripts/gen_results_index.py", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
