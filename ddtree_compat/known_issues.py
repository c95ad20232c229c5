"""The known-issues manifest: expected failures, keyed by arch, backend, budget and topology.

The manifest is TOML (read with :mod:`tomllib`), a list of ``[[issue]]`` tables; the shipped one is
``ddtree_compat/known_issues.toml`` (``--ddtree-known-issues PATH`` picks another, ``''`` none). Keys:

* ``id`` (required): unique, ``[a-z0-9-]+``; recorded as ``known_issue`` on each matching result.
* ``arch``: arch names (``sm120``), families (``blackwell-rtx``) or ``interpret``; exact, never ``>=``.
* ``backend``: backend names or :mod:`fnmatch` globs (``sglang-*``).
* ``budget``: budgets, integers ``>= 0``.
* ``topology``: topology names or globs (``bf-*``; DDTree cells: ``ddtree-<logits>``).
* ``kernel``: kernel names or globs (``ddtree_follow``, ``ddtree_*``); default: the verify grid's and the
  DDTree kernels' cells (the kernels whose records the manifest keys).
* ``layout``: the cells' layout names or globs (``cap16``, ``worker-prune``).
* ``batch_min``: the smallest batch the entry covers (an integer >= 1).
* ``strict``: ``true`` (default): a matching cell that passes fails the run (XPASS(strict)), so a fixed
  kernel prompts removing the entry; ``false`` for a third-party implementation's finding whose cells
  fail only on some draws (a pass is XPASS, reported, not a failure).
* ``reason`` (required): what fails and how it shows.
* ``source`` (required): an ``http(s)://`` link to the report or tracking issue.
* ``sources``: a table ``{backend glob = link}``: where one entry covers several builds whose code sits at
  different links (two commits of a DDTree branch), a cell's link is its backend's first match, else ``source``.

A missing ``arch``/``backend``/``budget``/``topology`` matches anything. The plugin marks each matching
cell ``xfail(strict=True)``: a failure is XFAIL, a pass is XPASS(strict), a failing test that says the
entry is stale.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from .arch import FAMILIES, family, parse_arch
from .errors import ArchError, KnownIssuesError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

SHIPPED = Path(__file__).with_name("known_issues.toml")
KEYS = ("id", "arch", "backend", "budget", "topology", "kernel", "layout", "batch_min", "strict", "reason", "source",
        "sources")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
DDTREE_TOPOLOGIES = ("ddtree-peaked", "ddtree-flat", "ddtree-ties")
"""The DDTree cells' topologies (:class:`ddtree_compat.families.ddtree.records.DDTreeCase` coordinates)."""


@dataclass(frozen=True)
class KnownIssue:
    """One manifest entry. Empty tuples match anything."""

    id: str
    reason: str
    source: str
    arch: tuple[str, ...] = ()
    backend: tuple[str, ...] = ()
    budget: tuple[int, ...] = ()
    topology: tuple[str, ...] = ()
    kernel: tuple[str, ...] = ()
    layout: tuple[str, ...] = ()
    batch_min: int = 0
    strict: bool = True
    sources: tuple[tuple[str, str], ...] = ()  # (backend glob, link), first match wins over ``source``

    def matches(self, arch: str, backend: str, budget: int, topology: str, kernel: str = "", layout: str = "",
                batch: int = 1) -> bool:
        """Whether a cell (``arch`` as in the results: ``sm90`` or ``interpret``) is covered."""
        arch_ok = not self.arch or arch in self.arch or (arch != "interpret" and family(arch) in self.arch)

        def globs(patterns, value):
            return not patterns or any(fnmatchcase(value or "", p) for p in patterns)

        return (arch_ok and globs(self.backend, backend) and (not self.budget or budget in self.budget)
                and globs(self.topology, topology) and globs(self.kernel, kernel) and globs(self.layout, layout)
                and batch >= self.batch_min)

    def source_for(self, backend: str = "") -> str:
        """The link for ``backend``'s cells: its first ``sources`` match, else ``source``."""
        return source_for(self.source, dict(self.sources), backend)

    def describe(self, backend: str = "") -> str:
        """The xfail reason of ``backend``'s cells: ``known issue <id>: <reason> (<its link>)``."""
        return f"known issue {self.id}: {self.reason} ({self.source_for(backend)})"


def source_for(source: str, sources: dict[str, str], backend: str) -> str:
    """``sources``' link for the first glob ``backend`` matches, else ``source`` (a report reads both from the
    results' ``env`` line)."""
    return next((link for glob, link in sources.items() if fnmatchcase(backend or "", glob)), source)


@dataclass(frozen=True)
class Manifest:
    """A loaded manifest (``path`` is ``None`` for the empty one)."""

    issues: tuple[KnownIssue, ...] = ()
    path: str | None = None

    def match(self, arch: str, backend: str, budget: int, topology: str, kernel: str = "", layout: str = "",
              batch: int = 1) -> KnownIssue | None:
        """The first entry covering the cell, or ``None``."""
        return next((i for i in self.issues if i.matches(arch, backend, budget, topology, kernel, layout, batch)),
                    None)

    def as_env(self) -> dict[str, dict[str, str]]:
        """``{id: {"reason", "source", "strict"}}`` (and ``"sources"``, ``{backend glob: link}``, where the entry
        gives them), for the results file's ``env`` line (reports link from it, and tell a strict entry's xpass, a
        fixed kernel, from a non-strict one's, a case that did not trigger the bug)."""
        return {i.id: {"reason": i.reason, "source": i.source, "strict": i.strict,
                       **({"sources": dict(i.sources)} if i.sources else {})} for i in self.issues}


