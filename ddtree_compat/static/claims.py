"""Which static compile jobs a test run's processes have taken, so that a kernel's specializations are
compiled once, by whoever reaches them first, and their cubins read in one batch.

A folder per test run (every xdist worker of one run sees the same one) holds, per job, ``<key>.claim``
(created exclusively; it holds the pid of the compile worker that took the job) and ``<key>.done``
(written once the job is built and its cubins' inspection cached, or once it failed). A process that
needs a job another one took waits for its ``.done`` while that process lives, then finds everything in
the caches. Nothing here decides an outcome: a job that nobody took, or whose claimant died, is simply
built by the cell that needs it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

from ..processes import pid_alive

STALE_S = 24 * 3600  # other runs' folders older than this are removed when a run starts its own


def job_key(func, args: tuple) -> str:
    """A compile job's name: its function and its (deterministic, ``repr``-able) arguments, hashed."""
    return hashlib.sha256(f"{func.__module__}.{func.__qualname__}{args!r}".encode()).hexdigest()[:24]


class Claims:
    """One test run's claims folder, ``<cache>/claims/<run id>``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @classmethod
    def for_run(cls, cache_dir: str | os.PathLike, run_id: str) -> "Claims":
        """The run's folder, created; other runs' folders older than a day are removed."""
        parent = Path(cache_dir) / "claims"
        parent.mkdir(parents=True, exist_ok=True)
        for old in parent.iterdir():
            try:
                if old.name != run_id and time.time() - old.stat().st_mtime > STALE_S:
                    shutil.rmtree(old, ignore_errors=True)
            except OSError:
                pass
        (parent / run_id).mkdir(exist_ok=True)
        return cls(parent / run_id)

    def take(self, key: str) -> bool:
        """Claim ``key`` for this process: False if another process (or this one) already has."""
        try:
            fd = os.open(self.root / f"{key}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True

    def finish(self, key: str) -> None:
        """Mark ``key`` done (built, or failed: either way its waiters go on)."""
        (self.root / f"{key}.done").touch()

    def wait(self, key: str, timeout: float, poll_s: float = 0.02) -> None:
        """Return once ``key`` is done, not claimed, claimed by a process that is gone, or ``timeout`` seconds
        passed (polling every ``poll_s`` seconds). Never raises: the caller then builds the job itself."""
        claim, done = self.root / f"{key}.claim", self.root / f"{key}.done"
        deadline = time.monotonic() + timeout
        while claim.exists() and not done.exists() and time.monotonic() < deadline:
            try:
                pid = int(claim.read_text() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and not pid_alive(pid):
                return
            time.sleep(poll_s)
