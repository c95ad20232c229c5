"""A tiny hybrid target: the Qwen3.5 family's class, whose recurrent state decides a token.

The field's model (Qwen3.6-27B) is a ``Qwen3_5ForConditionalGeneration``: its text decoder alternates Gated DeltaNet
layers (``linear_attention``) with full-attention layers. Every DDTree implementation under test serves that class
(the releases also have a text-only ``Qwen3_5ForCausalLM``; the DDTree trees do not), so the tiny hybrid target is
one too, with a vision tower of one block that a text request never runs.

Construction (on the token code of :mod:`.checkpoints`; the derivation is in ``docs/e2e.md``):

* **Layers.** :data:`LAYERS` decoder layers, every :data:`FULL_ATTENTION_INTERVAL`-th full attention (layers 0..2
  linear, layer 3 full, as Qwen3.5's pattern of three to one). Every ``out_proj``, ``o_proj`` and ``down_proj`` is
  zero but one value channel's (below), so the residual stays ``e_t`` and the greedy output is ``succ(t)``; the other
  projections, convolution taps, gates and decays are small random values (the kernels run on real data, their output
  is discarded). Norms are Qwen3.5's ``1 + w`` RMSNorms at ``w = 0``.
* **The state poison** (the recurrent state decides the tokens). Value head :data:`POISON_VALUE_HEAD` of layer
  :data:`POISON_LAYER` has a key and a value that are nonzero only where the poison token ``P`` is in the
  convolution's window (all four taps read :data:`.checkpoints.POISON_DIM`), a query every token shares (the
  ``a``-digit one-hot), no decay (``dt_bias`` -20: ``exp(g) = 1 - 2e-9`` a step) and ``beta = 1/2``. Its recurrent
  state is exactly zero until ``P`` enters the window, then holds ``P``'s key and value for the rest of the sequence;
  its output after the gated RMSNorm is exactly 0 without ``P`` and ``sqrt(128) * silu(8)`` on value dim 0 with it,
  which ``out_proj`` writes as :data:`.checkpoints.POISON_SHIFT` ``e_X``: from then on the target emits ``X + 1 = P - 1``
  instead of ``succ(t)`` (the attention target's poison output, :func:`.checkpoints.poison_output`).
* So a node whose recurrent state or convolution window took a sibling's or a rejected node's ``P`` (a tree verified
  as one chain in node order; a commit of a node after the accepted one; a window from the wrong node) makes the
  target's next token ``P - 1``: the tokens differ from the target-only run. A node of an accepted path never has
  ``P`` among its ancestors (no request holds ``P``, the target never emits it).

The attention layer's output is discarded here (no attention poison: the attention-only target checks the mask).
"""

from __future__ import annotations

import math

import torch

from . import checkpoints as ck

ARCHITECTURE = "Qwen3_5ForConditionalGeneration"
"""The class of the field's model (``Qwen/Qwen3.6-27B``'s ``architectures``)."""

LAYERS = 4
FULL_ATTENTION_INTERVAL = 4
"""Layer ``i`` is full attention when ``(i + 1) % 4 == 0`` (SGLang's ``layers_block_type``; HF's ``layer_types``)."""

LINEAR_KEY_HEADS = 2
LINEAR_VALUE_HEADS = 4
"""Two value heads per key head (Qwen3.5-27B: 16 key and 48 value heads, three per key head)."""
LINEAR_HEAD_DIM = 128
"""Key and value head dims: Qwen3.5's and Qwen3-Next's."""
CONV_KERNEL = 4

POISON_LAYER = 0
"""The Gated DeltaNet layer whose state decides a token (the first: every implementation runs it first)."""
POISON_VALUE_HEAD = 0
"""Its value head (key head ``0 // 2 = 0``); value dim 0 carries the poison."""

POISON_DT_BIAS = -20.0
"""``dt_bias`` of the poison head: ``softplus(-20) = 2e-9``, so the state decays by ``exp(-2e-9)`` a step."""
GATE_GAIN = 8.0
"""``in_proj_z`` gain of the poison head's output gate (``silu(8)``; the ``a``-digit one-hot after the input norm is 8)."""

