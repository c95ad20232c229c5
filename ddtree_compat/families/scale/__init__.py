"""Deployment shapes: every family's kernels at the batches where their tensors' offsets pass 2^31 and 2^32
(:mod:`.boundaries`), judged on every row by plants (:mod:`.oracle`); the envelope (:mod:`.envelope`)."""