STATUSES = ("xfail", "xpass")


def status(outcome: str, known_issue: str) -> str:
    """A cell's status for reports: its outcome, or ``xfail`` (failed as the known issue expects) /
    ``xpass`` (passed although a known issue covers it) when ``known_issue`` is set; skips stay ``skip``."""
    if not known_issue or outcome == "skip":
        return outcome
    return "xpass" if outcome == "pass" else "xfail"


def _strings(value: object, key: str, where: str, check=None) -> tuple[str, ...]:
    items = value if isinstance(value, list) else None
    if items is None or not items or not all(isinstance(v, str) and v for v in items):
        raise KnownIssuesError(key, value, "a non-empty list of strings", "wrong type", where)
    for v in items:
        if check is not None:
            check(v)
    return tuple(items)


def _check_arch(where: str):
    def check(name: str) -> None:
        if name == "interpret" or name in FAMILIES:
            return
        try:
            parse_arch(name)
        except ArchError:
            raise KnownIssuesError("arch", name, "sm<major><minor> (sm120), a family (" + ", ".join(FAMILIES)
                                   + ") or interpret", "not an arch", where) from None
    return check


def _check_topology(where: str):
    def check(pattern: str) -> None:
        from .families.verify.topologies import TOPOLOGIES  # numpy: only when a manifest is read

        names = (*TOPOLOGIES, "custom", *DDTREE_TOPOLOGIES)
        if not any(fnmatchcase(t, pattern) for t in names):
            raise KnownIssuesError("topology", pattern, ", ".join(names) + " (or a glob matching one)",
                                   "matches no topology", where)
    return check


def _entry(raw: object, n: int, path: str, seen: set[str]) -> KnownIssue:
    where = f"{path}: issue {n}"
    if not isinstance(raw, dict):
        raise KnownIssuesError("issue", raw, "a [[issue]] table", "wrong type", where)
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise KnownIssuesError(unknown[0], raw[unknown[0]], ", ".join(KEYS), "unknown key", where)
    for key in ("id", "reason", "source"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise KnownIssuesError(key, raw.get(key), "a non-empty string", "missing", where)
    issue_id = raw["id"]
    where = f"{path}: issue {issue_id}"
    if not _ID.match(issue_id) or issue_id in seen:
        raise KnownIssuesError("id", issue_id, "unique, lower-case letters, digits and '-'",
                               "duplicate" if issue_id in seen else "malformed", where)
    if not raw["source"].startswith(("https://", "http://")):
        raise KnownIssuesError("source", raw["source"], "an http(s):// link", "not a link", where)
    sources = raw.get("sources", {})
    if not isinstance(sources, dict) or not all(isinstance(v, str) and v.startswith(("https://", "http://"))
                                                for v in sources.values()):
        raise KnownIssuesError("sources", sources, "a table of backend glob = http(s):// link", "wrong type", where)
    budgets = raw.get("budget", [])
    if (not isinstance(budgets, list) or ("budget" in raw and not budgets)
            or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in budgets)):
        raise KnownIssuesError("budget", budgets, "a non-empty list of integers >= 0", "wrong type", where)
    batch_min = raw.get("batch_min", 0)
    if not isinstance(batch_min, int) or isinstance(batch_min, bool) or batch_min < 0:
        raise KnownIssuesError("batch_min", batch_min, "an integer >= 1", "wrong type", where)
    if not isinstance(raw.get("strict", True), bool):
        raise KnownIssuesError("strict", raw["strict"], "true or false", "wrong type", where)
    seen.add(issue_id)
    return KnownIssue(
        id=issue_id, reason=raw["reason"].strip(), source=raw["source"],
        arch=_strings(raw["arch"], "arch", where, _check_arch(where)) if "arch" in raw else (),
        backend=_strings(raw["backend"], "backend", where) if "backend" in raw else (),
        budget=tuple(budgets),
        topology=_strings(raw["topology"], "topology", where, _check_topology(where)) if "topology" in raw else (),
        kernel=_strings(raw["kernel"], "kernel", where) if "kernel" in raw else (),
        layout=_strings(raw["layout"], "layout", where) if "layout" in raw else (),
        batch_min=batch_min, strict=raw.get("strict", True), sources=tuple(sources.items()),
    )


def load(path: str | os.PathLike | None = SHIPPED) -> Manifest:
    """Read and validate a manifest; ``None`` or ``""`` gives the empty manifest.

    Raises:
        KnownIssuesError: unreadable file, not TOML, a top-level key other than ``issue``, or a
            malformed entry (unknown key, missing id/reason/source, bad arch, budget, topology or
            link, duplicate id); the one-line message names the file, the entry and the field.
    """
    if path is None or str(path) == "":
        return Manifest()
    path = str(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise KnownIssuesError("path", path, "a readable TOML known-issues manifest", e.strerror or "unreadable")
    except tomllib.TOMLDecodeError as e:
        raise KnownIssuesError("toml", path, "a TOML file of [[issue]] tables", f"not TOML ({e})")
    extra = sorted(set(data) - {"issue"})
    if extra:
        raise KnownIssuesError(extra[0], data[extra[0]], "issue (a list of [[issue]] tables)", "unknown key", path)
    entries = data.get("issue", [])
    if not isinstance(entries, list):
        raise KnownIssuesError("issue", entries, "a list of [[issue]] tables", "wrong type", path)
    seen: set[str] = set()
    return Manifest(tuple(_entry(raw, n, path, seen) for n, raw in enumerate(entries, 1)), path)
