"""The phase judge: which observations pass, which are zero-accept, wrong or faults (CPU).

The observations here are built in the test the way an honest (or a broken) server would report them,
from its own token-by-token simulation (:func:`honest`), never from the expectation the judge checks: ``Decode batch`` lines in the layout of sglang 0.5.23's
``scheduler_components/metrics_reporter.py``, Prometheus counters, ``meta_info`` computed with
``tokenizer_manager.py``'s formulas. They test the judging logic; parsing of real output is
``test_fixtures.py``'s job (quoted lines now, device captures once committed).
"""

import pytest

from ddtree_compat.e2e import checkpoints as ck
from ddtree_compat.e2e.configs import plan
from ddtree_compat.e2e.expect import PhaseExpectation
from ddtree_compat.e2e.judge import judge, judge_negative_control
from ddtree_compat.e2e.runner import Observation, load_capture, rejudge, save_capture

SHAPE = ck.TinyShape()
CONFIGS = {c.shape_id: c for c in plan("default", attention="triton")}


def line(k: float, rate: float, graph: bool, running: int = 1, tput: float = 812.5) -> str:
    return (f"[2026-12-01 10:00:00] Decode batch, #running-req: {running}, #token: 120, token usage: 0.00, "
            f"accept len: {k:.2f}, accept rate: {rate:.2f}, cuda graph: {graph}, gen throughput (token/s): {tput:.2f}, "
            f"#queue-req: 0")


def metrics(gen: int, ver: int, gauge: float) -> str:
    return (f"# TYPE sglang:generation_tokens_total counter\n"
            f'sglang:generation_tokens_total{{model_name="t",is_streaming="false"}} {gen}.0\n'
            f"# TYPE sglang:spec_verify_calls_total counter\n"
            f'sglang:spec_verify_calls_total{{model_name="t"}} {ver}.0\n'
            f"# TYPE sglang:spec_accept_length gauge\n"
            f'sglang:spec_accept_length{{model_name="t"}} {gauge}\n')


def honest(config, plan) -> tuple[list[int], list[int]]:
    """``(output_ids, accept length of each verify round)`` of an honest server, token by token and apart
    from :mod:`ddtree_compat.e2e.expect` (the expectation the judge checks): the target's greedy token after
    ``t`` is ``t + 1``; the draft proposes ``t + 1`` after ``t`` where its agreement agrees and another token
    elsewhere, ``chain_depth`` deep from the round's root; verify keeps drafts while they equal the target's
    token and adds the target's own (the bonus). The prefill emits the first token."""
    vocab = SHAPE.vocab
    out, rounds = [(plan.prompt[-1] + 1) % vocab], []
    while config.speculative and len(out) < plan.max_new_tokens:
        drafts, t = [], out[-1]
        for _ in range(config.chain_depth):
            t = (t + 1) % vocab if config.draft.agree.agrees(t) else (t + 2) % vocab
            drafts.append(t)
        kept, t = 0, out[-1]
        while kept < len(drafts) and drafts[kept] == (t + 1) % vocab:
            t, kept = drafts[kept], kept + 1
        out += drafts[:kept] + [(t + 1) % vocab]
        rounds.append(kept + 1)
    while len(out) < plan.max_new_tokens:  # no speculation: one token per decode step
        out.append((out[-1] + 1) % vocab)
    return out[:plan.max_new_tokens], rounds


def observe(config, phase, rounds=None, outputs=None, extra_log: str = "", graph=None, errors=None) -> Observation:
    """What a server shows for ``phase`` when each request's verify rounds accept ``rounds[i]`` and it
    returns ``outputs[i]`` (defaults: an honest server's, :func:`honest`)."""
    graph = config.cuda_graph if graph is None else graph
    runs = [honest(config, plan) for plan in phase.requests]
    rounds = rounds or [r for _, r in runs]
    outputs = outputs or [o for o, _ in runs]
    dpr = config.drafts_per_round
    responses, lines, gen, ver = [], [], 0, 0
    for out, acc in zip(outputs, rounds):
        meta = {"completion_tokens": len(out)}
        if config.speculative:
            correct = sum(a - 1 for a in acc)
            meta.update(spec_verify_ct=len(acc), spec_num_correct_drafts=correct,
                        spec_accept_length=len(out) / len(acc), spec_accept_rate=correct / (len(acc) * dpr))
            lines += [line(a, (a - 1) / dpr, graph) for a in acc]
        else:
            lines += [f"[2026-12-01 10:00:00] Decode batch, #running-req: 1, #token: 9, token usage: 0.00, "
                      f"cuda graph: {graph}, gen throughput (token/s): 99.00, #queue-req: 0"] * len(out)
        responses.append({"output_ids": out, "meta_info": meta})
        gen, ver = gen + len(out), ver + len(acc)
    window = "\n".join(lines + ([extra_log] if extra_log else [])) + "\n"
    size = len(window.encode())
    last = rounds[-1][-1] if config.speculative else 0
    avg = sum(sum(a) for a in rounds) / sum(len(a) for a in rounds) if config.speculative else None
    return Observation(responses, errors or [""] * len(responses), 0.8, window=window, history=window,
                       server_info={"internal_states": [{"avg_spec_accept_length": avg}]},
                       metrics_before=metrics(0, 0, 0.0), metrics_after=metrics(gen, ver, float(last)),
                       offsets=(0, size, 0))


