"""Pure-PyTorch forward of the tiny hybrid target (:mod:`.hybrid`), read back from its safetensors (our own code).

Written from the architecture's definition (HF ``Qwen3_5ForConditionalGeneration``'s text decoder): ``1 + w``
RMSNorms; Gated DeltaNet layers (one projection to query, key and value, a causal depthwise convolution of
:data:`.hybrid.CONV_KERNEL` taps with SiLU, the output gate ``z``, ``beta = sigmoid(b)``, the decay
``g = -exp(A_log) softplus(a + dt_bias)``, L2-normalised query and key, query scaled by ``d^-1/2``, the gated delta
rule ``S <- exp(g) S + k (beta (v - S^T k))^T``, output ``S^T q``, a gated RMSNorm with ``silu(z)``, ``out_proj``);
gated full attention (query and gate per head, ``1 + w`` q/k norms, RoPE on the first quarter of the head dims,
``sigmoid(gate)`` on the output) and SiLU MLPs. Float32 throughout.

A tree verify (:meth:`HybridLM.verify_logits`) runs the committed context as one sequence, then every draft node
from *its parent's* recurrent state and convolution window (``chain=True``: from the node before it in node order,
the rule a verify without tree links follows), with the ancestor-only mask in the attention layer.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from . import hybrid
from .checkpoints import load_checkpoint
from .forward import ancestor_mask, depths


def one_plus_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Qwen3.5's RMSNorm: ``x / rms(x) * (1 + w)``."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + weight)


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


class GatedDeltaNet:
    """One Gated DeltaNet layer's weights and its per-token step."""

    def __init__(self, w: dict[str, torch.Tensor], eps: float):
        self.w, self.eps = w, eps
        self.kd = hybrid.LINEAR_KEY_HEADS * hybrid.LINEAR_HEAD_DIM
        self.conv = w["conv1d.weight"][:, 0, :]  # [channels, taps]; the last tap reads the current token

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(mixed [T, C], z [T, HV, d], beta [T, HV], g [T, HV])`` of the normed input ``x [T, H]``."""
        t, d = x.shape[0], hybrid.LINEAR_HEAD_DIM
        mixed = x @ self.w["in_proj_qkv.weight"].T
        z = (x @ self.w["in_proj_z.weight"].T).view(t, -1, d)
        beta = torch.sigmoid(x @ self.w["in_proj_b.weight"].T)
        a = x @ self.w["in_proj_a.weight"].T
        g = -torch.exp(self.w["A_log"]) * F.softplus(a + self.w["dt_bias"])
        return mixed, z, beta, g

    def run(self, x: torch.Tensor, prev: list[int]) -> torch.Tensor:
        """Outputs ``[T, H]`` for the tokens ``x`` (normed, ``[T, H]``); ``prev[i]`` is the token whose state and
        window token ``i`` continues (``-1``: the zero state and an empty window)."""
        d, hk, hv = hybrid.LINEAR_HEAD_DIM, hybrid.LINEAR_KEY_HEADS, hybrid.LINEAR_VALUE_HEADS
        mixed, z, beta, g = self.project(x)
        taps = self.conv.shape[1]
        states: list[torch.Tensor] = []
        outs = []
        for i in range(x.shape[0]):
            window, j = [], i
            while len(window) < taps and j >= 0:
                window.append(mixed[j])
                j = prev[j]
            window += [torch.zeros_like(mixed[i])] * (taps - len(window))
            conv = F.silu(sum(self.conv[:, taps - 1 - n] * window[n] for n in range(taps)))
            q = conv[:self.kd].view(hk, d).repeat_interleave(hv // hk, 0)
            k = conv[self.kd:2 * self.kd].view(hk, d).repeat_interleave(hv // hk, 0)
            v = conv[2 * self.kd:].view(hv, d)
            q, k = l2norm(q) * d ** -0.5, l2norm(k)
            s = states[prev[i]] if prev[i] >= 0 else torch.zeros(hv, d, d)
            s = s * torch.exp(g[i])[:, None, None]
            delta = (v - torch.einsum("hkv,hk->hv", s, k)) * beta[i][:, None]
            s = s + torch.einsum("hk,hv->hkv", k, delta)
            states.append(s)
            o = torch.einsum("hkv,hk->hv", s, q)
            o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + self.eps) * self.w["norm.weight"]
            outs.append((o * F.silu(z[i])).reshape(-1))
        return torch.stack(outs) @ self.w["out_proj.weight"].T


def partial_rope(x: torch.Tensor, positions: torch.Tensor, theta: float, rot: int) -> torch.Tensor:
    """Rotate-half RoPE on the first ``rot`` dims of ``x [T, heads, D]`` (the rest pass through)."""
    inv = 1.0 / theta ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot)
    ang = positions.float()[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    r, rest = x[..., :rot], x[..., rot:]
    rotated = torch.cat([-r[..., rot // 2:], r[..., : rot // 2]], -1)
    return torch.cat([r * cos + rotated * sin, rest], -1)


class GatedAttention:
    """One full-attention layer (query and output gate per head)."""

    def __init__(self, w: dict[str, torch.Tensor], cfg: dict):
        self.w, self.cfg = w, cfg
        self.heads, self.kv, self.d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]

    def __call__(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        t, d, eps = x.shape[0], self.d, self.cfg["rms_norm_eps"]
        qg = (x @ self.w["q_proj.weight"].T).view(t, self.heads, 2 * d)
        q, gate = qg[..., :d], qg[..., d:].reshape(t, -1)
        k = (x @ self.w["k_proj.weight"].T).view(t, self.kv, d)
        v = (x @ self.w["v_proj.weight"].T).view(t, self.kv, d)
        q, k = one_plus_norm(q, self.w["q_norm.weight"], eps), one_plus_norm(k, self.w["k_norm.weight"], eps)
        rot = int(d * self.cfg["rope_parameters"].get("partial_rotary_factor", 1.0))
        theta = self.cfg["rope_parameters"]["rope_theta"]
        q, k = partial_rope(q, positions, theta, rot), partial_rope(k, positions, theta, rot)
        rep = self.heads // self.kv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * d ** -0.5
        out = torch.einsum("hqk,khd->qhd", scores.masked_fill(~mask, float("-inf")).softmax(-1), v).reshape(t, -1)
        return (out * torch.sigmoid(gate)) @ self.w["o_proj.weight"].T


class HybridLM:
    """The hybrid target: ``logits(ids)``, ``greedy(prompt, n)``, ``verify_logits(context, tokens, parents)``,
    and what a DFlash draft reads from a target (``embed``, ``head``, ``dtype``, ``features``)."""

    def __init__(self, path: str | Path):
        cfg, t = load_checkpoint(path)
        self.cfg = cfg["text_config"]
        self.dtype = torch.float32
        p = hybrid.PREFIX
        self.embed = t[f"{p}embed_tokens.weight"].float()
        self.norm = t[f"{p}norm.weight"].float()
        self.head = t["lm_head.weight"].float()
        self.eps = self.cfg["rms_norm_eps"]
        self.layers = []
        for i, kind in enumerate(self.cfg["layer_types"]):
            pre = f"{p}layers.{i}."
            w = {k[len(pre):]: v.float() for k, v in t.items() if k.startswith(pre)}
            mixer_w = {k.split(".", 1)[1]: v for k, v in w.items() if k.startswith(("linear_attn.", "self_attn."))}
            mixer = GatedDeltaNet(mixer_w, self.eps) if kind == "linear_attention" else GatedAttention(mixer_w, self.cfg)
            self.layers.append((mixer, w))

    def _residuals(self, ids: list[int], prev: list[int], positions: torch.Tensor, mask: torch.Tensor) -> list:
        h = self.embed[torch.tensor(ids)]
        out = []
        for mixer, w in self.layers:
            x = one_plus_norm(h, w["input_layernorm.weight"], self.eps)
            h = h + (mixer.run(x, prev) if isinstance(mixer, GatedDeltaNet) else mixer(x, positions, mask))
            x = one_plus_norm(h, w["post_attention_layernorm.weight"], self.eps)
            h = h + (F.silu(x @ w["mlp.gate_proj.weight"].T) * (x @ w["mlp.up_proj.weight"].T)) @ w["mlp.down_proj.weight"].T
            out.append(h)
        return out

    def _run(self, ids: list[int], prev: list[int] | None = None, positions: torch.Tensor | None = None,
             mask: torch.Tensor | None = None) -> torch.Tensor:
        n = len(ids)
        prev = list(range(-1, n - 1)) if prev is None else prev
        positions = torch.arange(n) if positions is None else positions
        mask = torch.ones(n, n, dtype=torch.bool).tril() if mask is None else mask
        h = self._residuals(ids, prev, positions, mask)[-1]
        return one_plus_norm(h, self.norm, self.eps) @ self.head.T

    def logits(self, ids: list[int]) -> torch.Tensor:
        """``[T, V]`` float32 logits at every position of one sequence."""
        return self._run(list(ids))

    def greedy(self, prompt: list[int], n: int) -> list[int]:
        """``n`` greedy tokens after ``prompt`` (the whole sequence recomputed per token)."""
        ids = list(prompt)
        for _ in range(n):
            ids.append(int(self.logits(ids)[-1].argmax()))
        return ids[len(prompt):]

    def features(self, ids: list[int], layer_ids: list[int]) -> torch.Tensor:
        """``[T, len(layer_ids) * H]``: the residual after each layer of ``layer_ids`` (what a DFlash draft reads)."""
        n = len(ids)
        res = self._residuals(list(ids), list(range(-1, n - 1)), torch.arange(n), torch.ones(n, n, dtype=torch.bool).tril())
        return torch.cat([res[k] for k in layer_ids], -1)

    def verify_logits(self, context: list[int], tokens: list[int], parents: list[int], chain: bool = False) -> torch.Tensor:
        """``[1 + n, V]`` logits of one tree verify: at the root (``context[-1]``) and at each node (``parents`` as
        :func:`.forward.ancestor_mask`; node ``i`` at position ``len(context) - 1 + depth``). Each node's recurrent
        state and window continue its parent's (the root's for a child of the root); ``chain=True``: the node
        before it in node order's (a tree verified as one chain)."""
        c, n = len(context), len(tokens)
        prev = list(range(-1, c - 1))
        prev += [c - 1 + i if chain else (c + p if p >= 0 else c - 1) for i, p in enumerate(parents)]
        mask = torch.ones(c + n, c + n, dtype=torch.bool).tril()
        mask[c:, c:] = ancestor_mask(list(parents))
        pos = torch.cat([torch.arange(c), c - 1 + torch.tensor(depths(list(parents)), dtype=torch.long)])
        return self._run(list(context) + list(tokens), prev, pos, mask)[c - 1:]
