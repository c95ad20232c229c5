"""Deliberately wrong ``verify_tree_greedy`` backends (test-only), proving the verify check can fail.

Each wraps the ``oracle`` backend and breaks one thing. Use with ``--ddtree-backend
ddtree_compat.families.verify.variants:ZeroAccept`` etc. Expected outcomes: ``ZeroAccept`` -> ``zero-accept``;
``SkipsPredicts``, ``WritesTail``, ``OutOfBounds``, ``OffByOne`` -> ``wrong``. ``OversizedSmem`` verifies
correctly but declares a planted static kernel: its static cells are ``out of resources`` on the 99 KB-per-block
archs (sm120) and pass on sm90. Backends that fault on purpose (for containment): :mod:`ddtree_compat.faultinject`.
"""

from __future__ import annotations

import torch

from ...backends import with_static
from ...backends.oracle import OracleBackend
from ...static.kernels import Spec, TritonKernel
from .records import VERIFY


class ZeroAccept(OracleBackend):
    """Accepts nothing: the root's target as bonus, ``accept_token_num = 0`` (the field symptom)."""

    name = "mutant-zero-accept"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        bs, cap = candidates.shape
        for b in range(bs):
            root = int(retrive_index[b, 0])
            accept_index[b, 0] = root
            predicts[root] = target_predict.flatten()[root].to(predicts.dtype)
        accept_token_num.zero_()


class SkipsPredicts(OracleBackend):
    """Correct walk, but never writes ``predicts`` (an unwritten output: the poison shows)."""

    name = "mutant-skips-predicts"

    def verify_tree_greedy(self, predicts, *args) -> None:
        scratch = predicts.clone()
        super().verify_tree_greedy(scratch, *args)


class WritesTail(OracleBackend):
    """Correct, then fills ``accept_index`` past the accepted path with -1 (writes the contract forbids)."""

    name = "mutant-writes-tail"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, *args) -> None:
        super().verify_tree_greedy(predicts, accept_index, accept_token_num, *args)
        for b in range(accept_index.shape[0]):
            accept_index[b, int(accept_token_num[b]) + 1:] = -1


class OutOfBounds(OracleBackend):
    """Correct, then writes one element past the end of ``accept_token_num`` (a canary catches it)."""

    name = "mutant-out-of-bounds"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, *args) -> None:
        super().verify_tree_greedy(predicts, accept_index, accept_token_num, *args)
        flat = torch.as_strided(accept_token_num, (accept_token_num.numel() + 1,), (1,))
        flat[-1] = 0


class OffByOne(OracleBackend):
    """Reports one accepted draft too many."""

    name = "mutant-off-by-one"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, *args) -> None:
        super().verify_tree_greedy(predicts, accept_index, accept_token_num, *args)
        accept_token_num += 1


def _oversized_spec(case, arch: str) -> Spec:
    return Spec("bm128-bn128-bk128-s4", (("BM", 128), ("BN", 128), ("BK", 128)), num_warps=8, num_stages=4)


class OversizedSmem(OracleBackend):
    """Correct verify, plus a planted static kernel (:mod:`ddtree_compat.static.planted`) whose shared
    memory (128 KB on sm120, 160 KB on sm90) fits sm90's 227 KB per block but not sm120's 99 KB: its
    static cells are ``out of resources`` on sm86/sm89/sm120/sm121 and pass elsewhere."""

    name = "mutant-oversized-smem"
    PLANTED = TritonKernel(kernel="oversized_smem_kernel", fn="ddtree_compat.static.planted:oversized_smem_kernel",
                           signature=(("a_ptr", "*fp16"), ("b_ptr", "*fp16"), ("c_ptr", "*fp32"), ("K", "i32")),
                           specialize=_oversized_spec)
    implements = with_static(OracleBackend.implements, VERIFY, (PLANTED,))
