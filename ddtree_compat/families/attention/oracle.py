"""The verify-attention family's oracle: the float reference of one request's tree-verify attention under
an explicit mask, and the per-dtype tolerance a kernel's output is held to. The reference is float32 torch
(a pure function of its inputs, any device); the ancestor-only mask it is given comes from
:func:`ddtree_compat.families.verify.oracle.ancestor_mask` (paper Sec. 3)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...errors import CaseError


@dataclass(frozen=True)
class Tolerance:
    """Per-dtype bound on ``|kernel - reference|`` for outputs of values in ``[-1, 1]``.

    Attributes:
        dtype: ``fp16`` or ``bf16``.
        unit_roundoff: ``u = 2^-(mantissa bits + 1)``.
        atol: the bound, ``4u``.
        reason: why ``4u``.
    """

    dtype: str
    unit_roundoff: float
    atol: float
    reason: str


_REASON = ("|v| <= 1 so |out| <= 1. The kernel rounds the softmax weights to {d} before P.V (each off by "
           "<= u relative: <= u on the output) and rounds the output to {d} (<= u); products and sums are "
           "fp32 (~1e-6).{extra} 4u bounds this with room; a wrong mask entry moves outputs by ~0.03-0.5.")
TOLERANCES: dict[str, Tolerance] = {
    "fp16": Tolerance("fp16", 2.0 ** -11, 4 * 2.0 ** -11, _REASON.format(
        d="fp16", extra=" Weights below 2^-14 are fp16 subnormals (absolute error <= 2^-25 each: <= 1.3e-4 "
                        "over 4096 prefix keys).")),
    "bf16": Tolerance("bf16", 2.0 ** -8, 4 * 2.0 ** -8, _REASON.format(d="bf16", extra="")),
}


def verify_attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor,
                               sm_scale: float) -> torch.Tensor:
    """Scaled-dot-product attention of one request's verify rows, in float32, over an explicit mask.

    ``out[i, h] = softmax_j(sm_scale * q[i, h] . k[j, h // G] | visible[i, j]) @ v[:, h // G]``: query
    head ``h`` reads KV head ``h // G`` (grouped-query attention, ``G = H / Hk``, SGLang's
    ``cur_kv_head = cur_head // kv_group_num``). Keys are the request's prefix then its tree rows, so
    ``visible[i, :P]`` is the prefix and ``visible[i, P:]`` the ancestor-only mask
    (:func:`ddtree_compat.families.verify.oracle.ancestor_mask`, paper Sec. 3). Inputs are upcast as given (already rounded to the kernel's
    dtype), so only the kernel's arithmetic differs from this.

    Args:
        q: ``[n, H, Dh]`` query rows (any float dtype, any device).
        k, v: ``[P + n, Hk, Dh]`` keys and values.
        visible: bool ``[n, P + n]``; every row must see at least one key.
        sm_scale: softmax scale (SGLang passes ``1 / sqrt(Dh)``).

    Returns:
        float32 ``[n, H, Dh]`` on ``q``'s device.

    Raises:
        CaseError: mismatched shapes, ``H`` not a multiple of ``Hk``, or a row that sees no key (its
            softmax would be undefined).
    """
    n, heads, _ = q.shape
    keys, kv_heads, _ = k.shape
    if heads % kv_heads or v.shape[:2] != k.shape[:2] or tuple(visible.shape) != (n, keys):
        raise CaseError("shapes", (tuple(q.shape), tuple(k.shape), tuple(v.shape), tuple(visible.shape)),
                        "q [n, H, Dh], k/v [T, Hk, Dh] with Hk | H, visible [n, T]", "mismatch")
    if n and not bool(visible.any(dim=1).all()):
        raise CaseError("visible", "a row with no visible key", "every row sees at least itself", "empty row")
    group = heads // kv_heads
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("nhd,thd->hnt", q.float(), kf) * sm_scale
    scores = scores.masked_fill(~visible.to(torch.bool).unsqueeze(0), float("-inf"))
    return torch.einsum("hnt,thd->nhd", torch.softmax(scores, dim=-1), vf)
