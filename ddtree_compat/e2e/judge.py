"""Judging one phase against a live server: small named rules, each unit-tested (``tests/e2e/test_judge_rules.py``).

:func:`judge` compares an :class:`~.runner.Observation` with the :class:`~.expect.PhaseExpectation` and returns a
:class:`Judgement`, whose :class:`~ddtree_compat.outcomes.Verdict` is, as in the kernel tiers, ``fault`` >
``zero-accept`` > ``wrong`` > ``pass``:

* ``fault``: the log showed a child that failed while the requests were out (:func:`child_failed`: a traceback or
  SGLang's SIGQUIT line, the server stopped at once, the message names the traceback's last frame and exception
  line), a fault line in the log (:func:`fault_lines`, classified like the kernel tiers' faults), the server exited
  (:func:`server_exited`), or a request failed or timed out (:func:`failed_requests`, ``hang``); the log excerpt is
  attached.
* ``zero-accept``: the draft agrees, yet no draft was accepted: accept length 1.00 (:func:`zero_accept`, the field
  symptom).
* ``wrong``: any other difference: a request returned no tokens or tokens other than the target-only run's
  (lossless) and the designed ``succ`` chain (:func:`tokens`); throughput not > 0 (:func:`throughput`); CUDA graphs
  not used when on, or used when off (:func:`cuda_graphs`); an accept figure from ``meta_info``
  (:func:`meta_info_accept`), ``/metrics`` (:func:`metrics_accept`), the ``Decode batch`` lines
  (:func:`decode_line_accept`) or ``/server_info`` (:func:`server_info_accept`) differs from the expectation.

Tolerances: integer counts (verify rounds, accepted drafts, tokens) exact; ratios of integers (``meta_info`` accept
length and rate, the ``/metrics`` counter ratio) within 1e-6; values SGLang prints with two decimals (log lines)
within 0.005; the ``/server_info`` average against the log lines' weighted mean within 0.006 (each line rounded to
0.005).

A rule is ``(...) -> Found``; :func:`judge` runs them in order and joins what they found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..outcomes import Verdict
from . import checkpoints as ck
from . import logparse, sampling
from .configs import SKEW, Phase, ServerConfig
from .expect import PhaseExpectation

TOL_RATIO = 1e-6
TOL_LOG = 0.005 + 1e-9
TOL_SERVER_INFO = 0.006
GEN_TOKENS = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"
ACCEPT_GAUGE = "sglang:spec_accept_length"


@dataclass
class Judgement:
    """A judged phase: the verdict, the figures measured, and (negative controls) the verdict against an
    agreeing draft's expectation, which must be ``zero-accept``."""

    verdict: Verdict
    measured: dict = field(default_factory=dict)
    log_excerpt: str = ""
    cross: Verdict | None = None


@dataclass
class Found:
    """What one rule found.

    Attributes:
        problems: one line per difference (in the verdict's message, in rule order).
        measured: figures for the verdict's summary and the capture.
        fault_class: the fault's class, where the rule found one (the first rule's wins).
        excerpt: the server log around the fault (the first rule's wins).
        zero_accept: the field symptom: no draft accepted where the draft agrees.
    """

    problems: list[str] = field(default_factory=list)
    measured: dict = field(default_factory=dict)
    fault_class: str | None = None
    excerpt: str = ""
    zero_accept: bool = False


def _fmt(x) -> str:
    return "n/a" if x is None else f"{float(x):.2f}"


def _close(a, b, tol: float) -> bool:
    return a is not None and b is not None and abs(float(a) - float(b)) <= tol


# ------------------------------------------------------------------------------------------------ faults

def child_failed(obs) -> Found:
    """A child that failed while the requests were out (the server was stopped then)."""
    f = obs.server_fault
    if not f:
        return Found()
    seen = f.get("seen_s")
    when = f", {seen:.0f}s after the server's start" if seen is not None else ""
    return Found([f"{f['message']} (seen during the phase{when}; server stopped)"], fault_class=f["fault_class"],
                 excerpt=f["excerpt"])


