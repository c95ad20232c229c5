"""Pure-PyTorch forward of the tiny checkpoints, read back from their safetensors (our own code).

Written for reading, from the architectures' definitions (HF ``Qwen3ForCausalLM`` / ``LlamaForCausalLM``:
pre-norm decoder layers, RMSNorm computed in float32, rotate-half RoPE, per-head q/k RMSNorm in Qwen3,
SiLU-gated MLP; SGLang ``models/llama_eagle.py`` for the EAGLE draft: ``fc(cat(embed, hidden))``, no
input norm in layer 0, no final norm, the target's head; SGLang ``models/dflash.py`` for the DFlash
draft's decoder layer). It runs every part of the network, attention included, so the tests that use it
prove the greedy functions of :mod:`.checkpoints` hold for the whole model and not just on paper, in
bfloat16 as the server computes them.

Tree verify (:meth:`CausalLM.verify_logits`) runs the target over the committed context plus a draft tree
with the ancestor-only mask (:func:`ancestor_mask`: a node sees the context, its ancestors and itself; its
position is the root's plus its depth): the rule the poison target (:mod:`.checkpoints`) makes visible in the
tokens.

The DFlash draft's context (the target's captured features, projected by ``fc`` and ``hidden_norm``,
as keys and values of every draft layer at their own positions) is modelled: the positional DFlash
draft (:mod:`.dflash`) reads the context through RoPE, so its drafts depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .checkpoints import load_checkpoint


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, computed in float32 and cast back to ``x.dtype``."""
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype)


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate-half RoPE on ``x`` ``[T, heads, D]`` at integer ``positions`` ``[T]``."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = positions.float()[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    x32 = x.float()
    rotated = torch.cat([-x32[..., d // 2:], x32[..., : d // 2]], -1)
    return (x32 * cos + rotated * sin).to(x.dtype)


@dataclass
class Layer:
    """One decoder layer's weights (already in the compute dtype)."""

    w: dict[str, torch.Tensor]
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    theta: float

    def qkv(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``q [T, heads, D]``, ``k`` and ``v [T, kv_heads, D]`` of ``x [T, H]``: projections, per-head q/k
        RMSNorm (Qwen3), RoPE at ``positions`` (q and k)."""
        t = x.shape[0]
        q = (x @ self.w["self_attn.q_proj.weight"].T).view(t, self.heads, self.head_dim)
        k = (x @ self.w["self_attn.k_proj.weight"].T).view(t, self.kv_heads, self.head_dim)
        v = (x @ self.w["self_attn.v_proj.weight"].T).view(t, self.kv_heads, self.head_dim)
        if "self_attn.q_norm.weight" in self.w:
            q = rms_norm(q, self.w["self_attn.q_norm.weight"], self.eps)
            k = rms_norm(k, self.w["self_attn.k_norm.weight"], self.eps)
        return rope(q, positions, self.theta), rope(k, positions, self.theta), v

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
               mask: torch.Tensor | None = None) -> torch.Tensor:
        """Scaled-dot-product attention (float32 scores and softmax) of ``q [Tq, heads, D]`` over
        ``k, v [Tk, kv_heads, D]`` (causal: the last ``Tq`` keys are the queries' own; ``mask``: a bool
        ``[Tq, Tk]`` of the keys each query may see, instead), then ``o_proj``."""
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * self.head_dim ** -0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        elif causal:
            tq, tk = q.shape[0], k.shape[0]
            scores = scores.masked_fill(torch.ones(tq, tk, dtype=torch.bool).triu(tk - tq + 1), float("-inf"))
        out = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v.float()).reshape(q.shape[0], -1).to(q.dtype)
        return out @ self.w["self_attn.o_proj.weight"].T

    def attention(self, x: torch.Tensor, positions: torch.Tensor, causal: bool,
                  mask: torch.Tensor | None = None) -> torch.Tensor:
        q, k, v = self.qkv(x, positions)
        return self.attend(q, k, v, causal, mask)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.nn.functional.silu(x @ self.w["mlp.gate_proj.weight"].T)
        return (gate * (x @ self.w["mlp.up_proj.weight"].T)) @ self.w["mlp.down_proj.weight"].T

    def __call__(self, h: torch.Tensor, positions: torch.Tensor, causal: bool = True,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
        """Pre-norm residual layer; without ``input_layernorm`` (EAGLE layer 0) attention reads ``h``."""
        a_in = rms_norm(h, self.w["input_layernorm.weight"], self.eps) if "input_layernorm.weight" in self.w else h
        h = h + self.attention(a_in, positions, causal, mask)
        return h + self.mlp(rms_norm(h, self.w["post_attention_layernorm.weight"], self.eps))


def ancestor_mask(parents: list[int]) -> torch.Tensor:
    """Bool ``[n, n]``: node ``i`` of a draft tree sees node ``j`` iff ``j`` is ``i`` or an ancestor of ``i``
    (``parents[i]`` is the parent's index, ``-1`` for a child of the root; parents come before children)."""
    n = len(parents)
    vis = torch.zeros(n, n, dtype=torch.bool)
    for i, p in enumerate(parents):
        vis[i, i] = True
        if p >= 0:
            vis[i] |= vis[p]
    return vis


def depths(parents: list[int]) -> list[int]:
    """Depth of each node (a child of the root: 1)."""
    out: list[int] = []
    for p in parents:
        out.append(1 if p < 0 else out[p] + 1)
    return out


def _layers(tensors: dict, prefix: str, cfg: dict, dtype: torch.dtype) -> list[Layer]:
    out = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}layers.{i}."
        w = {k[len(p):]: v.to(dtype) for k, v in tensors.items() if k.startswith(p)}
        out.append(Layer(w, cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"],
                         cfg["rms_norm_eps"], cfg["rope_parameters"]["rope_theta"]))
    return out


class CausalLM:
    """A Qwen3 checkpoint (the target, or a STANDALONE draft): ``logits(ids)``, ``greedy(prompt, n)``."""

    def __init__(self, path: str | Path, dtype: torch.dtype = torch.bfloat16):
        cfg, t = load_checkpoint(path)
        self.cfg, self.dtype = cfg, dtype
        self.embed = t["model.embed_tokens.weight"].to(dtype)
        self.layers = _layers(t, "model.", cfg, dtype)
        self.norm = t["model.norm.weight"].to(dtype)
        self.head = t["lm_head.weight"].to(dtype)

    def hidden(self, ids: list[int], positions: torch.Tensor | None = None,
               mask: torch.Tensor | None = None) -> torch.Tensor:
        """Final hidden states ``[T, H]`` (after the final norm: what the head reads); causal unless ``mask``
        (bool ``[T, T]``) says which tokens each sees; positions ``0 .. T - 1`` unless given."""
        pos = torch.arange(len(ids)) if positions is None else positions
        h = self.embed[torch.tensor(ids)]
        for layer in self.layers:
            h = layer(h, pos, mask=mask)
        return rms_norm(h, self.norm, self.cfg["rms_norm_eps"])

    def verify_logits(self, context: list[int], tokens: list[int], parents: list[int]) -> torch.Tensor:
        """``[1 + n, V]`` float32 logits of one tree verify: at the root (``context[-1]``, the last committed
        token) and at each of the ``n`` tree nodes (``tokens``, ``parents`` as :func:`ancestor_mask`), every
        node at position ``len(context) - 1 + depth``, seeing the context, its ancestors and itself."""
        c, n = len(context), len(tokens)
        mask = torch.ones(c + n, c + n, dtype=torch.bool).tril()
        mask[c:, c:] = ancestor_mask(list(parents))
        pos = torch.cat([torch.arange(c), c - 1 + torch.tensor(depths(list(parents)), dtype=torch.long)])
        h = self.hidden(list(context) + list(tokens), pos, mask)
        return (h[c - 1:] @ self.head.T).float()

    def features(self, ids: list[int], layer_ids: list[int]) -> torch.Tensor:
        """``[T, len(layer_ids) * H]``: the residual stream after each layer ``k`` of ``layer_ids``,
        concatenated (what SGLang captures "before layer ``k + 1``" for a DFlash draft: hidden + residual)."""
        pos = torch.arange(len(ids))
        h = self.embed[torch.tensor(ids)]
        out = {}
        for i, layer in enumerate(self.layers):
            h = layer(h, pos)
            out[i] = h
        return torch.cat([out[k] for k in layer_ids], -1)

    def logits(self, ids: list[int]) -> torch.Tensor:
        """``[T, V]`` float32 logits at every position."""
        return (self.hidden(ids) @ self.head.T).float()

    def greedy(self, prompt: list[int], n: int) -> list[int]:
        """``n`` greedy tokens after ``prompt`` (full recompute per token: no KV cache to get wrong)."""
        ids = list(prompt)
        for _ in range(n):
            ids.append(int(self.logits(ids)[-1].argmax()))
        return ids[len(prompt):]


class _DraftOnTarget:
    """A draft checkpoint's decoder layers, run with the target's embedding and head (EAGLE and DFlash
    drafts share them in SGLang); a subclass loads its own extra tensors in :meth:`_own`."""

    def __init__(self, path: str | Path, target: CausalLM):
        self.cfg, tensors = load_checkpoint(path)
        self.target = target
        self.layers = _layers(tensors, "", self.cfg, target.dtype)
        self._own(tensors, target.dtype)

    def _own(self, tensors: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
        raise NotImplementedError


class EagleDraft(_DraftOnTarget):
    """An EAGLE draft with the target's embedding and head, as SGLang wires it."""

    def _own(self, tensors: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
        self.fc_w, self.fc_b = tensors["fc.weight"].to(dtype), tensors["fc.bias"].to(dtype)

    def logits(self, tokens: list[int], target_hidden: torch.Tensor) -> torch.Tensor:
        """``[T, V]`` float32 draft logits for ``tokens`` with the target features ``target_hidden`` ``[T, H]``."""
        x = torch.cat([self.target.embed[torch.tensor(tokens)], target_hidden.to(self.target.dtype)], -1)
        h = x @ self.fc_w.T + self.fc_b
        pos = torch.arange(len(tokens))
        for layer in self.layers:
            h = layer(h, pos)
        return (h @ self.target.head.T).float()


class DFlashDraft(_DraftOnTarget):
    """A DFlash draft (SGLang ``models/dflash.py``) on one block, with the target's embedding and head and
    the target's features of the context as extra keys and values in every layer."""

    def _own(self, tensors: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
        self.norm = tensors["norm.weight"].to(dtype)
        self.fc = tensors["fc.weight"].to(dtype)
        self.hidden_norm = tensors["hidden_norm.weight"].to(dtype)
        self.layer_ids = list(self.cfg["dflash_config"]["target_layer_ids"])
        self.mask_token_id = int(self.cfg["dflash_config"]["mask_token_id"])

    def block_logits(self, context: list[int], bonus: int, block_size: int | None = None) -> torch.Tensor:
        """``[block_size, V]`` float32 logits of the block ``[bonus, mask, ..., mask]`` placed right after
        ``context`` (positions ``len(context) ..``). Rows ``1 .. block_size - 1`` are the drafts of depths
        ``1 ..`` (``draft_hidden[:, 1:]``).

        Every layer: queries, keys and values of the block from ``input_layernorm(h)`` at the block's
        positions; keys and values of the context from ``hidden_norm(fc(features))`` (no
        ``input_layernorm``) at positions ``0 .. len(context) - 1``; bidirectional attention over both
        (``ENCODER_ONLY``); then the residual, the MLP and the final norm.
        """
        n = block_size or int(self.cfg["block_size"])
        eps = self.cfg["rms_norm_eps"]
        block = [int(bonus)] + [self.mask_token_id] * (n - 1)
        ctx = rms_norm(self.target.features(list(context), self.layer_ids) @ self.fc.T, self.hidden_norm, eps)
        ctx_pos = torch.arange(len(context))
        pos = torch.arange(len(context), len(context) + n)
        h = self.target.embed[torch.tensor(block)]
        for layer in self.layers:
            q, k, v = layer.qkv(rms_norm(h, layer.w["input_layernorm.weight"], eps), pos)
            _, kc, vc = layer.qkv(ctx, ctx_pos)
            h = h + layer.attend(q, torch.cat([kc, k]), torch.cat([vc, v]), causal=False)
            h = h + layer.mlp(rms_norm(h, layer.w["post_attention_layernorm.weight"], eps))
        return (rms_norm(h, self.norm, eps) @ self.target.head.T).float()
