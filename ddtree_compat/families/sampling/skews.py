"""The planted skews: realistic wrong versions of the samplers, one wrong thing each. Each is stated twice, as a
decision rule (:mod:`.oracle`, ``skew=``; what a broken backend of ``variants.py`` runs) and as an exact law
(:mod:`.law`, ``skew=``; what the power analysis of :mod:`.distribution` uses); a unit test holds the two
statements to each other."""

KEEP_REJECTED = "keep-rejected"
"""The bonus drawn from the target row without removing the rejected children's mass (tree), or from ``p``
instead of ``relu(p - q)`` (chain)."""
CHILD_ROW = "child-row"
"""Acceptance (and the removed mass) read from the child's target row instead of its parent's (chain: the row of
the draft's own step instead of the step before)."""
FRESH_UNIFORM = "fresh-uniform"
"""Every sibling compared with a coin of its own, ``uniform_samples[child]``, instead of the coin its parent's
siblings share, ``uniform_samples[parent]``."""
NO_ACCUMULATE = "no-accumulate"
"""Each sibling compared with its own mass instead of the siblings' cumulative mass (the shared coin)."""
STALE_COIN = "stale-coin"
"""The coin not refreshed after an accepted draft: the root's coin decides every depth."""
REUSED_COIN = "reused-coin"
"""The bonus token drawn with the coin of the last test instead of the final coin (the node's coin; the chain:
the rejecting step's coin; block verification: the accepting step's coin)."""
UNSCALED_COIN = "unscaled-coin"
"""The bonus token's coin not scaled by the residual's total (the residual's CDF compared with the bare coin;
past the total: the fallback token)."""
INVERTED_RATIO = "inverted-ratio"
"""Chain: accept when ``coin * p < q`` (target and draft swapped)."""
UNSCALED_RESIDUAL = "unscaled-residual"
"""Chain, block verification: the bonus from ``relu(p - q)`` instead of ``relu(h * p - q)``."""

TREE_SKEWS = (KEEP_REJECTED, CHILD_ROW, FRESH_UNIFORM, NO_ACCUMULATE, STALE_COIN, REUSED_COIN, UNSCALED_COIN)
CHAIN_SKEWS = (KEEP_REJECTED, CHILD_ROW, STALE_COIN, REUSED_COIN, UNSCALED_COIN, INVERTED_RATIO)
BLOCK_SKEWS = (KEEP_REJECTED, UNSCALED_RESIDUAL, REUSED_COIN, UNSCALED_COIN)
SKEWS = (*TREE_SKEWS, INVERTED_RATIO, UNSCALED_RESIDUAL)
