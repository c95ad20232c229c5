"""Results survive a kill at any byte: a real sweep, killed with SIGKILL (its whole process group, as a host reboot
would) at random points, its results file cut at random byte offsets (a host crash that lost the page cache's
tail), then resumed, reads, reports and compares as an uninterrupted run of the same selection: every cell once,
no outcome changed, nothing lost.

Seeded (:data:`SEED`), so CI draws the same points each run: :data:`KILLS` kill points, each followed by a cut at a
random offset and a resume, and :data:`OFFSETS` more offsets of the uninterrupted run's file read by ``report``
and compared by ``diff``. A small selection (three backends: one passes, one is wrong by design, one skips on the
CPU): about a minute on a 2-core box.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from ddtree_compat.cli import KERNEL_TESTS
from ddtree_compat.gate import compare
from ddtree_compat.processes import group_alive
from ddtree_compat.results import load
from tests.envs import own_env

SEED = 41
KILLS = 3
"""SIGKILL points in the chain (each one: kill, cut at a random offset, resume)."""
OFFSETS = 40
"""More random cut offsets of the uninterrupted run's file, each read and compared (no resume)."""
SELECTION = ["--tests", str(KERNEL_TESTS / "test_verify.py"), "--backend", "oracle", "--backend", "sglang-cuda",
             "--backend", "ddtree_compat.families.verify.variants:ZeroAccept", "-n", "1", "--resume-passes", "0",
             "--", "-k", "b8-spine or b12-spine"]
"""Verify cells of a passing backend, a failing one and one that skips on the CPU: three outcomes to keep."""


def sweep(out: Path, *extra: str, kill_at: int | None = None) -> bool:
    """Run the sweep of :data:`SELECTION` into ``out/run.jsonl``; with ``kill_at``, SIGKILL its whole process group
    once the file holds that many bytes. Returns whether it was killed; no process of it is left either way."""
    log = out.parent / f"{out.name}.log"  # a file, not a pipe: nobody reads while it runs
    with open(log, "a") as sink:
        p = subprocess.Popen([sys.executable, "-m", "ddtree_compat", "sweep", "--out-dir", str(out), "--name", "run",
                              *extra, *SELECTION], stdout=sink, stderr=sink, env=own_env(), start_new_session=True)
    killed = False
    results = out / "run.jsonl"
    while p.poll() is None:
        if kill_at is not None and results.exists() and results.stat().st_size >= kill_at:
            os.killpg(p.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.01)
    p.wait(timeout=600)
    deadline = time.time() + 30
    while group_alive(p.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not group_alive(p.pid), "a process of the sweep outlived it"
    assert killed or p.returncode in (0, 1), log.read_text()[-3000:]
    return killed


def whole_results(data: bytes) -> dict[str, list[str]]:
    """Node id -> outcomes of the whole result lines in ``data`` (up to its last newline), read without the suite."""
    found: dict[str, list[str]] = defaultdict(list)
    for raw in data[:data.rfind(b"\n") + 1].splitlines():
        line = json.loads(raw)
        if line["kind"] == "result":
            found[line["nodeid"]].append(line["outcome"])
    return found


def check_read(path: Path, baseline: Path, outcomes: dict[str, str]) -> None:
    """What ``report`` and ``diff`` read of ``path`` (maybe torn, maybe partial) is every whole result line, with
    the uninterrupted run's (``baseline``) outcome, and they say whether it is torn and partial."""
    data = path.read_bytes()
    whole = whole_results(data)
    if not whole:
        return  # no result line survived: nothing to report (load says so: a usage error)
    loaded = load([path])
    assert {r.nodeid: r.outcome for r in loaded.records} == {n: o[-1] for n, o in whole.items()}
    assert all(outcomes[n] == o for n, found in whole.items() for o in found), "an outcome changed"
    assert bool(loaded.torn) == (not data.endswith(b"\n"))
    assert loaded.planned in (0, len(outcomes)) and loaded.done == len(whole)
    assert loaded.partial == (loaded.planned == len(outcomes) and len(whole) < len(outcomes))
    gate = compare(load([baseline]), loaded)
    assert not gate.fixed and all(c.after == "missing" for c in gate.regressed + gate.changed)  # only lost cells


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """The uninterrupted run."""
    out = tmp_path_factory.mktemp("kill") / "baseline"
    assert not sweep(out)
    return out / "run.jsonl"


def test_a_sweep_killed_and_cut_anywhere_resumes_to_the_uninterrupted_run(baseline):
    rng = random.Random(SEED)
    base = whole_results(baseline.read_bytes())
    outcomes = {n: o[0] for n, o in base.items()}
    assert all(len(o) == 1 for o in base.values()) and {"pass", "zero-accept", "skip"} <= set(outcomes.values())
    size = baseline.stat().st_size
    out = baseline.parent.parent / "chain"
    results = out / "run.jsonl"
    killed = 0
    for kill in range(KILLS):
        before = results.stat().st_size if results.exists() else 0
        killed += sweep(out, *(["--resume"] if results.exists() else []),
                        kill_at=before + int(rng.uniform(0.1, 0.9) * max(size - before, 1)))
        data = results.read_bytes()
        results.write_bytes(data[:rng.randrange(len(data) + 1)])  # the tail a crash lost, at any byte
        check_read(results, baseline, outcomes)
        if kill == 0 and not results.read_bytes().endswith(b"\n"):  # the CLI: one warning line, exit 0
            r = subprocess.run([sys.executable, "-m", "ddtree_compat", "report", str(results), "-o",
                                str(out / "torn.md")], capture_output=True, text=True, env=own_env())
            assert r.returncode == 0 and r.stderr.count("\n") == 1 and "torn last line" in r.stderr, r.stderr
    assert killed >= 2, "the kill points fell after the runs ended: nothing was killed"
    assert not sweep(out, "--resume")
    final = results.read_bytes()
    assert whole_results(final) == {n: [o] for n, o in outcomes.items()}  # each cell once, its outcome unchanged
    loaded = load([results])
    assert not loaded.partial and not loaded.torn and loaded.done == loaded.planned == len(outcomes)
    r = subprocess.run([sys.executable, "-m", "ddtree_compat", "diff", str(baseline), str(results)],
                       capture_output=True, text=True, env=own_env())
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_a_results_file_cut_at_any_byte_reads_every_whole_line(baseline, tmp_path):
    rng = random.Random(SEED + 1)
    data = baseline.read_bytes()
    outcomes = {n: o[0] for n, o in whole_results(data).items()}
    cut = tmp_path / "run.jsonl"
    for offset in sorted(rng.randrange(len(data) + 1) for _ in range(OFFSETS)):
        cut.write_bytes(data[:offset])
        check_read(cut, baseline, outcomes)
