"""Fault containment: one bad cell never takes down the run, and no result is lost.

A CUDA illegal instruction / illegal address / misaligned address / device-side assert / launch
failure is *sticky*: the context is unusable afterwards and every later kernel in the process fails.
Under pytest-xdist the worker that hit one records the cell and exits at once
(:func:`exit_worker`); xdist reports the cell as crashed, the controller's
``pytest_handlecrashitem`` (in the plugin) attaches the recorded verdict, and xdist starts a fresh
worker for the rest (``--max-worker-restart``). Without xdist the run goes on but later device cells
are skipped with the poisoning cell named. Hangs: ``pytest-timeout`` (thread method) kills the worker;
the controller classifies a crash at or past the timeout as ``hang``.

Durability: a ``start`` line is appended before each cell and a ``result`` line after it (each one
``write`` to the file, in the kernel's page cache before the cell goes on; ``--ddtree-fsync`` also
fsyncs), so a run killed with SIGKILL keeps every finished cell; ``--ddtree-resume`` skips them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

STICKY = frozenset({"illegal-instruction", "illegal-memory-access", "misaligned-address", "device-side-assert",
                    "launch-failure"})
EXIT_POISONED = 86  # worker exit status after a sticky fault (distinct from pytest's own codes)


def is_sticky(fault_class: str | None, context_poisoned: bool) -> bool:
    """Whether the process must be replaced after this fault."""
    return context_poisoned or fault_class in STICKY


def exit_worker() -> None:
    """Leave the xdist worker now (no teardown: the CUDA context is unusable), after flushing stdio."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_POISONED)


def scan(path: str | os.PathLike, limit: int | None = None) -> tuple[dict[str, dict], dict[str, dict]]:
    """``(results, starts)`` by nodeid from a results file, reading at most ``limit`` bytes.

    Tolerates a torn last line (a writer killed mid-write); later lines win.
    """
    results: dict[str, dict] = {}
    starts: dict[str, dict] = {}
    p = Path(path)
    if not p.exists():
        return results, starts
    with open(p, "rb") as f:
        data = f.read() if limit is None else f.read(limit)
    for raw in data.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or not line.get("nodeid"):
            continue
        if line.get("kind") == "result":
            results[line["nodeid"]] = line
        elif line.get("kind") == "start":
            starts[line["nodeid"]] = line
    return results, starts


def results_size(path: str | os.PathLike) -> int:
    """Bytes in the results file now (the resume snapshot every xdist worker reads up to)."""
    p = Path(path)
    return p.stat().st_size if p.exists() else 0
