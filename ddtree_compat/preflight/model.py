"""A model's shape from its ``config.json``, read offline (:func:`read_model`): vocabulary, attention heads and
head dims, the layer types (a hybrid model's Gated DeltaNet layers and their heads), the weights' dtype.

A multimodal class (Qwen3.5 / 3.6 as ``*ForConditionalGeneration``) nests its language model under
``text_config``; that is the one read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .launch import LaunchError

LINEAR = "linear_attention"
FULL = "full_attention"


@dataclass(frozen=True)
class ModelShape:
    """What preflight needs of a model (its ``config.json``'s language-model fields)."""

    architecture: str
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    layer_types: tuple[str, ...]
    dtype: str = "bfloat16"
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_dim: int = 0
    linear_value_dim: int = 0
    conv_kernel: int = 0
    context: int = 0
    """``max_position_embeddings``: SGLang's context length when ``--context-length`` is not given (0: not said)."""

    @property
    def hybrid(self) -> bool:
        """Linear-attention (Gated DeltaNet) layers beside full-attention ones: the recurrent state is verified too."""
        return LINEAR in self.layer_types

    def describe(self) -> str:
        lines = self.layer_types.count(LINEAR)
        kind = f"hybrid: {lines} linear-attention + {len(self.layer_types) - lines} full-attention layers, " \
               f"GDN heads {self.linear_key_heads}/{self.linear_value_heads} d{self.linear_key_dim}" if self.hybrid \
            else f"{len(self.layer_types)} attention layers"
        return (f"{self.architecture}: vocabulary {self.vocab}, {self.heads} query / {self.kv_heads} KV heads "
                f"d{self.head_dim}, {kind}, {self.dtype}")


def shape_of(config: dict, where: str = "config.json") -> ModelShape:
    """The shape of one ``config.json`` (a dict).

    Raises:
        LaunchError: a field the shape needs is missing.
    """
    text = config.get("text_config") or config
    arch = (config.get("architectures") or [config.get("model_type", "?")])[0]
    try:
        heads = int(text["num_attention_heads"])
        layers = int(text["num_hidden_layers"])
        vocab = int(text.get("vocab_size") or config["vocab_size"])
        head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError) as e:
        raise LaunchError(f"{where}: no {e} field: not a language model's config.json") from None
    types = text.get("layer_types")
    if not types and text.get("full_attention_interval"):  # Qwen3-Next: every n-th layer full attention
        n = int(text["full_attention_interval"])
        types = [FULL if (i + 1) % n == 0 else LINEAR for i in range(layers)]
    types = tuple(types or [FULL] * layers)
    return ModelShape(arch, vocab, heads, int(text.get("num_key_value_heads", heads)), head_dim, types,
                      str(text.get("torch_dtype") or config.get("torch_dtype") or text.get("dtype") or "bfloat16"),
                      int(text.get("linear_num_key_heads", 0) or 0), int(text.get("linear_num_value_heads", 0) or 0),
                      int(text.get("linear_key_head_dim", 0) or 0), int(text.get("linear_value_head_dim", 0) or 0),
                      int(text.get("linear_conv_kernel_dim", 0) or 0),
                      int(text.get("max_position_embeddings") or config.get("max_position_embeddings") or 0))


def read_model(model_path: str | None, model_config: str | None = None) -> ModelShape:
    """The shape from ``model_config`` (a ``config.json``), else ``model_path/config.json`` (a local folder).

    Raises:
        LaunchError: neither names a readable ``config.json``.
    """
    if model_config:
        path = Path(model_config)
    elif model_path and Path(model_path).is_dir():
        path = Path(model_path) / "config.json"
    else:
        raise LaunchError(f"--model-path {model_path!r} is no local folder: give its config.json with --model-config "
                          "FILE (preflight reads models offline)")
    try:
        return shape_of(json.loads(path.read_text()), str(path))
    except OSError as e:
        raise LaunchError(f"{path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise LaunchError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