def fault_lines(obs) -> Found:
    """Fault lines (CUDA errors, the scheduler's exception) in the startup log and the phase's window."""
    scan = obs.startup + ("\n" if obs.startup else "") + obs.window
    hits = logparse.fault_lines(scan)
    if not hits:
        return Found()
    return Found([f"{len(hits)} fault line(s) in the server log, first: {hits[0].text.strip()[:300]}"],
                 fault_class=logparse.classify_log(scan, hits), excerpt=logparse.excerpt(scan, hits[0].line_no))


def server_exited(obs) -> Found:
    """The server exited during the phase (its last log lines as the excerpt)."""
    if obs.returncode is None:
        return Found()
    lines = obs.history.splitlines()
    return Found([f"server exited with code {obs.returncode} during the phase"], fault_class="other",
                 excerpt=logparse.excerpt(obs.history, len(lines) - 1, before=40, after=0))


def failed_requests(obs) -> Found:
    """Requests that failed or timed out (``hang`` when one timed out)."""
    failed = [(i, e) for i, e in enumerate(obs.errors) if e]
    if not failed:
        return Found()
    cls = "hang" if any(e.startswith("timeout") for _, e in failed) else "other"
    return Found([f"{len(failed)}/{len(obs.errors)} request(s) failed, first #{failed[0][0]}: {failed[0][1][:300]}"],
                 fault_class=cls)


# ------------------------------------------------------------------------------------------------ tokens

def tokens(phase: Phase, expect: PhaseExpectation, obs, baseline: dict[tuple, list[int]] | None) -> Found:
    """Each answered request returned tokens, the target's designed greedy chain, and (``baseline``: the target-only
    run's output by prompt, a prefix of equal length compared) the target-only run's: lossless."""
    problems, count = [], 0
    for i, (plan, want, got) in enumerate(zip(phase.requests, expect.requests, obs.responses)):
        if got is None:
            continue
        out = list(got.get("output_ids") or [])
        count += len(out)
        if not out:
            problems.append(f"request #{i} returned 0 tokens")
            continue
        want_ids = want.output_ids
        if out != want_ids:
            diff = next((k for k, (a, b) in enumerate(zip(out, want_ids)) if a != b), min(len(out), len(want_ids)))
            problems.append(f"request #{i} (prompt ending {plan.prompt[-1]}): {len(out)} tokens, first difference "
                            f"from the target's greedy chain at {diff}: got {out[diff:diff + 4]}, "
                            f"want {want_ids[diff:diff + 4]}")
        if baseline is not None and plan.prompt in baseline:
            ref = baseline[plan.prompt][: len(out)]
            if out != ref:
                problems.append(f"request #{i}: not lossless: differs from the target-only run "
                                f"({out[:6]}... vs {ref[:6]}...)")
    return Found(problems, {"tokens": count})


def throughput(obs, token_count: int, decode_lines: list) -> Found:
    """Client throughput > 0 (unless requests failed), and no ``Decode batch`` line with running requests reports
    a generation throughput of 0."""
    rate = token_count / obs.wall_s if obs.wall_s > 0 else 0.0
    problems = []
    if not any(obs.errors) and rate <= 0:
        problems.append(f"client throughput {rate:.1f} tok/s (must be > 0)")
    zero = [d for d in decode_lines if d.gen_throughput is not None and d.gen_throughput <= 0 and (d.running or 0) > 0]
    if zero:
        problems.append(f"{len(zero)} Decode batch line(s) report gen throughput 0: {zero[0].text.strip()[:200]}")
    return Found(problems, {"throughput_tok_s": round(rate, 1), "decode_lines": len(decode_lines)})


def cuda_graphs(config: ServerConfig, decode_lines: list) -> Found:
    """CUDA graphs as configured: some decode batch ran as a graph when on, none when off."""
    flags = [d.cuda_graph for d in decode_lines if d.cuda_graph is not None]
    if not flags:
        return Found()
    problems = []
    if config.cuda_graph and not any(flags):
        problems.append(f"CUDA graphs on, but none of {len(flags)} Decode batch lines ran as a graph")
    if not config.cuda_graph and any(flags):
        problems.append(f"CUDA graphs off, but {sum(flags)} Decode batch line(s) ran as a graph")
    return Found(problems, {"cuda_graph_lines": sum(flags)})


