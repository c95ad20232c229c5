"""Run one phase against a live server, judge it, and save what it saw.

:func:`run_phase` sends the phase's requests (one at a time, or all at once from ``N`` client threads),
reads ``/metrics`` before and after and ``/server_info`` after, and cuts the phase's window out of the
server log. :func:`judge` compares that :class:`Observation` with the :class:`~.expect.PhaseExpectation`
and returns a :class:`~ddtree_compat.outcomes.Verdict` (outcomes as the kernel tiers: ``fault`` >
``zero-accept`` > ``wrong`` > ``pass``):

* ``fault``: the log showed a child that failed while the requests were out (a traceback or SGLang's SIGQUIT
  line: :meth:`~.server.ServerProcess.check_log`, polled every ``poll_s``; the server is stopped at once, the
  message names the traceback's last frame and exception line), a fault line in the log (classified like the
  kernel tiers' faults), the server exited, or a request failed or timed out (``hang``); the log excerpt is
  attached.
* ``zero-accept``: the draft agrees, yet no draft was accepted: accept length 1.00 (the field symptom).
* ``wrong``: any other difference: a request returned no tokens or tokens other than the target-only
  run's (lossless) and the designed ``succ`` chain; an accept figure from ``meta_info``, ``/metrics``,
  ``/server_info`` or the ``Decode batch`` lines differs from the expectation; throughput not > 0;
  CUDA graphs not used when on (or used when off).

Tolerances: integer counts (verify rounds, accepted drafts, tokens) exact; ratios of integers
(``meta_info`` accept length and rate, the ``/metrics`` counter ratio) within 1e-6; values SGLang prints
with two decimals (log lines) within 0.005; the ``/server_info`` average against the log lines' weighted
mean within 0.006 (each line rounded to 0.005).

:func:`save_capture` / :func:`load_capture` write and read a phase's raw material (responses, metrics
text, ``/server_info``, log window, expectation, verdict), so ``tests/e2e/test_fixtures.py`` re-judges
real captures in CI.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..outcomes import Verdict
from . import logparse
from .configs import Phase, ServerConfig
from .expect import PhaseExpectation, RequestExpectation

TOL_RATIO = 1e-6
TOL_LOG = 0.005 + 1e-9
TOL_SERVER_INFO = 0.006
GEN_TOKENS = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"
ACCEPT_GAUGE = "sglang:spec_accept_length"


@dataclass
class Observation:
    """What one phase saw.

    Attributes:
        responses: per request, the ``/generate`` JSON (``None`` if it failed).
        errors: per request, ``""`` or what went wrong (``timeout: ...`` for a request past its deadline).
        wall_s: seconds from the first request sent to the last response.
        window: the server log written during the phase.
        history: the server log from its start to the end of the phase.
        startup: the log up to readiness when this is the server's first phase, else ``""``.
        server_info: ``/server_info`` after the phase (``None`` if unreadable).
        metrics_before, metrics_after: ``/metrics`` text around the phase (``None`` if unreadable).
        returncode: the server's exit code if it died, else ``None``.
        offsets: ``(start, end, ready)`` byte offsets of the window, and of readiness when ``startup`` is
            set (else 0), in the server log (captures keep the offsets, not copies of the log).
        server_fault: the child failure the log showed during the phase (``{"message", "fault_class",
            "excerpt", "seen_s"}``; the server was stopped then), else ``None``.
    """

    responses: list[dict | None]
    errors: list[str]
    wall_s: float
    window: str = ""
    history: str = ""
    startup: str = ""
    server_info: dict | None = None
    metrics_before: str | None = None
    metrics_after: str | None = None
    returncode: int | None = None
    offsets: tuple[int, int, int] = (0, 0, 0)
    server_fault: dict | None = None


@dataclass
class Judgement:
    """A judged phase: the verdict, the figures measured, and (negative controls) the verdict against an
    agreeing draft's expectation, which must be ``zero-accept``."""

    verdict: Verdict
    measured: dict = field(default_factory=dict)
    log_excerpt: str = ""
    cross: Verdict | None = None


def _get(url: str, timeout: float = 10.0):
    import requests

    r = requests.get(url, timeout=timeout)
    r.raise_for_status()
    return r


def _text_or_none(url: str) -> str | None:
    """The body of ``GET url``, or ``None`` when the server did not answer it (refused, timed out, an HTTP
    error): recorded as unreadable, which the judge reports. Any other exception is ours and propagates."""
    import requests

    try:
        return _get(url).text
    except requests.RequestException:
        return None


