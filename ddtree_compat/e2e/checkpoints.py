"""Tiny checkpoints with a known greedy function, written by the suite (config.json + safetensors).

Construction (the derivation is in ``docs/e2e.md``):

* **Token code.** Vocabulary ``V = NA * NB`` (default 8 x 64 = 512). Token ``t`` is the digit pair
  ``(a, b) = divmod(t, NB)``; its embedding ``e_t`` (hidden size ``H >= NA + NB``) is one-hot in dims
  ``0..NA-1`` (digit ``a``) plus one-hot in dims ``NA..NA+NB-1`` (digit ``b``), zero elsewhere. So
  ``e_u . e_t`` counts the digits ``u`` and ``t`` share: 2 for ``u == t``, at most 1 otherwise.
* **Target** (``Qwen3ForCausalLM``): every MLP ``down_proj`` is zero and so is every attention ``o_proj``
  but one head's, the *poison head* (:func:`poison_head`); the residual stream stays ``e_t`` through every
  layer whatever the other heads read (their q/k/v, gate/up are small random weights: the kernels still
  run on real data, their output is discarded). The final RMSNorm turns ``e_t`` into ``sqrt(H/2) * e_t``,
  and ``lm_head`` row ``s`` is ``e_{s-1}``: the logit of ``s`` is ``sqrt(H/2)`` times the digits ``s-1``
  shares with ``t``, largest (by ``sqrt(H/2)``, 8 at H=128) at ``s = t + 1``. Greedy output:
  ``succ(t) = (t + 1) mod V``, whatever the context, as long as the context holds no poison token.
* **Poison** (attention decides the tokens). Token :func:`poison_token` ``P = V - 2`` carries one more
  embedding dim, :data:`POISON_DIM`; the target never emits it (its ``lm_head`` row is
  :data:`BIAS_DIM` only, a dim the target's residual never has: logit 0) and no request reaches it
  (:mod:`.configs` keeps prompts and outputs below ``P - 1``). Head 0 of the target's last layer has a
  key that is nonzero only on ``P`` (read from ``POISON_DIM``, on the slowest RoPE pair: it scores
  ``128 cos(distance * 1.3e-4)`` nats against a constant query, every other key 0) and a value nonzero
  only on ``P``, which ``o_proj`` writes as ``~4 e_X`` (``X = P - 2``): a query that sees ``P`` emits
  ``X + 1 = P - 1`` instead of ``succ(t)``; a query that does not see it gets exactly 0 from that head.
  Every draft ranks ``P`` second where it agrees (logit 24 between the top-1's 32 and the rest's <= 16;
  first where it disagrees), so speculative trees hold poison siblings and chains hold a poison node
  where the draft disagrees. With an ancestor-only mask no node on an accepted path sees ``P``; a
  sibling or a later node made visible, or a rejected node's KV kept, changes the target's tokens.
* **Drafts** read the same code through a diagonal map ``A = I - 2 D``, ``D`` the indicator of the
  ``b``-digit dims of a residue class ``S = {b : b mod p == p - 1}`` (:class:`Agreement`). For
  ``t`` outside ``S``, ``A e_t = e_t``: the draft's top-1 is ``succ(t)``. For ``t`` in ``S`` the
  ``b`` one-hot flips sign: ``succ(t)`` scores 0 while 63 tokens score 1, so ``succ(t)`` is outside
  the draft's top-63 (any top-k a tree uses). Logits are scaled by :data:`DRAFT_LOGIT_SCALE` so an
  agreeing top-1 has probability ``>= 1 - 71 e^-16`` and a tree keeps the whole top-1 chain first.
  ``p = 1`` never agrees (negative control), no ``p`` always agrees.

  - EAGLE (``LlamaForCausalLMEagle``, SGLang ``models/llama_eagle.py``): SGLang replaces its
    ``embed_tokens`` and ``lm_head`` by the target's (``eagle_worker_v2.init_lm_head``); its input is
    ``fc(cat(embed(token), target_hidden))``, so ``fc.weight = scale * [A | 0]`` (``fc.bias = 0``)
    makes its output ``scale * A e_t`` (o_proj / down_proj zero; layer 0 has no input norm, no final
    norm) and ignores the target's hidden state.
  - STANDALONE (``Qwen3ForCausalLM``, 1 layer, own embedding and head:
    ``standalone_worker_v2``): final norm weight ``scale / sqrt(H/2)``, ``lm_head = W_target A``.
  - DFLASH (``DFlashDraftModel``, SGLang ``models/dflash.py``; DDTREE uses the same draft): shares
    the target's embedding and head; its block's mask rows read the context through RoPE, one
    position 65 back, and draft ``r + j`` at depth ``j`` on a consecutive context, through the same
    map ``A`` (:mod:`.dflash` has the construction).

Tensors are written in bfloat16 (every value of the code, heads and maps is exact in
bfloat16; the DFlash selector's RoPE phases are rounded, which its margin absorbs).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

REAL_VOCAB = 248320
"""The field's model family's vocabulary (Qwen3.5 / 3.6): the ``scale`` e2e profile's :attr:`TinyShape.served_vocab`
(its embedding and ``lm_head`` are 248320 x 128 in bf16, about 64 MB each)."""

POISON_DIM = 96
"""Embedding dim set only on the poison token (the target's poison head reads its key and value from it)."""

BIAS_DIM = 112
"""Dim the drafts write a constant into (the target's residual never has it); ``lm_head`` row ``P`` reads
it, so every draft gives the poison token logit :data:`POISON_DRAFT_LOGIT` and the target gives it 0."""

POISON_DRAFT_LOGIT = 24.0
"""The drafts' logit of the poison token: below an agreeing top-1 (``2 * DRAFT_LOGIT_SCALE`` = 32), above
every other candidate (<= 16)."""

POISON_LAYER_HEAD = 0
"""The poison head is this head of the target's last layer."""

POISON_ROPE_DIM = 31
"""Head dim of the poison head's query and key: the slowest RoPE pair (``theta = 10000^(-62/64)``), so the
poison key scores the same at any distance up to ``max_positions``."""

POISON_QK_GAIN = 4.0
"""``q_norm`` / ``k_norm`` weight of :data:`POISON_ROPE_DIM`: the poison key scores ``8 * 4 * 4 = 128`` nats."""

POISON_SHIFT = 4.0
"""How much of ``e_X`` a query that sees the poison adds to its residual (> 2 moves the argmax to ``X + 1``)."""

DRAFT_LOGIT_SCALE = 16.0
"""Draft logits are this times the shared-digit count (EAGLE: ``fc`` gain; STANDALONE: norm x head)."""

WEIGHT_STD = 0.02
"""Standard deviation of the random q/k/v and gate/up weights (their outputs are zeroed)."""

EAGLE = "EAGLE"
STANDALONE = "STANDALONE"
DFLASH = "DFLASH"
TARGET = "TARGET"


@dataclass(frozen=True)
class TinyShape:
    """Sizes of the tiny models (defaults: the target seen serving on the lent H200).

    Attributes:
        digits_a, digits_b: ``NA`` and ``NB``; the vocabulary is ``NA * NB``.
        hidden: ``H``, at least ``NA + NB``; equals ``heads * head_dim``.
        heads, kv_heads, head_dim: attention shape (Qwen3: q/k RMSNorm per head).
        intermediate: MLP width.
        target_layers: decoder layers of the target.
        max_positions: ``max_position_embeddings`` (the context length SGLang serves).
        rope_theta: RoPE base.
        rms_norm_eps: RMSNorm epsilon.
        vocab_pad: padding tokens after the code's (:attr:`served_vocab`).
        hybrid: the target is the Qwen3.5 family's hybrid class, Gated DeltaNet layers before a full-attention
            layer (:mod:`.hybrid`), instead of ``Qwen3ForCausalLM``; the drafts are the same.
    """

    digits_a: int = 8
    digits_b: int = 64
    hidden: int = 128
    heads: int = 2
    kv_heads: int = 2
    head_dim: int = 64
    intermediate: int = 256
    target_layers: int = 4
    max_positions: int = 2048
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    vocab_pad: int = 0
    hybrid: bool = False

    @property
    def vocab(self) -> int:
        """The code's tokens ``NA * NB``: every token a request or the target ever holds."""
        return self.digits_a * self.digits_b

    @property
    def served_vocab(self) -> int:
        """The checkpoints' ``vocab_size``: the code's tokens, then :attr:`vocab_pad` padding tokens whose embedding
        and ``lm_head`` rows are zero (logit 0 under every model: never a greedy choice, never in a top-p 0.5 set).
        A real vocabulary's size (:data:`REAL_VOCAB`) puts the verify's ``[bs, q, V]`` tensors and the samplers at
        a deployment's shape while the greedy function stays the code's."""
        return self.vocab + self.vocab_pad

    def __post_init__(self):
        if self.hidden < self.digits_a + self.digits_b:
            raise ValueError(f"hidden {self.hidden} < digits_a + digits_b = {self.digits_a + self.digits_b}")
        if self.hidden != self.heads * self.head_dim:
            raise ValueError(f"hidden {self.hidden} != heads * head_dim = {self.heads * self.head_dim}")


@dataclass(frozen=True)
class Agreement:
    """Which tokens a draft agrees with the target on.

    A draft *agrees at t* when its greedy output after ``t`` is the target's, ``succ(t)``. It disagrees
    exactly on ``t`` with ``t mod period == period - 1`` (``period`` divides ``NB``, so ``t mod period``
    is ``b mod period``); ``period=None`` agrees everywhere, ``period=1`` nowhere.

    Attributes:
        name: ``always``, ``never``, ``mod<p>``, ``never-second`` or ``mod<p>-second`` (used in ids and directory names).
        period: ``p`` or ``None``.
        runner_up: where the draft disagrees, ``succ(t)`` ranks second (after the poison token, which ranks first)
            instead of outside the top 63 (:data:`RUNNER_UP_GAIN`): a best-first tree with room for one more node
            than the chain accepts through a sibling (DFLASH and DDTREE drafts; EAGLE trees of one step, whose top-2
            children of the root always hold ``succ``).
    """

    name: str
    period: int | None
    runner_up: bool = False

    def agrees(self, token: int) -> bool:
        return self.period is None or token % self.period != self.period - 1

    @property
    def fraction(self) -> float:
        """Fraction of tokens the draft agrees on: ``1 - 1/p`` (1 for always, 0 for never)."""
        return 1.0 if self.period is None else 1.0 - 1.0 / self.period


ALWAYS = Agreement("always", None)
NEVER = Agreement("never", 1)


RUNNER_UP_GAIN = 0.25
"""Where a ``mod<p>-second`` draft disagrees, its map scales the ``b``-digit one-hot by this instead of flipping its
sign: ``succ(t)`` shares both digits at ``1 + 0.25`` against the other ``a``-digit tokens' 1, so it ranks second,
below the poison token (the DFlash draft's logits there: poison 27.2, succ 22.7, the rest <= 18.1)."""


def agreement(name: str) -> Agreement:
    """``always``, ``never``, ``mod<p>``, or ``never-second`` / ``mod<p>-second`` (``p`` a power of two,
    ``2 <= p <= NB``).

    Raises:
        ValueError: any other name.
    """
    if name == "always":
        return ALWAYS
    if name == "never":
        return NEVER
    base, runner_up = (name[:-len("-second")], True) if name.endswith("-second") else (name, False)
    if base == "never" and runner_up:
        return Agreement(name, 1, True)
    if base.startswith("mod") and base[3:].isdigit():
        p = int(base[3:])
        if p >= 2 and p & (p - 1) == 0:
            return Agreement(name, p, runner_up)
    raise ValueError(f"agreement {name!r}: expected always, never, never-second, mod<p> or mod<p>-second with p a "
                     "power of two >= 2")


def succ(token: int, vocab: int) -> int:
    """The target's greedy output after ``token``: ``(token + 1) mod vocab``."""
    return (token + 1) % vocab


def poison_token(vocab: int) -> int:
    """``P = V - 2``: the token whose KV must never be visible to a node of an accepted path (``V - 1`` is
    the DFlash mask token)."""
    return vocab - 2


def poison_output(vocab: int) -> int:
    """What the target emits after any token once it sees the poison: ``X + 1 = P - 1`` (``X = P - 2``), a
    token no correct run reaches."""
    return poison_token(vocab) - 1


def token_code(shape: TinyShape) -> torch.Tensor:
    """Embedding matrix ``[V, H]`` float32 of 0/1: row ``t`` is one-hot ``a`` plus one-hot ``NA + b`` (the
    poison token also has :data:`POISON_DIM`)."""
    t = torch.arange(shape.vocab)
    code = torch.zeros(shape.vocab, shape.hidden)
    code[t, t // shape.digits_b] = 1.0
    code[t, shape.digits_a + t % shape.digits_b] = 1.0
    if shape.hidden > BIAS_DIM:
        code[poison_token(shape.vocab), POISON_DIM] = 1.0
    return code


def pure_code(shape: TinyShape) -> torch.Tensor:
    """:func:`token_code` without the poison dim (the digit code only)."""
    code = token_code(shape)
    code[:, shape.digits_a + shape.digits_b:] = 0.0
    return code


def successor_head(shape: TinyShape) -> torch.Tensor:
    """Target ``lm_head`` ``[V, H]``: row ``s`` is ``e_{(s - 1) mod V}`` (digit code only), except the poison
    token's row, which reads :data:`BIAS_DIM` only (the target's logit of ``P`` is always 0)."""
    head = torch.roll(pure_code(shape), shifts=1, dims=0)
    if shape.hidden > BIAS_DIM:
        p = poison_token(shape.vocab)
        head[p] = 0.0
        head[p, BIAS_DIM] = 1.0
    return head


def draft_map(shape: TinyShape, agree: Agreement) -> torch.Tensor:
    """Diagonal ``A = I - 2 D`` as a ``[H]`` vector of +-1 (``D``: the ``b``-digit dims of the tokens the
    draft disagrees on); a runner-up agreement scales those dims by :data:`RUNNER_UP_GAIN` instead."""
    diag = torch.ones(shape.hidden)
    if agree.period is not None:
        if shape.digits_b % agree.period:
            raise ValueError(f"period {agree.period} does not divide digits_b {shape.digits_b}")
        b = torch.arange(shape.digits_b)
        diag[shape.digits_a + b[b % agree.period == agree.period - 1]] = RUNNER_UP_GAIN if agree.runner_up else -1.0
    return diag


def norm_gain(shape: TinyShape) -> float:
    """RMSNorm of a code row multiplies it by ``sqrt(H / 2)`` (two ones among ``H`` dims)."""
    return math.sqrt(shape.hidden / 2)


def _rand(gen: torch.Generator, *size: int) -> torch.Tensor:
    return torch.randn(*size, generator=gen) * WEIGHT_STD


def _layer(shape: TinyShape, prefix: str, gen: torch.Generator, qk_norm: bool, input_norm: bool = True) -> dict:
    """One decoder layer: random q/k/v and gate/up, zero o_proj and down_proj, unit norms."""
    h, q, kv, i = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim, shape.intermediate
    out = {
        f"{prefix}.self_attn.q_proj.weight": _rand(gen, q, h),
        f"{prefix}.self_attn.k_proj.weight": _rand(gen, kv, h),
        f"{prefix}.self_attn.v_proj.weight": _rand(gen, kv, h),
        f"{prefix}.self_attn.o_proj.weight": torch.zeros(h, q),
        f"{prefix}.post_attention_layernorm.weight": torch.ones(h),
        f"{prefix}.mlp.gate_proj.weight": _rand(gen, i, h),
        f"{prefix}.mlp.up_proj.weight": _rand(gen, i, h),
        f"{prefix}.mlp.down_proj.weight": torch.zeros(h, i),
    }
    if input_norm:
        out[f"{prefix}.input_layernorm.weight"] = torch.ones(h)
    if qk_norm:
        out[f"{prefix}.self_attn.q_norm.weight"] = torch.ones(shape.head_dim)
        out[f"{prefix}.self_attn.k_norm.weight"] = torch.ones(shape.head_dim)
    return out


def poison_head(shape: TinyShape, layer: dict, prefix: str) -> None:
    """Make head :data:`POISON_LAYER_HEAD` of ``layer`` (HF names under ``prefix``) the poison head, in place.

    Query: the ``a``-digit one-hot (always one 1) into :data:`POISON_ROPE_DIM`, so every token has the same
    query; key and value: :data:`POISON_DIM` (nonzero only on the poison token) into that dim and into value
    dim 0; ``o_proj`` writes value dim 0 as :data:`POISON_SHIFT` ``e_X`` (``X = P - 2``, divided by the value
    the poison token's normed embedding gives, ``sqrt(H / 3)``). A query that sees no poison key gets exactly 0
    (every value is 0)."""
    h, hd = shape.hidden, shape.head_dim
    lo, hi = POISON_LAYER_HEAD * hd, (POISON_LAYER_HEAD + 1) * hd
    q, k = layer[f"{prefix}.self_attn.q_proj.weight"], layer[f"{prefix}.self_attn.k_proj.weight"]
    v, o = layer[f"{prefix}.self_attn.v_proj.weight"], layer[f"{prefix}.self_attn.o_proj.weight"]
    q[lo:hi], k[lo:hi], v[lo:hi] = 0.0, 0.0, 0.0
    q[lo + POISON_ROPE_DIM, :shape.digits_a] = 1.0
    k[lo + POISON_ROPE_DIM, POISON_DIM] = 1.0
    v[lo, POISON_DIM] = 1.0
    x = poison_token(shape.vocab) - 2
    o[:, lo] = pure_code(shape)[x] * (POISON_SHIFT / math.sqrt(h / 3))
    for name in ("q_norm", "k_norm"):
        layer[f"{prefix}.self_attn.{name}.weight"][POISON_ROPE_DIM] = POISON_QK_GAIN


def target_tensors(shape: TinyShape, seed: int = 0, poison: bool = True) -> dict[str, torch.Tensor]:
    """Weights of the target (HF Qwen3 names): embedding = code, head = successor, mixers zeroed but the
    poison head (:func:`poison_head`, last layer; ``poison=False``: none, every attention output discarded)."""
    gen = torch.Generator().manual_seed(seed)
    out = {"model.embed_tokens.weight": token_code(shape)}
    for i in range(shape.target_layers):
        out.update(_layer(shape, f"model.layers.{i}", gen, qk_norm=True))
    if poison and shape.hidden > BIAS_DIM:
        poison_head(shape, out, f"model.layers.{shape.target_layers - 1}")
    out["model.norm.weight"] = torch.ones(shape.hidden)
    out["lm_head.weight"] = successor_head(shape)
    return _padded_vocab(out, shape)


def eagle_tensors(shape: TinyShape, agree: Agreement, seed: int = 1) -> dict[str, torch.Tensor]:
    """Weights of an EAGLE draft (names as SGLang's ``LlamaForCausalLMEagle.load_weights`` reads them:
    no ``model.`` prefix; layer 0 has no ``input_layernorm``). ``embed_tokens`` and ``lm_head`` are
    written for completeness; SGLang replaces both with the target's."""
    gen = torch.Generator().manual_seed(seed)
    h = shape.hidden
    fc = torch.zeros(h, 2 * h)
    fc[:, :h] = torch.diag(draft_map(shape, agree)) * DRAFT_LOGIT_SCALE
    out = {"embed_tokens.weight": token_code(shape)}
    out.update(_layer(shape, "layers.0", gen, qk_norm=False, input_norm=False))
    out["fc.weight"] = fc
    out["fc.bias"] = torch.zeros(h)
    if h > BIAS_DIM:
        out["fc.bias"][BIAS_DIM] = POISON_DRAFT_LOGIT  # the poison token's logit, through the target's head
    out["lm_head.weight"] = successor_head(shape)
    return _padded_vocab(out, shape)


def standalone_tensors(shape: TinyShape, agree: Agreement, layers: int = 1, seed: int = 2) -> dict[str, torch.Tensor]:
    """Weights of a STANDALONE draft (a Qwen3 of ``layers`` layers with its own embedding and head)."""
    gen = torch.Generator().manual_seed(seed)
    embed = pure_code(shape)
    head = successor_head(shape) * draft_map(shape, agree)
    gain = norm_gain(shape)
    if shape.hidden > BIAS_DIM:  # every token also carries BIAS_DIM = 1; lm_head row P reads it
        embed[:, BIAS_DIM] = 1.0
        gain = math.sqrt(shape.hidden / 3)
        head[poison_token(shape.vocab), BIAS_DIM] = POISON_DRAFT_LOGIT / DRAFT_LOGIT_SCALE
    out = {"model.embed_tokens.weight": embed}
    for i in range(layers):
        out.update(_layer(shape, f"model.layers.{i}", gen, qk_norm=True))
    out["model.norm.weight"] = torch.full((shape.hidden,), DRAFT_LOGIT_SCALE / gain)
    out["lm_head.weight"] = head
    return _padded_vocab(out, shape)


def padded(rows: torch.Tensor, shape: TinyShape) -> torch.Tensor:
    """An embedding or ``lm_head`` of the code's ``V`` rows, with :attr:`TinyShape.vocab_pad` zero rows after."""
    if not shape.vocab_pad:
        return rows
    return torch.cat([rows, torch.zeros(shape.vocab_pad, rows.shape[1], dtype=rows.dtype)])


def _padded_vocab(tensors: dict[str, torch.Tensor], shape: TinyShape) -> dict[str, torch.Tensor]:
    """Every embedding and ``lm_head`` of ``tensors`` padded to :attr:`TinyShape.served_vocab` rows."""
    return {name: padded(t, shape) if name.endswith(("embed_tokens.weight", "lm_head.weight")) else t
            for name, t in tensors.items()}


def _shape_fields(shape: TinyShape, layers: int) -> dict:
    """The ``config.json`` fields a Qwen3 and a Llama (EAGLE) config take from the tiny shape alike."""
    return {
        "vocab_size": shape.served_vocab,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": shape.max_positions,
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": shape.rope_theta},
        "rope_theta": shape.rope_theta,
        "attention_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "torch_dtype": "bfloat16",
    }


def _qwen3_config(shape: TinyShape, layers: int) -> dict:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        **_shape_fields(shape, layers),
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": layers,
        "layer_types": ["full_attention"] * layers,
        "use_cache": True,
    }


def target_config(shape: TinyShape) -> dict:
    """config.json of the attention-only target (HF ``Qwen3Config`` fields; a hybrid shape's is
    :func:`.hybrid.target_config`)."""
    return _qwen3_config(shape, shape.target_layers)


def standalone_config(shape: TinyShape, layers: int = 1) -> dict:
    return _qwen3_config(shape, layers)


def eagle_config(shape: TinyShape) -> dict:
    """config.json of an EAGLE draft (HF ``LlamaConfig`` fields, architecture ``LlamaForCausalLMEagle``)."""
    return {"architectures": ["LlamaForCausalLMEagle"], "model_type": "llama", **_shape_fields(shape, 1),
            "mlp_bias": False}


ROPE_THETA = 10000.0
"""RoPE base of the DFlash draft (its positional construction, :mod:`.dflash`, is computed for it)."""


def dflash_config(shape: TinyShape, block_size: int, target_layer_ids: list[int], mask_token_id: int) -> dict:
    """config.json of a DFlash draft (SGLang ``parse_dflash_draft_config``: ``block_size``,
    ``dflash_config.target_layer_ids`` each ``< num_target_layers``, ``num_target_layers`` (the target's
    layer count; without it SGLang takes the draft's own and rejects the ids), ``mask_token`` and
    ``mask_token_id`` (``< V``; required with ``--skip-tokenizer-init``)); RoPE base
    :data:`ROPE_THETA`."""

    cfg = _qwen3_config(shape, 1)
    cfg["architectures"] = ["DFlashDraftModel"]
    cfg["block_size"] = block_size
    cfg["num_target_layers"] = shape.target_layers
    cfg["rope_theta"] = ROPE_THETA
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": ROPE_THETA}
    cfg["dflash_config"] = {"block_size": block_size, "target_layer_ids": list(target_layer_ids),
                            "num_target_layers": shape.target_layers,
                            "mask_token": "<|MASK|>", "mask_token_id": mask_token_id}
    return cfg


def dflash_layer_ids(shape: TinyShape) -> list[int]:
    """Target layers a DFlash draft reads: ``1 .. target_layers - 2`` (the last two excluded)."""
    return list(range(1, max(2, shape.target_layers - 1)))


def write_checkpoint(path: str | Path, config: dict, tensors: dict[str, torch.Tensor]) -> Path:
    """Write ``config.json`` and ``model.safetensors`` (bfloat16) into ``path``; return the folder.

    Raises:
        ValueError: a tensor value is not exactly representable in bfloat16 where it must be (the code,
            head and maps are 0/+-1/scale), or a tensor is not finite.
    """
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, t in tensors.items():
        if not torch.isfinite(t).all():
            raise ValueError(f"tensor {name} has non-finite values")
        out[name] = t.to(torch.bfloat16).contiguous()
    save_file(out, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path


def load_checkpoint(path: str | Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """``(config, tensors)`` of a folder written by :func:`write_checkpoint` (tensors as stored)."""
    from safetensors.torch import load_file

    path = Path(path)
    return json.loads((path / "config.json").read_text(encoding="utf-8")), load_file(str(path / "model.safetensors"))


@dataclass(frozen=True)
class DraftSpec:
    """A draft checkpoint to write: algorithm family, agreement and (DFLASH, also used by DDTREE) block size."""

    algorithm: str
    agree: Agreement
    block_size: int = 16

    @property
    def name(self) -> str:
        if self.algorithm == DFLASH:
            return f"dflash-b{self.block_size}-{self.agree.name}"
        return f"{self.algorithm.lower()}-{self.agree.name}"


def write_target(root: str | Path, shape: TinyShape = TinyShape()) -> Path:
    """Write the attention-only target under ``root/target`` (a hybrid shape's: :func:`.hybrid.write_target`)."""
    if shape.hybrid:
        raise ValueError("a hybrid shape's target is written by ddtree_compat.e2e.hybrid.write_target")
    return write_checkpoint(Path(root) / "target", target_config(shape), target_tensors(shape))
