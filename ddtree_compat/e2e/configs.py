"""Server configurations and request phases of the e2e profiles.

A :class:`ServerConfig` is one ``sglang.launch_server`` (one target, at most one draft, one speculative
setting, CUDA graphs on or off); a :class:`Phase` is a set of requests sent to it, one at a time
(``bs1``) or all at once (``c4``: four concurrent clients). A pytest cell is one (config, phase).

Draft-token counts follow the kernel sweep: 9 and 13 tree nodes (budgets 8 and 12, the field report's),
as chains (top-k 1: ``num_draft_tokens = num_steps + 1``, SGLang forces it) and as trees (top-k > 1).
Every speculative config states its expected accept length per round (:func:`expected_accept`).

``default`` (about 8 server launches, started together: fits one 10-minute device call):

========================================  =====================================================
target                                    no speculation: the lossless baseline, greedy = succ
eagle-k1-s8-d9-always-eager               chain of 8 drafts (9 nodes), every one accepted: 9.00
eagle-k1-s8-d9-never-eager                negative control: accept length exactly 1.00
eagle-k1-s12-d13-always-graph             chain, 13 nodes, CUDA graphs: 13.00
eagle-k4-s3-d9-mod2-eager                 tree, top-k 4, 9 nodes, draft agrees on half: 2.00
eagle-k2-s6-d13-mod4-graph                tree, top-k 2, 13 nodes, agrees on 3/4, graphs: 4.00
standalone-k1-s3-d4-always-eager          STANDALONE (1-layer Qwen3 draft): 4.00
standalone-k1-s8-d9-mod4-graph            STANDALONE, 9 nodes, graphs: 4.00
dflash-b16-never-eager                    DFLASH (skips without flashinfer): 1.00
ddtree-b8-never-eager, ddtree-b12-...     DDTREE if the installed SGLang has it (0.5.23: skip)
========================================  =====================================================

``full`` adds more agreement x shape x graph combinations and a phase of eight concurrent clients.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import checkpoints as ck
from .expect import (RequestPlan, RoundAccepts, aligned_accept, chain_accepts, expect_phase, mask_draft_accepts,
                     rounds_for, PhaseExpectation)

PROFILES = ("default", "full")
NONE = "NONE"
DDTREE = "DDTREE"
START_TOKEN = 7
"""Prompts end on ``7 + 24 j``: ``-1 mod 8``, so the first root is ``0 mod 8`` (aligned for ``mod2/4/8``)."""
START_STEP = 24


@dataclass(frozen=True)
class Phase:
    """Requests sent to one server in one cell.

    Attributes:
        name: ``bs1`` (one request at a time) or ``c<N>`` (``N`` concurrent clients).
        concurrency: 1 or ``N``.
        requests: the requests, in order.
    """

    name: str
    concurrency: int
    requests: tuple[RequestPlan, ...]


@dataclass(frozen=True)
class ServerConfig:
    """One server launch.

    Attributes:
        id: ``<algo>-k<topk>-s<steps>-d<draft tokens>-<agreement>-<graph|eager>`` (``target``, ``dflash-b16-...``,
            ``ddtree-b8-...``).
        algorithm: ``NONE``, ``EAGLE``, ``STANDALONE``, ``DFLASH`` or ``DDTREE``.
        draft: the draft checkpoint (``None`` for the target-only server).
        steps, topk, draft_tokens: ``--speculative-num-steps``, ``--speculative-eagle-topk``,
            ``--speculative-num-draft-tokens`` (DFLASH: the block size; DDTREE: unused).
        cuda_graph: CUDA graphs on (captured up to the phases' batch size) or off.
        budget: DDTREE ``--speculative-ddtree-budget``.
        phases: the cells of this server.
    """

    id: str
    algorithm: str
    draft: ck.DraftSpec | None = None
    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None
    cuda_graph: bool = False
    budget: int | None = None
    phases: tuple[Phase, ...] = field(default_factory=tuple, compare=False)

    @property
    def speculative(self) -> bool:
        return self.algorithm != NONE

    @property
    def negative_control(self) -> bool:
        """A draft that never agrees with a tree/chain that could accept: accept length must be 1.00,
        and the zero-accept check must report it when judged against an agreeing draft."""
        return self.draft is not None and self.draft.agree is ck.NEVER and self.algorithm in (ck.EAGLE, ck.STANDALONE)

    @property
    def chain_depth(self) -> int:
        """Drafts on the longest path a round can accept (see :mod:`.expect`)."""
        if self.algorithm in (ck.EAGLE, ck.STANDALONE):
            return min(self.steps, self.draft_tokens - 1)
        if self.algorithm == ck.DFLASH:
            return self.draft_tokens - 1
        if self.algorithm == DDTREE:
            return min(self.budget, self.draft.block_size - 1)
        return 0

    @property
    def drafts_per_round(self) -> int:
        """SGLang's accept-rate denominator per round: ``num_draft_tokens - 1``."""
        if self.algorithm == DDTREE:
            return self.budget
        return (self.draft_tokens or 1) - 1

    def round_accepts(self, shape: ck.TinyShape) -> RoundAccepts | None:
        if not self.speculative:
            return None
        if self.algorithm in (ck.DFLASH, DDTREE):
            return mask_draft_accepts(shape.vocab - 1, self.chain_depth, shape.vocab)
        return chain_accepts(self.draft.agree, self.chain_depth, shape.vocab)

    def expectation(self, phase: Phase, shape: ck.TinyShape) -> PhaseExpectation:
        return expect_phase(phase.requests, shape.vocab, self.round_accepts(shape), self.drafts_per_round)

    def agreeing_twin(self) -> "ServerConfig":
        """The same shape with an always-agreeing draft (what a negative control is judged against to
        prove the zero-accept check fires)."""
        from dataclasses import replace

        return replace(self, id=self.id.replace("-never-", "-always-"), draft=ck.DraftSpec(self.algorithm, ck.ALWAYS))

    @property
    def max_batch(self) -> int:
        return max((p.concurrency for p in self.phases), default=1)


def expected_accept(config: ServerConfig) -> int:
    """Accept length of every round of an aligned request (1 without speculation)."""
    if not config.speculative:
        return 1
    if config.algorithm in (ck.DFLASH, DDTREE):
        return 1
    return aligned_accept(config.draft.agree, config.chain_depth)


def prompt(j: int, vocab: int = 512) -> tuple[int, ...]:
    """Prompt ``j``: ``3 + j mod 5`` filler tokens, then ``START_TOKEN + 24 j`` (only the last token
    decides the output)."""
    last = START_TOKEN + START_STEP * j
    filler = tuple((last * 37 + 101 * i + 13) % vocab for i in range(3 + j % 5))
    return filler + (last,)


def max_new_tokens(accept: int) -> int:
    """``1 + n * accept``: the request ends on a round boundary (no overshoot)."""
    return 1 + rounds_for(accept) * accept


def _phases(accept: int, concurrencies: tuple[int, ...], vocab: int, fixed_tokens: int | None = None) -> tuple[Phase, ...]:
    tokens = fixed_tokens or max_new_tokens(accept)
    phases, j = [], 0
    for c in concurrencies:
        n = 2 if c == 1 else c
        reqs = tuple(RequestPlan(prompt(j + i, vocab), tokens) for i in range(n))
        phases.append(Phase("bs1" if c == 1 else f"c{c}", c, reqs))
        j += n
    return tuple(phases)


def _spec(algo: str, topk: int, steps: int, nodes: int, agree: str, graph: bool) -> ServerConfig:
    a = ck.agreement(agree)
    return ServerConfig(f"{algo.lower()}-k{topk}-s{steps}-d{nodes}-{a.name}-{'graph' if graph else 'eager'}", algo,
                        ck.DraftSpec(algo, a), steps, topk, nodes, graph)


def _dflash(block: int, graph: bool) -> ServerConfig:
    return ServerConfig(f"dflash-b{block}-never-{'graph' if graph else 'eager'}", ck.DFLASH,
                        ck.DraftSpec(ck.DFLASH, ck.NEVER, block), 1, 1, block, graph)


def _ddtree(budget: int, graph: bool) -> ServerConfig:
    return ServerConfig(f"ddtree-b{budget}-never-{'graph' if graph else 'eager'}", DDTREE,
                        ck.DraftSpec(ck.DFLASH, ck.NEVER, 16), None, None, None, graph, budget)


_DEFAULT = [
    _spec(ck.EAGLE, 1, 8, 9, "always", False),
    _spec(ck.EAGLE, 1, 8, 9, "never", False),
    _spec(ck.EAGLE, 1, 12, 13, "always", True),
    _spec(ck.EAGLE, 4, 3, 9, "mod2", False),
    _spec(ck.EAGLE, 2, 6, 13, "mod4", True),
    _spec(ck.STANDALONE, 1, 3, 4, "always", False),
    _spec(ck.STANDALONE, 1, 8, 9, "mod4", True),
    _dflash(16, False),
    _ddtree(8, False),
    _ddtree(12, False),
]
_FULL_EXTRA = [
    _spec(ck.EAGLE, 1, 8, 9, "mod4", True),
    _spec(ck.EAGLE, 1, 8, 9, "never", True),
    _spec(ck.EAGLE, 1, 12, 13, "mod8", False),
    _spec(ck.EAGLE, 1, 15, 16, "always", True),
    _spec(ck.EAGLE, 1, 3, 4, "always", True),
    _spec(ck.EAGLE, 4, 3, 9, "always", True),
    _spec(ck.EAGLE, 4, 3, 9, "never", True),
    _spec(ck.EAGLE, 8, 4, 13, "mod2", True),
    _spec(ck.EAGLE, 2, 6, 13, "never", False),
    _spec(ck.STANDALONE, 2, 4, 9, "mod2", False),
    _spec(ck.STANDALONE, 1, 12, 13, "never", True),
    _spec(ck.STANDALONE, 1, 8, 9, "always", False),
    _dflash(9, False),
    _dflash(13, True),
    _ddtree(15, True),
    _ddtree(16, True),
    _ddtree(32, True),
]


def plan(profile: str = "default", shape: ck.TinyShape = ck.TinyShape()) -> list[ServerConfig]:
    """The server configurations of ``profile``, each with its phases; the target-only server first.

    The target-only server's requests cover every prompt the others send, with the most tokens any of
    them asks for, so its outputs are the lossless baseline for all.

    Raises:
        ValueError: unknown profile.
    """
    from dataclasses import replace

    if profile not in PROFILES:
        raise ValueError(f"e2e profile {profile!r}: expected one of {', '.join(PROFILES)}")
    conc = (1, 4) if profile == "default" else (1, 4, 8)
    specs = _DEFAULT + (_FULL_EXTRA if profile == "full" else [])
    out = [replace(c, phases=_phases(expected_accept(c), conc, shape.vocab)) for c in specs]
    longest = max(r.max_new_tokens for c in out for p in c.phases for r in p.requests)
    target = ServerConfig("target", NONE, phases=_phases(1, conc, shape.vocab, fixed_tokens=longest))
    return [target, *out]


def drafts(configs: list[ServerConfig]) -> list[ck.DraftSpec]:
    """The distinct draft checkpoints the configurations need."""
    seen: dict[str, ck.DraftSpec] = {}
    for c in configs:
        if c.draft is not None:
            seen.setdefault(c.draft.name, c.draft)
    return list(seen.values())
