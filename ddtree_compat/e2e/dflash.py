"""A DFlash draft whose block agrees with the tiny target always, never, or on a known fraction.

How a DFlash draft drafts (SGLang ``models/dflash.py`` and ``speculative/dflash_worker_v2.py`` /
``ddtree_worker_v2.py`` of the DDTree trees; the DFlash paper's block diffusion): one forward over a
*block* of ``block_size`` positions ``p .. p + block_size - 1`` whose tokens are the bonus token ``r``
(the last committed token, at position ``p``) and then ``mask_token_id``; row ``j`` of the output
(``draft_hidden[:, 1:]``) is the draft for depth ``j``, read through the target's ``lm_head``. Each
layer's attention is bidirectional over the block plus the *context*: for every committed position
``q < p`` the target's hidden states at ``dflash_config.target_layer_ids`` (captured before target
layer ``k + 1``), concatenated, projected by ``fc`` and ``hidden_norm``, then that layer's ``k_proj`` /
``v_proj``, ``k_norm`` and RoPE at position ``q`` (``input_layernorm`` is not applied to the context).

Every mask row has the same input, so the rows can differ only through *where they attend*, i.e.
through RoPE. The construction (one draft layer, hidden 128, two heads of 64):

* **Context = token code.** The tiny target's residual stream is the code ``e_t`` at every layer
  (:mod:`.checkpoints`), so each captured feature is ``e_t``. ``fc`` copies the first feature's code
  into dims ``0..71`` and writes a constant 1 into dim :data:`CONST_DIM` (the sum of the ``a``-digit
  one-hot is 1 for every token); after ``hidden_norm`` the context row is ``sqrt(H / 3) (e_t + u_72)``.
* **Keys.** ``k_proj`` reads only :data:`CONST_DIM`, so every context key has the same content
  ``K*`` and the block's keys (token embeddings, zero there) are exactly 0 after ``k_norm``.
* **Queries.** ``q_proj`` reads the mask token's ``b``-digit dim, so every mask row has the query
  ``Q*``. With ``K*`` real on RoPE pairs ``i < 12`` (``sqrt(w_i)``) and ``Q*`` the same amplitudes
  turned by ``-s theta_i``, the score of a context key at distance ``Delta`` (query position minus key
  position) is ``8 g_q g_k sum_i w_i cos((Delta - s) theta_i) / sum_i w_i``: largest at
  ``Delta = s`` (:data:`LOOKBACK` = 65), by at least :data:`SELECTOR_MARGIN` of the peak for every
  other ``Delta`` up to :data:`MAX_CONTEXT` (``theta_i = 10000^(-2i/64)``, ``w = (11, 1, ..., 1)``;
  :func:`selector_margin` computes it). With ``g_q = g_k = 4`` the peak is 128 nats, every other
  context key at least 32 nats lower and the block keys at 0: each mask row reads one context
  position, ``s`` before its own.
* **Values.** ``v_proj`` copies the code; ``o_proj`` maps it through ``A P``: ``P`` adds 1 to the
  ``a`` digit (``e_u -> e_{u + 64}``, linear on the code) and ``A`` is :func:`.checkpoints.draft_map`
  (the agreement's sign flips), with gain :data:`VALUE_GAIN` so the mask embedding is negligible.
  ``v_proj`` also copies :data:`CONST_DIM` and ``o_proj`` writes it as ``1.5 * VALUE_GAIN`` into
  :data:`.checkpoints.BIAS_DIM`, which the target's ``lm_head`` row of the poison token reads; ``norm.weight``
  is set so the draft's logit of ``u + 65`` is 32, the poison token's 24 and every other's at most ~16.5
  (the poison ranks second where the draft agrees, first where it disagrees: :mod:`.checkpoints`).

So on a *consecutive* context (position ``q`` holds ``c + q``: a prompt that is itself a run of
successors, which the target then continues), row ``j`` at position ``p + j`` reads the token at
``p + j - 65``, which is ``r + j - 65``, and drafts ``r + j - 65 + 64 + 1 = r + j``: exactly the
target's chain, at every depth. Where ``A`` flips (``r + j - 1`` in the agreement's disagreeing
class), the draft's top-63 tokens share only the ``a`` digit and ``r + j`` is not among them. Depth
``j`` therefore agrees iff the agreement agrees at ``r + j - 1``, independently of the other depths:
the chain-agreement rule of EAGLE drafts, over ``block_size - 1`` depths. The proof that the whole
network computes this, in bfloat16, is ``tests/e2e/test_checkpoints.py`` (pure-PyTorch forward,
:mod:`.forward`).

Requirements a request must meet (the profiles' DFlash prompts do, :func:`.configs.chain_prompt`):
at least ``LOOKBACK - 1`` consecutive tokens before the first root, and no more than
:data:`MAX_CONTEXT` positions in all.
"""

