"""The verify grid's cache on disk (``families/verify/grid_cache.py``): a process loads what an earlier one built
with the same code; code replaced at run time (a planted bug) or the switch off builds anew; a bad entry is
rebuilt."""

import pickle
import subprocess
import sys

import pytest

from ddtree_compat import case_lookup
from ddtree_compat.families.verify import grid_cache, topologies


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("DDTREE_GRID_CACHE", raising=False)
    return tmp_path / "ddtree-compat" / "grids"


def builder(calls):
    def build():
        calls.append(1)
        return ("case-a", "case-b")
    return build


def test_the_second_call_loads_what_the_first_built(cache):
    calls = []
    assert grid_cache.cached("default", builder(calls)) == ("case-a", "case-b")
    assert grid_cache.cached("default", builder(calls)) == ("case-a", "case-b")
    assert len(calls) == 1 and len(list(cache.glob("verify-default-*.pickle"))) == 1


def test_a_function_replaced_at_run_time_keys_its_own_grid(cache, monkeypatch):
    before = grid_cache.key("default")
    name = next(n for n, f in grid_cache._functions(topologies) if "." not in n)
    real = getattr(topologies, name)
    monkeypatch.setattr(topologies, name, lambda *a, **k: real(*a, **k))  # a planted bug's wrapper
    assert grid_cache.key("default") != before
    monkeypatch.undo()
    assert grid_cache.key("default") == before and grid_cache.key("full") != before


def test_off_builds_every_time_and_a_bad_entry_is_built_again(cache, monkeypatch):
    calls = []
    monkeypatch.setenv("DDTREE_GRID_CACHE", "off")
    grid_cache.cached("default", builder(calls))
    grid_cache.cached("default", builder(calls))
    assert len(calls) == 2 and not cache.exists()
    monkeypatch.delenv("DDTREE_GRID_CACHE")
    grid_cache.cached("default", builder(calls))
    entry = next(cache.glob("verify-default-*.pickle"))
    entry.write_bytes(b"not a pickle")
    assert grid_cache.cached("default", builder(calls)) == ("case-a", "case-b") and len(calls) == 4
    assert pickle.loads(entry.read_bytes()) == ("case-a", "case-b")


def test_another_process_loads_the_same_default_grid(cache, tmp_path):
    """Two fresh processes, the first building, the second loading: the same cases, byte for byte."""
    code = ("import hashlib, pickle, time; t = time.time(); from ddtree_compat.families.verify import records; "
            "g = records.grid('default'); print(hashlib.sha256(pickle.dumps(g, protocol=4)).hexdigest(), len(g))")
    env = {**__import__("os").environ, "XDG_CACHE_HOME": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert len(list(cache.glob("verify-default-*.pickle"))) == 1
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert first == again and first.split()[1] == str(sum(r[3] for r in case_lookup.index()["default"]))
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**env, "DDTREE_GRID_CACHE": "off"}).stdout
    assert off == first


def test_processes_missing_the_cache_at_once_build_it_once(cache):
    """Four builders at once (threads, each with its own lock handle, as xdist workers have): one builds, the
    others wait for it and load its entry."""
    import threading
    import time

    calls, results = [], []

    def slow_build():
        calls.append(1)
        time.sleep(0.3)
        return ("case-a", "case-b")

    threads = [threading.Thread(target=lambda: results.append(grid_cache.cached("default", slow_build)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and results == [("case-a", "case-b")] * 4


def test_a_lock_not_taken_in_time_builds_without_it(cache, monkeypatch):
    from filelock import FileLock

    monkeypatch.setattr(grid_cache, "LOCK_WAIT_S", 0.05)
    cache.mkdir(parents=True)
    calls = []
    with FileLock(cache / ".verify-default.lock"):  # a builder that never finishes
        import threading

        out = []
        t = threading.Thread(target=lambda: out.append(grid_cache.cached("default", builder(calls))))
        t.start()
        t.join(10)
    assert out == [("case-a", "case-b")] and len(calls) == 1
    assert len(list(cache.glob("verify-default-*.pickle"))) == 1


def test_warm_builds_the_entry_in_the_background_and_nothing_with_the_cache_off(cache, monkeypatch):
    monkeypatch.setattr(grid_cache, "key", lambda profile, modules=grid_cache.BUILDERS: "k")
    from ddtree_compat.families.verify import records

    monkeypatch.setattr(records, "grid_groups", lambda profile: [("g",)])
    monkeypatch.setattr(records, "grid_group", lambda profile, g: ("case-a", "case-b"))
    monkeypatch.setattr(records, "WARM_PROCESSES", 1)  # in the thread, where the patches above apply
    records.grid.cache_clear()  # this process's copy, not the one on disk
    records.warm_grid("default").join(10)
    records.grid.cache_clear()
    assert pickle.loads((cache / "verify-default-k.pickle").read_bytes()) == ("case-a", "case-b")
    monkeypatch.setenv("DDTREE_GRID_CACHE", "off")
    assert records.warm_grid("default") is None


def test_the_groups_built_in_fresh_processes_are_the_grid(cache, monkeypatch):
    """``warm_grid``'s build on a larger host: two spawned processes build the groups of the default profile;
    the cases are the grid's, in its order."""
    from ddtree_compat.families.verify import records

    keys = records.grid_groups("default")[:6]
    serial = tuple(c for key in keys for c in records.grid_group("default", *key))
    monkeypatch.setattr(records, "grid_groups", lambda profile: keys)  # six groups are enough to cross processes
    assert records._built_in_processes("default", 2) == serial