def _json_or_none(url: str) -> dict | None:
    """As :func:`_text_or_none`, parsed as JSON (``None`` also when the body is not JSON)."""
    import requests

    try:
        return _get(url).json()
    except (requests.RequestException, ValueError):  # requests' JSONDecodeError is a ValueError
        return None


def post_generate(base_url: str, body: dict, timeout: float) -> tuple[dict | None, str]:
    """POST ``/generate``; ``(json, "")`` or ``(None, error)``."""
    import requests

    try:
        r = requests.post(base_url + "/generate", json=body, timeout=timeout)
    except requests.Timeout as e:
        return None, f"timeout: no response in {timeout:.0f}s ({e})"
    except requests.RequestException as e:
        return None, f"request failed: {type(e).__name__}: {e}"
    if r.status_code != 200:
        return None, f"HTTP {r.status_code}: {r.text[:300]}"
    try:
        return r.json(), ""
    except ValueError:
        return None, f"response is not JSON: {r.text[:300]}"


def _send(server, bodies: list[dict], concurrency: int, timeout: float, poll_s: float):
    """POST every body (one after another, or from ``concurrency`` threads) while polling the server's log
    (:meth:`~.server.ServerProcess.check_log`) every ``poll_s``: ``(results, fault)``, ``fault`` the
    :class:`~.server.ServerFault` that ended the wait early (requests without an answer then carry an error
    saying so), else ``None``."""
    from .server import ServerFault

    results: list[tuple[dict | None, str] | None] = [None] * len(bodies)
    stopped = threading.Event()

    def send(i: int) -> None:
        if not stopped.is_set():
            results[i] = post_generate(server.base_url, bodies[i], timeout)

    def in_turn() -> None:
        for i in range(len(bodies)):
            send(i)

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    futures = [pool.submit(in_turn)] if concurrency <= 1 else [pool.submit(send, i) for i in range(len(bodies))]
    fault = None
    try:
        while wait(futures, timeout=poll_s).not_done:
            try:
                server.check_log()
            except ServerFault as e:
                fault = e
                stopped.set()
                break
    finally:
        pool.shutdown(wait=fault is None, cancel_futures=True)
    for f in futures:
        if f.done() and not f.cancelled() and f.exception() is not None:
            raise f.exception()
    why = "no answer: the server was stopped when its child failed" if fault else "not sent"
    return [r if r is not None else (None, why) for r in results], fault


def run_phase(server, phase: Phase, timeout: float, first: bool, poll_s: float = 0.5) -> Observation:
    """Send ``phase``'s requests to ``server`` (a :class:`~.server.ServerProcess`) and observe. While the
    requests are out, and once more when they are all answered, the server's log is polled for a child that
    failed (:meth:`~.server.ServerProcess.check_log`); when one shows, the phase ends at once and the server is
    stopped (:attr:`Observation.server_fault`)."""
    from .server import FAILED_GRACE_S, ServerFault

    start = server.log_size()
    before = _text_or_none(server.base_url + "/metrics")
    t0 = time.perf_counter()
    bodies = [r.body() for r in phase.requests]
    results, fault = _send(server, bodies, phase.concurrency, timeout, poll_s)
    wall = time.perf_counter() - t0
    if fault is None:
        server.settle_log()  # the last batches' log lines and finished-request metrics land first
        try:
            server.check_log()
        except ServerFault as e:
            fault = e
    info = after = None
    returncode = None if server.alive() else server.proc.returncode  # it exited by itself
    if fault is not None:
        server.stop(grace_s=FAILED_GRACE_S)
    else:
        info = _json_or_none(server.base_url + "/server_info") if server.alive() else None
        after = _text_or_none(server.base_url + "/metrics") if server.alive() else None
    end = server.settle_log(quiet=0.2, limit=2.0)
    return Observation([r for r, _ in results], [e for _, e in results], wall,
                       window=server.read_log(start, end), history=server.read_log(0, end),
                       startup=server.read_log(0, server.ready_offset) if first else "",
                       server_info=info, metrics_before=before, metrics_after=after,
                       returncode=returncode, offsets=(start, end, server.ready_offset if first else 0),
                       server_fault=None if fault is None else {
                           "message": str(fault), "fault_class": fault.fault_class, "excerpt": fault.excerpt,
                           "seen_s": round(fault.seen_s, 1) if fault.seen_s is not None else None})


def _fmt(x) -> str:
    return "n/a" if x is None else f"{float(x):.2f}"


