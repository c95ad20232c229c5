"""The check harness every kernel family shares (:mod:`ddtree_compat.families`): guarded, poisoned buffers
(:mod:`.buffers`), the call-once rule and verdicts (:mod:`.calls`), CUDA-graph capture and replay
(:mod:`.graphs`). It knows no family: families import it, never the other way."""