# ------------------------------------------------------------------------------------------------ acceptance

def meta_info_accept(expect: PhaseExpectation, obs) -> Found:
    """Each request's ``meta_info``: verify rounds and accepted drafts exact, accept length and rate within 1e-6 (the
    first request that differs is named, with how many more do). ``measured`` also carries the totals
    :func:`zero_accept` reads (``_meta_ok``, ``_verify_total``, ``_correct_total``; dropped from the judgement)."""
    correct_total, verify_total, completion_total, meta_ok = 0, 0, 0, True
    differ: dict[int, list[str]] = {}
    for i, (want, got) in enumerate(zip(expect.requests, obs.responses)):
        if got is None:
            meta_ok = False
            continue
        meta = got.get("meta_info") or {}
        completion_total += int(meta.get("completion_tokens", len(got.get("output_ids") or [])))
        if "spec_verify_ct" not in meta:
            differ.setdefault(i, []).append(f"meta_info has no spec_verify_ct (keys: {sorted(meta)[:12]})")
            meta_ok = False
            continue
        vct, cor = int(meta["spec_verify_ct"]), int(meta.get("spec_num_correct_drafts", -1))
        verify_total += vct
        correct_total += max(cor, 0)
        if vct != want.verify_ct or cor != want.correct_drafts:
            differ.setdefault(i, []).append(f"{vct} verify rounds and {cor} accepted drafts, expected {want.verify_ct} "
                                            f"and {want.correct_drafts} (rounds accept {want.round_accepts[:6]}...)")
        if not _close(meta.get("spec_accept_length"), want.accept_length, TOL_RATIO):
            differ.setdefault(i, []).append(f"meta_info spec_accept_length {meta.get('spec_accept_length')}, "
                                            f"expected {float(want.accept_length):.4f}")
        if want.accept_rate is not None and not _close(meta.get("spec_accept_rate"), want.accept_rate, TOL_RATIO):
            differ.setdefault(i, []).append(f"meta_info spec_accept_rate {meta.get('spec_accept_rate')}, "
                                            f"expected {float(want.accept_rate):.4f}")
    problems = []
    if differ:
        first = min(differ)
        more = f" (and {len(differ) - 1} more request(s) differ)" if len(differ) > 1 else ""
        problems.append(f"request #{first}: {'; '.join(differ[first])}{more}")
    measured = {"_meta_ok": meta_ok, "_verify_total": verify_total, "_correct_total": correct_total}
    if verify_total:
        measured.update(meta_accept=round(completion_total / verify_total, 6), meta_correct_drafts=correct_total,
                        meta_verify_ct=verify_total)
    return Found(problems, measured)


def metrics_accept(expect: PhaseExpectation, obs) -> Found:
    """``/metrics`` read before and after the phase: the generated-token and verify-call counters grew by exactly the
    expectation's; the accept-length gauge (the last logged batch) is the uniform accept length within 0.005."""
    try:
        before = logparse.parse_metrics(obs.metrics_before) if obs.metrics_before else None
        after = logparse.parse_metrics(obs.metrics_after) if obs.metrics_after else None
    except (ImportError, ValueError) as e:
        return Found([f"/metrics unreadable: {type(e).__name__}: {e}", "/metrics not read before and after the phase"])
    if before is None or after is None:
        return Found(["/metrics not read before and after the phase"])
    problems, measured = [], {}
    d_gen = after.get(GEN_TOKENS, 0.0) - before.get(GEN_TOKENS, 0.0)
    d_ver = after.get(VERIFY_CALLS, 0.0) - before.get(VERIFY_CALLS, 0.0)
    if d_ver > 0:
        measured["metrics_accept"] = round(d_gen / d_ver, 6)
    if (d_gen, d_ver) != (expect.completion_tokens, expect.verify_ct):
        problems.append(f"/metrics counters grew by {d_gen:.0f} generated tokens and {d_ver:.0f} verify calls, "
                        f"expected {expect.completion_tokens} and {expect.verify_ct}")
    gauge = after.get(ACCEPT_GAUGE)
    measured["gauge_accept"] = gauge
    if expect.uniform is not None and not _close(gauge, expect.uniform, TOL_LOG):
        problems.append(f"gauge {ACCEPT_GAUGE} = {gauge}, expected {expect.uniform:.2f}")
    return Found(problems, measured)


