"""The stated hypothesis test a distribution cell is judged by, and its power.

A distribution cell calls a sampler once with ``N`` rows of one case (the same tree and probabilities, fresh
coins per row) and counts what the rows emitted, cut to their first two tokens (:func:`.law.marginal`: the
first token; the first two, or the first and "stopped"). The null hypothesis is the oracle's exact law of those
categories (:mod:`.law`).

The test (:func:`gof_test`): Pearson's chi-square goodness of fit, ``scipy.stats.power_divergence`` with
``lambda_="pearson"``, after pooling (:func:`pool`: every cell's expected count at least
:data:`MIN_EXPECTED`), at the false-alarm rate :data:`ALPHA` per cell. An emitted category the null gives
probability 0 (a token the target cannot produce there) rejects at once, whatever the statistic says.

Power (:func:`power`): under an alternative law ``p1`` (a planted skew), Pearson's statistic is asymptotically
noncentral chi-square with the pooled cells' ``dof`` and noncentrality ``lambda = N * sum((p1 - p0)^2 / p0)``
(``scipy.stats.ncx2``); an alternative that puts mass ``m`` on categories of null probability 0 adds the chance
``1 - (1 - m)^N`` of seeing one. :func:`rows_needed` is the smallest ``N`` reaching a stated power.

SciPy is imported inside the functions: the family's records load without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

ALPHA = 1e-6
"""False-alarm rate of one distribution cell (a correct kernel fails it with this probability): a sweep of a
few hundred distribution cells fails by chance less than once in a thousand sweeps."""
POWER = 0.999
"""The power each planted skew is to be caught with, at :data:`ALPHA`, by the rows a cell draws."""
MIN_EXPECTED = 5.0
"""Pooling: every cell's expected count at least this (Cochran's rule for the chi-square approximation)."""

Key = Hashable


def pool(probs: Mapping[Key, float], n: int, min_expected: float = MIN_EXPECTED) -> list[tuple[Key, ...]]:
    """The cells of the test: categories of positive probability whose expected count ``n * p`` reaches
    ``min_expected`` stand alone; the rest are pooled into one cell, and while that cell's expected count is
    below ``min_expected`` the smallest standing cell joins it. Deterministic (sorted by probability, then key
    ``repr``); standing cells first in key order, the pooled cell last. Categories of probability 0 are no cell.
    """
    positive = sorted(((p, repr(k), k) for k, p in probs.items() if p > 0))
    alone = [(p, r, k) for p, r, k in positive if n * p >= min_expected]
    pooled = [(p, r, k) for p, r, k in positive if n * p < min_expected]
    while pooled and n * sum(p for p, _, _ in pooled) < min_expected and alone:
        pooled.append(alone.pop(0))
    cells = [(k,) for _, _, k in sorted(alone, key=lambda x: x[1])]
    if pooled:
        cells.append(tuple(k for _, _, k in sorted(pooled, key=lambda x: x[1])))
    return cells


@dataclass(frozen=True)
class TestResult:
    """One goodness-of-fit test.

    Attributes:
        statistic: Pearson's chi-square over the pooled cells (0 with fewer than two cells).
        p_value: its upper tail (1 with fewer than two cells; 0 when an impossible category was seen).
        dof: cells - 1.
        n: rows counted.
        alpha: the false-alarm rate the verdict is at.
        impossible: rows that emitted a category of null probability 0.
        reject: ``p_value < alpha`` or ``impossible > 0``.
        worst: the cell contributing most to the statistic: ``(categories, observed, expected)``.
    """

    statistic: float
    p_value: float
    dof: int
    n: int
    alpha: float
    impossible: int
    reject: bool
    worst: tuple = ()

    @property
    def verdict(self) -> str:
        return "reject" if self.reject else "pass"

    def describe(self) -> str:
        """One line for a failure message."""
        line = (f"chi-square {self.statistic:.1f} on {self.dof} dof, p = {self.p_value:.3g} (alpha {self.alpha:g}), "
                f"N = {self.n}")
        if self.impossible:
            line += f"; {self.impossible} rows emitted a sequence of probability 0"
        if self.worst:
            cats, obs, exp = self.worst
            line += f"; worst cell {list(cats)[:4]}: observed {obs}, expected {exp:.1f}"
        return line


def gof_test(observed: Mapping[Key, int], expected: Mapping[Key, float], alpha: float = ALPHA,
             min_expected: float = MIN_EXPECTED) -> TestResult:
    """Test observed category counts against the null law ``expected`` (probabilities summing to 1).

    Raises:
        ValueError: a negative count, or ``expected`` not summing to 1 within 1e-9.
    """
    from scipy.stats import power_divergence

    if any(v < 0 for v in observed.values()):
        raise ValueError("negative count")
    total_p = sum(p for p in expected.values() if p > 0)
    if abs(total_p - 1.0) > 1e-9:
        raise ValueError(f"expected probabilities sum to {total_p!r}, not 1")
    n = int(sum(observed.values()))
    impossible = sum(c for k, c in observed.items() if expected.get(k, 0.0) <= 0)
    cells = pool(expected, n, min_expected)
    if len(cells) < 2 or n == 0:
        return TestResult(0.0, 0.0 if impossible else 1.0, 0, n, alpha, impossible, impossible > 0)
    f_obs = [sum(observed.get(k, 0) for k in cell) for cell in cells]
    f_exp = [n * sum(expected[k] for k in cell) for cell in cells]
    scale = sum(f_obs) / sum(f_exp) if sum(f_exp) else 1.0  # impossible rows are not in f_obs
    f_exp = [e * scale for e in f_exp]
    statistic, p_value = power_divergence(f_obs, f_exp, lambda_="pearson")
    statistic, p_value = float(statistic), float(p_value)
    parts = [(o - e) ** 2 / e for o, e in zip(f_obs, f_exp)]
    i = max(range(len(parts)), key=parts.__getitem__)
    if impossible:
        p_value = 0.0
    return TestResult(statistic, p_value, len(cells) - 1, n, alpha, impossible, p_value < alpha or impossible > 0,
                      (cells[i], f_obs[i], f_exp[i]))


def noncentrality(null: Mapping[Key, float], alternative: Mapping[Key, float], cells: Sequence[tuple]) -> float:
    """``sum over cells of (p1 - p0)^2 / p0`` (per row: times ``N`` for the statistic's noncentrality)."""
    out = 0.0
    for cell in cells:
        p0 = sum(null[k] for k in cell)
        p1 = sum(alternative.get(k, 0.0) for k in cell)
        out += (p1 - p0) ** 2 / p0
    return out


def power(null: Mapping[Key, float], alternative: Mapping[Key, float], n: int, alpha: float = ALPHA,
          min_expected: float = MIN_EXPECTED) -> float:
    """The chance that :func:`gof_test` rejects ``N = n`` rows drawn from ``alternative``: the noncentral
    chi-square tail beyond the null's critical value, combined with the chance of seeing a category of null
    probability 0."""
    from scipy.stats import chi2, ncx2

    outside = sum(p for k, p in alternative.items() if null.get(k, 0.0) <= 0)
    miss_outside = (1.0 - outside) ** n
    cells = pool(null, n, min_expected)
    if len(cells) < 2:
        return 1.0 - miss_outside
    dof = len(cells) - 1
    critical = chi2.isf(alpha, dof)
    lam = n * noncentrality(null, alternative, cells)
    caught = float(ncx2.sf(critical, dof, lam)) if lam > 0 else alpha
    return 1.0 - miss_outside * (1.0 - caught)


def rows_needed(null: Mapping[Key, float], alternative: Mapping[Key, float], target: float = POWER,
                alpha: float = ALPHA, min_expected: float = MIN_EXPECTED, limit: int = 1 << 30) -> int | None:
    """The smallest ``N`` with :func:`power` at least ``target`` (searched by doubling, then bisection; the
    pooling moves with ``N``, so the result is checked at the ``N`` returned), or ``None`` below ``limit``
    (an alternative the test cannot tell from the null: the same law on the cells)."""
    n = 16
    while power(null, alternative, n, alpha, min_expected) < target:
        n *= 2
        if n > limit:
            return None
    lo, hi = n // 2, n
    while hi - lo > max(1, hi // 1000):
        mid = (lo + hi) // 2
        if power(null, alternative, mid, alpha, min_expected) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def counts(samples: Sequence[Key]) -> dict:
    """Category counts of a sequence of keys."""
    out: dict = {}
    for k in samples:
        out[k] = out.get(k, 0) + 1
    return out


def binomial_band(n: int, p: float, alpha: float) -> tuple[int, int]:
    """The two-sided ``1 - alpha`` range of a binomial count (for tests of the test's own rates)."""
    from scipy.stats import binom

    return int(binom.ppf(alpha / 2, n, p)), int(binom.isf(alpha / 2, n, p))


def round_up(n: int) -> int:
    """``n`` rounded up to two significant binary digits (a round number of rows to state)."""
    if n <= 4:
        return n
    top = 1 << (n.bit_length() - 1)
    return top if n == top else (top + top // 2 if n <= top + top // 2 else 2 * top)


__all__ = ["ALPHA", "POWER", "MIN_EXPECTED", "pool", "TestResult", "gof_test", "noncentrality", "power",
           "rows_needed", "counts", "binomial_band", "round_up"]
