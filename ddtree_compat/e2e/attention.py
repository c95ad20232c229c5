"""The attention backends the e2e tier serves each configuration on: one encoding, a name of
:data:`ATTENTION_BACKENDS`. ``default`` (:data:`SGLANG_CHOICE`) is SGLang's own choice for the configuration on this
host (no ``--attention-backend``: resolved by asking the installed SGLang, :func:`.probe.resolve_attention`); the
others are passed as ``--attention-backend``. Torch-free: the plugin parses ``--ddtree-e2e-attention`` with it."""

from __future__ import annotations

SGLANG_CHOICE = "default"
"""A configuration's attention backend when SGLang chooses it (no ``--attention-backend``)."""
ATTENTION_BACKENDS = (SGLANG_CHOICE, "triton", "flashinfer", "fa3")
"""Values of ``--ddtree-e2e-attention``: ``default`` and the ``--attention-backend`` values the tier knows how to
judge."""
TARGET_ATTENTION = "triton"
"""The target-only server's attention backend (its tokens are the lossless baseline; triton serves everywhere)."""


def parse_attention(value: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """``--ddtree-e2e-attention`` (comma-separated, repeatable) as a tuple of names, in order, without repeats;
    empty: every name of :data:`ATTENTION_BACKENDS`.

    Raises:
        ValueError: an unknown name (the message names the allowed ones).
    """
    items = [value] if isinstance(value, str) else list(value or ())
    names = [n.strip() for item in items for n in item.split(",") if n.strip()]
    bad = [n for n in names if n not in ATTENTION_BACKENDS]
    if bad:
        raise ValueError(f"unknown attention backend {bad[0]!r}; allowed: {', '.join(ATTENTION_BACKENDS)}")
    return tuple(dict.fromkeys(names)) or ATTENTION_BACKENDS
