"""Plants the bug ``PLANTED_BUG`` names (``planted_bugs.py``) in every Python process of a run.

The mutation check puts this folder first on ``PYTHONPATH``, so every process it starts (pytest, the
static tier's compile worker, e2e stand-in servers, pytester subprocesses) runs this at start-up. Without
the variable it does nothing. The bug's module is patched right after its first import (an import hook that
wraps the loader), so ``from module import name`` elsewhere gets the broken object too. Each process that
applies the bug appends ``applied <name>`` to ``PLANTED_BUG_LOG``; one that cannot (what it breaks is not
there) appends ``broken <name>: <why>``, so a renamed function fails the check instead of passing it.
Another ``sitecustomize`` further down the path still runs. (The variables do not start with ``DDTREE_``:
``tests/unit/conftest.py`` clears those for inner sessions.)
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _log(line: str) -> None:
    path = os.environ.get("PLANTED_BUG_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{line} (pid {os.getpid()})\n")


class _Loader(importlib.abc.Loader):
    def __init__(self, real, bug):
        self.real, self.bug = real, bug

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        self.real.exec_module(module)
        try:
            self.bug.apply(module)
        except Exception as e:  # noqa: BLE001 - reported to the mutation check, which fails on it
            _log(f"broken {self.bug.name}: {type(e).__name__}: {e}")
        else:
            _log(f"applied {self.bug.name}")


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, bug):
        self.bug = bug

    def find_spec(self, fullname, path, target=None):
        if fullname != self.bug.module:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                spec.loader = _Loader(spec.loader, self.bug)
                return spec
        return None


def _plant(name: str) -> None:
    sys.path.insert(0, _HERE)
    try:
        from planted_bugs import BUGS
    finally:
        sys.path.remove(_HERE)
    bug = BUGS[name]
    finder = _Finder(bug)
    sys.meta_path = _FinderFirst([finder, *sys.meta_path], finder)


class _FinderFirst(list):
    """``sys.meta_path`` that keeps the planting finder in front. pytest inserts its assertion-rewriting hook
    at position 0, and it rewrites (so loads itself) every module of a distribution that registers a pytest
    plugin, when that distribution lists its files: a wheel install, or the ``ddtree_compat.egg-info`` that
    ``pip wheel .`` leaves in the checkout. In front of it the planting finder wraps that hook's loader too."""

    def __init__(self, items, first):
        super().__init__(items)
        self.first = first

    def insert(self, index, item):
        if index <= 0 and self and self[0] is self.first:
            index = 1
        super().insert(index, item)


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows, if there is one."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.origin and os.path.dirname(os.path.abspath(spec.origin)) != _HERE:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if os.environ.get("PLANTED_BUG"):
    _plant(os.environ["PLANTED_BUG"])
_chain()
