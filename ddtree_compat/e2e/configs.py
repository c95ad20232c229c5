"""Server configurations and request phases of the e2e profiles.

A :class:`ServerConfig` is one ``sglang.launch_server`` (one target, at most one draft, one speculative
setting, CUDA graphs on or off); a :class:`Phase` is a set of requests sent to it, one at a time
(``bs1``) or all at once (``c4``: four concurrent clients). A pytest cell is one (config, phase).

Draft-token counts follow the kernel sweep: 9 and 13 tree nodes (budgets 8 and 12, the field report's),
as chains (top-k 1: ``num_draft_tokens = num_steps + 1``, SGLang forces it) and as trees (top-k > 1).
Every speculative config states its expected accept length per round (:func:`expected_accept`).

Profiles (``DDTREE_E2E_PROFILE`` overrides the suite's ``--ddtree-profile`` for this tier only):

* ``default`` (about 8 server launches on SGLang 0.5.23, started together: fits one 10-minute
  run): the target-only server; EAGLE chains of 9 and 13 nodes (always: 9.00 and 13.00), a negative
  control (never: 1.00), EAGLE trees (top-k 4, 9 nodes, agreeing on half: 2.00; top-k 2, 13 nodes,
  3/4: 4.00), STANDALONE (4.00); DFLASH block 16 (always: 16.00) and DDTREE budgets 8 (never: 1.00) and
  12 (always: 13.00), which skip where the installed SGLang lacks them.
* ``full``: more agreement x shape x graph combinations and a phase of eight concurrent clients.
* ``ddtree``: the DDTree sweep for a DDTree build of SGLang: DDTREE at budgets
  8, 12, 13, 15, 16, 32, 64 with block size 16 and an always-agreeing draft, CUDA graphs on and off;
  negative controls at 8, 12 and 16; drafts agreeing on 3/4 and 7/8; the prune option; DFLASH (linear
  block of 16) always (graphs on and off) and on 3/4. 25 servers: two waves of 13 in one 10-minute run.
* ``ddtree-boundary``: where the verify width ``B + 1`` meets the block size: budget 14 (block 16), budget 8
  with the CPU tree build and follow, budget 8 with block 9 and 12 with block 13 (``B + 1 = block``).
* ``ddtree-smoke``: four servers of the same kinds (a second DDTree implementation's column).
* ``sampling``: requests at temperature 1 (:mod:`.sampling`): the target alone, EAGLE chains and a top-k 4
  tree, DFLASH block 16 and DDTREE budgets 12 and 15 (spine) and 32 (tree), judged by the target's law; the same at top-k 71; at top-p 0.5
  (the successor alone) judged as greedy, with a never-agreeing EAGLE draft beside; and a planted skew
  (:data:`SKEW`) whose verdict must be ``wrong``. SGLang's own attention choice only, unless
  ``--ddtree-e2e-attention`` names others.
* ``hybrid``: the same servers on a hybrid target (:mod:`.hybrid`: the Qwen3.5 family's class, Gated DeltaNet layers
  whose recurrent state decides a token): EAGLE (a chain, and a top-k 4 tree), DFLASH block 16, DDTREE spine budgets
  8, 12, 15 and branching budgets 16, 32, 64 with a ``mod8-second`` draft (where it disagrees ``succ`` is the poison
  token's sibling, so the accepted path leaves the chain: a tree verified as one chain in node order changes tokens),
  and an EAGLE tree of one step, top-k 2, whose ``never-second`` draft ranks the poison first and ``succ`` second.
* ``replica``: one user's serving configuration on the tiny checkpoints (:mod:`.replica`, ``DDTREE_E2E_REPLICA``):
  preflight's ``e2e`` line.
* ``dflash-ddtree``: DDTree inside the DFlash worker (``--speculative-dflash-enable-ddtree``, budget =
  block size - 1: blocks 9, 13 and 16) and plain DFLASH.

Every speculative configuration runs once per attention backend (:data:`.attention.ATTENTION_BACKENDS`; the id ends
in ``-attn-<name>``): ``default`` is whatever the installed SGLang chooses for that configuration on this
host (resolved at run time by asking SGLang, :func:`.probe.resolve_attention`), the others are passed as
``--attention-backend``. The target-only server (the lossless baseline) runs on ``triton`` only.

CUDA-graph configurations also get phases at live batch sizes a captured graph pads (3, 5, 6 beside the
captured 1, 2, 4, 8: :data:`CAPTURED_BS`, :data:`PADDED_BS`; SGLang PR #24401's class).

DFLASH and DDTREE requests start with a prompt that is itself a run of successors
(:func:`chain_prompt`): the positional DFlash draft reads the context 65 positions back
(:mod:`.dflash`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from . import checkpoints as ck, hybrid, replica
from .attention import SGLANG_CHOICE, TARGET_ATTENTION, parse_attention
from .expect import (PhaseExpectation, RequestPlan, RoundAccepts, aligned_accept, chain_accepts, expect_phase,
                     rounds_for, tree_accepts)
from .sampling import TOKENS_PER_CELL, Sampling

PROFILES = ("default", "full", "ddtree", "ddtree-boundary", "ddtree-smoke", "dflash-ddtree", "sampling", "scale",
            "hybrid", "replica")
NONE = "NONE"
DDTREE = "DDTREE"
START_TOKEN = 7
"""Prompts end on ``7 + 24 j``: ``-1 mod 8``, so the first root is ``0 mod 8`` (aligned for ``mod2/4/8``)."""
START_STEP = 24
CHAIN_PROMPT_LEN = 72
"""Length of a DFLASH / DDTREE prompt (a run of successors): more than the draft's look-back of 65."""
DFLASH_ENABLE_DDTREE = "--speculative-dflash-enable-ddtree"
"""DDTree inside the DFlash worker (github.com/DB-Guo/sglang-ddtree-dev): budget = block size - 1."""
PRUNE = "--is-ddtree-prune"
CPU_BUILD = "--speculative-ddtree-cpu-build"
CPU_FOLLOW = "--speculative-ddtree-cpu-follow"
TARGET_ONLY = "sglang-target"
"""The e2e backend of a target-only server (``sglang-target@<build>`` with a DDTree build): the reference a profile's
speculative servers are judged against."""


