"""The linear-attention contracts in float64: pure functions over NumPy arrays, written from the gated delta rule
and the short causal convolution as the Gated DeltaNet layer defines them, never from the kernels under test.

Shapes for one request of ``D`` verified nodes (node 0 the root, ``parents[0] == -1``, parents before children):
q, k ``[D, H, K]``; v ``[D, HV, V]``; gate inputs a, b ``[D, HV]``; ``A_log``, ``dt_bias`` ``[HV]``; a recurrent
state ``[HV, K, V]`` (logical: key index first; SGLang stores it ``[HV, V, K]``); conv input ``[dim, D]``,
weights ``[dim, W]``, a conv window ``[dim, W - 1]`` (oldest input first).

The tree rule: node ``i`` starts from its parent's state (the root from the request's persistent state) and adds
its own token only, so a sibling never enters a node's state; its conv window is its own input after its
ancestors', the persistent window before the root.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

SOFTPLUS_THRESHOLD = 20.0  # softplus(x) = x above it (beta 1), as the layer computes its decay
L2_EPS = 1e-6  # q and k are divided by sqrt(sum of squares + eps)


def softplus(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.where(x <= SOFTPLUS_THRESHOLD, np.log1p(np.exp(np.minimum(x, SOFTPLUS_THRESHOLD))), x)


def gates(a: np.ndarray, b: np.ndarray, A_log: np.ndarray, dt_bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(g, beta)``: the log decay ``g = -exp(A_log) * softplus(a + dt_bias)`` and the write strength
    ``beta = sigmoid(b)``, both ``[..., HV]``."""
    g = -np.exp(np.asarray(A_log, np.float64)) * softplus(np.asarray(a, np.float64) + np.asarray(dt_bias, np.float64))
    beta = 1.0 / (1.0 + np.exp(-np.asarray(b, np.float64)))
    return g, beta


def l2norm(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + L2_EPS)


def delta_step(state: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, g: float, beta: float) -> tuple:
    """One token of one value head: ``(output [V], new state [K, V])`` from ``state [K, V]``, the normalized and
    scaled query ``q [K]``, the normalized key ``k [K]``, the value ``v [V]`` and the token's gates."""
    decayed = state * np.exp(g)
    delta = (v - k @ decayed) * beta
    new = decayed + np.outer(k, delta)
    return q @ new, new


def gdn_verify(parents: Sequence[int], state0: np.ndarray, q, k, v, a, b, A_log, dt_bias) -> tuple:
    """Every node's output ``[D, HV, V]`` and state ``[D, HV, K, V]`` of one request by the tree rule."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    d, heads, dim = q.shape
    hv = v.shape[1]
    g, beta = gates(a, b, A_log, dt_bias)
    qn, kn = l2norm(q) * dim ** -0.5, l2norm(k)
    out = np.zeros((d, hv, v.shape[2]))
    states = np.zeros((d, hv, dim, v.shape[2]))
    group = hv // heads
    for i in range(d):
        before = np.asarray(state0, np.float64) if parents[i] < 0 else states[parents[i]]
        for h in range(hv):
            out[i, h], states[i, h] = delta_step(before[h], qn[i, h // group], kn[i, h // group], v[i, h],
                                                 g[i, h], beta[i, h])
    return out, states


def path_inputs(parents: Sequence[int], window0: np.ndarray, x: np.ndarray, node: int, width: int) -> np.ndarray:
    """The last ``width`` inputs ``[dim, width]`` (oldest first) along the node's ancestor path, the persistent
    window ``[dim, W - 1]`` before the root."""
    path = []
    i = node
    while i >= 0:
        path.append(i)
        i = parents[i]
    seq = np.concatenate([np.asarray(window0, np.float64), np.asarray(x, np.float64)[:, path[::-1]]], axis=1)
    return seq[:, -width:]


def conv_verify(parents: Sequence[int], window0, x, weight, bias, silu: bool = True) -> tuple:
    """Every node's convolution output ``[dim, D]`` and window ``[D, dim, W - 1]`` of one request by the tree rule."""
    weight = np.asarray(weight, np.float64)
    width = weight.shape[1]
    d = len(parents)
    out = np.zeros((weight.shape[0], d))
    windows = np.zeros((d, weight.shape[0], width - 1))
    for i in range(d):
        inputs = path_inputs(parents, window0, x, i, width)
        acc = (inputs * weight).sum(1) + (0.0 if bias is None else np.asarray(bias, np.float64))
        out[:, i] = acc / (1.0 + np.exp(-acc)) if silu else acc
        windows[i] = inputs[:, 1:]
    return out, windows


def parent_table(parents: Sequence[int]) -> list[int]:
    """The parent table the conv kernel writes for the recurrent kernel: each node's parent, the root's 0."""
    return [max(p, 0) for p in parents]


def committed(persistent: np.ndarray, scratch: np.ndarray, slots: Sequence[int], rows: Sequence[int],
              steps: Sequence[int]) -> np.ndarray:
    """The persistent cache ``[layers, slots, ...]`` after the commit: for each request with a step ``>= 0``, its
    slot holds its scratch row's entry at that step (``scratch [layers, rows, C, ...]``); nothing else changes."""
    out = np.array(persistent, copy=True)
    for slot, row, step in zip(slots, rows, steps):
        if step >= 0:
            out[:, slot] = scratch[:, row, step]
    return out
