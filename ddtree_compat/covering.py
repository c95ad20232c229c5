"""Covering arrays for case grids: every pair of values of any two dimensions in some row (strength 2), made by
``covertable`` (greedy, hash-sorted: the same dimensions give the same rows in the same order, so case ids and
their order are stable). Torch-free (records import it).
"""

from __future__ import annotations

from itertools import product
from typing import Sequence


def pairwise(dims: dict[str, Sequence], start: Sequence[dict] = ()) -> list[dict]:
    """Rows (``{dimension: value}``, keys in ``dims`` order) covering every pair of values of every two
    dimensions (the product when that is no larger). ``start``: rows over some of the dimensions that must be
    kept (each appears, completed with the other dimensions, before the rows added for the pairs left).

    Raises:
        ValueError: a dimension without values.
    """
    from covertable import make

    names = list(dims)
    values = {n: list(dims[n]) for n in names}
    if any(not v for v in values.values()):
        raise ValueError(f"every dimension needs a value: {dims}")
    sizes = [len(values[n]) for n in names]
    total = 1
    for s in sizes:
        total *= s
    if not start and (len(names) <= 2 or total <= max(a * b for i, a in enumerate(sizes) for b in sizes[i + 1:])):
        return [dict(zip(names, combo)) for combo in product(*values.values())]
    rows = make(values, presets=[dict(r) for r in start]) if len(names) > 1 else [{names[0]: v} for v in values[names[0]]]
    return [{n: r[n] for n in names} for r in rows]


def missing_pairs(rows: Sequence[dict], dims: dict[str, Sequence]) -> list[tuple]:
    """The ``(dim, value, dim, value)`` pairs of ``dims`` no row holds (``[]``: ``rows`` cover every pair)."""
    names = list(dims)
    seen = {(x, r[x], y, r[y]) for r in rows for i, x in enumerate(names) for y in names[i + 1:]}
    return [(x, a, y, b) for i, x in enumerate(names) for y in names[i + 1:]
            for a in dims[x] for b in dims[y] if (x, a, y, b) not in seen]