def decode_line_accept(config: ServerConfig, expect: PhaseExpectation, accept_lines: list) -> Found:
    """The phase's ``Decode batch`` lines with an accept length: there is one; each equals the uniform accept length
    (and its accept rate, accepted drafts per round over the drafts a round verifies) within 0.005, or lies within
    the expected rounds' range (the first line that does not is named)."""
    measured = {"log_accept": round(logparse.weighted_accept(accept_lines), 4) if accept_lines else None}
    if not accept_lines:
        return Found(["no Decode batch line with an accept len in the phase's log window"], measured)
    lo, hi = min(expect.round_values), max(expect.round_values)
    for d in accept_lines:
        if expect.uniform is not None:
            rate = (expect.uniform - 1) / config.drafts_per_round if config.drafts_per_round else None
            if not _close(d.accept_len, expect.uniform, TOL_LOG) or (
                    rate is not None and d.accept_rate is not None and not _close(d.accept_rate, rate, TOL_LOG)):
                return Found([f"log line {d.line_no}: accept len {d.accept_len:.2f}, accept rate {d.accept_rate}, "
                              f"expected {expect.uniform:.2f} and {_fmt(rate)} in every decode batch: "
                              f"{d.text.strip()[:200]}"], measured)
        elif not (lo - TOL_LOG <= d.accept_len <= hi + TOL_LOG):
            return Found([f"log line {d.line_no}: accept len {d.accept_len:.2f} outside [{lo}, {hi}]"], measured)
    return Found([], measured)


def server_info_accept(obs, accept_lines: list) -> Found:
    """``/server_info``'s average accept length (cumulative over every logged batch since the server's start) matches
    the ``Decode batch`` lines' weighted mean up to some line of this phase, within 0.006."""
    info = logparse.server_info_accept(obs.server_info) if obs.server_info else None
    measured = {"server_info_accept": info}
    if info is None:
        return Found(["/server_info has no internal_states[0].avg_spec_accept_length"], measured)
    hist = [d for d in logparse.decode_lines(obs.history) if d.accept_len is not None]
    if hist:
        n_before = len(hist) - len(accept_lines)
        means = [logparse.weighted_accept(hist[:n]) for n in range(max(1, n_before), len(hist) + 1)]
        if not any(_close(info, m, TOL_SERVER_INFO) for m in means):
            return Found([f"/server_info avg_spec_accept_length {info:.4f} matches no weighted mean of the "
                          f"{len(hist)} Decode batch lines logged so far ({_fmt(means[0])}..{_fmt(means[-1])})"],
                         measured)
    return Found([], measured)


def zero_accept(expect: PhaseExpectation, meta: Found, accept_lines: list) -> Found:
    """The field symptom: some request's draft agrees, yet ``meta_info`` counts no accepted draft over its verify
    rounds (or, without ``meta_info`` rounds, every ``Decode batch`` line says accept len 1.00)."""
    expects_accept = any(r.correct_drafts > 0 for r in expect.requests)
    verify_total = meta.measured["_verify_total"]
    nothing_meta = meta.measured["_meta_ok"] and verify_total > 0 and meta.measured["_correct_total"] == 0
    nothing_log = bool(accept_lines) and all(_close(d.accept_len, 1.0, TOL_LOG) for d in accept_lines)
    if expects_accept and (nothing_meta or (not verify_total and nothing_log)):
        return Found([f"accept len 1.00 (no draft accepted in {verify_total} verify rounds) where the draft "
                      f"agrees: expected {_fmt(expect.uniform or expect.accept_length)}; the field symptom"],
                     zero_accept=True)
    return Found()


