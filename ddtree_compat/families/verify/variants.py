"""Deliberately wrong ``verify_tree_greedy`` backends (test-only), proving the verify check can fail.

Each wraps the family's reference (:class:`.reference.VerifyReference`) and breaks one thing. Use with
``--ddtree-backend ddtree_compat.families.verify.variants:ZeroAccept`` etc. Expected outcomes: ``ZeroAccept`` ->
``zero-accept``; ``SkipsPredicts``, ``WritesTail``, ``OutOfBounds``, ``OffByOne`` -> ``wrong``. Backends that fault
on purpose (containment, the static tier's planted kernel): :mod:`ddtree_compat.faultinject`.
"""

from __future__ import annotations

import torch

from .reference import VerifyReference


class ZeroAccept(VerifyReference):
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


class SkipsPredicts(VerifyReference):
    """Correct walk, but never writes ``predicts`` (an unwritten output: the poison shows)."""

    name = "mutant-skips-predicts"

    def verify_tree_greedy(self, predicts, *args) -> None:
        scratch = predicts.clone()
        super().verify_tree_greedy(scratch, *args)


class WritesTail(VerifyReference):
    """Correct, then fills ``accept_index`` past the accepted path with -1 (writes the contract forbids)."""

    name = "mutant-writes-tail"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, *args) -> None:
        super().verify_tree_greedy(predicts, accept_index, accept_token_num, *args)
        for b in range(accept_index.shape[0]):
            accept_index[b, int(accept_token_num[b]) + 1:] = -1


class OutOfBounds(VerifyReference):
    """Correct, then writes one element past the end of ``accept_token_num`` (a canary catches it)."""

    name = "mutant-out-of-bounds"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, *args) -> None:
        super().verify_tree_greedy(predicts, accept_index, accept_token_num, *args)
        flat = torch.as_strided(accept_token_num, (accept_token_num.numel() + 1,), (1,))
        flat[-1] = 0


class OffByOne(VerifyReference):
    """Reports one accepted draft too many."""

    name = "mutant-off-by-one"

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, *args) -> None:
        super().verify_tree_greedy(predicts, accept_index, accept_token_num, *args)
        accept_token_num += 1
