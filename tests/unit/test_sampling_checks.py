"""The sampling family's checks on the CPU: the reference column passes every exact case and its distribution cells;
each planted skew (``variants.py``) is called ``wrong``: by an exact cell, and by the law test of a distribution cell
(its own finding, apart from the rows' comparison with the oracle) at the rows the power analysis asks for."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ddtree_compat.families.sampling import distribution as D
from ddtree_compat.families.sampling import records as R
from ddtree_compat.families.sampling import skews as K
from ddtree_compat.families.sampling.checks import chain_speculative_sampling, tree_speculative_sampling
from ddtree_compat.families.sampling.reference import SamplingReference
from ddtree_compat.families.sampling.variants import VARIANTS

pytest.importorskip("scipy")

CPU = "cpu"
RUN = {"tree": tree_speculative_sampling, "chain": chain_speculative_sampling}
EXACT = R.tree_exact_cases() + R.chain_exact_cases()


@pytest.mark.parametrize("case", EXACT, ids=lambda c: c.id)
def test_the_reference_passes_every_exact_case(case):
    verdict = RUN[case.sampler](case, SamplingReference(), CPU)
    assert verdict.outcome == "pass", verdict.message


@pytest.mark.parametrize("case", R.tree_distribution_cases(rows=512) + R.chain_distribution_cases(rows=512),
                         ids=lambda c: c.id)
def test_the_reference_passes_the_distribution_cells_and_states_the_test(case):
    verdict = RUN[case.sampler](case, SamplingReference(), CPU)
    assert verdict.outcome == "pass", verdict.message
    assert verdict.message.startswith("law test: chi-square") and "N = 512" in verdict.message
    assert verdict.measured["rows"] == 512 and 0.0 <= verdict.measured["p_value"] <= 1.0


def _applies(skew: str, case: R.SamplingCase) -> bool:
    if case.sampler == "chain":
        return skew in (K.BLOCK_SKEWS if case.block else K.CHAIN_SKEWS)
    return skew in K.TREE_SKEWS


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.skew)
def test_every_skew_fails_an_exact_cell(variant):
    failing = [c.id for c in EXACT if _applies(variant.skew, c) and RUN[c.sampler](c, variant(), CPU).outcome
               in ("wrong", "zero-accept")]
    assert failing, f"no exact case tells {variant.skew} from the sampler (the exact grid misses it)"


def _easiest(skew: str) -> tuple[R.SamplingCase, int]:
    """The distribution case whose law the skew moves most cheaply, and the rows for the stated power there."""
    best = None
    for case in R.tree_distribution_cases(rows=1) + R.chain_distribution_cases(rows=1):
        if case.sampler not in RUN or not _applies(skew, case):
            continue
        rows = D.rows_needed(case.categories(), case.categories(skew))
        if rows is not None and (best is None or rows < best[1]):
            best = (case, rows)
    assert best is not None, f"no distribution case's law is moved by {skew}"
    return best


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.skew)
def test_every_skew_fails_the_law_test_of_a_distribution_cell(variant):
    """At the rows the power analysis gives for power 0.999 at the cell's false-alarm rate (fixed seeds: the
    outcome is the same at every run); the law test's own line, not only the rows' comparison with the oracle."""
    case, rows = _easiest(variant.skew)
    cell = replace(case, batch=D.round_up(rows))
    verdict = RUN[cell.sampler](cell, variant(), CPU)
    assert verdict.outcome == "wrong" and "law test rejects" in verdict.message, (cell.id, verdict.message[:500])
    assert verdict.measured["p_value"] < D.ALPHA
