"""End to end: a real SGLang server per speculative configuration (tier ``e2e``, marker ``e2e``).

Each cell is one server configuration x one request phase (:mod:`ddtree_compat.e2e.configs`); the
servers of one pytest session start together and stop after their last cell. A cell passes when every
request returns the target-only run's tokens (lossless), throughput is > 0, the server log has no fault,
and the accept length from ``meta_info``, ``/metrics``, ``/server_info`` and the ``Decode batch`` lines
equals the computed expectation. Negative controls (drafts that never agree) must measure exactly 1.00
and the zero-accept check must report them when judged against an agreeing draft.

Without a GPU (or without SGLang's server dependencies) every cell is a skip with the reason.
On a GPU: ``python -m pytest tests/e2e -m e2e`` (``docs/e2e.md``).
"""


def test_serve(ddtree_e2e_cell, ddtree_check_e2e):
    judgement = ddtree_check_e2e(ddtree_e2e_cell)
    if ddtree_e2e_cell.config.negative_control:
        assert judgement.cross is not None and judgement.cross.outcome == "zero-accept", (
            "negative control: the zero-accept check did not report accept length 1.00")
        assert judgement.measured.get("meta_accept") is not None