from __future__ import annotations

import math

import torch

from . import checkpoints as ck

LOOKBACK = 65
"""``s``: a mask row reads the context position ``s`` before its own (``s - 1 = 64`` is a pure
``a``-digit shift, the only shift that is linear on the token code)."""

CONST_DIM = 72
"""Hidden dim that ``fc`` sets to 1 for every context token (first dim after the token code)."""

ROPE_PAIRS = 12
"""RoPE frequency pairs the selector uses (``0 .. ROPE_PAIRS - 1``)."""

PAIR_WEIGHTS = (11.0,) + (1.0,) * (ROPE_PAIRS - 1)
"""``w_i``: the highest frequency carries as much as the next eleven together."""

QK_GAIN = 4.0
"""``g_q = g_k``: ``q_norm`` / ``k_norm`` weight; the selected key scores ``8 g_q g_k = 128`` nats."""

VALUE_GAIN = 64.0
"""Norm of the attention output written into the residual, relative to the mask embedding's (1)."""

MAX_CONTEXT = 512
"""Positions (prompt + generated + block) over which :data:`SELECTOR_MARGIN` is guaranteed."""

ROPE_THETA = ck.ROPE_THETA


def selector_scores(distances: torch.Tensor, head_dim: int = 64, theta: float = ROPE_THETA) -> torch.Tensor:
    """Normalised selector score ``sum_i w_i cos((Delta - s) theta_i) / sum_i w_i`` (float64) of context
    keys at ``distances`` (query position minus key position); 1 at ``Delta = LOOKBACK``."""
    i = torch.arange(ROPE_PAIRS, dtype=torch.float64)
    freqs = theta ** (-2 * i / head_dim)
    w = torch.tensor(PAIR_WEIGHTS, dtype=torch.float64)
    d = distances.to(torch.float64)[:, None] - LOOKBACK
    return (torch.cos(d * freqs) * w).sum(-1) / w.sum()


def selector_margin(max_context: int = MAX_CONTEXT) -> float:
    """``1 - max score`` over every distance ``2 .. max_context`` other than :data:`LOOKBACK` (a mask row
    at depth ``j >= 1`` is at least 2 positions after any context key)."""
    d = torch.tensor([x for x in range(2, max_context + 1) if x != LOOKBACK])
    return float(1 - selector_scores(d).max())


SELECTOR_MARGIN = 0.25
"""A lower bound of :func:`selector_margin` (``MAX_CONTEXT``); checked in ``tests/e2e/test_checkpoints.py``."""


