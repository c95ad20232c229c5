"""Whether a process, or any process of a group, still runs: asked by pid or pgid (no handle to it needed)."""

from __future__ import annotations

import os


def _answers(kill, ident: int) -> bool:
    """Signal 0 through ``kill`` (``os.kill`` / ``os.killpg``) finds ``ident`` (one of another user counts)."""
    try:
        kill(ident, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, and is another user's
        pass
    return True


def pid_alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie (a process of another user counts as alive)."""
    if not _answers(os.kill, pid):
        return False
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return not os.path.isdir("/proc")  # no /proc to ask (macOS): signal 0 said it runs


def group_alive(pgid: int) -> bool:
    """A process of process group ``pgid`` is alive (zombies do not count where ``/proc`` can say so)."""
    if not _answers(os.killpg, pgid):
        return False
    if not os.path.isdir("/proc"):
        return True  # signal 0 said the group has a member
    return any(pid_alive(int(p)) for p in os.listdir("/proc") if p.isdigit() and _pgid_of(int(p)) == pgid)


def _pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