def _close(a, b, tol: float) -> bool:
    return a is not None and b is not None and abs(float(a) - float(b)) <= tol


def judge(config: ServerConfig, phase: Phase, expect: PhaseExpectation, obs: Observation,
          baseline: dict[tuple, list[int]] | None = None) -> Judgement:
    """Judge one phase (see the module docstring for outcomes and tolerances).

    ``baseline`` maps a prompt to the target-only server's output for it (a prefix of equal length is
    compared); ``None`` when the target-only run is unavailable (then only the designed chain is checked).
    """
    problems: list[str] = []
    measured: dict = {"requests": len(phase.requests), "wall_s": round(obs.wall_s, 3)}
    fault_class, log_excerpt = None, ""

    # 1. faults: a child that failed (seen while the requests were out), log lines, a dead server, failed requests
    if obs.server_fault:
        fault_class, log_excerpt = obs.server_fault["fault_class"], obs.server_fault["excerpt"]
        seen = obs.server_fault.get("seen_s")
        when = f", {seen:.0f}s after the server's start" if seen is not None else ""
        problems.append(f"{obs.server_fault['message']} (seen during the phase{when}; server stopped)")
    scan = obs.startup + ("\n" if obs.startup else "") + obs.window
    hits = logparse.fault_lines(scan)
    if hits:
        fault_class = fault_class or logparse.classify_log(scan, hits)
        log_excerpt = log_excerpt or logparse.excerpt(scan, hits[0].line_no)
        problems.append(f"{len(hits)} fault line(s) in the server log, first: {hits[0].text.strip()[:300]}")
    if obs.returncode is not None:
        fault_class = fault_class or "other"
        problems.append(f"server exited with code {obs.returncode} during the phase")
        if not log_excerpt:
            lines = obs.history.splitlines()
            log_excerpt = logparse.excerpt(obs.history, len(lines) - 1, before=40, after=0)
    failed = [(i, e) for i, e in enumerate(obs.errors) if e]
    if failed:
        if fault_class is None:
            fault_class = "hang" if any(e.startswith("timeout") for _, e in failed) else "other"
        problems.append(f"{len(failed)}/{len(obs.errors)} request(s) failed, first #{failed[0][0]}: "
                        f"{failed[0][1][:300]}")

    # 2. tokens: > 0, the designed chain, the target-only run's (lossless)
    tokens = 0
    for i, (plan, want, got) in enumerate(zip(phase.requests, expect.requests, obs.responses)):
        if got is None:
            continue
        out = list(got.get("output_ids") or [])
        tokens += len(out)
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
    measured["tokens"] = tokens
    throughput = tokens / obs.wall_s if obs.wall_s > 0 else 0.0
    measured["throughput_tok_s"] = round(throughput, 1)
    if not failed and throughput <= 0:
        problems.append(f"client throughput {throughput:.1f} tok/s (must be > 0)")
    lines = logparse.decode_lines(obs.window)
    measured["decode_lines"] = len(lines)
    zero_tp = [d for d in lines if d.gen_throughput is not None and d.gen_throughput <= 0 and (d.running or 0) > 0]
    if zero_tp:
        problems.append(f"{len(zero_tp)} Decode batch line(s) report gen throughput 0: {zero_tp[0].text.strip()[:200]}")

    # 3. CUDA graphs as configured
    flags = [d.cuda_graph for d in lines if d.cuda_graph is not None]
    if flags:
        measured["cuda_graph_lines"] = sum(flags)
        if config.cuda_graph and not any(flags):
            problems.append(f"CUDA graphs on, but none of {len(flags)} Decode batch lines ran as a graph")
        if not config.cuda_graph and any(flags):
            problems.append(f"CUDA graphs off, but {sum(flags)} Decode batch line(s) ran as a graph")

    # 4. acceptance
    zero = False
    if expect.speculative:
        zero = _judge_accept(config, expect, obs, lines, measured, problems)

    if fault_class is not None:
        kind = "fault"
    elif zero:
        kind = "zero-accept"
    elif problems:
        kind = "wrong"
    else:
        kind = "pass"
    summary = _summary(config, expect, measured)
    message = summary if kind == "pass" else f"{'; '.join(problems)}. [{summary}]"
    return Judgement(Verdict(kind, message, duration_s=obs.wall_s, fault_class=fault_class), measured, log_excerpt)


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