def _selector(head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Q*, K*)`` ``[head_dim]``: the query and key contents whose RoPE score peaks at ``LOOKBACK``."""
    half = head_dim // 2
    q, k = torch.zeros(head_dim), torch.zeros(head_dim)
    for i, w in enumerate(PAIR_WEIGHTS):
        theta_i = theta ** (-2 * i / head_dim)
        a = math.sqrt(w)
        k[i] = a
        q[i] = a * math.cos(LOOKBACK * theta_i)
        q[i + half] = -a * math.sin(LOOKBACK * theta_i)
    return q, k


def a_digit_shift(shape: ck.TinyShape) -> torch.Tensor:
    """``P`` ``[H, H]``: ``e_u -> e_{(u + NB) mod V}`` (the ``a`` one-hot rotated by one, ``b`` kept)."""
    p = torch.zeros(shape.hidden, shape.hidden)
    na = shape.digits_a
    for a in range(na):
        p[(a + 1) % na, a] = 1.0
    for b in range(na, na + shape.digits_b):
        p[b, b] = 1.0
    return p


def draft_tensors(shape: ck.TinyShape, agree: ck.Agreement, mask_token_id: int, target_layer_ids: list[int],
                  seed: int = 3) -> dict[str, torch.Tensor]:
    """Weights of the positional DFlash draft (HF names SGLang's ``DFlashDraftModel.load_weights`` maps:
    ``layers.0.self_attn.{q,k,v,o}_proj``, ``q_norm``, ``k_norm``, norms, ``mlp``, ``fc``, ``hidden_norm``,
    ``norm``). See the module docstring for the construction.

    Raises:
        ValueError: the shape leaves no free dim for :data:`CONST_DIM`, the heads are not two of
            ``head_dim >= 2 * ROPE_PAIRS``, or ``mask_token_id`` is out of range.
    """
    h, hd = shape.hidden, shape.head_dim
    code = shape.digits_a + shape.digits_b
    if code > CONST_DIM or CONST_DIM >= h:
        raise ValueError(f"hidden {h}: the token code ({code} dims) and CONST_DIM {CONST_DIM} must fit")
    if shape.heads * hd != h or shape.kv_heads != shape.heads or hd < 2 * ROPE_PAIRS:
        raise ValueError(f"positional DFlash draft needs heads == kv_heads and heads * head_dim == hidden, "
                         f"head_dim >= {2 * ROPE_PAIRS}; got {shape.heads} x {hd}, kv {shape.kv_heads}")
    if not 0 <= mask_token_id < shape.vocab:
        raise ValueError(f"mask_token_id {mask_token_id} outside the vocabulary of {shape.vocab}")
    gen = torch.Generator().manual_seed(seed)
    out = ck._layer(shape, "layers.0", gen, qk_norm=True)  # random gate/up, zero down_proj, unit norms
    q_star, k_star = _selector(hd, ROPE_THETA)
    mask_b_dim = shape.digits_a + mask_token_id % shape.digits_b
    wq, wk = torch.zeros(h, h), torch.zeros(h, h)
    for head in range(shape.heads):
        wq[head * hd:(head + 1) * hd, mask_b_dim] = q_star
        wk[head * hd:(head + 1) * hd, CONST_DIM] = k_star
    wv = torch.zeros(h, h)
    wv[torch.arange(code), torch.arange(code)] = 1.0
    poison = h > ck.BIAS_DIM
    if poison:
        wv[CONST_DIM, CONST_DIM] = 1.0
    context_gain = math.sqrt(h / 3)  # hidden_norm of e_t + u_CONST (three ones)
    shift = a_digit_shift(shape)[:code, :code]
    flips = torch.diag(ck.draft_map(shape, agree)[:code])
    wo = torch.zeros(h, h)
    wo[:code, :code] = (VALUE_GAIN / context_gain) * flips @ shift
    bias = VALUE_GAIN * ck.POISON_DRAFT_LOGIT / ck.DRAFT_LOGIT_SCALE if poison else 0.0
    if poison:
        wo[ck.BIAS_DIM, CONST_DIM] = bias / context_gain
    # final RMSNorm of the mask row's residual (two code dims at VALUE_GAIN, BIAS_DIM at ``bias``): the
    # agreeing top-1 (two shared digits) gets DRAFT_LOGIT_SCALE * 2
    rms = math.sqrt((2 * VALUE_GAIN ** 2 + bias ** 2) / h)
    fc = torch.zeros(h, len(target_layer_ids) * h)
    fc[torch.arange(code), torch.arange(code)] = 1.0
    fc[CONST_DIM, :shape.digits_a] = 1.0
    out.update({
        "layers.0.self_attn.q_proj.weight": wq,
        "layers.0.self_attn.k_proj.weight": wk,
        "layers.0.self_attn.v_proj.weight": wv,
        "layers.0.self_attn.o_proj.weight": wo,
        "layers.0.self_attn.q_norm.weight": torch.full((hd,), QK_GAIN),
        "layers.0.self_attn.k_norm.weight": torch.full((hd,), QK_GAIN),
        "fc.weight": fc,
        "hidden_norm.weight": torch.ones(h),
        "norm.weight": torch.full((h,), ck.DRAFT_LOGIT_SCALE * rms / VALUE_GAIN),
    })
    return out
