"""Exact acceptance a server must report for the tiny checkpoints (pure functions).

Derivation (also in ``docs/e2e.md``). The target emits ``succ(t) = t + 1 (mod V)`` after any context.
A verify round starts at the *root* ``r``: the last committed token (after the prefill, the token the
prefill sampled). The draft proposes a chain ``d_1 = d(r), d_2 = d(d_1), ...`` of *chain depth* ``L``
(EAGLE / STANDALONE: ``min(num_steps, num_draft_tokens - 1)``; a tree with top-k > 1 keeps the top-1
chain first, because an agreeing draft's top-1 has probability ~1 and every other node ~e^-16). The
target accepts ``d_j`` while ``d_j == r + j``, i.e. while the draft agrees at ``r, r + 1, ...``; a
disagreeing draft's top-k never holds ``succ`` (:mod:`.checkpoints`), so no sibling is accepted. So a
round accepts ``k = max{j <= L : the draft agrees at r, ..., r + j - 1}`` drafts, commits ``k + 1``
tokens (the bonus included: SGLang's *accept length*), and the next root is ``r + k + 1``.

For ``Agreement`` ``mod p`` and a root ``r`` with ``r mod p == 0`` (prompts end on ``t0 = -1 mod 8``),
every round accepts ``k = min(p - 1, L)``: the accept length is ``min(p, L + 1)`` in every round,
``L + 1`` for ``always`` and exactly 1 for ``never``.

DFLASH and DDTREE use the positional DFlash draft (:mod:`.dflash`): depth ``j`` of a block drafts ``r + j``
exactly when the agreement agrees at ``r + j - 1``, so the same ``k(r)`` holds with ``L = block_size - 1``
(DFLASH: a linear block, every depth verified) or ``L = min(B, block_size - 1)`` (DDTREE with budget
``B``). For DDTREE this needs the tree to hold the agreeing prefix of the argmax chain: an agreeing
depth's top-1 has log-probability ``> -2e-5`` and every other candidate ``< -15``, so a best-first build
(paper Sec. 3; any tie-breaking) adds the chain's first ``min(B, L)`` depths before any other node; at a
disagreeing depth ``succ`` is outside the top 63 while 63 candidates score ``-log 63`` each, so no tree
of at most 64 nodes below it holds ``succ``. Pruning to the deepest chains keeps that prefix (every
deepest node descends from it). ``tests/e2e/test_checkpoints.py`` checks the whole argument with the
reference draft and the suite's best-first oracle at every budget of the sweep.

What SGLang reports (sglang 0.5.23; ``managers/tokenizer_manager.py``,
``scheduler_components/batch_result_processor.py``, ``metrics_reporter.py``):

* ``meta_info.spec_verify_ct`` = rounds of the request, ``spec_num_correct_drafts`` = ``sum k``,
  ``spec_accept_length`` = ``completion_tokens / spec_verify_ct`` (the prefill token included),
  ``spec_accept_rate`` = ``sum k / (rounds * (num_draft_tokens - 1))``.
* The ``Decode batch`` log line and the ``sglang:spec_accept_length`` gauge: ``sum (k + 1) / #requests``
  over the decode batches of the log interval; ``/server_info`` ``avg_spec_accept_length``: the same
  over every logged interval since start. These count batches, not requests: with the overlap
  scheduler a finished request can ride one more round (its *phantom* round, from its last root), which
  they count and ``meta_info`` does not.

A round that crosses ``max_new_tokens`` is committed whole and the output cut at ``max_new_tokens``
(``Req._cap_finished_len_at_max_new_tokens``); the profiles choose ``max_new_tokens = 1 + n * accept``
so that never happens (:attr:`RequestExpectation.overshoot` is 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Sequence

from .checkpoints import Agreement
from .sampling import Sampling

RoundAccepts = Callable[[int], int]
"""``k(root)``: drafts accepted in a round whose root is ``root``."""


def chain_accepts(agree: Agreement, depth: int, vocab: int) -> RoundAccepts:
    """``k(r)`` for a chain draft of depth ``depth`` (EAGLE, STANDALONE): leading agreements from ``r``."""

    def k(root: int) -> int:
        j = 0
        while j < depth and agree.agrees((root + j) % vocab):
            j += 1
        return j

    return k


DRAFT_LOG_PROBS = {"agree": (0.0, -8.08, -15.8), "second": (-4.508, -0.019, -8.77)}
"""Log-probabilities of the DFlash draft's ``(succ, poison, every other)`` candidates at a depth where it agrees, and
where a ``mod<p>-second`` draft disagrees (measured from the reference draft, ``tests/e2e/test_hybrid.py``)."""


def tree_accepts(agree: Agreement, budget: int, depth: int, vocab: int) -> RoundAccepts:
    """``k(r)`` of a DDTREE round of budget ``budget`` whose draft is a runner-up agreement (``mod<p>-second``): the
    suite's best-first build (``families/verify/oracle.py``) over the draft's per-depth log-probabilities
    (:data:`DRAFT_LOG_PROBS`), walked greedily against ``succ``. Where the chain reaches a disagreeing depth the
    tree may hold ``succ`` as a sibling of the poison token: a budget above the chain's depth accepts through it."""
    import numpy as np

    from ..families.verify.oracle import build_best_first

    def k(root: int) -> int:
        logits = np.empty((depth, vocab))
        for j in range(depth):
            succ_lp, poison_lp, rest = DRAFT_LOG_PROBS["agree" if agree.agrees((root + j) % vocab) else "second"]
            logits[j] = rest
            logits[j, (root + j + 1) % vocab] = succ_lp
            logits[j, vocab - 2] = poison_lp
        tree = build_best_first(logits, budget, root)
        node, got = 0, 0
        while True:
            want = (tree.tokens[node] + 1) % vocab
            child = next((i for i, p in enumerate(tree.parents) if p == node and tree.tokens[i] == want), None)
            if child is None:
                return got
            node, got = child, got + 1

    return k


