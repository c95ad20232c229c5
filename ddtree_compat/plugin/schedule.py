"""The order the cells run in: a test marked ``long`` (seconds on its own: an ahead-of-time compile, a
property test drawing dozens of trees) starts first, and under xdist one starts at the head of each
worker's share, so it overlaps the short cells instead of trailing them.

xdist's ``worksteal`` scheduler (the device tier's, :data:`ddtree_compat.tiers.LOAD_BALANCED`) hands the
collection out in contiguous shares: with ``n`` tests and ``w`` workers, the first gets ``n // w``, the next
``(n - n // w) // (w - 1)`` and so on (:func:`shares`); an idle worker then steals from the tail of the
longest queue. A long test sent to the head of a share starts with its worker's first test; put at
the end of the collection, it started 40 s into the H200 sweep and kept one worker busy 23 s after the
others had finished. Only the order changes: the cells, their ids and their outcomes stay the same.
The rest keep their collection order (kernel cells with the same specialization stay together)."""

from __future__ import annotations

import pytest

from .markers import LONG
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


def long_first(items: list, is_long, workers: int) -> list:
    """``items`` reordered: the long ones dealt round-robin to the heads of the ``workers`` shares (the
    first of them to the first share), the others after them in their order. One worker (or none): the
    long ones first."""
    long = [i for i in items if is_long(i)]
    if not long:
        return list(items)
    rest = iter([i for i in items if not is_long(i)])
    sizes = shares(len(items), max(1, workers))
    heads: list[list] = [[] for _ in sizes]
    for k, item in enumerate(long):
        heads[k % len(heads)].append(item)
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
    """Long tests first, one at the head of each worker's share (after every deselection)."""
    if active(config) is None:
        return
    items[:] = long_first(items, lambda i: i.get_closest_marker(LONG) is not None, worker_count(config))