def _judge_accept(config: ServerConfig, expect: PhaseExpectation, obs: Observation, lines, measured: dict,
                  problems: list[str]) -> bool:
    """Accept-length checks; returns True when the phase shows zero acceptance where drafts agree."""
    # meta_info, per request (the first request that differs is named, with how many more do)
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
    if differ:
        first = min(differ)
        more = f" (and {len(differ) - 1} more request(s) differ)" if len(differ) > 1 else ""
        problems.append(f"request #{first}: {'; '.join(differ[first])}{more}")
    if verify_total:
        measured["meta_accept"] = round(completion_total / verify_total, 6)
        measured["meta_correct_drafts"] = correct_total
        measured["meta_verify_ct"] = verify_total

    # /metrics: counter deltas (request level) and the gauge (last logged batch)
    try:
        before = logparse.parse_metrics(obs.metrics_before) if obs.metrics_before else None
        after = logparse.parse_metrics(obs.metrics_after) if obs.metrics_after else None
    except (ImportError, ValueError) as e:
        before = after = None
        problems.append(f"/metrics unreadable: {type(e).__name__}: {e}")
    if before is None or after is None:
        problems.append("/metrics not read before and after the phase")
    else:
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

    # Decode batch lines of the phase
    acc = [d for d in lines if d.accept_len is not None]
    measured["log_accept"] = round(logparse.weighted_accept(acc), 4) if acc else None
    if not acc:
        problems.append("no Decode batch line with an accept len in the phase's log window")
    lo, hi = min(expect.round_values), max(expect.round_values)
    for d in acc:
        if expect.uniform is not None:
            rate = (expect.uniform - 1) / config.drafts_per_round if config.drafts_per_round else None
            if not _close(d.accept_len, expect.uniform, TOL_LOG) or (
                    rate is not None and d.accept_rate is not None and not _close(d.accept_rate, rate, TOL_LOG)):
                problems.append(f"log line {d.line_no}: accept len {d.accept_len:.2f}, accept rate {d.accept_rate}, "
                                f"expected {expect.uniform:.2f} and {_fmt(rate)} in every decode batch: "
                                f"{d.text.strip()[:200]}")
                break
        elif not (lo - TOL_LOG <= d.accept_len <= hi + TOL_LOG):
            problems.append(f"log line {d.line_no}: accept len {d.accept_len:.2f} outside [{lo}, {hi}]")
            break

    # /server_info: cumulative over every logged batch since start, against the log's weighted mean
    info = logparse.server_info_accept(obs.server_info) if obs.server_info else None
    measured["server_info_accept"] = info
    hist = [d for d in logparse.decode_lines(obs.history) if d.accept_len is not None]
    if info is None:
        problems.append("/server_info has no internal_states[0].avg_spec_accept_length")
    elif hist:
        n_before = len(hist) - len(acc)
        means = [logparse.weighted_accept(hist[:n]) for n in range(max(1, n_before), len(hist) + 1)]
        if not any(_close(info, m, TOL_SERVER_INFO) for m in means):
            problems.append(f"/server_info avg_spec_accept_length {info:.4f} matches no weighted mean of the "
                            f"{len(hist)} Decode batch lines logged so far ({_fmt(means[0])}..{_fmt(means[-1])})")

    # zero acceptance where drafts agree: the field symptom
    expects_accept = any(r.correct_drafts > 0 for r in expect.requests)
    nothing_meta = meta_ok and verify_total > 0 and correct_total == 0
    nothing_log = bool(acc) and all(_close(d.accept_len, 1.0, TOL_LOG) for d in acc)
    if expects_accept and (nothing_meta or (not verify_total and nothing_log)):
        problems.insert(0, f"accept len 1.00 (no draft accepted in {verify_total} verify rounds) where the draft "
                           f"agrees: expected {_fmt(expect.uniform or expect.accept_length)}; the field symptom")
        return True
    return False