# ------------------------------------------------------------------------------------------------ sampled requests

def law(config: ServerConfig, phase: Phase, obs, shape: ck.TinyShape) -> Found:
    """Each answered request returned tokens, and the served transitions follow the target's law at the requests'
    sampling parameters (:func:`.sampling.distribution_test`: Pearson's chi-square at :data:`.sampling.ALPHA`)."""
    seqs, problems = [], []
    for i, (plan, got) in enumerate(zip(phase.requests, obs.responses)):
        if got is None:
            continue
        out = list(got.get("output_ids") or [])
        if not out:
            problems.append(f"request #{i} returned 0 tokens")
        seqs.append((plan.prompt[-1], out))
    t = sampling.count_transitions(seqs, shape, config.sampling)
    test = sampling.distribution_test(t)
    measured = {"tokens": sum(len(o) for _, o in seqs), "law_transitions": t.count, "law_dropped": t.dropped,
                "law_observed": t.observed, "law_expected": {c: round(e, 2) for c, e in t.expected.items()},
                "law_statistic": None if test.statistic is None else round(test.statistic, 4),
                "law_p_value": test.p_value, "law_dof": test.dof, "law_alpha": sampling.ALPHA}
    if test.impossible:
        problems.append(f"{test.impossible} token(s) the target's law at {config.sampling.tag} gives probability 0 "
                        f"(observed {t.observed})")
    if test.p_value is not None and test.p_value < sampling.ALPHA:
        problems.append(f"not the target's law at {config.sampling.tag}: chi-square {test.statistic:.1f} "
                        f"(dof {test.dof}), p = {test.p_value:.3g} < alpha {sampling.ALPHA:g}, over {t.count} "
                        f"transitions; observed {t.observed}, expected {measured['law_expected']}")
    return Found(problems, measured)


def accept_spread(config: ServerConfig, obs) -> Found:
    """Accepted drafts per verify round at temperature > 0, from ``meta_info``: reported with their spread over the
    requests; what must hold is asserted only: some draft accepted where the draft agrees (else the field symptom),
    and at least one per round on average where the draft reads the last token only (EAGLE, STANDALONE; a DFlash
    draft reads the context 65 back, which a sampled neighbour breaks)."""
    per, rounds, correct, problems = [], 0, 0, []
    for i, got in enumerate(obs.responses):
        meta = (got or {}).get("meta_info") or {}
        if got is None:
            continue
        if "spec_verify_ct" not in meta or "spec_num_correct_drafts" not in meta:
            problems.append(f"request #{i}: meta_info lacks spec_verify_ct / spec_num_correct_drafts")
            continue
        r, k = int(meta["spec_verify_ct"]), int(meta["spec_num_correct_drafts"])
        rounds, correct = rounds + r, correct + k
        if r:
            per.append(k / r)
    mean = correct / rounds if rounds else None
    measured = {"rounds": rounds, "accepted_drafts": correct, "accepted_per_round": None if mean is None else round(mean, 3),
                "accepted_per_round_min": round(min(per), 3) if per else None,
                "accepted_per_round_max": round(max(per), 3) if per else None}
    agrees = config.draft is not None and config.draft.agree is ck.ALWAYS
    if agrees and rounds and correct == 0:
        return Found([f"no draft accepted in {rounds} verify rounds of an always-agreeing draft at "
                      f"{config.sampling.tag}"], measured, zero_accept=True)
    if agrees and config.algorithm in (ck.EAGLE, ck.STANDALONE) and mean is not None and mean < 1:
        problems.append(f"{mean:.3f} accepted drafts per round (< 1) from an always-agreeing draft at "
                        f"{config.sampling.tag}")
    return Found(problems, measured)