def cell(cid, phase=0):
    c = CONFIGS[cid]
    p = c.phases[phase]
    return c, p, c.expectation(p, SHAPE)


@pytest.mark.parametrize("cid", CONFIGS)
def test_an_honest_server_passes(cid):
    c, p, e = cell(cid, 1)
    j = judge(c, p, e, observe(c, p))
    assert j.verdict.outcome == "pass", j.verdict.message
    if c.speculative:
        assert j.measured["meta_accept"] == pytest.approx(float(e.accept_length))
        assert j.measured["log_accept"] == e.uniform


def test_zero_acceptance_is_the_field_symptom():
    c, p, e = cell("eagle-k1-s8-d9-always-eager")
    broken = [[1] * (len(r.output_ids) - 1) for r in e.requests]  # every round accepted nothing
    j = judge(c, p, e, observe(c, p, rounds=broken))
    assert j.verdict.outcome == "zero-accept"
    assert j.verdict.message.startswith("accept len 1.00") and "9.00" in j.verdict.message


def test_a_cuda_fault_in_the_log_wins_and_carries_the_excerpt():
    c, p, e = cell("eagle-k4-s3-d9-mod2-eager")
    broken = [[1] * (len(r.output_ids) - 1) for r in e.requests]
    fault = "RuntimeError: CUDA error: an illegal instruction was encountered"
    j = judge(c, p, e, observe(c, p, rounds=broken, extra_log=fault))
    assert (j.verdict.outcome, j.verdict.fault_class) == ("fault", "illegal-instruction")
    assert fault in j.log_excerpt and "accept len 1.00" in j.verdict.message


def test_lossy_output_is_wrong():
    c, p, e = cell("standalone-k1-s3-d4-always-eager")
    outs = [r.output_ids[:] for r in e.requests]
    outs[0][5] += 1
    j = judge(c, p, e, observe(c, p, outputs=outs), baseline={r.prompt: o.output_ids for r, o in zip(p.requests, e.requests)})
    assert j.verdict.outcome == "wrong" and "not lossless" in j.verdict.message


def test_no_tokens_and_timeouts():
    c, p, e = cell("target")
    empty = judge(c, p, e, observe(c, p, outputs=[[] for _ in e.requests]))
    assert empty.verdict.outcome == "wrong" and "returned 0 tokens" in empty.verdict.message
    obs = observe(c, p)
    obs.responses[0] = None
    obs.errors[0] = "timeout: no response in 120s"
    hung = judge(c, p, e, obs)
    assert (hung.verdict.outcome, hung.verdict.fault_class) == ("fault", "hang")


def test_wrong_accept_length_is_wrong():
    c, p, e = cell("eagle-k2-s6-d13-mod4-graph")
    off = [[a - 1 if i == 0 else a for i, a in enumerate(r.round_accepts)] + [2] for r in e.requests]
    j = judge(c, p, e, observe(c, p, rounds=off))
    assert j.verdict.outcome == "wrong" and "verify rounds" in j.verdict.message


def test_graphs_must_be_used_when_on():
    c, p, e = cell("eagle-k1-s12-d13-always-graph")
    j = judge(c, p, e, observe(c, p, graph=False))
    assert j.verdict.outcome == "wrong" and "CUDA graphs on" in j.verdict.message


def test_negative_control_passes_and_proves_the_check_fires():
    c, p, e = cell("eagle-k1-s8-d9-never-eager")
    twin = c.agreeing_twin().expectation(p, SHAPE)
    j = judge_negative_control(c, p, observe(c, p), e, twin, None)
    assert j.verdict.outcome == "pass" and j.cross.outcome == "zero-accept"
    assert j.verdict.message.startswith("negative control")


def test_negative_control_fails_when_drafts_are_accepted():
    c, p, e = cell("eagle-k1-s8-d9-never-eager")
    twin = c.agreeing_twin().expectation(p, SHAPE)
    accepted = [[2] * ((len(r.output_ids) - 1) // 2) for r in e.requests]
    j = judge_negative_control(c, p, observe(c, p, rounds=accepted), e, twin, None)
    assert j.verdict.outcome == "wrong"


def test_capture_round_trip(tmp_path):
    c, p, e = cell("eagle-k1-s8-d9-never-eager")
    twin = c.agreeing_twin().expectation(p, SHAPE)
    obs = observe(c, p)
    j = judge_negative_control(c, p, obs, e, twin, None)
    folder = save_capture(tmp_path / "server" / "bs1", c, p, e, obs, j, None, twin)
    (folder.parent / "server.log").write_text(obs.history)
    config, phase, expect, obs2, baseline, twin2, meta = load_capture(folder)
    assert config == c and phase == p and obs2.responses == obs.responses and twin2 is not None
    again = rejudge(folder)
    assert (again.verdict.outcome, again.cross.outcome) == ("pass", "zero-accept") == (meta["verdict"]["outcome"],
                                                                                       meta["verdict"]["cross"])
    assert again.measured == j.measured
