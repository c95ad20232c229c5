"""The ``oracle`` backend: :func:`ddtree_compat.oracle.verify_greedy_eagle` run over the kernel buffers.

Pure PyTorch/Python on any device (tensors are read to the host, results written back). It follows the
EAGLE retrieve links rather than the parent array the tree-level oracle walks, so its cell checks the
layout and the harness end to end; it is the reference every kernel column is read against.
"""

from __future__ import annotations

import torch

from ..oracle import verify_greedy_eagle
from ..tiers import Target


class OracleBackend:
    name = "oracle"

    def unavailable_reason(self, target: Target) -> str | None:
        if target.fake:
            return f"{target.arch} is a DDTREE_FAKE_GPUS entry: no device to run on"
        return None

    def verify_tree_greedy(self, predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict) -> None:
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