def judge_law(config: ServerConfig, phase: Phase, obs, shape: ck.TinyShape = ck.TinyShape()) -> Judgement:
    """Judge a distribution cell: faults as :func:`judge`, then :func:`law`, throughput, CUDA graphs and (speculative)
    :func:`accept_spread`. A planted skew's verdict must be ``wrong``: its message says so."""
    lines = logparse.decode_lines(obs.window)
    found = [child_failed(obs), fault_lines(obs), server_exited(obs), failed_requests(obs)]
    counted = law(config, phase, obs, shape)
    found += [counted, throughput(obs, counted.measured["tokens"], lines), cuda_graphs(config, lines)]
    if config.speculative:
        found.insert(0, accept_spread(config, obs))
    measured = {"requests": len(phase.requests), "wall_s": round(obs.wall_s, 3)}
    for f in found:
        measured.update({k: v for k, v in f.measured.items() if not k.startswith("_")})
    m = measured
    summary = (f"{m['tokens']} tokens from {m['requests']} request(s) at {config.sampling.tag}, "
               f"{m.get('throughput_tok_s', 0)} tok/s; law: {m['law_transitions']} transitions, observed "
               f"{m['law_observed']}, expected {m['law_expected']}, chi-square {_fmt(m['law_statistic'])} "
               f"(dof {m['law_dof']}), p = {_fmt(m['law_p_value'])}, alpha {sampling.ALPHA:g}")
    if config.speculative:
        summary += (f"; accepted drafts per round {_fmt(m.get('accepted_per_round'))} over {m.get('rounds', 0)} rounds "
                    f"(requests {_fmt(m.get('accepted_per_round_min'))}..{_fmt(m.get('accepted_per_round_max'))})")
    verdict = _verdict(found, summary, obs.wall_s)
    if config.planted_skew:
        verdict.message = f"planted skew ({SKEW}; must read wrong): {verdict.message}"
    return Judgement(verdict, measured, next((f.excerpt for f in found if f.excerpt), ""))


# ------------------------------------------------------------------------------------------------ the judge

def judge(config: ServerConfig, phase: Phase, expect: PhaseExpectation, obs,
          baseline: dict[tuple, list[int]] | None = None) -> Judgement:
    """Judge one phase (see the module docstring for outcomes and tolerances).

    ``baseline`` maps a prompt to the target-only server's output for it (a prefix of equal length is
    compared); ``None`` when the target-only run is unavailable (then only the designed chain is checked).
    """
    lines = logparse.decode_lines(obs.window)
    found = [child_failed(obs), fault_lines(obs), server_exited(obs), failed_requests(obs)]
    counted = tokens(phase, expect, obs, baseline)
    found += [counted, throughput(obs, counted.measured["tokens"], lines), cuda_graphs(config, lines)]
    if expect.speculative:
        accept_lines = [d for d in lines if d.accept_len is not None]
        meta = meta_info_accept(expect, obs)
        zero = zero_accept(expect, meta, accept_lines)
        found = [zero, *found, meta, metrics_accept(expect, obs), decode_line_accept(config, expect, accept_lines),
                 server_info_accept(obs, accept_lines)]  # the field symptom leads the message
    measured = {"requests": len(phase.requests), "wall_s": round(obs.wall_s, 3)}
    for f in found:
        measured.update({k: v for k, v in f.measured.items() if not k.startswith("_")})
    excerpt = next((f.excerpt for f in found if f.excerpt), "")
    return Judgement(_verdict(found, _summary(config, expect, measured), obs.wall_s), measured, excerpt)


def _verdict(found: list[Found], summary: str, wall_s: float) -> Verdict:
    """``fault`` > ``zero-accept`` > ``wrong`` > ``pass`` over the rules' findings, the problems before the summary."""
    problems = [p for f in found for p in f.problems]
    fault_class = next((f.fault_class for f in found if f.fault_class is not None), None)
    if fault_class is not None:
        kind = "fault"
    elif any(f.zero_accept for f in found):
        kind = "zero-accept"
    elif problems:
        kind = "wrong"
    else:
        kind = "pass"
    message = summary if kind == "pass" else f"{'; '.join(problems)}. [{summary}]"
    return Verdict(kind, message, duration_s=wall_s, fault_class=fault_class)