@dataclass(frozen=True)
class RequestPlan:
    """One ``/generate`` request: ``input_ids`` and ``max_new_tokens`` (``ignore_eos``), greedy unless ``sampling``
    (:class:`.sampling.Sampling`) gives temperature, top-k and top-p."""

    prompt: tuple[int, ...]
    max_new_tokens: int
    sampling: Sampling | None = None

    def body(self) -> dict:
        params = self.sampling.params() if self.sampling else {"temperature": 0}
        return {"input_ids": list(self.prompt),
                "sampling_params": {**params, "max_new_tokens": self.max_new_tokens, "ignore_eos": True}}


@dataclass
class RequestExpectation:
    """What one request must return.

    Attributes:
        output_ids: the target's greedy tokens (``succ`` chain from the prompt's last token).
        round_accepts: accept length (``k + 1``) of each verify round, in order (empty without speculation).
        phantom_accept: accept length of the round from the last root (counted by batch-level metrics
            only, when the overlap scheduler runs it), or ``None`` without speculation.
        overshoot: tokens the last round committed past ``max_new_tokens`` (cut from the output).
        drafts_per_round: ``num_draft_tokens - 1``, SGLang's accept-rate denominator per round.
    """

    output_ids: list[int]
    round_accepts: list[int] = field(default_factory=list)
    phantom_accept: int | None = None
    overshoot: int = 0
    drafts_per_round: int = 0

    @property
    def verify_ct(self) -> int:
        return len(self.round_accepts)

    @property
    def correct_drafts(self) -> int:
        return sum(a - 1 for a in self.round_accepts)

    @property
    def completion_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def accept_length(self) -> Fraction | None:
        """``meta_info.spec_accept_length``: ``completion_tokens / spec_verify_ct``."""
        return Fraction(self.completion_tokens, self.verify_ct) if self.verify_ct else None

    @property
    def accept_rate(self) -> Fraction | None:
        """``meta_info.spec_accept_rate``: ``correct / (verify_ct * drafts_per_round)``."""
        if not self.verify_ct or not self.drafts_per_round:
            return None
        return Fraction(self.correct_drafts, self.verify_ct * self.drafts_per_round)


def expect_request(plan: RequestPlan, vocab: int, accepts: RoundAccepts | None,
                   drafts_per_round: int = 0) -> RequestExpectation:
    """Simulate one request (see the module docstring). ``accepts=None``: no speculation.

    Raises:
        ValueError: empty prompt or ``max_new_tokens < 1``.
    """
    if not plan.prompt or plan.max_new_tokens < 1:
        raise ValueError(f"request needs a prompt and max_new_tokens >= 1, got {plan}")
    last = plan.prompt[-1]
    out = [(last + i) % vocab for i in range(1, plan.max_new_tokens + 1)]
    if accepts is None:
        return RequestExpectation(out)
    rounds, done, root = [], 1, out[0]
    while done < plan.max_new_tokens:
        k = accepts(root)
        rounds.append(k + 1)
        done += k + 1
        root = (root + k + 1) % vocab
    return RequestExpectation(out, rounds, accepts(root) + 1, done - plan.max_new_tokens, drafts_per_round)


@dataclass
class PhaseExpectation:
    """Expectations of a set of requests served together (one phase).

    Attributes:
        requests: one :class:`RequestExpectation` per request, in request order.
        speculative: whether the server speculates (accept checks apply).
    """

    requests: list[RequestExpectation]
    speculative: bool

    @property
    def completion_tokens(self) -> int:
        return sum(r.completion_tokens for r in self.requests)

    @property
    def verify_ct(self) -> int:
        return sum(r.verify_ct for r in self.requests)

    @property
    def accept_length(self) -> Fraction | None:
        """Request-level aggregate: ``sum completion_tokens / sum spec_verify_ct`` (what the
        ``/metrics`` counters ``generation_tokens_total / spec_verify_calls_total`` give)."""
        return Fraction(self.completion_tokens, self.verify_ct) if self.verify_ct else None

    @property
    def round_values(self) -> set[int]:
        """Every accept length a round of this phase can have, phantom rounds included."""
        vals = {a for r in self.requests for a in r.round_accepts}
        return vals | {r.phantom_accept for r in self.requests if r.phantom_accept is not None}

    @property
    def uniform(self) -> int | None:
        """The one accept length of every round (phantom rounds included), if there is one: then every
        ``Decode batch`` line of the phase must show it."""
        vals = self.round_values
        return next(iter(vals)) if len(vals) == 1 else None


def expect_phase(plans: Sequence[RequestPlan], vocab: int, accepts: RoundAccepts | None,
                 drafts_per_round: int = 0) -> PhaseExpectation:
    """:func:`expect_request` for each plan."""
    return PhaseExpectation([expect_request(p, vocab, accepts, drafts_per_round) for p in plans], accepts is not None)


def aligned_accept(agree: Agreement, depth: int) -> int:
    """Accept length of every round whose root is ``0 mod p``: ``min(p, depth + 1)`` (``always``:
    ``depth + 1``; ``never``: 1)."""
    return depth + 1 if agree.period is None else min(agree.period, depth + 1)


def rounds_for(accept: int, min_tokens: int = 24, min_rounds: int = 6) -> int:
    """Rounds a request runs: at least ``min_rounds`` and ``1 + rounds * accept >= min_tokens + 1``."""
    return max(min_rounds, -(-min_tokens // accept))
