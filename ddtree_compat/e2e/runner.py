"""Run one phase against a live server, and save what it saw.

:func:`run_phase` sends the phase's requests (one at a time, or all at once from ``N`` client threads), reads
``/metrics`` before and after and ``/server_info`` after, and cuts the phase's window out of the server log, into an
:class:`Observation`. While the requests are out the server's log is polled for a child that failed
(:meth:`~.process.ServerProcess.check_log`, every ``poll_s``): the phase ends at once and the server is stopped. The
judge is :mod:`.judge`.

:func:`save_capture` / :func:`load_capture` write and read a phase's raw material (responses, metrics text,
``/server_info``, log window, expectation, verdict), so ``tests/e2e/test_fixtures.py`` re-judges real captures in CI
(:func:`rejudge`).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path

from .configs import Phase, ServerConfig
from .expect import PhaseExpectation, RequestExpectation, RequestPlan
from .judge import Judgement, judge_cell


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


WARM_UP_TOKENS = 4
"""Tokens of the warm-up request a sampled server answers before its first phase (:func:`warm_up`)."""


def warm_up(server, config: ServerConfig, timeout: float) -> tuple[float, str] | None:
    """For a server whose requests are sampled: one request of :data:`WARM_UP_TOKENS` tokens at ``config``'s sampling
    (the first phase's first prompt) before its first phase; ``(seconds taken, error)``, the error ``""`` when answered
    (:func:`post_generate`'s), ``None`` for a greedy server. ``timeout``: seconds.

    SGLang's own warm-up request is greedy (``temperature 0``, 8 tokens: ``_execute_server_warmup`` in
    ``sglang/srt/entrypoints/http_server.py``), so a kernel only the sampled path calls is built at its first use (a
    JIT build: 100-125 s on the H200 with a cold cache, DFLASH's ``top_p_renorm_probs`` at top-p 0.5 on fa3,
    docs/e2e.md) inside the first phase, where a request past its deadline reads as a lost request. What the warm-up
    request meets is not judged: a server it broke fails the first phase."""
    if config.sampling is None or not config.phases or not config.phases[0].requests:
        return None
    body = RequestPlan(config.phases[0].requests[0].prompt, WARM_UP_TOKENS, config.sampling).body()
    t0 = time.perf_counter()
    _, error = post_generate(server.base_url, body, timeout)
    return time.perf_counter() - t0, error


def _send(server, bodies: list[dict], concurrency: int, timeout: float, poll_s: float):
    """POST every body (one after another, or from ``concurrency`` threads) while polling the server's log
    (:meth:`~.process.ServerProcess.check_log`) every ``poll_s``: ``(results, fault)``, ``fault`` the
    :class:`~.process.ServerFault` that ended the wait early (requests without an answer then carry an error
    saying so), else ``None``."""
    from .process import ServerFault

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
    """Send ``phase``'s requests to ``server`` (a :class:`~.process.ServerProcess`) and observe. While the
    requests are out, and once more when they are all answered, the server's log is polled for a child that
    failed (:meth:`~.process.ServerProcess.check_log`); when one shows, the phase ends at once and the server is
    stopped (:attr:`Observation.server_fault`)."""
    from .process import FAILED_GRACE_S, ServerFault

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
                  "requests": [{"prompt": list(r.prompt), "max_new_tokens": r.max_new_tokens,
                                ** ({"sampling": asdict(r.sampling)} if r.sampling else {})} for r in phase.requests]},
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
    from .sampling import Sampling

    meta = json.loads((folder / "capture.json").read_text())
    c = dict(meta["config"])
    c["flags"] = tuple(c.get("flags") or ())
    if c.get("draft"):
        d = c["draft"]
        c["draft"] = DraftSpec(d["algorithm"], Agreement(d["agree"]["name"], d["agree"]["period"]), d["block_size"])
    if c.get("sampling"):
        c["sampling"] = Sampling(**c["sampling"])
    config = ServerConfig(**c)
    reqs = tuple(RequestPlan(tuple(r["prompt"]), r["max_new_tokens"], Sampling(**r["sampling"]) if r.get("sampling")
                             else None) for r in meta["phase"]["requests"])
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
    return judge_cell(config, phase, obs, expect, twin, baseline)
