"""Requests at temperature > 0: the tiny target's next-token law, and the test that served tokens follow it.

The target's logits after token ``t`` are known by construction (:mod:`.checkpoints`): ``g = sqrt(H/2)`` times the
digits ``s - 1`` shares with ``t`` (``2g`` for the successor, ``g`` for the ~70 *neighbours* that share one digit, 0
for the rest, the *far* tokens; the poison token's logit is always 0), whatever the context holds, as long as it
holds no poison token. So at temperature ``T`` (then top-k, then top-p, as SGLang renormalises the target's
probabilities before its verify kernels and its sampler) each emitted token falls in one of three categories of the
token before it, with probabilities this module computes (:func:`category_law`): at ``T = 1`` (H = 128) the successor
0.9765, a neighbour 0.0235, a far token 5e-5.

Speculative sampling must keep that law whatever the draft proposes (lossless in distribution). The served
transitions (the prompt's last token to the first output, then each output to the next) are counted per category
(:func:`count_transitions`) and tested against the summed law with scipy's ``power_divergence`` (Pearson's
chi-square) at a false-alarm rate of :data:`ALPHA` per cell (:func:`distribution_test`); categories expected fewer
than :data:`MIN_EXPECTED` times are pooled with the next. With :data:`TOKENS_PER_CELL` transitions a planted skew that
accepts every agreeing draft (SGLang's ``--speculative-accept-threshold-single 0``: the successor's share rises to
about ``1 - 0.0235 / (L + 1)``) is caught with power > 0.999 (``tests/e2e/test_sampling_law.py`` holds both figures).

At the field's vocabulary (the ``scale`` profile's target, :attr:`.checkpoints.TinyShape.vocab_pad`) the tokens past
the code's are a fourth category, *padding*: their embedding and ``lm_head`` rows are zero, so each has logit 0 after
every code token (at ``T = 1``, 247,808 of them carry about 2.7% of the mass). After a padding token the law is not
known (its zero embedding leaves the next logits to the context), so a request's transitions are counted up to the
first padding token it emits, as after a poison token.

A top-p of 0.5 leaves the successor alone (its probability is 0.98): the sampled output is then the target's greedy
chain, and such a configuration is judged by the greedy rules (tokens, accept lengths, lossless): the sampling
verify path must reproduce greedy decoding exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import checkpoints as ck

ALPHA = 1e-6
"""False-alarm rate of one distribution cell."""
MIN_EXPECTED = 5.0
"""A category expected fewer times is pooled with the next (the chi-square approximation needs it)."""
TOKENS_PER_CELL = 2400
"""Transitions a distribution cell collects at least (the phases' requests together)."""
CATEGORIES = ("successor", "neighbour", "far", "padding")


@dataclass(frozen=True)
class Sampling:
    """A request's sampling parameters (SGLang's ``sampling_params``).

    Attributes:
        temperature: > 0.
        top_k: ``-1`` keeps every token (SGLang's default).
        top_p: 1.0 keeps every token.
    """

    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0

    @property
    def tag(self) -> str:
        """``t1``, ``t1-k71``, ``t1-p0.5``: the configuration id's suffix."""
        tag = f"t{self.temperature:g}"
        if self.top_k > 0:
            tag += f"-k{self.top_k}"
        if self.top_p < 1.0:
            tag += f"-p{self.top_p:g}"
        return tag

    def params(self) -> dict:
        out = {"temperature": self.temperature}
        if self.top_k > 0:
            out["top_k"] = self.top_k
        if self.top_p < 1.0:
            out["top_p"] = self.top_p
        return out

    def point_mass(self, shape: ck.TinyShape = ck.TinyShape()) -> bool:
        """Only the successor survives top-k / top-p after an ordinary token: the output is the greedy chain."""
        law = category_law(0, shape, self)
        return law["successor"] == 1.0


def _classes(token: int, shape: ck.TinyShape) -> list[tuple[str, float, int]]:
    """``(category, logit, count)`` of the tokens after ``token``, by logit (the construction's, exactly)."""
    v, nb = shape.vocab, shape.digits_b
    g = ck.norm_gain(shape)
    a, b = divmod(token, nb)
    poison = ck.poison_token(v)
    neighbours = far = 0
    successor = ck.succ(token, v)
    for s in range(v):
        if s == successor:
            continue
        pa, pb = divmod((s - 1) % v, nb)
        shared = 0 if s == poison else (pa == a) + (pb == b)
        if shared == 1:
            neighbours += 1
        else:
            far += 1
    top = [("successor", 2 * g, 1)] if successor != poison else [("far", 0.0, 1)]
    padding = [("padding", 0.0, shape.vocab_pad)] if shape.vocab_pad else []
    return sorted(top + [("neighbour", g, neighbours), ("far", 0.0, far)] + padding, key=lambda c: -c[1])


def category_law(token: int, shape: ck.TinyShape, sampling: Sampling) -> dict[str, float]:
    """The probability of each category for the token after ``token`` at ``sampling`` (temperature, then top-k, then
    top-p over the renormalised law, as SGLang applies them). Ties at a top-k boundary are split by count: which of
    equal tokens are kept does not change the category's mass."""
    classes = _classes(token, shape)
    kept, room = [], sampling.top_k if sampling.top_k > 0 else math.inf
    for cat, logit, count in classes:  # already by logit, largest first
        take = min(count, room)
        if take > 0:
            kept.append((cat, logit, take))
        room -= take
    top = max(logit for _, logit, _ in kept)
    weights = [(cat, count * math.exp((logit - top) / sampling.temperature)) for cat, logit, count in kept]
    total = sum(w for _, w in weights)
    probs = [(cat, w / total) for cat, w in weights]
    if sampling.top_p < 1.0:  # classes, largest first, while the mass before them is below top_p (equal
        kept_p, before = [], 0.0  # probabilities are kept or dropped together, as a threshold renorm does)
        for cat, mass in probs:
            if before >= sampling.top_p:
                break
            kept_p.append((cat, mass))
            before += mass
        total = sum(m for _, m in kept_p)
        probs = [(cat, m / total) for cat, m in kept_p]
    law = dict.fromkeys(CATEGORIES, 0.0)
    for cat, mass in probs:
        law[cat] += mass
    return law


def category(prev: int, token: int, shape: ck.TinyShape) -> str:
    """The category of ``token`` after ``prev``."""
    v, nb = shape.vocab, shape.digits_b
    if token >= v:
        return "padding"
    if token == ck.succ(prev, v) and token != ck.poison_token(v):
        return "successor"
    if token == ck.poison_token(v):
        return "far"
    pa, pb = divmod((token - 1) % v, nb)
    a, b = divmod(prev, nb)
    return "neighbour" if (pa == a) + (pb == b) == 1 else "far"


@dataclass
class Transitions:
    """Served transitions counted per category, with the summed law.

    Attributes:
        observed, expected: per category of :data:`CATEGORIES`.
        count: transitions counted.
        dropped: transitions not counted (after a poison or a padding token: the target's law is not known there).
    """

    observed: dict[str, int]
    expected: dict[str, float]
    count: int = 0
    dropped: int = 0


def count_transitions(sequences, shape: ck.TinyShape, sampling: Sampling) -> Transitions:
    """``sequences``: ``(last prompt token, output ids)`` per request."""
    observed, expected = dict.fromkeys(CATEGORIES, 0), dict.fromkeys(CATEGORIES, 0.0)
    laws: dict[int, dict[str, float]] = {}
    count = dropped = 0
    poison = ck.poison_token(shape.vocab)
    for last, out in sequences:
        prev = last
        for i, token in enumerate(out):
            if prev == poison or prev >= shape.vocab:
                dropped += len(out) - i
                break
            law = laws.get(prev) or laws.setdefault(prev, category_law(prev, shape, sampling))
            for cat in CATEGORIES:
                expected[cat] += law[cat]
            observed[category(prev, token, shape)] += 1
            count += 1
            prev = token
    return Transitions(observed, expected, count, dropped)


@dataclass(frozen=True)
class LawTest:
    """The outcome of :func:`distribution_test`: ``statistic`` and ``p_value`` (``None`` when the law left one
    category only), the pooled ``observed`` / ``expected`` counts, ``impossible``: tokens of a category the law gives
    probability 0."""

    statistic: float | None
    p_value: float | None
    dof: int
    observed: tuple[int, ...]
    expected: tuple[float, ...]
    impossible: int

    @property
    def rejects(self) -> bool:
        return self.impossible > 0 or (self.p_value is not None and self.p_value < ALPHA)


def distribution_test(t: Transitions) -> LawTest:
    """Pearson's chi-square (``scipy.stats.power_divergence``) of the observed categories against the summed law,
    categories expected fewer than :data:`MIN_EXPECTED` times pooled with the next (the last with the one before);
    a category of probability 0 that was observed is reported as impossible."""
    from scipy.stats import power_divergence

    impossible = sum(t.observed[c] for c in CATEGORIES if t.expected[c] == 0.0)
    obs, exp = [], []
    for c in CATEGORIES:
        if t.expected[c] == 0.0:
            continue
        if exp and exp[-1] < MIN_EXPECTED:
            obs[-1] += t.observed[c]
            exp[-1] += t.expected[c]
        else:
            obs.append(t.observed[c])
            exp.append(t.expected[c])
    while len(exp) > 1 and exp[-1] < MIN_EXPECTED:
        last_obs, last_exp = obs.pop(), exp.pop()
        obs[-1] += last_obs
        exp[-1] += last_exp
    if len(exp) < 2:
        return LawTest(None, None, 0, tuple(obs), tuple(exp), impossible)
    scale = sum(obs) / sum(exp)  # the summed law counts the same transitions: equal up to rounding
    stat, p = power_divergence(obs, [e * scale for e in exp], lambda_="pearson")
    return LawTest(float(stat), float(p), len(exp) - 1, tuple(obs), tuple(round(e, 2) for e in exp), impossible)
