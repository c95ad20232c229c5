"""The verify family's reference column: ``verify_tree_greedy``'s contract stated a second time, as a walk of the
EAGLE retrieve links in the kernel's own buffers (:func:`.oracle.verify_greedy_eagle`), apart from the expected
outputs, which walk each tree's parent array (:func:`.checks.expected_outputs`). Python on the host, for any
real target (tensors read back, results written back: never inside a CUDA graph). The ``oracle`` backend
(:mod:`ddtree_compat.backends.oracle_column`) composes it; the broken variants (:mod:`.variants`) break it."""

from __future__ import annotations

from ...contract import Backend, KernelImpl
from .oracle import verify_greedy_eagle
from .records import VERIFY

HOST = "the oracle (Python on the host)"
"""What the reference columns are, for skip reasons (:attr:`~ddtree_compat.contract.KernelImpl.what`)."""


class VerifyReference(Backend):
    """``verify_tree_greedy`` from the EAGLE links (see the module docstring)."""

    name = "verify-reference"
    implements = (KernelImpl(VERIFY, "host", what=HOST),)

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
        import torch
        out = verify_greedy_eagle(candidates.tolist(), retrive_index.tolist(), retrive_next_token.tolist(),
                                  retrive_next_sibling.tolist(), target_predict.tolist(), accept_index.shape[1])
        for i, v in enumerate(out.predicts):
            if v is not None:
                predicts[i] = v
        for b, row in enumerate(out.accept_index):
            for j, v in enumerate(row):
                if v is not None:
                    accept_index[b, j] = v
        accept_token_num.copy_(torch.tensor(out.accept_token_num, dtype=accept_token_num.dtype))
