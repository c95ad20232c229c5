"""The terminal summary: cells counted from their reports (``user_properties`` travel from xdist workers
to the controller), one line per tier group, known issues, the results file."""

from __future__ import annotations

import os
import re
import shlex
from collections import Counter

import pytest

from ..outcomes import OUTCOMES
from ..tiers import E2E, STATIC
from .cells import OUTCOME_PROPERTY, TIER_PROPERTY
from .options import DEFAULT_RESULTS
from .session import active, suite

SHOWN = ("pass", "wrong", "zero-accept", "fault", "skip")
"""Outcomes always spelled out in a summary line; others (``error``) only when they occur."""
BINARIES = {"flashinfer": ("backend", "flashinfer"), "sgl_kernel": ("kernel", "sgl_kernel_ops")}
"""Static cells that check a library's binaries, by the user property that names them."""
FLASHINFER_SCOPE = "registers, static smem, SASS; its dynamic smem only on the device"
REASON_CHARS = 60
"""A skip reason in an ``-m <arch>`` line: its words before any parenthesis, cut to this many characters."""


def _group(tier: str | None) -> str:
    return tier if tier in (STATIC, E2E) else "grid"


class Summary:
    """Registered in every session; counts only reports that carry a ddtree outcome."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.counts: Counter = Counter()
        self.expected: Counter = Counter()  # (group, outcome) -> cells of that count a known issue expected (xfail)
        self.skips: dict[str, str] = {}  # BINARIES name -> why its static cells skipped, when they did
        self.static_by_backend: Counter = Counter()  # static cells that ran (not skipped), by backend

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if OUTCOME_PROPERTY in props:
            self.counts[(_group(props.get(TIER_PROPERTY)), props[OUTCOME_PROPERTY])] += 1
        if OUTCOME_PROPERTY in props and "@emulated-" in (props.get("ddtree_kernel") or ""):
            self.counts[("emulated", props[OUTCOME_PROPERTY])] += 1
        if props.get(TIER_PROPERTY) == STATIC and props.get(OUTCOME_PROPERTY) not in (None, "skip"):
            self.static_by_backend[props.get("ddtree_backend")] += 1
        for name, (prop, value) in BINARIES.items():
            if (props.get(TIER_PROPERTY) == STATIC and props.get(f"ddtree_{prop}") == value
                    and OUTCOME_PROPERTY in props):
                self.counts[(name, props[OUTCOME_PROPERTY])] += 1
                if props[OUTCOME_PROPERTY] == "skip" and report.longrepr:
                    self.skips[name] = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else
                                           report.longrepr)
        if "ddtree_known_issue" in props:
            self.counts[("known", props["ddtree_known_issue"])] += 1
            if props["ddtree_known_issue"] == "xfail" and OUTCOME_PROPERTY in props:
                self.expected[(_group(props.get(TIER_PROPERTY)), props[OUTCOME_PROPERTY])] += 1

    def _line(self, group: str) -> str:
        """``23839 pass, 14 wrong (all 14 known issues: xfail), 0 zero-accept, ...``: a count that holds cells a known
        issue expected says how many (the report lists them under known issues, not failures)."""
        shown = [o for o in OUTCOMES if o in SHOWN or self.counts[(group, o)]]

        def count(o: str) -> str:
            n, known = self.counts[(group, o)], self.expected[(group, o)]
            if not known:
                return f"{n} {o}"
            return f"{n} {o} ({'all ' if known == n else ''}{known} known issue{'s' if known > 1 else ''}: xfail)"

        return ", ".join(count(o) for o in shown)

    def _ran(self, sess, arch: str) -> list[str]:
        """What ran here for ``arch`` without its GPU: the static builds (naming a DDTree implementation only when
        its cells ran) and the emulated tile choice."""
        impls = {b.name for b in sess.implementations}
        built = [n for b, n in self.static_by_backend.items() if b not in impls]
        theirs = sorted(b for b in self.static_by_backend if b in impls)
        emulated = sum(self.counts[("emulated", o)] for o in OUTCOMES if o != "skip")
        lines = []
        if built or theirs:
            whose = "SGLang's kernels" + (f" and {', '.join(theirs)}'s" if theirs else "")
            lines.append(f"ran here: {sum(self.static_by_backend.values())} static-build cell(s): {whose} compiled "
                         f"for {arch} (resources, SASS)")
        if emulated:
            lines.append(f"ran here: {emulated} cell(s) of SGLang's {arch} tile choice, emulated on this host")
        return lines or [f"ran here: nothing for {arch} (every selected cell skipped)"]

    def _binaries(self, name: str) -> str:
        built = sum(self.counts[(name, o)] for o in OUTCOMES if o != "skip")
        skipped = self.counts[(name, "skip")]
        if built:
            scope = f" ({FLASHINFER_SCOPE})" if name == "flashinfer" else ""
            return f"checked in {built} static cell(s){scope}" + (f", {skipped} skipped" if skipped else "")
        if skipped:
            why = (self.skips.get(name, "").strip().splitlines()[-1:] or [""])[0]
            why = why.removeprefix("Skipped: ").split(" (", 1)[0]
            why = why if len(why) <= REASON_CHARS else why[:REASON_CHARS - 3] + "..."
            return f"not checked ({skipped} static cell(s) skipped: {why})"
        return f"not checked (no such static cell selected: {self._left_out_by()})"

    def _left_out_by(self) -> str:
        """What kept a static cell out of this session, read from its own options (the first that applies)."""
        opt = self.config.option
        if getattr(opt, "keyword", ""):
            return f"-k {opt.keyword!r} leaves it out"
        if self.config.getoption("ddtree_backend", None):
            return "--ddtree-backend leaves it out"
        if self.config.getoption("ddtree_static", "on") == "off":
            return "--ddtree-static off"
        if not any("kernels" in str(a) for a in self.config.args) and self.config.args:
            return f"the paths named ({' '.join(map(str, self.config.args))}) leave tests/kernels out"
        return "-m or --tests leaves it out"

    def _arch_lines(self, sess, config: pytest.Config) -> list[str]:
        """``-m <arch>`` naming an arch with no GPU on this host: a few short lines, so a CPU box's answer is not
        read as the GPU's: what ran here, what did not, and the command for the rest. ``[]`` when every arch the
        expression names has its GPU here."""
        markexpr = config.getoption("markexpr", "") or ""
        missing = sorted(set(re.findall(r"\bsm\d+\b", markexpr)) - {g.arch for g in sess.gpus})
        if not missing:
            return []
        arch = ", ".join(missing)
        have = ", ".join(sorted({g.arch for g in sess.gpus})) or "none"
        rest = " or ".join(missing) if len(missing) > 1 else arch  # the arch's whole marker, not this expression
        if config.option.collectonly:
            return [f"-m {markexpr!r}: no {arch} GPU on this host (detected: {have}); collected only (--collect-only): "
                    f"nothing ran", f"  on a host with an {arch} GPU: python -m ddtree_compat sweep -- -m "
                    f"{shlex.quote(rest)}"]
        return [f"-m {markexpr!r}: no {arch} GPU on this host (detected: {have})",
                *(f"  {line}" for line in self._ran(sess, arch)),
                f"  not run: every {arch} device cell (kernels on that GPU, CUDA graphs, faults): a pass here is not "
                f"an {arch} pass",
                f"  FlashInfer's verify kernel: {self._binaries('flashinfer')}",
                f"  sgl-kernel's prebuilt libraries: {self._binaries('sgl_kernel')}",
                f"  the rest, on a host with an {arch} GPU: python -m ddtree_compat sweep -- -m {shlex.quote(rest)}"]

    def _any(self, group: str) -> bool:
        return any(self.counts[(group, o)] for o in OUTCOMES)

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        if exitstatus == pytest.ExitCode.USAGE_ERROR:
            return  # pytest said what was wrong, in its line; nothing ran
        sess = active(config) or (suite(config) if self.counts else None)
        if sess is None:
            return
        arch_lines = self._arch_lines(sess, config)
        if arch_lines:
            terminalreporter.write_sep("-", "ddtree-compat")
            for line in arch_lines:
                terminalreporter.write_line(line)
        if not self.counts:
            return
        counts = self.counts
        terminalreporter.write_sep("-", "ddtree-compat")
        if self._any("grid"):
            terminalreporter.write_line(f"grid cells: {self._line('grid')}  (tier {sess.tier}, profile "
                                        f"{sess.profile}; property tests are counted by pytest only)")
        if self._any(STATIC):
            terminalreporter.write_line(f"static cells: {self._line(STATIC)}  (tier static, build cache "
                                        f"{sess.static_cache})")
        if self._any(E2E):
            where = (f"real SGLang servers on {sess.e2e_arch()}; logs and captures in {sess.e2e_dir}" if sess.gpus
                     else "real SGLang servers: no GPU visible here, so none started")
            terminalreporter.write_line(f"e2e cells: {self._line(E2E)}  ({where})")
        if counts[("known", "xfail")] or counts[("known", "xpass")]:
            terminalreporter.write_line(f"known issues: {counts[('known', 'xfail')]} failed as expected (xfail), "
                                        f"{counts[('known', 'xpass')]} passed (XPASS: under a strict entry the kernel "
                                        f"is fixed; under a non-strict one, a case that does not trigger the bug; "
                                        f"see {sess.known.path})")
        if sess.writer is not None:
            from ..results import REPORT_BY_SWEEP

            ran = sum(n for (group, outcome), n in counts.items()
                      if group in ("grid", STATIC, E2E) and outcome != "skip")
            if not ran:
                skipped = ", ".join(f"{n} {group} cell{'s' if n > 1 else ''}" for group in ("grid", STATIC, E2E)
                                    if (n := counts[(group, "skip")]))
                line = f"results: {sess.writer.path} ({skipped}, every one skipped: pytest's skip lines say why)"
            elif os.environ.get(REPORT_BY_SWEEP) == "1":
                line = f"results: {sess.writer.path} (the sweep writes its report when every tier has run)"
            else:
                line = f"results: {sess.writer.path}  ->  python -m ddtree_compat report {sess.writer.path}"
                if config.getoption("ddtree_results") == DEFAULT_RESULTS:
                    line += ("  (every plain pytest run appends to this file, and the report counts them all: "
                             "--ddtree-results PATH for a file of this run's own)")
            terminalreporter.write_line(line)
        if sess.cut:
            terminalreporter.write_line(f"results: a torn last line ({sess.cut['cut_bytes']} bytes at byte "
                                        f"{sess.cut['at_byte']}: a writer killed mid-line) was cut before appending; "
                                        "a repair line in the file says so")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Summary(config), "ddtree-summary")
