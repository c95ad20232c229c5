"""Pure-PyTorch forward of the tiny checkpoints, read back from their safetensors (our own code).

Written for reading, from the architectures' definitions (HF ``Qwen3ForCausalLM`` / ``LlamaForCausalLM``:
pre-norm decoder layers, RMSNorm computed in float32, rotate-half RoPE, per-head q/k RMSNorm in Qwen3,
SiLU-gated MLP; SGLang ``models/llama_eagle.py`` for the EAGLE draft: ``fc(cat(embed, hidden))``, no
input norm in layer 0, no final norm, the target's head; SGLang ``models/dflash.py`` for the DFlash
draft's decoder layer). It runs every part of the network, attention included, so the tests that use it
prove the greedy functions of :mod:`.checkpoints` hold for the whole model and not just on paper, in
bfloat16 as the server computes them.

Not modelled: the DFlash draft's context K/V (target features projected by ``fc``): with ``o_proj`` zero
the attention output is zero whatever the keys and values, which
``tests/e2e/test_checkpoints.py`` shows by perturbing the attention inputs.
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

    def attention(self, x: torch.Tensor, positions: torch.Tensor, causal: bool) -> torch.Tensor:
        t = x.shape[0]
        q = (x @ self.w["self_attn.q_proj.weight"].T).view(t, self.heads, self.head_dim)
        k = (x @ self.w["self_attn.k_proj.weight"].T).view(t, self.kv_heads, self.head_dim)
        v = (x @ self.w["self_attn.v_proj.weight"].T).view(t, self.kv_heads, self.head_dim)
        if "self_attn.q_norm.weight" in self.w:
            q = rms_norm(q, self.w["self_attn.q_norm.weight"], self.eps)
            k = rms_norm(k, self.w["self_attn.k_norm.weight"], self.eps)
        q, k = rope(q, positions, self.theta), rope(k, positions, self.theta)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * self.head_dim ** -0.5
        if causal:
            scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        out = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v.float()).reshape(t, -1).to(x.dtype)
        return out @ self.w["self_attn.o_proj.weight"].T

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.nn.functional.silu(x @ self.w["mlp.gate_proj.weight"].T)
        return (gate * (x @ self.w["mlp.up_proj.weight"].T)) @ self.w["mlp.down_proj.weight"].T

    def __call__(self, h: torch.Tensor, positions: torch.Tensor, causal: bool = True) -> torch.Tensor:
        """Pre-norm residual layer; without ``input_layernorm`` (EAGLE layer 0) attention reads ``h``."""
        a_in = rms_norm(h, self.w["input_layernorm.weight"], self.eps) if "input_layernorm.weight" in self.w else h
        h = h + self.attention(a_in, positions, causal)
        return h + self.mlp(rms_norm(h, self.w["post_attention_layernorm.weight"], self.eps))


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

    def hidden(self, ids: list[int]) -> torch.Tensor:
        """Final hidden states ``[T, H]`` (after the final norm: what the head reads)."""
        pos = torch.arange(len(ids))
        h = self.embed[torch.tensor(ids)]
        for layer in self.layers:
            h = layer(h, pos)
        return rms_norm(h, self.norm, self.cfg["rms_norm_eps"])

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
    """A DFlash draft's decoder stack on one block, with the target's embedding and head."""

    def _own(self, tensors: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
        self.norm = tensors["norm.weight"].to(dtype)

    def block_logits(self, block: list[int], start: int = 0) -> torch.Tensor:
        """``[B, V]`` float32 logits of a block ``[bonus, mask, ..., mask]`` placed at ``start``; the
        drafts are rows ``1 .. B-1`` (SGLang ``dflash_worker_v2``: ``draft_hidden[:, 1:]``)."""
        h = self.target.embed[torch.tensor(block)]
        pos = torch.arange(start, start + len(block))
        for layer in self.layers:
            h = layer(h, pos, causal=False)
        return (rms_norm(h, self.norm, self.cfg["rms_norm_eps"]) @ self.target.head.T).float()
