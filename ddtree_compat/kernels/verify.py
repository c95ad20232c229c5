"""Greedy tree verify: SGLang's ``verify_tree_greedy`` contract over EAGLE-format buffers.

Backend method ``verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index,
retrive_next_token, retrive_next_sibling, target_predict)``, outputs written in place. Shapes and dtypes
(``bs`` requests, ``C`` node slots each, ``S = accept_width``): ``predicts`` int32 ``[bs*C]``;
``accept_index`` int32 ``[bs, S]``; ``accept_token_num`` int32 ``[bs]``; the five inputs int64
``[bs, C]``, on the target's device. Contract: :func:`ddtree_compat.oracle.verify_greedy_eagle`
(elements off the accepted path are left as they were). Cases: the verify grid
(:func:`ddtree_compat.cases.grid`) or ``--ddtree-case`` files; judged by
:func:`ddtree_compat.checks.verify.run_verify`.
"""

from __future__ import annotations

from ..cases import VerifyCase
from . import CaseContext, KernelRecord

VERIFY = "verify_tree_greedy"
GRAPH = f"{VERIFY}@graph"
"""The verify launch captured in a CUDA graph at capacity and replayed at the live width
(:mod:`ddtree_compat.checks.graphs`)."""


def _cases(ctx: CaseContext) -> tuple:
    return tuple(ctx.verify)


RECORD = KernelRecord(
    name=VERIFY,
    summary="greedy tree verify over EAGLE retrieve links: predicts, accept_index, accept_token_num",
    case_param="ddtree_case",
    case_type=VerifyCase,
    cases=_cases,
    run="ddtree_compat.checks.verify:run_verify",
    known_issues=True,
)
RECORDS = (RECORD,)
