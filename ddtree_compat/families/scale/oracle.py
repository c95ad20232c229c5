"""What a scale cell's kernel must write, known by rule at any size: the plants that let every row be judged
without a full-size reference. Pure integer rules (they take Python ints, NumPy arrays or torch tensors alike).

* Sampling verify (the tree sampler, the chain sampler, the DDTree sampler) and greedy verify: each request's draft
  is a chain of ``B`` tokens; the target puts probability 1 on the next draft token at every node (its argmax, for
  greedy verify) and on the bonus token at the last. Every draft is accepted whatever the coins, and the bonus
  token is the last node's one-hot: accept length ``B`` per request, the emitted tokens ``token(b, 1..B+1)``. The
  tokens sit in the last :data:`WINDOW` columns of each row, the largest offsets of the probabilities tensor.
* ``req_to_token``: request ``b`` owns row ``b + 1`` (row 0 is the pool's padding row) and commits a verify block
  of ``q`` slots at the end of its context (the row's largest offsets); the slots follow :func:`slot`.
* the KV copy: rows move from the top of the pool (the largest offsets) to just below, by :func:`move_plan`;
  each source row holds its own slot number.
* verify attention: every V row of request ``b`` (prefix and tree) is :func:`attention_value`, so each output row is
  that row whatever the weights;
* the FlashAttention tree-verify page table: row ``(b, i)`` holds request ``b``'s ``req_to_token`` prefix and then
  its verify slots (:func:`slot`), by the ancestor-only rule of a chain.
"""

from __future__ import annotations

WINDOW = 4093
"""Tokens of a request are drawn from the last ``min(WINDOW, V)`` ids (a prime: consecutive requests differ)."""
_STEP_B, _STEP_I = 7919, 104729


def token(b, i, vocab: int):
    """Request ``b``'s token at chain depth ``i`` (0: the root; ``B + 1``: the bonus token)."""
    window = min(WINDOW, vocab)
    return vocab - 1 - ((b * _STEP_B + i * _STEP_I) % window)


def slot(b, i, context: int):
    """The KV slot request ``b`` writes at position ``i`` of its row (``1 .. 2^31 - 1``: int32, never the
    padding slot 0)."""
    return 1 + (b * context + i) % (2 ** 31 - 2)


def verify_block_start(context: int, q: int) -> int:
    """Where a request's verify block of ``q`` slots starts in its ``req_to_token`` row: the end of the row."""
    return context - q


def move_plan(pool_tokens: int, moved: int) -> tuple[int, int]:
    """``(src_start, tgt_start)``: ``moved`` rows read from the pool's last ``moved`` slots and written to the
    ``moved`` slots before them (sources and targets do not overlap)."""
    return pool_tokens - moved, pool_tokens - 2 * moved


def attention_value(b, h, d):
    """Verify attention: the V row every token of request ``b`` holds at KV head ``h``, dim ``d``: a multiple of 1/16
    in [-15/16, 15/16] (exact in bf16), different between neighbouring requests. With every V row of a request equal,
    each output row of that request is this row, whatever the attention weights."""
    return ((b * 7 + h * 3 + d) % 31 - 15) / 16