def is_target_only(backend: str) -> bool:
    """Whether an e2e result's ``backend`` is a target-only server's (:data:`TARGET_ONLY`, with or without
    ``@<build>``)."""
    return backend.split("@", 1)[0] == TARGET_ONLY
SKEW = "--speculative-accept-threshold-single=0"
"""SGLang's accept threshold at 0: the target-only tree sampler accepts every draft it is shown (lossy by design):
the ``sampling`` profile's negative control."""
_FLAG_TAGS = {PRUNE: "prune", CPU_BUILD: "cpubuild", CPU_FOLLOW: "cpufollow", DFLASH_ENABLE_DDTREE: "ddtree",
              SKEW: "skew-accept-all"}


CAPTURED_BS = (1, 2, 4, 8)
"""Decode batch sizes captured as CUDA graphs (``--cuda-graph-bs-decode``; SGLang's speculative default
captures every size 1..8, which would leave nothing padded)."""

PADDED_BS = (3, 5, 6)
"""Live batch sizes below a captured one (replayed padded to 4, 8, 8): extra phases of CUDA-graph servers."""
GRAPH_BS_CAP = 256
"""The largest decode batch captured for a server of more than 8 requests at once (the ``scale`` profile): its CUDA
graph holds the verify's logits ``[bs * q, V]`` (at the real vocabulary and ``q = 65``, 16 GB at 256 requests); a
phase of more requests runs eager, as SGLang does for a batch above its largest graph."""


def graph_batch_sizes(config: "ServerConfig") -> tuple[int, ...]:
    """The decode batch sizes a CUDA-graph server captures: :data:`CAPTURED_BS`, and for a server of more requests
    at once the powers of two up to its largest phase (at most :data:`GRAPH_BS_CAP`)."""
    sizes, b = list(CAPTURED_BS), 2 * max(CAPTURED_BS)
    while b <= min(config.max_batch, GRAPH_BS_CAP):
        sizes.append(b)
        b *= 2
    return tuple(sizes)


