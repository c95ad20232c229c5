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
first cell took 23.6 s, stolen 32 s in).

A kernel built on first use (a JIT module per template instance, :attr:`ddtree_compat.contract.KernelImpl.build_key`)
counts its first device cell of each build as a long test: on the H100 every worker that reached SGLang's tree
sampler 30 s in waited about 24 s for a build (two waves, one per vocabulary's ``vec_size``); started first, the
builds overlap the small cells and the later cells find them in the cache."""

from __future__ import annotations

from itertools import islice

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
        out += islice(rest, max(0, size - len(head)))  # (fewer left than room: a share holding no long test)
    out += list(rest)  # a share smaller than its long tests: the rest go after
    return out


def worker_count(config: pytest.Config) -> int:
    """How many xdist workers share the collection: ``workercount`` of the worker's ``workerinput`` (xdist
    sets it in every worker), 1 without xdist."""
    return int(getattr(config, "workerinput", {}).get("workercount", 1))


def build_of(item: pytest.Item) -> tuple | None:
    """The first-use build a device cell needs, ``(backend name, kernel, key)`` (the key from its implementation's
    :attr:`~ddtree_compat.contract.KernelImpl.build_key`), or ``None``: no such build, or not a device cell."""
    from ..contract import implementation
    from .cells import kernel_parts

    parts = kernel_parts(item)
    if parts is None or parts[0].tier != "device":
        return None
    _, backend, record, case = parts
    impl = implementation(backend, record.name)
    if impl is None or impl.build_key is None:
        return None
    return backend.name, impl.kernel, impl.build_key(case)


def first_builds(items: list) -> set[int]:
    """``id`` of each item that is the first (in collection order) of its build (:func:`build_of`)."""
    seen, out = set(), set()
    for item in items:
        build = build_of(item)
        if build is not None and build not in seen:
            seen.add(build)
            out.add(id(item))
    return out


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long tests and each first-use build's first cell first, one at the head of each worker's share, the serial
    ones together at one head (after every deselection)."""
    if active(config) is None:
        return
    serial = {id(i) for i in items if i.get_closest_marker(SERIAL) is not None}
    builds = first_builds([i for i in items if id(i) not in serial])
    items[:] = long_first(items, lambda i: i.get_closest_marker(LONG) is not None or id(i) in builds,
                          worker_count(config), lambda i: id(i) in serial)
