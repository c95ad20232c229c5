"""The plugin's options, defined once: :data:`OPTIONS` feeds ``pytest_addoption``, the check whether a
session asked for the suite (:func:`asked`), and the options table in ``docs/options.md``
(:func:`markdown_table`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from ..tiers import TIER_CHOICES

DEFAULT_RESULTS = ".ddtree/results.jsonl"
DEFAULT_CASES_DIR = ".ddtree/cases"
DEFAULT_E2E_DIR = ".ddtree/e2e"
ATTENTION_PROFILE_CHOICES = ("auto", "interpret", "device")


def _static_cache() -> str:
    from pathlib import Path

    base = os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))
    return str(Path(base) / "ddtree-compat" / "static")


def _shipped_known_issues() -> str:
    from .. import known_issues

    return str(known_issues.SHIPPED)


@dataclass(frozen=True)
class Option:
    """One ``--ddtree-*`` option.

    Attributes:
        flag: the command-line flag.
        help: what it does (the docs table's text).
        env: the environment variable that sets its default, or ``""``.
        default: its default without the environment (a callable for a computed one).
        kind: ``value``, ``list`` (repeatable; env: comma-separated), ``paths`` (repeatable; env: separated by
            ``os.pathsep``), ``switch`` (env: 1/true/yes/on).
        choices: allowed values, or ``()``.
        metavar: shown in ``--help``.
    """

    flag: str
    help: str
    env: str = ""
    default: object = None
    kind: str = "value"
    choices: tuple[str, ...] = ()
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def builtin_default(self):
        value = self.default() if callable(self.default) else self.default
        return [] if self.kind in ("list", "paths") and value is None else value

    def env_default(self):
        """The default as the environment sets it (``builtin_default`` when the variable is unset)."""
        raw = os.environ.get(self.env) if self.env else None
        if raw is None:
            return self.builtin_default()
        if self.kind == "switch":
            return raw.lower() in ("1", "true", "yes", "on")
        if self.kind in ("list", "paths"):
            return [v for v in raw.split("," if self.kind == "list" else os.pathsep) if v]
        return raw


OPTIONS: tuple[Option, ...] = (
    Option("--ddtree-tier", "tier: `auto` (device when a GPU is visible), `interpret` or `device`; one tier per process",
           env="DDTREE_TIER", default="auto", metavar="TIER"),
    Option("--ddtree-backend", "backend to run (repeatable): a registered name or `module:object`; default every "
           "registered backend", kind="list", metavar="NAME|module:object"),
    Option("--ddtree-require-backend", "usage error at start unless this backend can run on every target "
           "(repeatable; env comma-separated): for CI that must exercise a real kernel",
           env="DDTREE_REQUIRE_BACKENDS", kind="list", metavar="NAME"),
    Option("--ddtree-profile", "case grid: `default`, `full` (budgets to 256, batch to 64, block sizes 8/16/32) or `scale` (only the "
           "deployment-shape cells, every derived index boundary)",
           env="DDTREE_PROFILE", default="default", metavar="PROFILE"),
    Option("--ddtree-vocab", "deployment-shape cells' vocabularies (comma-separated, repeatable); default "
           "32000, 128256, 151936 and 248320", env="DDTREE_VOCAB", kind="list", metavar="V[,V]"),
    Option("--ddtree-case", "run these case files instead of the grid (repeatable)", kind="list", metavar="CASE.json"),
    Option("--ddtree-impl", "a DDTree build of SGLang to test (repeatable; env separated by the path separator): a "
           "checkout holding `python/sglang`, or the `sglang` package folder; the installed sglang is tested too "
           "when it has DDTree modules", env="DDTREE_IMPLS", kind="paths", metavar="PATH"),
    Option("--ddtree-results", "JSONL results file to append to (`''` = none)", env="DDTREE_RESULTS",
           default=DEFAULT_RESULTS, metavar="PATH"),
    Option("--ddtree-fsync", "fsync the results file after every line, for a host that may hang or reboot on a GPU "
           "fault (a killed process loses nothing without it)", env="DDTREE_FSYNC", default=False, kind="switch"),
    Option("--ddtree-resume", "skip cells that already have a result line in the results file (after a killed run)",
           default=False, kind="switch"),
    Option("--ddtree-cases-dir", "where failing cases are written as JSON", default=DEFAULT_CASES_DIR, metavar="DIR"),
    Option("--sanitize", "re-run each failing device cell under compute-sanitizer with this tool; attach its report",
           default="", choices=("", "memcheck", "racecheck", "initcheck", "synccheck")),
    Option("--ddtree-known-issues", "TOML manifest of expected failures, run as strict xfail (`''` = none)",
           env="DDTREE_KNOWN_ISSUES", default=_shipped_known_issues, metavar="PATH"),
    Option("--ddtree-static", "static tier cells (AOT compile for every arch, on the CPU): `on` or `off`",
           env="DDTREE_STATIC", default="on", choices=("on", "off")),
    Option("--ddtree-static-cache", "static tier build cache, Triton's included", env="DDTREE_STATIC_CACHE",
           default=_static_cache, metavar="DIR"),
    Option("--ddtree-attention-profile", "verify-attention cases: `interpret` (small shapes), `device` (the shape "
           "sweep) or `auto` (the tier's own)", env="DDTREE_ATTENTION_PROFILE", default="auto",
           choices=ATTENTION_PROFILE_CHOICES),
    Option("--ddtree-progress", "seconds between progress lines (tests done, static compiles left, the test running "
           "longest); `0`: none", env="DDTREE_PROGRESS", default="30", metavar="SECONDS"),
    Option("--ddtree-e2e-dir", "e2e tier: generated checkpoints, server logs and captures", env="DDTREE_E2E_DIR",
           default=DEFAULT_E2E_DIR, metavar="DIR"),
    Option("--ddtree-e2e-attention", "e2e tier: attention backends to serve each configuration on (comma-separated, "
           "repeatable): `default` (what the installed SGLang chooses for the configuration on this host), `triton`, "
           "`flashinfer`, `fa3`; default all four (one that cannot serve here is a skip saying why)",
           env="DDTREE_E2E_ATTENTION", kind="list", metavar="NAME[,NAME]"),
)
"""Every option of the plugin. ``--ddtree-tier`` also takes the values of :data:`ddtree_compat.tiers.TIER_CHOICES`."""


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("ddtree", "DDTree kernel compatibility (ddtree-compat)")
    for o in OPTIONS:
        env = f" (env {o.env})" if o.env else ""
        kwargs = dict(default=o.env_default(), help=o.help.replace("`", "") + env, dest=o.dest)
        if o.kind == "switch":
            kwargs["action"] = "store_true"
        else:
            kwargs["metavar"] = o.metavar
            if o.kind in ("list", "paths"):
                kwargs["action"] = "append"
            if o.choices:
                kwargs["choices"] = list(o.choices)
        g.addoption(o.flag, **kwargs)


def asked(config: pytest.Config) -> bool:
    """Whether the session asked for the suite by an option on the command line or in the ini file (a value
    differing from what the environment sets). A ``DDTREE_*`` variable alone asks nothing: it is the default
    the suite takes once something asks, so a CI job exporting ``DDTREE_IMPLS`` does not make every pytest
    process it starts load SGLang and the implementations (seconds each). (A marker
    selection or a ddtree fixture asks too: :mod:`.session`.)"""
    return any(config.getoption(o.dest) != o.env_default() for o in OPTIONS)


def markdown_table() -> str:
    """The options as a Markdown table (``docs/options.md`` is generated from it)."""
    rows = ["| option | environment | default | meaning |", "|---|---|---|---|"]
    for o in OPTIONS:
        default = o.builtin_default()
        shown = "" if default in ("", None, False, []) else f"`{default}`"
        if callable(o.default):
            shown = {"_static_cache": "`~/.cache/ddtree-compat/static`",
                     "_shipped_known_issues": "the shipped `ddtree_compat/known_issues.toml`"}[o.default.__name__]
        named = [c for c in o.choices if c]
        choices = f" (`{'`, `'.join(named)}`)" if named and not any(f"`{c}`" in o.help for c in named) else ""
        rows.append(f"| `{o.flag}` | {f'`{o.env}`' if o.env else ''} | {shown} | {o.help}{choices} |")
    return "\n".join(rows) + "\n"


__all__ = ["OPTIONS", "Option", "asked", "markdown_table", "pytest_addoption", "TIER_CHOICES"]
