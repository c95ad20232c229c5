"""Deliberately wrong samplers (test-only): each plants one skew of :mod:`.skews` into the family's reference
(:class:`.reference.SamplingReference`), row by row. The exact cells must call each ``wrong`` where its decisions
differ on the given coins, and the distribution cells' law test (:mod:`.distribution`) must reject each on the cases
whose law it changes (``docs/sampling-kernels.md`` has the power table; ``tests/unit/test_sampling_checks.py`` holds
every skew to a failing distribution cell)."""

from __future__ import annotations

from . import skews as K
from .reference import SamplingReference


def _variant(skew: str) -> type:
    name = "".join(part.title() for part in skew.split("-"))
    return type(name, (SamplingReference,), {"name": f"mutant-sampling-{skew}", "skew": skew,
                                              "__doc__": f"The reference sampler with the skew {skew!r} planted."})


KeepRejected = _variant(K.KEEP_REJECTED)
ChildRow = _variant(K.CHILD_ROW)
FreshUniform = _variant(K.FRESH_UNIFORM)
NoAccumulate = _variant(K.NO_ACCUMULATE)
StaleCoin = _variant(K.STALE_COIN)
ReusedCoin = _variant(K.REUSED_COIN)
UnscaledCoin = _variant(K.UNSCALED_COIN)
InvertedRatio = _variant(K.INVERTED_RATIO)
UnscaledResidual = _variant(K.UNSCALED_RESIDUAL)
VARIANTS = (KeepRejected, ChildRow, FreshUniform, NoAccumulate, StaleCoin, ReusedCoin, UnscaledCoin, InvertedRatio,
            UnscaledResidual)
"""One broken sampler per skew (``--ddtree-backend ddtree_compat.families.sampling.variants:ChildRow``)."""