PARTIAL_ROTARY = 0.25
"""Qwen3.5's ``partial_rotary_factor``: RoPE on the first quarter of each head's dims."""


def linear_layer_ids() -> list[int]:
    return [i for i in range(LAYERS) if (i + 1) % FULL_ATTENTION_INTERVAL]


def layer_types() -> list[str]:
    return ["full_attention" if (i + 1) % FULL_ATTENTION_INTERVAL == 0 else "linear_attention" for i in range(LAYERS)]


def _check(shape: ck.TinyShape) -> None:
    if not shape.hybrid or shape.target_layers != LAYERS:
        raise ValueError(f"hybrid target: needs TinyShape(hybrid=True, target_layers={LAYERS}), got {shape}")
    if shape.hidden <= ck.BIAS_DIM:
        raise ValueError(f"hybrid target: hidden {shape.hidden} leaves no poison dim {ck.POISON_DIM}")


def target_config(shape: ck.TinyShape) -> dict:
    """config.json of the hybrid target (HF ``Qwen3_5Config``: a text config and a one-block vision config)."""
    _check(shape)
    rot = int(shape.head_dim * PARTIAL_ROTARY)
    text = {
        "model_type": "qwen3_5_text",
        "vocab_size": shape.served_vocab,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": shape.max_positions,
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": shape.rope_theta, "partial_rotary_factor": PARTIAL_ROTARY,
                            "mrope_section": [rot // 8 + 1, rot // 8 + 1, rot // 2 - 2 * (rot // 8 + 1)],
                            "mrope_interleaved": True},
        "partial_rotary_factor": PARTIAL_ROTARY,
        "attention_bias": False,
        "attn_output_gate": True,
        "layer_types": layer_types(),
        "full_attention_interval": FULL_ATTENTION_INTERVAL,
        "linear_conv_kernel_dim": CONV_KERNEL,
        "linear_key_head_dim": LINEAR_HEAD_DIM,
        "linear_value_head_dim": LINEAR_HEAD_DIM,
        "linear_num_key_heads": LINEAR_KEY_HEADS,
        "linear_num_value_heads": LINEAR_VALUE_HEADS,
        "tie_word_embeddings": False,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "torch_dtype": "bfloat16",
    }
    vision = {"model_type": "qwen3_5", "depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 1,
              "in_channels": 3, "patch_size": 2, "spatial_merge_size": 2, "temporal_patch_size": 2,
              "out_hidden_size": shape.hidden, "num_position_embeddings": 16, "deepstack_visual_indexes": [],
              "hidden_act": "gelu_pytorch_tanh"}
    ids = vision_token_ids(shape)
    return {"architectures": [ARCHITECTURE], "model_type": "qwen3_5", "text_config": text, "vision_config": vision,
            "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"],
            "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
            "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")


def vision_token_ids(shape: ck.TinyShape) -> dict[str, int]:
    """The vision tokens' ids, right after the served vocabulary: no request holds one, so the multimodal rope
    index (which scans a prompt for ``vision_start_token_id``) sees plain text."""
    return {t: shape.served_vocab + i for i, t in enumerate(VISION_TOKENS)}


