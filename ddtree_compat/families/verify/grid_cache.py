"""The verify grid on disk, so a process loads it instead of building it.

Building a profile's grid (:func:`~.records.grid`: 1144 cases of the default profile, each drafted best-first
and walked by the oracle) takes seconds of CPU; every pytest process that collects a kernel test needs it (each
xdist worker of the sweep, each sweep or pytest session a test starts). Loading the pickle takes milliseconds.

The key holds everything the grid is made from, as loaded in this process: the source of the modules that
build it (:data:`BUILDERS`), the code of every function and method they hold (so a function replaced at run
time, such as a planted bug of the mutation check, keys a grid of its own), the profile, Python's and NumPy's
versions. Entries live under ``$XDG_CACHE_HOME/ddtree-compat/grids`` (``~/.cache`` without it), written
whole (a temporary file renamed) so workers building at once never read half an entry; an entry that cannot be
read is built again. ``DDTREE_GRID_CACHE=off`` turns the cache off.

Processes that miss the cache at once (a fresh machine's xdist workers) take a file lock per profile, so one
builds and the others load what it wrote: many builds at once cost each worker's start several times one build's
time. A lock not taken within :data:`LOCK_WAIT_S` (a stuck builder, a folder where no lock
can be made) builds without it.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import marshal
import os
import pickle
import platform
import sys
import types
from pathlib import Path
from typing import Callable

from filelock import FileLock, Timeout

BUILDERS = ("ddtree_compat.families.verify.records", "ddtree_compat.families.verify.topologies",
            "ddtree_compat.families.verify.oracle", "ddtree_compat.cases", "ddtree_compat.records",
            "ddtree_compat.tree", "ddtree_compat.errors")
"""The modules whose code builds the grid (records' imports from the package, transitively)."""


def cache_dir() -> Path:
    """Where the entries live: ``$XDG_CACHE_HOME/ddtree-compat/grids`` (``~/.cache`` without it)."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ddtree-compat" / "grids"


def enabled() -> bool:
    """False when ``DDTREE_GRID_CACHE`` is ``off`` (or ``0``, ``no``, ``false``)."""
    return os.environ.get("DDTREE_GRID_CACHE", "on").lower() not in ("off", "0", "no", "false")


def _functions(module: types.ModuleType):
    """``(qualified name, function)`` of a module's functions and its classes' methods, in name order."""
    for name, obj in sorted(vars(module).items()):
        obj = getattr(obj, "__wrapped__", obj)  # lru_cache and functools.wraps keep the function here
        if isinstance(obj, types.FunctionType):
            yield name, obj
        elif isinstance(obj, type) and obj.__module__ == module.__name__:
            for attr, member in sorted(vars(obj).items()):
                member = getattr(member, "__func__", member)  # classmethod / staticmethod
                if isinstance(member, types.FunctionType):
                    yield f"{name}.{attr}", member


def key(profile: str, modules: tuple[str, ...] = BUILDERS) -> str:
    """The cache key of ``profile``'s grid as this process would build it (the modules are imported): 32 hex
    digits of a SHA-256."""
    import numpy

    h = hashlib.sha256(f"{profile}\0{sys.version}\0{platform.machine()}\0{numpy.__version__}".encode())
    for name in modules:
        module = importlib.import_module(name)
        h.update(name.encode())
        try:
            h.update(Path(inspect.getsourcefile(module)).read_bytes())
        except (TypeError, OSError):
            h.update(b"<no source>")
        for qualname, fn in _functions(module):
            h.update(qualname.encode())
            h.update(marshal.dumps(fn.__code__))
            h.update(repr(fn.__defaults__).encode())
    return h.hexdigest()[:32]


LOCK_WAIT_S = 120.0
"""How long a process waits for another's build of the same profile before it builds its own."""

_UNREADABLE = (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, IndexError, TypeError,
               ValueError)


def cached(profile: str, build: Callable[[], tuple]) -> tuple:
    """``profile``'s grid: loaded from the cache when an entry has this process's key, else ``build()`` (and
    stored), one process at a time. Never raises for the cache itself: an unreadable entry is built again, an
    unwritable folder only not written, a lock not taken in time built without."""
    if not enabled():
        return build()
    path = cache_dir() / f"verify-{profile}-{key(profile)}.pickle"
    try:
        return pickle.loads(path.read_bytes())
    except _UNREADABLE:
        pass
    lock = FileLock(path.parent / f".verify-{profile}.lock", timeout=LOCK_WAIT_S)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except (Timeout, OSError):
        return _store(path, profile, build())
    try:
        try:  # another process may have built it while this one waited
            return pickle.loads(path.read_bytes())
        except _UNREADABLE:
            pass
        return _store(path, profile, build())
    finally:
        lock.release()


def _store(path: Path, profile: str, grid: tuple) -> tuple:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(grid, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)
        _prune(path.parent, f"verify-{profile}-")
    except OSError:
        pass  # a read-only or full cache: the grid is built, only not kept
    return grid


KEEP = 8
"""Entries kept per profile (the newest; each code change keys a new one)."""


def _prune(folder: Path, prefix: str) -> None:
    entries = sorted(folder.glob(f"{prefix}*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        old.unlink(missing_ok=True)
