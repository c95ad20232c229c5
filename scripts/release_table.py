"""Print, as Markdown, which of a backend's kernels each SGLang release ran: one column per results file.

    python scripts/release_table.py 0.5.22=results/a.jsonl 0.5.23=results/b.jsonl.gz [--backend sglang-triton]

A cell reads ``present: N pass, ...`` when the kernel ran, ``absent`` when the release does not define it
(every place the lookup tried is named under the table), ``not run`` when it is there but could not be
used here (a module it imports is missing: the reason is under the table), ``error`` when the suite's own
adapter failed.
"""

import argparse
import collections

from ddtree_compat.results import load

RAN = ("pass", "wrong", "zero-accept", "fault")


def column(path: str, backend: str) -> tuple[dict, dict]:
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    reason: dict[str, str] = {}
    for record in load([path]).records:
        if record.backend != backend:
            continue
        counts[record.kernel][record.outcome] += 1
        if record.outcome in ("skip", "error"):
            reason.setdefault(record.kernel, record.message)
    return counts, reason


def cell(counts: collections.Counter, reason: str) -> str:
    if not counts:
        return "—"
    if any(counts[o] for o in RAN):
        return "present: " + ", ".join(f"{counts[o]} {o}" for o in (*RAN, "error") if counts[o])
    if counts["error"]:
        return f"error ({counts['error']})"
    state = "absent" if reason.startswith("absent") else "not run"
    return f"{state} ({counts['skip']} skip)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("columns", nargs="+", metavar="RELEASE=RESULTS", help="a column name and its results file")
    parser.add_argument("--backend", default="sglang-triton")
    args = parser.parse_args()
    names, paths = zip(*(c.split("=", 1) for c in args.columns))
    loaded = [column(p, args.backend) for p in paths]
    kernels = list(dict.fromkeys(k for counts, _ in loaded for k in counts))
    print("| kernel | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for kernel in kernels:
        print(f"| `{kernel}` | " + " | ".join(cell(c[kernel], r.get(kernel, "")) for c, r in loaded) + " |")
    print()
    for name, (counts, reason) in zip(names, loaded):
        for kernel in kernels:
            if kernel in reason and not any(counts[kernel][o] for o in RAN):
                print(f"- {name} `{kernel}`: {reason[kernel]}")


if __name__ == "__main__":
    main()
