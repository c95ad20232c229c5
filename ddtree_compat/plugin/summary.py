"""The terminal summary: cells counted from their reports (``user_properties`` travel from xdist workers
to the controller), one line per tier group, known issues, the results file."""

from __future__ import annotations

import os
import re
from collections import Counter

import pytest

from ..outcomes import OUTCOMES
from ..tiers import E2E, STATIC
from .cells import OUTCOME_PROPERTY, TIER_PROPERTY
from .session import active, suite

SHOWN = ("pass", "wrong", "zero-accept", "fault", "skip")
"""Outcomes always spelled out in a summary line; others (``error``) only when they occur."""
WITHOUT_THE_GPU = (
    "what an arch's cells here leave out: every device cell (kernels run on that GPU, CUDA graphs, faults); what ran "
    "here: {ran}; FlashInfer's verify kernel: {flashinfer}; sgl-kernel's prebuilt libraries: {sgl_kernel}. Passing "
    "cells here do not say the arch is fine.")
"""Said after ``-m <arch>`` on a host without that GPU, so a CPU box's answer is not read as the GPU's."""
STATIC_RAN = ("static builds ({n} cell(s): Triton kernels of SGLang and of the DDTree implementations, SGLang's JIT "
              "CUDA verify kernel where nvcc is installed; cubins, SASS, static resources per arch)")
EMULATED_RAN = "SGLang's tile choice for the arch emulated here ({n} cell(s))"
FLASHINFER_SCOPE = ("bf16, head dim 128; registers, static shared memory and SASS: FlashInfer sizes its dynamic "
                    "shared memory on the device at launch, which only a device cell runs")
BINARIES = {"flashinfer": ("backend", "flashinfer"), "sgl_kernel": ("kernel", "sgl_kernel_ops")}
"""Static cells that check a library's binaries, by the user property that names them."""


def _group(tier: str | None) -> str:
    return tier if tier in (STATIC, E2E) else "grid"


class Summary:
    """Registered in every session; counts only reports that carry a ddtree outcome."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.counts: Counter = Counter()
        self.skips: dict[str, str] = {}  # BINARIES name -> why its static cells skipped, when they did

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if OUTCOME_PROPERTY in props:
            self.counts[(_group(props.get(TIER_PROPERTY)), props[OUTCOME_PROPERTY])] += 1
        if OUTCOME_PROPERTY in props and "@emulated-" in (props.get("ddtree_kernel") or ""):
            self.counts[("emulated", props[OUTCOME_PROPERTY])] += 1
        for name, (prop, value) in BINARIES.items():
            if (props.get(TIER_PROPERTY) == STATIC and props.get(f"ddtree_{prop}") == value
                    and OUTCOME_PROPERTY in props):
                self.counts[(name, props[OUTCOME_PROPERTY])] += 1
                if props[OUTCOME_PROPERTY] == "skip" and report.longrepr:
                    self.skips[name] = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else
                                           report.longrepr)
        if "ddtree_known_issue" in props:
            self.counts[("known", props["ddtree_known_issue"])] += 1

    def _line(self, group: str) -> str:
        shown = [o for o in OUTCOMES if o in SHOWN or self.counts[(group, o)]]
        return ", ".join(f"{self.counts[(group, o)]} {o}" for o in shown)

    def _ran(self) -> str:
        static = sum(self.counts[(STATIC, o)] for o in OUTCOMES if o != "skip")
        emulated = sum(self.counts[("emulated", o)] for o in OUTCOMES if o != "skip")
        parts = (([STATIC_RAN.format(n=static)] if static else [])
                 + ([EMULATED_RAN.format(n=emulated)] if emulated else []))
        return " and ".join(parts) or "nothing for the arch (every selected cell skipped)"

    def _binaries(self, name: str) -> str:
        built = sum(self.counts[(name, o)] for o in OUTCOMES if o != "skip")
        skipped = self.counts[(name, "skip")]
        if built:
            scope = f" ({FLASHINFER_SCOPE})" if name == "flashinfer" else ""
            return f"checked in {built} static cell(s){scope}" + (f", {skipped} skipped" if skipped else "")
        if skipped:
            return f"not checked ({skipped} static cell(s) skipped: {self.skips.get(name, '')[-300:]})"
        return "not checked (no such static cell selected: --ddtree-backend leaves it out?)"

    def _any(self, group: str) -> bool:
        return any(self.counts[(group, o)] for o in OUTCOMES)

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        sess = active(config) or (suite(config) if self.counts else None)
        if sess is None:
            return
        wanted = set(re.findall(r"\bsm\d+\b", config.getoption("markexpr", "") or ""))
        missing = sorted(wanted - {g.arch for g in sess.gpus})
        if missing:
            have = ", ".join(sorted({g.arch for g in sess.gpus})) or "none"
            terminalreporter.write_sep("-", "ddtree-compat")
            terminalreporter.write_line(f"no {', '.join(missing)} GPU on this host (detected: {have}): "
                                        f"no device cells selected for -m {config.getoption('markexpr')!r}")
            terminalreporter.write_line(WITHOUT_THE_GPU.format(ran=self._ran(), flashinfer=self._binaries("flashinfer"),
                                                               sgl_kernel=self._binaries("sgl_kernel")))
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
                                        f"{counts[('known', 'xpass')]} passed (XPASS: fixed, or, for a non-strict "
                                        f"entry, a draw the issue does not hit; see {sess.known.path})")
        if sess.writer is not None:
            from ..results import REPORT_BY_SWEEP

            ran = sum(n for (group, outcome), n in counts.items()
                      if group in ("grid", STATIC, E2E) and outcome != "skip")
            if not ran:
                line = f"results: {sess.writer.path} (every cell of this session skipped: pytest lists why)"
            elif os.environ.get(REPORT_BY_SWEEP) == "1":
                line = f"results: {sess.writer.path} (the sweep writes its report when every tier has run)"
            else:
                line = f"results: {sess.writer.path}  ->  python -m ddtree_compat report {sess.writer.path}"
            terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Summary(config), "ddtree-summary")
