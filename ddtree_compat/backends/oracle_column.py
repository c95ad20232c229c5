"""The ``oracle`` backend: each kernel contract of SGLang's kernels stated a second time, composed of the families'
reference columns: verify (:mod:`ddtree_compat.families.verify.reference`, a walk of the EAGLE retrieve links in
the buffers), commit (:mod:`ddtree_compat.families.commit.reference`, loops over the buffers, apart from the
commit plan), verify attention (:mod:`ddtree_compat.families.attention.reference`, a float64 per-row softmax
over the layout's indirections) and sampling verify (:mod:`ddtree_compat.families.sampling.reference`, SGLang's tree
and chain samplers row by row) and linear attention (:mod:`ddtree_compat.families.linear.reference`, the gated
delta rule and the short convolution in torch float64 over the buffers). None of them is the reference the checks judge against, so the ``oracle``
column checks the layout and the harness end to end.

Runs on the host for any real target (tensors are read back, results written back: never inside a CUDA graph).
torch is imported inside the methods: the CLI and pytest's xdist controller load every adapter and run none.
"""

from __future__ import annotations

from ..families.attention.reference import AttentionReference
from ..families.commit.reference import CommitReference
from ..families.linear.reference import LinearReference
from ..families.sampling.reference import SamplingReference
from ..families.verify.reference import VerifyReference


class OracleBackend(VerifyReference, CommitReference, AttentionReference, SamplingReference, LinearReference):
    name = "oracle"
    implements = (VerifyReference.implements + CommitReference.implements + AttentionReference.implements
                  + SamplingReference.implements + LinearReference.implements)