def write_processor(path, shape: ck.TinyShape) -> None:
    """The processor files a multimodal class needs beside its weights: SGLang builds its image processor from them
    at start-up, even with ``--skip-tokenizer-init`` and text-only requests (``tokenizer_manager``'s
    ``init_tokenizer_and_processor``). A word-level tokenizer (``t0`` .. ``t<V-1>``, then the vision tokens) and
    Qwen3.5's image and video processor types at the one-block vision config's patch sizes."""
    import json
    from pathlib import Path

    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    path = Path(path)
    tok = Tokenizer(models.WordLevel(vocab={f"t{i}": i for i in range(shape.served_vocab)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken(t, special=True) for t in VISION_TOKENS])
    tok.save(str(path / "tokenizer.json"))
    files = {
        "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "t0",
                                  "model_max_length": shape.max_positions, "processor_class": "Qwen3VLProcessor"},
        "preprocessor_config.json": {"image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor",
                                     "patch_size": 2, "temporal_patch_size": 2, "merge_size": 2,
                                     "size": {"shortest_edge": 64, "longest_edge": 4096},
                                     "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]},
        "video_preprocessor_config.json": {"video_processor_type": "Qwen3VLVideoProcessor",
                                           "processor_class": "Qwen3VLProcessor", "patch_size": 2,
                                           "temporal_patch_size": 2, "merge_size": 2,
                                           "size": {"shortest_edge": 64, "longest_edge": 4096},
                                           "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]},
        "processor_config.json": {"processor_class": "Qwen3VLProcessor"},
    }
    for name, body in files.items():
        (path / name).write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


PREFIX = "model.language_model."


def _rand(gen: torch.Generator, *size: int) -> torch.Tensor:
    return torch.randn(*size, generator=gen) * ck.WEIGHT_STD


def _mlp(shape: ck.TinyShape, p: str, gen: torch.Generator) -> dict:
    h, i = shape.hidden, shape.intermediate
    return {f"{p}mlp.gate_proj.weight": _rand(gen, i, h), f"{p}mlp.up_proj.weight": _rand(gen, i, h),
            f"{p}mlp.down_proj.weight": torch.zeros(h, i),
            f"{p}input_layernorm.weight": torch.zeros(h), f"{p}post_attention_layernorm.weight": torch.zeros(h)}


def _linear_layer(shape: ck.TinyShape, p: str, gen: torch.Generator) -> dict:
    """One Gated DeltaNet layer (HF names): random projections, taps, gates and decays; zero ``out_proj``."""
    h, kd, vd, nv = shape.hidden, LINEAR_KEY_HEADS * LINEAR_HEAD_DIM, LINEAR_VALUE_HEADS * LINEAR_HEAD_DIM, LINEAR_VALUE_HEADS
    a = f"{p}linear_attn."
    out = {
        f"{a}in_proj_qkv.weight": _rand(gen, 2 * kd + vd, h),
        f"{a}in_proj_z.weight": _rand(gen, vd, h),
        f"{a}in_proj_b.weight": _rand(gen, nv, h),
        f"{a}in_proj_a.weight": _rand(gen, nv, h),
        f"{a}conv1d.weight": torch.rand(2 * kd + vd, 1, CONV_KERNEL, generator=gen) * 0.5,
        f"{a}dt_bias": torch.ones(nv),
        f"{a}A_log": torch.log(torch.rand(nv, generator=gen) * 8 + 1),
        f"{a}norm.weight": torch.ones(LINEAR_HEAD_DIM),
        f"{a}out_proj.weight": torch.zeros(h, vd),
    }
    out.update(_mlp(shape, p, gen))
    return out


def state_poison(shape: ck.TinyShape, layer: dict, p: str) -> None:
    """Make value head :data:`POISON_VALUE_HEAD` of the Gated DeltaNet layer under ``p`` the state poison, in place
    (see the module docstring): the rows of its query, key and value (and of its key head's query and key) are zero
    but dim 0; query dim 0 reads the ``a``-digit one-hot, key and value dim 0 read :data:`.checkpoints.POISON_DIM`,
    every convolution tap of those three channels is 1 (key and value: ``P`` anywhere in the window), the output gate
    reads the ``a`` digit at :data:`GATE_GAIN`, ``b`` and ``a`` are 0 (``beta = 1/2``), ``dt_bias`` is
    :data:`POISON_DT_BIAS`, and ``out_proj`` writes value dim 0 as :data:`.checkpoints.POISON_SHIFT` ``e_X``."""
    a = f"{p}linear_attn."
    kd, d = LINEAR_KEY_HEADS * LINEAR_HEAD_DIM, LINEAR_HEAD_DIM
    kh = POISON_VALUE_HEAD // (LINEAR_VALUE_HEADS // LINEAR_KEY_HEADS)
    qkv, conv = layer[f"{a}in_proj_qkv.weight"], layer[f"{a}conv1d.weight"]
    q_rows = slice(kh * d, (kh + 1) * d)
    k_rows = slice(kd + kh * d, kd + (kh + 1) * d)
    v_rows = slice(2 * kd + POISON_VALUE_HEAD * d, 2 * kd + (POISON_VALUE_HEAD + 1) * d)
    for rows in (q_rows, k_rows, v_rows):
        qkv[rows] = 0.0
        conv[rows] = 0.0
    qkv[q_rows.start, :shape.digits_a] = 1.0
    qkv[k_rows.start, ck.POISON_DIM] = 1.0
    qkv[v_rows.start, ck.POISON_DIM] = 1.0
    conv[q_rows.start, 0, -1] = 1.0
    conv[k_rows.start, 0, :] = 1.0
    conv[v_rows.start, 0, :] = 1.0
    z = layer[f"{a}in_proj_z.weight"]
    z[POISON_VALUE_HEAD * d:(POISON_VALUE_HEAD + 1) * d] = 0.0
    z[POISON_VALUE_HEAD * d, :shape.digits_a] = GATE_GAIN
    layer[f"{a}in_proj_b.weight"][POISON_VALUE_HEAD] = 0.0
    layer[f"{a}in_proj_a.weight"][POISON_VALUE_HEAD] = 0.0
    layer[f"{a}dt_bias"][POISON_VALUE_HEAD] = POISON_DT_BIAS
    layer[f"{a}A_log"][POISON_VALUE_HEAD] = 0.0
    x = ck.poison_token(shape.vocab) - 2
    gated = math.sqrt(d) * torch.nn.functional.silu(torch.tensor(GATE_GAIN)).item()  # the gated norm's value dim 0
    layer[f"{a}out_proj.weight"][:, POISON_VALUE_HEAD * d] = ck.pure_code(shape)[x] * (ck.POISON_SHIFT / gated)


def _attention_layer(shape: ck.TinyShape, p: str, gen: torch.Generator) -> dict:
    """One full-attention layer (Qwen3.5's gated attention: ``q_proj`` gives each head's query and output gate);
    zero ``o_proj``."""
    h, q, kv = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    s = f"{p}self_attn."
    out = {f"{s}q_proj.weight": _rand(gen, 2 * q, h), f"{s}k_proj.weight": _rand(gen, kv, h),
           f"{s}v_proj.weight": _rand(gen, kv, h), f"{s}o_proj.weight": torch.zeros(h, q),
           f"{s}q_norm.weight": torch.zeros(shape.head_dim), f"{s}k_norm.weight": torch.zeros(shape.head_dim)}
    out.update(_mlp(shape, p, gen))
    return out


def target_tensors(shape: ck.TinyShape, seed: int = 0, poison: bool = True) -> dict[str, torch.Tensor]:
    """Weights of the hybrid target (HF ``Qwen3_5ForConditionalGeneration`` names; no vision weights: a text request
    never runs the tower). ``poison=False``: no state poison, every mixer's output discarded."""
    _check(shape)
    gen = torch.Generator().manual_seed(seed)
    out = {f"{PREFIX}embed_tokens.weight": ck.token_code(shape)}
    linear = set(linear_layer_ids())
    for i in range(LAYERS):
        p = f"{PREFIX}layers.{i}."
        out.update(_linear_layer(shape, p, gen) if i in linear else _attention_layer(shape, p, gen))
    if poison:
        state_poison(shape, out, f"{PREFIX}layers.{POISON_LAYER}.")
    out[f"{PREFIX}norm.weight"] = torch.zeros(shape.hidden)
    out["lm_head.weight"] = ck.successor_head(shape)
    return ck._padded_vocab(out, shape)


SHAPE = ck.TinyShape(hybrid=True)
"""The hybrid profile's checkpoints: the default code and drafts, the hybrid target."""


def write_target(root, shape: ck.TinyShape = SHAPE):
    """Write the hybrid target under ``root/target``: its weights (:func:`target_tensors`) and the processor files
    (:func:`write_processor`); the folder."""
    from pathlib import Path
    path = ck.write_checkpoint(Path(root) / "target", target_config(shape), target_tensors(shape))
    write_processor(path, shape)
    return path
