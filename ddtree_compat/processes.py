"""Whether a process still runs, asked by pid (no handle to it needed)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie (a process of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return os.name != "posix" or not os.path.isdir("/proc")  # no /proc to ask (macOS): kill(0) said it runs