def kv_tokens(config: "ServerConfig") -> int:
    """KV-cache tokens the largest phase of ``config`` holds at once: per request its prompt, its new tokens and a
    verify block (``B + 1`` or the draft tokens), rounded up to whole pages of 64 (the pool's floor for
    ``--max-total-tokens``, which would otherwise queue requests of a large phase)."""
    width = config.budget + 1 if config.algorithm == DDTREE else max(config.draft_tokens or 1, 1)
    longest = max((len(r.prompt) + r.max_new_tokens for p in config.phases for r in p.requests), default=0)
    per = -(-(longest + width) // 64) * 64
    return config.max_batch * per


PROMPT_SLOTS = 14
"""Distinct prompts (``j mod 14``): the longest request (97 tokens after a chain prompt ending on
``7 + 24 * 16 = 391``) ends at 488, below ``P - 1`` (:func:`.checkpoints.poison_output`), so no correct
run reaches the poison token."""


def e2e_profile(suite_profile: str) -> str:
    """The e2e tier's profile: ``DDTREE_E2E_PROFILE`` if set, else the suite's ``--ddtree-profile``."""
    return os.environ.get("DDTREE_E2E_PROFILE") or suite_profile


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
        id: ``<algo>-k<topk>-s<steps>-d<draft tokens>-<agreement>-<graph|eager>`` (``target``,
            ``dflash-b16-...``, ``ddtree-b8-spine-...``, ``ddtree-b32-tree-...-prune``).
        algorithm: ``NONE``, ``EAGLE``, ``STANDALONE``, ``DFLASH`` or ``DDTREE``.
        draft: the draft checkpoint (``None`` for the target-only server); DFLASH and DDTREE drafts carry
            the block size.
        steps, topk, draft_tokens: ``--speculative-num-steps``, ``--speculative-eagle-topk``,
            ``--speculative-num-draft-tokens`` (DFLASH: the block size; DDTREE: unused).
        cuda_graph: CUDA graphs on (captured up to the phases' batch size) or off.
        budget: DDTREE ``--speculative-ddtree-budget`` (non-root tree nodes B; verify width B + 1).
        flags: extra switches passed as they are (``--is-ddtree-prune``, the CPU build / follow,
            ``--speculative-dflash-enable-ddtree``); each must exist in the installed SGLang.
        phases: the cells of this server.
        attention: ``default`` (SGLang's own choice, resolved at run time), ``triton``, ``flashinfer`` or
            ``fa3`` (``--attention-backend``); ``""`` before :func:`plan` sets it.
        sampling: the requests' temperature, top-k and top-p (:class:`.sampling.Sampling`); ``None``: greedy.
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
    flags: tuple[str, ...] = ()
    attention: str = ""
    sampling: Sampling | None = None

    @property
    def shape_id(self) -> str:
        """The id without the attention backend (what the expectation and the sweep table key on)."""
        suffix = f"-attn-{self.attention}"
        return self.id[: -len(suffix)] if self.attention and self.id.endswith(suffix) else self.id

    @property
    def speculative(self) -> bool:
        return self.algorithm != NONE

    @property
    def distribution(self) -> bool:
        """Sampled requests whose law leaves more than the successor: judged by the law (:mod:`.sampling`), not by
        the greedy chain (a top-p that leaves the successor alone is judged as greedy)."""
        return self.sampling is not None and not self.sampling.point_mass()

    @property
    def planted_skew(self) -> bool:
        """A negative control of the distribution check: a server argument that makes sampling lossy
        (:data:`SKEW`); its verdict must be ``wrong``."""
        return SKEW.split("=")[0] in " ".join(self.flags)

    @property
    def block_size(self) -> int | None:
        """DFlash block (DFLASH and DDTREE): the bonus token and ``block_size - 1`` mask positions."""
        return self.draft.block_size if self.algorithm in (ck.DFLASH, DDTREE) and self.draft else None

    @property
    def dflash_ddtree(self) -> bool:
        """DDTree through the DFlash worker's ``--speculative-dflash-enable-ddtree``."""
        return DFLASH_ENABLE_DDTREE in self.flags

    @property
    def mode(self) -> str:
        """``spine`` when the tree budget fits the block's depths (``B <= block_size - 1``: a peaked draft's
        best-first tree is its argmax chain, SGLang PR #29907's spine mode), ``tree`` above; ``""`` for
        the other algorithms."""
        if self.algorithm == DDTREE:
            return "spine" if self.budget <= self.block_size - 1 else "tree"
        return "spine" if self.dflash_ddtree else ""

    @property
    def negative_control(self) -> bool:
        """A draft that never agrees with a tree/chain that could accept: accept length must be 1.00,
        and the zero-accept check must report it when judged against an agreeing draft."""
        return self.draft is not None and self.draft.agree is ck.NEVER

    @property
    def chain_depth(self) -> int:
        """Drafts on the longest path a round can accept (see :mod:`.expect`): EAGLE / STANDALONE
        ``min(steps, draft tokens - 1)``; DFLASH ``block - 1``; DDTREE ``min(B, block - 1)`` (a peaked draft's
        best-first tree holds the argmax chain's first ``min(B, block - 1)`` depths before any other node)."""
        if self.algorithm in (ck.EAGLE, ck.STANDALONE):
            return min(self.steps, self.draft_tokens - 1)
        if self.algorithm == ck.DFLASH:
            return self.draft_tokens - 1
        if self.algorithm == DDTREE:
            return min(self.budget, self.block_size - 1)
        return 0

    @property
    def drafts_per_round(self) -> int:
        """SGLang's accept-rate denominator per round: ``speculative_num_draft_tokens - 1`` (DDTREE: the
        block size - 1, whatever the budget: ``tokenizer_manager._calculate_spec_decoding_metrics`` and the
        ``Decode batch`` line of the DDTree trees)."""
        if self.algorithm == DDTREE:
            return self.block_size - 1
        return (self.draft_tokens or 1) - 1

    def round_accepts(self, shape: ck.TinyShape) -> RoundAccepts | None:
        if not self.speculative:
            return None
        if self.algorithm == DDTREE and self.draft.agree.runner_up:
            return tree_accepts(self.draft.agree, self.budget, self.block_size - 1, shape.vocab)
        if self.dflash_ddtree and self.draft.agree.runner_up:  # budget = block - 1 = depth
            return tree_accepts(self.draft.agree, self.chain_depth, self.chain_depth, shape.vocab)
        if self.algorithm in (ck.EAGLE, ck.STANDALONE) and self.draft.agree.runner_up:  # one step, succ in the top 2
            return chain_accepts(ck.ALWAYS, self.chain_depth, shape.vocab)
        return chain_accepts(self.draft.agree, self.chain_depth, shape.vocab)

    def expectation(self, phase: Phase, shape: ck.TinyShape) -> PhaseExpectation:
        return expect_phase(phase.requests, shape.vocab, self.round_accepts(shape), self.drafts_per_round)

    def agreeing_twin(self) -> "ServerConfig":
        """The same shape with an always-agreeing draft (what a negative control is judged against to
        prove the zero-accept check fires)."""
        return replace(self, id=self.id.replace("-never-", "-always-"), draft=replace(self.draft, agree=ck.ALWAYS))

    @property
    def max_batch(self) -> int:
        return max((p.concurrency for p in self.phases), default=1)


def expected_accept(config: ServerConfig) -> int:
    """Accept length of every round of an aligned request (1 without speculation; a runner-up DDTREE draft: its
    first round's, :func:`runner_up_tokens`)."""
    if not config.speculative:
        return 1
    if config.algorithm == DDTREE and config.draft.agree.runner_up:
        return config.round_accepts(ck.TinyShape())(0) + 1
    if config.algorithm in (ck.EAGLE, ck.STANDALONE) and config.draft.agree.runner_up:
        return aligned_accept(ck.ALWAYS, config.chain_depth)
    return aligned_accept(config.draft.agree, config.chain_depth)


def runner_up_tokens(config: ServerConfig, vocab: int) -> int:
    """``max_new_tokens`` of a runner-up DDTREE request: the prefill's token and :func:`.expect.rounds_for` whole
    rounds from a root ``0 mod 8`` (every chain prompt's), whose accept lengths differ (the first round accepts through
    a sibling and leaves the next root off the period)."""
    accepts, root, tokens = config.round_accepts(ck.TinyShape()), 0, 1
    for _ in range(rounds_for(expected_accept(config))):
        k = accepts(root)
        tokens, root = tokens + k + 1, (root + k + 1) % vocab
    return tokens


def prompt(j: int, vocab: int = 512) -> tuple[int, ...]:
    """Prompt ``j`` (taken ``mod PROMPT_SLOTS``): ``3 + j mod 5`` filler tokens, then ``START_TOKEN + 24 j``
    (only the last token decides the output). Fillers never hold the poison token (its key would reach every
    later query): one that would is moved down by 2."""
    j %= PROMPT_SLOTS
    last = START_TOKEN + START_STEP * j
    poison = ck.poison_token(vocab)
    filler = tuple((last * 37 + 101 * i + 13) % vocab for i in range(3 + j % 5))
    return tuple(f - 2 if f == poison else f for f in filler) + (last,)


def chain_prompt(j: int, vocab: int = 512) -> tuple[int, ...]:
    """DFLASH / DDTREE prompt ``j`` (taken ``mod PROMPT_SLOTS``): :data:`CHAIN_PROMPT_LEN` successive tokens
    ending on ``START_TOKEN + 24 (j + 3)`` (``-1 mod 8``; the offset keeps the run from wrapping past
    ``V - 1``). The positional DFlash draft reads the context 65 positions back, so the context must be a run."""
    j %= PROMPT_SLOTS
    last = START_TOKEN + START_STEP * (j + 3)
    return tuple((last - CHAIN_PROMPT_LEN + 1 + i) % vocab for i in range(CHAIN_PROMPT_LEN))


def uses_chain_prompts(config: ServerConfig) -> bool:
    return config.algorithm in (ck.DFLASH, DDTREE)


def max_new_tokens(accept: int) -> int:
    """``1 + n * accept``: the request ends on a round boundary (no overshoot)."""
    return 1 + rounds_for(accept) * accept


def _phases(accept: int, concurrencies: tuple[int, ...], vocab: int, fixed_tokens: int | None = None,
            prompt_fn=prompt) -> tuple[Phase, ...]:
    tokens = fixed_tokens or max_new_tokens(accept)
    phases, j = [], 0
    for c in concurrencies:
        n = 2 if c == 1 else c
        reqs = tuple(RequestPlan(prompt_fn(j + i, vocab), tokens) for i in range(n))
        phases.append(Phase("bs1" if c == 1 else f"c{c}", c, reqs))
        j += n
    return tuple(phases)


def _graph(graph: bool) -> str:
    return "graph" if graph else "eager"


def _spec(algo: str, topk: int, steps: int, nodes: int, agree: str, graph: bool) -> ServerConfig:
    a = ck.agreement(agree)
    if a.runner_up and (topk < 2 or steps != 1):
        raise ValueError(f"{algo} k{topk} s{steps} with {agree}: a runner-up draft needs one step of top-k >= 2 (the "
                         "root's top-2 children then hold succ: one draft accepted per round, what the expectation "
                         "models)")
    return ServerConfig(f"{algo.lower()}-k{topk}-s{steps}-d{nodes}-{a.name}-{_graph(graph)}", algo,
                        ck.DraftSpec(algo, a), steps, topk, nodes, graph)


def _dflash(block: int, agree: str, graph: bool, *flags: str) -> ServerConfig:
    a = ck.agreement(agree)
    tags = "".join(f"-{_FLAG_TAGS[f]}" for f in flags if f != DFLASH_ENABLE_DDTREE)
    name = f"dflash-ddtree-n{block}" if DFLASH_ENABLE_DDTREE in flags else f"dflash-b{block}"
    return ServerConfig(f"{name}-{a.name}-{_graph(graph)}{tags}", ck.DFLASH, ck.DraftSpec(ck.DFLASH, a, block),
                        1, 1, block, graph, flags=tuple(flags))


def _ddtree(budget: int, agree: str, graph: bool, *flags: str, block: int = 16) -> ServerConfig:
    a = ck.agreement(agree)
    mode = "spine" if budget <= block - 1 else "tree"
    tags = "".join(f"-{_FLAG_TAGS[f]}" for f in flags) + ("" if block == 16 else f"-n{block}")
    return ServerConfig(f"ddtree-b{budget}-{mode}-{a.name}-{_graph(graph)}{tags}", DDTREE,
                        ck.DraftSpec(ck.DFLASH, a, block), None, None, None, graph, budget, flags=tuple(flags))


SWEEP_BUDGETS = (8, 12, 13, 15, 16, 32, 64)
"""The field report's budgets (8 and 12 failed; 15, 16, 32 and 64 worked) and 13 (D = 14, odd)."""

_DEFAULT = [
    _spec(ck.EAGLE, 1, 8, 9, "always", False),
    _spec(ck.EAGLE, 1, 8, 9, "never", False),
    _spec(ck.EAGLE, 1, 12, 13, "always", True),
    _spec(ck.EAGLE, 4, 3, 9, "mod2", False),
    _spec(ck.EAGLE, 2, 6, 13, "mod4", True),
    _spec(ck.STANDALONE, 1, 3, 4, "always", False),
    _spec(ck.STANDALONE, 1, 8, 9, "mod4", True),
    _dflash(16, "always", False),
    _ddtree(8, "never", False),
    _ddtree(12, "always", False),
]
_FULL_EXTRA = [
    _ddtree(12, "always", False, CPU_BUILD, CPU_FOLLOW),
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
    _dflash(9, "mod4", False),
    _dflash(13, "never", True),
    _ddtree(15, "always", True),
    _ddtree(16, "mod8", True),
    _ddtree(32, "always", True),
]
FIELD_FIRST = ((8, False), (12, False))
"""The ``ddtree`` profile's first servers, before even the target-only one (budget, CUDA graphs): the field's
failing budgets, eager (no graph capture before their first verify), so their verdict is the run's first."""
_DDTREE = [  # then DFLASH: its draft sampler's flashinfer JIT build (~90 s, once) overlaps the first wave
    *[_ddtree(b, "always", g) for b, g in FIELD_FIRST],
    _dflash(16, "always", False),
    _dflash(16, "always", True),
    _dflash(16, "mod4", False),
    *[_ddtree(b, "always", g) for b in SWEEP_BUDGETS for g in (True, False) if (b, g) not in FIELD_FIRST],
    _ddtree(8, "never", True),
    _ddtree(12, "never", True),
    _ddtree(16, "never", False),
    _ddtree(12, "mod4", True),
    _ddtree(32, "mod8", False),
    _ddtree(16, "always", True, PRUNE),
    _ddtree(64, "mod8", True, PRUNE),
]
_DDTREE_BOUNDARY = [  # where the verify width B + 1 meets the block size (H200 2026-12-01: B <= 13 died at start)
    _ddtree(14, "always", False),
    _ddtree(8, "always", False, CPU_BUILD, CPU_FOLLOW),
    _ddtree(8, "always", False, block=9),
    _ddtree(12, "always", False, block=13),
]
_DDTREE_SMOKE = [
    _ddtree(8, "always", False),
    _ddtree(16, "always", True),
    _ddtree(12, "never", False),
    _dflash(16, "always", False),
]
_DFLASH_DDTREE = [
    _dflash(16, "always", False, DFLASH_ENABLE_DDTREE),
    _dflash(9, "always", False, DFLASH_ENABLE_DDTREE),
    _dflash(13, "never", False, DFLASH_ENABLE_DDTREE),
    _dflash(16, "always", False),
]
T1, T1_K71, T1_P05 = Sampling(1.0), Sampling(1.0, top_k=71), Sampling(1.0, top_p=0.5)


def _sampled(config: ServerConfig, sampling: Sampling, *flags: str) -> ServerConfig:
    tags = "".join(f"-{_FLAG_TAGS[f]}" for f in flags)
    return replace(config, id=f"{config.id}-{sampling.tag}{tags}", sampling=sampling, flags=config.flags + flags)


_SAMPLING = [  # temperature 1 (the law), top-k 71 (the far tokens cut), top-p 0.5 (the successor alone: greedy)
    _sampled(ServerConfig("target", NONE), T1),
    _sampled(_spec(ck.EAGLE, 1, 8, 9, "always", False), T1),
    _sampled(_spec(ck.EAGLE, 4, 3, 9, "mod2", False), T1),
    _sampled(_spec(ck.EAGLE, 1, 8, 9, "always", False), T1_K71),
    _sampled(_spec(ck.EAGLE, 1, 8, 9, "always", False), T1_P05),
    _sampled(_spec(ck.EAGLE, 1, 8, 9, "never", False), T1_P05),
    _sampled(_spec(ck.EAGLE, 1, 8, 9, "always", False), T1, SKEW),
    _sampled(_dflash(16, "always", False), T1),
    _sampled(_dflash(16, "always", False), T1_P05),
    _sampled(_ddtree(12, "always", False), T1),
    _sampled(_ddtree(12, "always", False), T1_P05),
    _sampled(_ddtree(15, "always", False), T1),
    _sampled(_ddtree(32, "always", False), T1),
]
_SCALE = [  # deployment concurrency at a real vocabulary (SCALE_SHAPE): greedy, top-p 0.5 (judged as greedy), T = 1
    _ddtree(16, "always", True),
    _ddtree(64, "always", True),
    _dflash(16, "always", True),
    _sampled(_ddtree(16, "always", True), T1_P05),
    _sampled(_dflash(16, "always", True), T1_P05),
    _sampled(_ddtree(16, "always", True), T1),  # distribution cells: the law with the padding tokens, 512 clients
    _sampled(_dflash(16, "always", True), T1),
    _dflash(16, "always", False, DFLASH_ENABLE_DDTREE),  # dbguo-ddtree-dev's DDTree (eager, as its profile serves
]                                                      # it); a skip saying the flag is missing on the other trees
SCALE_CONCURRENCY = (1, 64, 256, 512)
"""The ``scale`` profile's phases: a few hundred requests at once, ``--max-running-requests`` and the CUDA-graph
batch sizes raised to the largest (:mod:`.command`); the largest phase that serves losslessly is the verdict."""
SCALE_SHAPE = ck.TinyShape(vocab_pad=ck.REAL_VOCAB - ck.TinyShape().vocab)
"""The ``scale`` profile's checkpoints: the tiny code padded to the field's vocabulary, 248320."""


def replica_servers(spec: "replica.Replica") -> list[ServerConfig]:
    """A replica's servers, phases aside (:func:`plan` adds them): its configuration with an always-agreeing draft,
    greedy, then once per temperature above 0 (judged by the law)."""
    if spec.algorithm == DDTREE:
        base = _ddtree(spec.budget, "always", spec.cuda_graph, block=spec.block_size)
    elif spec.algorithm == ck.DFLASH:
        base = _dflash(spec.block_size, "always", spec.cuda_graph,
                       *((DFLASH_ENABLE_DDTREE,) if spec.ddtree_in_dflash else ()))
    else:
        base = _spec(spec.algorithm, spec.topk, spec.steps, spec.draft_tokens, "always", spec.cuda_graph)
    base = replace(base, id=f"replica-{base.id}", flags=base.flags + spec.flags)
    return [base if t == 0 else _sampled(base, Sampling(float(t))) for t in spec.temperatures]


FIXED_PROFILES = tuple(p for p in PROFILES if p != replica.PROFILE)
"""The profiles whose servers are the suite's own (the replica's are one user's configuration, read from a file)."""


def shape_for(profile: str) -> ck.TinyShape:
    """The tiny checkpoints' shape of an e2e profile: :data:`SCALE_SHAPE` for ``scale``, :data:`HYBRID_SHAPE` for
    ``hybrid``, the replica's own for ``replica`` (:mod:`.replica`), else the default."""
    if profile == replica.PROFILE:
        return replica.from_env().shape()
    return {"scale": SCALE_SHAPE, "hybrid": HYBRID_SHAPE}.get(profile, ck.TinyShape())


_HYBRID = [  # the hybrid target (HYBRID_SHAPE); DDTREE skips where the installed SGLang lacks it
    _ddtree(8, "always", False),
    _ddtree(12, "always", False),
    _ddtree(15, "always", True),
    _ddtree(12, "mod8-second", False),
    _ddtree(16, "mod8-second", False),
    _ddtree(32, "mod8-second", True),
    _ddtree(64, "mod8-second", False),
    _dflash(16, "always", False),
    _dflash(16, "mod8-second", False),
    _dflash(16, "always", False, DFLASH_ENABLE_DDTREE),
    _dflash(9, "always", False, DFLASH_ENABLE_DDTREE),
    _dflash(16, "mod8-second", False, DFLASH_ENABLE_DDTREE),
    _spec(ck.EAGLE, 1, 8, 9, "always", False),
    _spec(ck.EAGLE, 1, 8, 9, "mod4", False),
    _spec(ck.EAGLE, 4, 3, 9, "mod2", False),
    _spec(ck.EAGLE, 2, 1, 3, "never-second", False),
]
HYBRID_SHAPE = hybrid.SHAPE

_PROFILES = {"default": _DEFAULT, "full": _DEFAULT + _FULL_EXTRA, "ddtree": _DDTREE, "ddtree-boundary": _DDTREE_BOUNDARY,
             "ddtree-smoke": _DDTREE_SMOKE,
             "dflash-ddtree": _DFLASH_DDTREE, "sampling": _SAMPLING, "scale": _SCALE, "hybrid": _HYBRID}


def plan(profile: str = "default", shape: ck.TinyShape = ck.TinyShape(),
         attention: str | tuple[str, ...] | None = None) -> list[ServerConfig]:
    """The server configurations of ``profile``, each with its phases, once per attention backend of
    ``attention`` (:func:`parse_attention`; default every one); the target-only server first (in ``ddtree``,
    right after the field's budgets, :data:`FIELD_FIRST`, whose verdict is the one that run is for).

    The target-only server's own cells use the EAGLE prompts; :func:`baseline_requests` gives the
    requests whose outputs are the lossless baseline for every other server.

    Raises:
        ValueError: unknown profile or attention backend.
    """
    if profile not in PROFILES:
        raise ValueError(f"e2e profile {profile!r}: expected one of {', '.join(PROFILES)}")
    conc = {"full": (1, 4, 8), "scale": SCALE_CONCURRENCY}.get(profile, (1, 4))
    if profile == replica.PROFILE:  # one configuration, on its own attention backend, at its concurrency
        spec = replica.from_env()
        servers, attention, conc = replica_servers(spec), (spec.attention,), spec.concurrency
    else:
        servers = _PROFILES[profile]
        attention = (SGLANG_CHOICE,) if profile in ("sampling", "scale") and not attention else \
            parse_attention(attention)
    out = [replace(c, id=f"{c.id}-attn-{a}", attention=a, phases=_config_phases(c, conc, shape.vocab))
           for c in servers for a in attention]
    longest = max(r.max_new_tokens for c in out if not c.distribution for p in c.phases for r in p.requests)
    target = ServerConfig("target", NONE, phases=_phases(1, conc, shape.vocab, fixed_tokens=longest),
                          attention=TARGET_ATTENTION)
    ahead = len(FIELD_FIRST) * len(attention) if profile == "ddtree" else 0  # the field's verdict before the target's
    return [*out[:ahead], target, *out[ahead:]]


LAW_CLIENTS = 8
"""Concurrent requests of a distribution cell (one phase, ``c8``), :data:`.sampling.TOKENS_PER_CELL` tokens
together."""
LAW_MIN_TOKENS = 48
"""Tokens of each request of a distribution cell at least: several verify rounds per request when the phase has many
clients (the ``scale`` profile's: as many as its largest phase, 512, at the field's vocabulary, where a request's
transitions are counted up to its first padding token, about 37 on average at ``T = 1``)."""


def _config_phases(c: ServerConfig, conc: tuple[int, ...], vocab: int) -> tuple[Phase, ...]:
    """The greedy phases (requests carrying ``c.sampling`` where it leaves the successor alone), or one phase of
    :data:`LAW_CLIENTS` long sampled requests for a distribution cell (the prompts of the same kind)."""
    prompt_fn = chain_prompt if uses_chain_prompts(c) else prompt
    if c.distribution:
        clients = max(LAW_CLIENTS, *conc)
        n = max(-(-TOKENS_PER_CELL // clients), LAW_MIN_TOKENS)
        reqs = tuple(RequestPlan(prompt_fn(i, vocab), n, c.sampling) for i in range(clients))
        return (Phase(f"c{clients}", clients, reqs),)
    fixed = runner_up_tokens(c, vocab) if c.algorithm == DDTREE and c.draft.agree.runner_up else None
    phases = _phases(expected_accept(c), concurrencies(c, conc), vocab, fixed_tokens=fixed, prompt_fn=prompt_fn)
    if c.sampling is None:
        return phases
    return tuple(replace(p, requests=tuple(replace(r, sampling=c.sampling) for r in p.requests)) for p in phases)


def concurrencies(config: ServerConfig, base: tuple[int, ...]) -> tuple[int, ...]:
    """The phases' client counts: ``base``, plus :data:`PADDED_BS` for a CUDA-graph server (live batches a
    captured graph pads), in increasing order."""
    return tuple(sorted(set(base) | set(PADDED_BS))) if config.cuda_graph else base


def baseline_requests(configs: list[ServerConfig]) -> tuple[RequestPlan, ...]:
    """One request per distinct prompt of ``configs``, asking for the most tokens any of them asks for
    (what the target-only server answers once: the lossless baseline)."""
    most: dict[tuple, int] = {}
    for c in configs:
        if c.distribution:  # judged by the law: no baseline to compare with
            continue
        for p in c.phases:
            for r in p.requests:
                most[r.prompt] = max(most.get(r.prompt, 0), r.max_new_tokens)
    return tuple(RequestPlan(prompt, n) for prompt, n in most.items())


def drafts(configs: list[ServerConfig]) -> list[ck.DraftSpec]:
    """The distinct draft checkpoints the configurations need."""
    seen: dict[str, ck.DraftSpec] = {}
    for c in configs:
        if c.draft is not None:
            seen.setdefault(c.draft.name, c.draft)
    return list(seen.values())
