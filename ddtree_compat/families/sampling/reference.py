"""The sampling family's reference column: SGLang's two samplers stated a second time, row by row in Python from
:mod:`.oracle` over the kernel's own buffers (the EAGLE links and coins read back, the outputs written as the kernels
write them), apart from the judge's expected values (the case's requests, and :mod:`.law` for the distribution).
Host code for any real target (never inside a CUDA graph). The ``oracle`` backend
(:mod:`ddtree_compat.backends.oracle_column`) composes it; the broken variants (:mod:`.variants`) each plant one skew
of :mod:`.skews` through the same rows (``skew``)."""

from __future__ import annotations

from ...contract import Backend, KernelImpl
from ..verify.reference import HOST
from . import oracle as O
from . import skews as K
from .records import CHAIN, TREE


def _sparse(probs) -> list[list[dict]]:
    """A ``[bs, D, V]`` probability tensor as per-request lists of sparse ``{token: mass}`` rows (rows equal to the
    previous request's are shared, as a distribution cell's ``N`` copies of one tree are)."""
    import numpy as np

    dense = probs.cpu().numpy()
    out, last = [], None
    for b in range(dense.shape[0]):
        if last is not None and np.array_equal(dense[b], dense[b - 1]):
            out.append(last)
            continue
        last = [{int(t): float(row[t]) for t in np.flatnonzero(row)} for row in dense[b]]
        out.append(last)
    return out


class SamplingReference(Backend):
    """SGLang's tree and chain samplers as :mod:`.oracle` states them, over the buffers (see the module docstring).

    Attributes:
        skew: a skew of :mod:`.skews` every row is sampled with where the sampler (and its mode) has it (``None``:
            the sampler's own rule); the broken variants set it.
    """

    name = "sampling-reference"
    implements = (KernelImpl(TREE, "host", what=HOST), KernelImpl(CHAIN, "host", what=HOST))
    skew: str | None = None

    def tree_speculative_sampling(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                                  retrive_next_token, retrive_next_sibling, uniform_samples,
                                  uniform_samples_for_final_sampling, target_probs, draft_probs,
                                  threshold_single=1.0, threshold_acc=1.0, deterministic=True) -> None:
        """``tree_speculative_sampling_target_only``: per request, the walk and the bonus token; the rejected
        children's target masses written into ``draft_probs``."""
        import torch

        bs, width, vocab = candidates.shape[0], accept_index.shape[1], target_probs.shape[-1]
        cand, nxt, sib = candidates.tolist(), retrive_next_token.tolist(), retrive_next_sibling.tolist()
        index, coins, finals = retrive_index.tolist(), uniform_samples.tolist(), uniform_samples_for_final_sampling.tolist()
        targets, rounds = _sparse(target_probs), []
        for b in range(bs):
            links = O.Links(tuple(cand[b]), tuple(nxt[b]), tuple(sib[b]))
            rounds.append(O.tree_target_only(links, targets[b], coins[b], finals[b], vocab, width, threshold_single,
                                             threshold_acc, skew=self._skew(K.TREE_SKEWS)))
        self._write(rounds, index, predicts, accept_index, accept_token_num)
        rejected = [(b, node, token) for b, r in enumerate(rounds) for node, token in r.rejected]
        if rejected:
            at = tuple(torch.tensor(col, dtype=torch.long, device=draft_probs.device) for col in zip(*rejected))
            draft_probs[at] = target_probs[at]

    def chain_speculative_sampling(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                                   retrive_next_token, retrive_next_sibling, uniform_samples,
                                   uniform_samples_for_final_sampling, target_probs, draft_probs,
                                   threshold_single=1.0, threshold_acc=1.0, deterministic=True,
                                   block_verification=False) -> None:
        """``chain_speculative_sampling_triton``: per request, rejection sampling (or block verification) of the
        chain ``candidates[b, 1:]`` against ``draft_probs``; thresholds and ``deterministic`` unused, as there."""
        bs, vocab = candidates.shape[0], target_probs.shape[-1]
        cand, index = candidates.tolist(), retrive_index.tolist()
        coins, finals = uniform_samples.tolist(), uniform_samples_for_final_sampling.tolist()
        targets, drafts = _sparse(target_probs), _sparse(draft_probs)
        skew = self._skew(K.BLOCK_SKEWS if block_verification else K.CHAIN_SKEWS)
        rounds = [O.chain_rejection(cand[b], targets[b], drafts[b], coins[b], finals[b], vocab,
                                    block=bool(block_verification), skew=skew) for b in range(bs)]
        self._write(rounds, index, predicts, accept_index, accept_token_num)

    def _skew(self, of: tuple[str, ...]) -> str | None:
        """The planted skew where this sampler (and mode) has it; else its own rule."""
        return self.skew if self.skew in of else None

    @staticmethod
    def _write(rounds: list[O.Round], index: list[list[int]], predicts, accept_index, accept_token_num) -> None:
        """The rounds as the kernels write them: ``accept_index[b, j]`` the path's flat indices, ``predicts`` at each
        the next emitted token, ``accept_token_num[b]`` the accepted drafts. Filled on the host and copied back once
        (one element write per launch on a device makes a 65,536-row cell take minutes)."""
        import torch

        pred, acc, num = (t.tolist() for t in (predicts, accept_index, accept_token_num))
        for b, r in enumerate(rounds):
            for j, (node, token) in enumerate(zip(r.path, r.emitted)):
                acc[b][j] = index[b][node]
                pred[index[b][node]] = token
            num[b] = r.accepted_drafts
        for out, values in zip((predicts, accept_index, accept_token_num), (pred, acc, num)):
            out.copy_(torch.tensor(values, dtype=out.dtype))
