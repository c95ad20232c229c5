"""The order the cells run in: a test marked ``long`` (seconds on its own: an ahead-of-time compile, a
property test drawing dozens of trees) starts first, and under xdist one starts at the head of each
worker's share, so it overlaps the short cells instead of trailing them.

xdist's ``worksteal`` scheduler (the device tier's, :data:`ddtree_compat.tiers.LOAD_BALANCED`) hands the
collection out in contiguous shares: with ``n`` tests and ``w`` workers, the first gets ``n // w``, the next
``(n - n // w) // (w - 1)`` and so on (:func:`shares`); an idle worker then steals from the tail of the
longest queue. A long test sent to the head of a share starts with its worker's first test; put at
the end of the collection, it started 40 s into the H200 sweep and kept one worker busy 23 s after the
others had finished. Only the order changes: the cells, their ids and their outcomes stay the same.
The rest keep their collection order (kernel cells with the same specialization stay together).

Tests marked ``serial`` (a deployment-shape cell of the default profiles' slice: tens of GiB of GPU memory, and
the first call of a JIT-built kernel) count as one more long test, dealt after the others: together, in their
order, at the head of one share, so one worker runs them one after another from the start. The GPU then holds
one such cell at a time (side by side, the slice's cells need more than an H200's memory and would skip for
it), and their JIT builds overlap the short cells instead of trailing them (on the H200 the tree sampler's
first cell took 23.6 s, stolen 32 s in)."""

from __future__ import annotations

import pytest

from .markers import LONG, SERIAL
from .session import active


def shares(n: int, workers: int) -> list[int]:
    """The sizes of the contiguous shares xdist's first distribution gives ``workers`` idle workers out
    of ``n`` tests (each takes the pending tests divided by the workers still to serve)."""
    out, left = [], n
    for i in range(workers):
        take = left // (workers - i)
        out.append(take)
        left -= take
    return out


def long_first(items: list, is_long, workers: int, is_serial=None) -> list:
    """``items`` reordered: the long ones dealt round-robin to the heads of the ``workers`` shares (the
    first of them to the first share), the others after them in their order. The ``is_serial`` ones are one
    more long unit, dealt after the long ones, in their order (so the long ones sit where they sat without
    them). One worker (or none): the long ones first, then the serial ones."""
    serial = [i for i in items if is_serial is not None and is_serial(i)]
    chosen = set(map(id, serial))
    units = [[i] for i in items if id(i) not in chosen and is_long(i)] + ([serial] if serial else [])
    if not units:
        return list(items)
    held = {id(i) for unit in units for i in unit}
    rest = iter([i for i in items if id(i) not in held])
    sizes = shares(len(items), max(1, workers))
    heads: list[list] = [[] for _ in sizes]
    for k, unit in enumerate(units):
        heads[k % len(heads)] += unit
    out = []
    for head, size in zip(heads, sizes):
        out += head
        out += [next(rest) for _ in range(max(0, size - len(head)))]
    out += list(rest)  # a share smaller than its long tests: the rest go after
    return out


def worker_count(config: pytest.Config) -> int:
    """How many xdist workers share the collection: ``workercount`` of the worker's ``workerinput`` (xdist
    sets it in every worker), 1 without xdist."""
    return int(getattr(config, "workerinput", {}).get("workercount", 1))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long tests first, one at the head of each worker's share, the serial ones together at one head (after every
    deselection)."""
    if active(config) is None:
        return
    items[:] = long_first(items, lambda i: i.get_closest_marker(LONG) is not None, worker_count(config),
                          lambda i: i.get_closest_marker(SERIAL) is not None)
