"""Command line: ``python -m ddtree_compat {sweep,report,replay,cases}``.

* ``sweep``: the main job. Runs the kernel tests (``tests/kernels``) on the tier(s) this host has (device
  when a GPU is visible, else the CPU interpreter), each tier in its own pytest process, appending to a
  dated results file, then writes the Markdown report beside it. The static tier (AOT compiles for
  every arch) runs once, in the first tier's process.
* ``report RESULTS...``: render results files (merged) as Markdown.
* ``replay CASE.json --backend NAME``: run one case in this process and print the verdict.
* ``cases``: list (or write as JSON) the grid of a profile.

Bad input (unknown backend, arch, tier or profile; malformed case or results file) prints one line
and exits 2.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from .errors import DDTreeInputError

EXIT_USAGE = 2


def _default_tests_dir() -> Path:
    here = Path(__file__).resolve().parent.parent / "tests" / "kernels"
    return here if here.is_dir() else Path("tests/kernels")


def cmd_sweep(args: argparse.Namespace) -> int:
    from .arch import detect_gpus
    from .cases import check_profile
    from .tiers import TIERS, resolve_tier

    gpus = detect_gpus()
    check_profile(args.profile)
    tiers = list(TIERS) if args.tier == "all" else [resolve_tier(args.tier, gpus)]
    if "device" in tiers and not gpus:
        if args.tier == "all":
            tiers.remove("device")
        else:
            raise DDTreeInputError("--tier", "device", "interpret, auto or all on a host without a GPU", "no GPU")
    tests = Path(args.tests)
    if not tests.exists():
        raise DDTreeInputError("--tests", str(tests), "the suite's tests/kernels directory", "not found")
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    arch = "-".join(sorted({g.arch for g in gpus})) or "cpu"
    stem = args.name or f"{time.strftime('%Y-%m-%d')}-{arch}-{args.profile}"
    results = out_dir / f"{stem}.jsonl"
    if results.exists() and not args.append:
        results.unlink()
    worst = 0
    for n, tier in enumerate(tiers):
        workers = args.workers or (str(max(1, len(gpus))) if tier == "device" else "auto")
        cmd = [sys.executable, "-m", "pytest", str(tests), "-q", "-p", "no:cacheprovider",
               f"--ddtree-tier={tier}", f"--ddtree-profile={args.profile}", f"--ddtree-results={results}",
               f"--ddtree-cases-dir={out_dir / (stem + '-cases')}", "-n", workers, *args.pytest_args]
        if n:  # static cells do not depend on the tier: the first tier's process runs them once
            cmd.append("--ddtree-static=off")
        for b in args.backend or []:
            cmd.append(f"--ddtree-backend={b}")
        print("+", " ".join(cmd), flush=True)
        start = time.time()
        rc = subprocess.call(cmd)
        print(f"tier {tier}: pytest exit {rc} in {time.time() - start:.1f}s", flush=True)
        worst = max(worst, rc)
    if results.exists():
        report = results.with_suffix(".md")
        _write_report([str(results)], str(report))
        print(f"results: {results}\nreport:  {report}")
    return worst


def _write_report(paths: list[str], out: str | None) -> None:
    from .report import render_markdown
    from .results import load

    text = render_markdown(load(paths))
    if out:
        Path(out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


def cmd_report(args: argparse.Namespace) -> int:
    _write_report(args.results, args.output)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from .arch import detect_gpus
    from .cases import VerifyCase
    from .tiers import enable_interpreter, resolve_tier, targets_for

    gpus = detect_gpus()
    tier = resolve_tier(args.tier, gpus)
    if tier == "interpret":
        enable_interpreter()
    from . import backends
    from .harness import run_verify

    case = VerifyCase.load(args.case)
    (backend,) = backends.resolve([args.backend])
    targets = targets_for(tier, gpus)
    if not targets:
        raise DDTreeInputError("--tier", tier, "interpret on a host without a GPU", "no GPU")
    target = targets[args.gpu] if tier == "device" else targets[0]
    reason = backend.unavailable_reason(target)
    if reason:
        print(f"skip: {backend.name} on {target.id}: {reason}")
        return 0 if args.allow_skip else 3
    verdict = run_verify(case, backend, target)
    print(f"{verdict.outcome}: {backend.name} on {target.id}, case {case.id}, "
          f"accepted expected {verdict.accepted_expected} got {verdict.accepted_got}"
          + (f"\n{verdict.message}" if verdict.message else ""))
    return 0 if verdict.outcome == "pass" else 1


def cmd_cases(args: argparse.Namespace) -> int:
    from .cases import grid

    cases = grid(args.profile)
    for c in cases:
        line = c.id
        if args.write:
            line += f"  {c.save(args.write)}"
        print(line)
    print(f"{len(cases)} cases in profile {args.profile}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ddtree_compat", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("sweep", help="run the kernel sweep on this host's tiers and write results + report")
    s.add_argument("--tier", default="auto", choices=["auto", "interpret", "device", "all"])
    s.add_argument("--profile", default=os.environ.get("DDTREE_PROFILE", "default"))
    s.add_argument("--backend", action="append", help="backend name or module:object (repeatable)")
    s.add_argument("--out-dir", default="results", help="directory for results JSONL and report (default results/)")
    s.add_argument("--name", help="file stem (default DATE-ARCH-PROFILE)")
    s.add_argument("--append", action="store_true", help="append to an existing results file")
    s.add_argument("--tests", default=str(_default_tests_dir()), help="kernel tests directory")
    s.add_argument("-n", "--workers", help="xdist workers (default: one per GPU on device, auto on interpret)")
    s.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    s.set_defaults(func=cmd_sweep)

    r = sub.add_parser("report", help="render results JSONL files as a Markdown matrix")
    r.add_argument("results", nargs="+")
    r.add_argument("-o", "--output", help="write here instead of stdout")
    r.set_defaults(func=cmd_report)

    y = sub.add_parser("replay", help="run one case JSON through one backend in this process")
    y.add_argument("case")
    y.add_argument("--backend", required=True)
    y.add_argument("--tier", default="auto", choices=["auto", "interpret", "device"])
    y.add_argument("--gpu", type=int, default=0, help="GPU index on the device tier")
    y.add_argument("--allow-skip", action="store_true", help="exit 0 when the backend is unavailable")
    y.set_defaults(func=cmd_replay)

    c = sub.add_parser("cases", help="list the grid of a profile (optionally write each case as JSON)")
    c.add_argument("--profile", default="default")
    c.add_argument("--write", metavar="DIR")
    c.set_defaults(func=cmd_cases)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except DDTreeInputError as e:
        print(f"ddtree_compat {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
