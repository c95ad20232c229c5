"""The linear-attention family's reference column: each kernel's contract stated a second time, in torch float64 over
the kernel's own buffers (the stored ``[HV, V, K]`` state layout, the retrieve links walked for the conv), apart
from the NumPy oracle the checks judge against. Host code for any real target (never inside a CUDA graph). The
``oracle`` backend (:mod:`ddtree_compat.backends.oracle_column`) composes it; :mod:`.variants` breaks it."""

from __future__ import annotations

from ...contract import Backend, KernelImpl
from ..verify.reference import HOST
from .records import KERNELS


def _parents_from_links(next_token: list[int], next_sibling: list[int]) -> list[int]:
    """Each node's parent from EAGLE's first-child / next-sibling links (the root's: -1)."""
    parents = [-1] * len(next_token)
    for node, child in enumerate(next_token):
        while child != -1:
            parents[child] = node
            child = next_sibling[child]
    return parents


class LinearReference(Backend):
    """The linear-attention kernels in torch float64 (see the module docstring)."""

    name = "linear-reference"
    implements = tuple(KernelImpl(k, "host", what=HOST) for k in KERNELS)

    def gdn_verify_tree(self, A_log, dt_bias, q, k, v, a, b, *, ssm_states, cache_indices, query_start_loc,
                        intermediate_states_buffer, intermediate_state_indices, cache_steps,
                        retrieve_parent_token=None):
        import torch
        import torch.nn.functional as F

        f = torch.float64
        q, k, v = q[0].to(f), k[0].to(f), v[0].to(f)
        heads, hv = q.shape[1], v.shape[1]
        g = -A_log.to(f).exp() * F.softplus(a.to(f) + dt_bias.to(f), beta=1.0, threshold=20.0)
        beta = b.to(f).sigmoid()
        qn = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) * q.shape[-1] ** -0.5
        kn = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        rep = hv // heads
        qn, kn = qn.repeat_interleave(rep, 1), kn.repeat_interleave(rep, 1)  # [T, HV, K]
        out = torch.empty_like(v)
        starts = query_start_loc.tolist()
        for r, (s, e) in enumerate(zip(starts, starts[1:])):
            row = int(intermediate_state_indices[r])
            states = []  # [HV, V, K] per node, as stored
            for t in range(e - s):
                if t == 0:
                    h = ssm_states[int(cache_indices[r])].to(f)
                else:
                    p = int(retrieve_parent_token[r, t]) if retrieve_parent_token is not None else t - 1
                    h = states[p]
                h = h * g[s + t].exp()[:, None, None]
                delta = (v[s + t] - torch.einsum("hvk,hk->hv", h, kn[s + t])) * beta[s + t][:, None]
                h = h + delta[:, :, None] * kn[s + t][:, None, :]
                states.append(h)
                out[s + t] = torch.einsum("hvk,hk->hv", h, qn[s + t])
                intermediate_states_buffer[row, t] = h.to(intermediate_states_buffer.dtype)
        return out.unsqueeze(0).to(q.dtype)

    def gdn_verify_chain(self, A_log, dt_bias, q, k, v, a, b, **kwargs):
        return self.gdn_verify_tree(A_log, dt_bias, q, k, v, a, b, **kwargs, retrieve_parent_token=None)

    def conv_verify_tree(self, x, conv_states, weight, bias, cache_indices, intermediate_conv_window,
                         intermediate_state_indices, retrieve_next_token, retrieve_next_sibling, retrieve_parent_token):
        import torch

        f = torch.float64
        w = weight.to(f)
        width = w.shape[1]
        out = torch.empty(x.shape, dtype=f, device=x.device)
        for r in range(x.shape[0]):
            parents = _parents_from_links(retrieve_next_token[r].tolist(), retrieve_next_sibling[r].tolist())
            retrieve_parent_token[r] = torch.tensor([max(p, 0) for p in parents], dtype=retrieve_parent_token.dtype)
            history = conv_states[int(cache_indices[r])].to(f)  # [dim, W - 1]
            for t in range(x.shape[2]):
                cols, node = [], t
                while node >= 0 and len(cols) < width:
                    cols.append(x[r, :, node].to(f))
                    node = parents[node]
                past = width - len(cols)
                inputs = torch.stack([*history.unbind(1)[history.shape[1] - past:], *reversed(cols)], 1) \
                    if past else torch.stack(list(reversed(cols)), 1)
                acc = (inputs * w).sum(1) + (0 if bias is None else bias.to(f))
                out[r, :, t] = acc * acc.sigmoid()
                intermediate_conv_window[int(intermediate_state_indices[r]), t] = \
                    inputs[:, 1:].to(intermediate_conv_window.dtype)
        return out.to(x.dtype)

    def ssm_state_commit(self, dst, src, dst_indices, step_indices) -> None:
        for row, (slot, step) in enumerate(zip(dst_indices.tolist(), step_indices.tolist())):
            if step >= 0:
                dst[:, slot] = src[:, row, step]

    def conv_window_commit(self, dst, src, dst_indices, step_indices) -> None:
        self.ssm_state_commit(dst, src, dst_indices, step_indices)
