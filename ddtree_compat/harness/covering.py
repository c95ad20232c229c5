"""Covering arrays for case grids: every pair of values of any two dimensions in some row (strength 2),
built with IPOG (Lei, Kacker, Kuhn, Okun, Lawrence: "IPOG: A General Strategy for T-Way Software
Testing", 2007): start from all pairs of the first two dimensions, then add one dimension at a time,
first extending the existing rows with the value that covers most uncovered pairs (horizontal growth),
then adding rows for the pairs still uncovered (vertical growth). Deterministic: the same dimensions give
the same rows in the same order, so case ids and their order are stable. Torch-free (records import it).
"""

from __future__ import annotations

from itertools import product
from typing import Sequence


def pairwise(dims: dict[str, Sequence], start: Sequence[dict] = ()) -> list[dict]:
    """Rows (``{dimension: value}``) covering every pair of values of every two dimensions (the product
    when that is no larger). ``start``: rows over the first dimensions of ``dims`` that already cover their
    pairs (a full product, say); the rows returned extend them (in order) with the other dimensions.

    Raises:
        ValueError: a dimension without values.
    """
    names = list(dims)
    values = [list(dims[n]) for n in names]
    if any(not v for v in values):
        raise ValueError(f"every dimension needs a value: {dims}")
    index = [{v: i for i, v in enumerate(vals)} for vals in values]
    if start:
        first = len(start[0])
        rows = [[index[i][r[n]] for i, n in enumerate(names[:first])] for r in start]
    else:
        total = 1
        for v in values:
            total *= len(v)
        first = len(names) if len(names) <= 2 or total <= len(values[0]) * len(values[1]) else 2
        rows = [list(r) for r in product(*(range(len(v)) for v in values[:first]))]
    for k in range(first, len(names)):
        n_new = len(values[k])
        uncovered = {(j, a, b) for j in range(k) for a in range(len(values[j])) for b in range(n_new)}
        for row in rows:  # horizontal growth: the value covering most uncovered pairs (first on a tie)
            gain = [sum((j, row[j], b) in uncovered for j in range(k)) for b in range(n_new)]
            best = gain.index(max(gain))
            row.append(best)
            uncovered -= {(j, row[j], best) for j in range(k)}
        extra: list[list] = []  # vertical growth: each pair left, into the first new row that can take it
        for j, a, b in sorted(uncovered):
            for row in extra:
                if row[k] == b and row[j] in (None, a):
                    row[j] = a
                    break
            else:
                row = [None] * (k + 1)
                row[j], row[k] = a, b
                extra.append(row)
        rows += [[0 if x is None else x for x in r] for r in extra]
    return [{n: values[i][r[i]] for i, n in enumerate(names)} for r in rows]


def missing_pairs(rows: Sequence[dict], dims: dict[str, Sequence]) -> list[tuple]:
    """The ``(dim, value, dim, value)`` pairs of ``dims`` no row holds (``[]``: ``rows`` cover every pair)."""
    names = list(dims)
    seen = {(x, r[x], y, r[y]) for r in rows for i, x in enumerate(names) for y in names[i + 1:]}
    return [(x, a, y, b) for i, x in enumerate(names) for y in names[i + 1:]
            for a in dims[x] for b in dims[y] if (x, a, y, b) not in seen]
