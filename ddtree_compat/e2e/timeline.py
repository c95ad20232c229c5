"""Where an e2e session's time goes: ``<root>/timeline.jsonl``, one line per step (the session's plan, the probe, the
checkpoints, each server's launch, readiness, phases and stop), in seconds since the session began (pytest's configure
under the plugin: the verdict lines' zero). ``benchmarks/suite_cost.py --from-e2e-dir`` reads it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path


class Timeline:
    """Appends the session's steps to ``root/timeline.jsonl`` (thread-safe; the folder is made on the first line)."""

    def __init__(self, root: Path, started: float | None = None):
        """``started``: the timeline's zero (``time.time()``; default now)."""
        self.path = Path(root) / "timeline.jsonl"
        self.t0 = time.time() if started is None else started
        self._lock = threading.Lock()

    def mark(self, event: str, server: str = "", **fields) -> None:
        """One line: seconds since the zero, the event, its server and fields."""
        line = {"t": round(time.time() - self.t0, 2), "event": event, **({"server": server} if server else {}),
                **fields}
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(json.dumps(line) + "\n")