def judge_negative_control(config: ServerConfig, phase: Phase, obs: Observation, expect: PhaseExpectation,
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


# ----------------------------------------------------------------------------------------------- captures

def _exp_json(e: RequestExpectation) -> dict:
    return {"output_ids": e.output_ids, "round_accepts": e.round_accepts, "phantom_accept": e.phantom_accept,
            "overshoot": e.overshoot, "drafts_per_round": e.drafts_per_round}


def save_capture(folder: Path, config: ServerConfig, phase: Phase, expect: PhaseExpectation, obs: Observation,
                 judgement: Judgement, baseline: dict | None, twin_expect: PhaseExpectation | None = None) -> Path:
    """Write a phase's raw material and verdict under ``folder`` (one file each; the log stays in
    ``folder/../server.log``, read back by offsets)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "responses.json").write_text(json.dumps({"responses": obs.responses, "errors": obs.errors}, indent=1))
    (folder / "window.log").write_text(obs.window)  # for reading; the judge re-reads ../server.log by offsets
    if obs.server_info is not None:
        (folder / "server_info.json").write_text(json.dumps(obs.server_info, indent=1, default=str))
    for name, text in (("metrics-before.txt", obs.metrics_before), ("metrics-after.txt", obs.metrics_after)):
        if text is not None:
            (folder / name).write_text(text)
    meta = {
        "config": {k: v for k, v in asdict(config).items() if k != "phases"},
        "phase": {"name": phase.name, "concurrency": phase.concurrency,
                  "requests": [{"prompt": list(r.prompt), "max_new_tokens": r.max_new_tokens} for r in phase.requests]},
        "expect": {"speculative": expect.speculative, "requests": [_exp_json(e) for e in expect.requests]},
        "twin_expect": None if twin_expect is None else [_exp_json(e) for e in twin_expect.requests],
        "baseline": None if baseline is None else [baseline.get(r.prompt) for r in phase.requests],
        "observation": {"wall_s": obs.wall_s, "returncode": obs.returncode, "offsets": list(obs.offsets),
                        "server_fault": obs.server_fault},
        "verdict": {"outcome": judgement.verdict.outcome, "message": judgement.verdict.message,
                    "fault_class": judgement.verdict.fault_class,
                    "cross": None if judgement.cross is None else judgement.cross.outcome},
        "measured": judgement.measured,
    }
    (folder / "capture.json").write_text(json.dumps(meta, indent=1, default=str))
    return folder


def load_capture(folder: Path) -> tuple[ServerConfig, Phase, PhaseExpectation, Observation, dict | None,
                                        PhaseExpectation | None, dict]:
    """Read a folder written by :func:`save_capture`: ``(config, phase, expect, obs, baseline, twin, meta)``."""
    from .checkpoints import Agreement, DraftSpec
    from .expect import RequestPlan

    meta = json.loads((folder / "capture.json").read_text())
    c = dict(meta["config"])
    c["flags"] = tuple(c.get("flags") or ())
    if c.get("draft"):
        d = c["draft"]
        c["draft"] = DraftSpec(d["algorithm"], Agreement(d["agree"]["name"], d["agree"]["period"]), d["block_size"])
    config = ServerConfig(**c)
    reqs = tuple(RequestPlan(tuple(r["prompt"]), r["max_new_tokens"]) for r in meta["phase"]["requests"])
    phase = Phase(meta["phase"]["name"], meta["phase"]["concurrency"], reqs)

    def exps(items):
        return [RequestExpectation(e["output_ids"], e["round_accepts"], e["phantom_accept"], e["overshoot"],
                                   e["drafts_per_round"]) for e in items]

    expect = PhaseExpectation(exps(meta["expect"]["requests"]), meta["expect"]["speculative"])
    twin = PhaseExpectation(exps(meta["twin_expect"]), True) if meta.get("twin_expect") else None
    resp = json.loads((folder / "responses.json").read_text())

    def text(name):
        p = folder / name
        return p.read_text() if p.exists() else None

    info = json.loads(text("server_info.json")) if (folder / "server_info.json").exists() else None
    start, end, ready = meta["observation"]["offsets"]
    log = (folder.parent / "server.log").read_bytes()
    obs = Observation(resp["responses"], resp["errors"], meta["observation"]["wall_s"],
                      log[start:end].decode("utf-8", "replace"), log[:end].decode("utf-8", "replace"),
                      log[:ready].decode("utf-8", "replace"), info, text("metrics-before.txt"),
                      text("metrics-after.txt"), meta["observation"]["returncode"], (start, end, ready),
                      meta["observation"].get("server_fault"))
    baseline = None
    if meta.get("baseline") is not None:
        baseline = {r.prompt: b for r, b in zip(reqs, meta["baseline"]) if b is not None}
    return config, phase, expect, obs, baseline, twin, meta


def rejudge(folder: Path) -> Judgement:
    """Judge a saved capture again (what the fixture tests compare with the saved verdict)."""
    config, phase, expect, obs, baseline, twin, _ = load_capture(folder)
    if twin is not None:
        return judge_negative_control(config, phase, obs, expect, twin, baseline)
    return judge(config, phase, expect, obs, baseline)