def _summary(config: ServerConfig, expect: PhaseExpectation, m: dict) -> str:
    parts = [f"{m.get('tokens', 0)} tokens from {m['requests']} request(s), {m.get('throughput_tok_s', 0)} tok/s"]
    if expect.speculative:
        want = expect.uniform
        parts.append(f"accept len per round: expected {_fmt(want) if want else sorted(expect.round_values)}, "
                     f"log {_fmt(m.get('log_accept'))} over {m.get('decode_lines', 0)} line(s), "
                     f"gauge {_fmt(m.get('gauge_accept'))}, /server_info {_fmt(m.get('server_info_accept'))}")
        parts.append(f"meta_info accept length {_fmt(m.get('meta_accept'))} (expected {_fmt(expect.accept_length)}: "
                     f"{expect.completion_tokens} tokens / {expect.verify_ct} verify rounds), /metrics "
                     f"{_fmt(m.get('metrics_accept'))}")
    return "; ".join(parts)


def shared_gpu(verdict: Verdict, servers_at_once: int) -> Verdict:
    """A server that ran out of GPU memory while up to ``servers_at_once`` of the suite's servers shared the one GPU
    (``DDTREE_E2E_PARALLEL`` per session, times ``DDTREE_E2E_GPU_SESSIONS`` sessions): the suite's ``error`` (its
    servers' memory together), never a verdict on the server; alone (``servers_at_once == 1``) it stays a ``fault`` of
    class ``out-of-memory`` (that configuration's own limit at that concurrency on this GPU)."""
    if verdict.outcome != "fault" or verdict.fault_class != "out-of-memory" or servers_at_once <= 1:
        return verdict
    return Verdict("error", f"the suite's: out of GPU memory with up to {servers_at_once} of its servers on the one GPU "
                            f"(DDTREE_E2E_PARALLEL x DDTREE_E2E_GPU_SESSIONS); run the cell alone (one session, "
                            f"DDTREE_E2E_PARALLEL=1) for the server's own limit. {verdict.message}",
                   duration_s=verdict.duration_s)


def judge_negative_control(config: ServerConfig, phase: Phase, obs, expect: PhaseExpectation,
                           twin_expect: PhaseExpectation, baseline: dict | None) -> Judgement:
    """A negative control passes when its own expectation (accept length 1.00) holds AND the same
    observation judged against an always-agreeing draft's expectation is ``zero-accept``."""
    own = judge(config, phase, expect, obs, baseline)
    cross = judge(config.agreeing_twin(), phase, twin_expect, obs, baseline).verdict
    own.cross = cross
    if own.verdict.outcome == "pass" and cross.outcome != "zero-accept":
        own.verdict = Verdict("wrong", f"negative control: the zero-accept check did not fire against an agreeing "
                                       f"draft's expectation (verdict {cross.outcome}: {cross.message[:400]}). "
                                       f"[{own.verdict.message}]", duration_s=own.verdict.duration_s)
    elif own.verdict.outcome == "pass":
        own.verdict.message = (f"negative control: accept len 1.00 as expected, and the zero-accept check reports it "
                               f"against an agreeing draft ({cross.message[:240]}). [{own.verdict.message}]")
    return own


def judge_cell(config: ServerConfig, phase: Phase, obs, expect: PhaseExpectation, twin: PhaseExpectation | None,
               baseline: dict | None, shape: ck.TinyShape = ck.TinyShape()) -> Judgement:
    """The judge of one cell: the law for a distribution cell (:func:`judge_law`), a negative control's pair when
    ``twin`` is given (:func:`judge_negative_control`), else :func:`judge`."""
    if config.distribution:
        return judge_law(config, phase, obs, shape)
    if twin is not None:
        return judge_negative_control(config, phase, obs, expect, twin, baseline)
    return judge(config, phase, expect, obs, baseline)
