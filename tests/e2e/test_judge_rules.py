"""The e2e judge's named rules, one by one (``ddtree_compat.e2e.judge``): each finds nothing on an honest server's
phase and finds what it exists for on a phase broken in exactly that way. The whole judge, end to end:
``test_runner.py``; against real captures: ``test_fixtures.py``."""

from dataclasses import replace

from ddtree_compat.e2e import judge as j
from ddtree_compat.e2e import logparse
from tests.e2e.test_runner import cell, line, metrics, observe

SPEC = "eagle-k1-s8-d9-always-eager"  # a speculative server whose drafts always agree


def _honest(cid=SPEC, phase=1):
    c, p, e = cell(cid, phase)
    return c, p, e, observe(c, p)


def _accept_lines(obs):
    return [d for d in logparse.decode_lines(obs.window) if d.accept_len is not None]


def test_child_failed():
    *_, obs = _honest()
    assert j.child_failed(obs) == j.Found()
    fault = {"message": "scheduler raised at x.py:1 in verify: RuntimeError: CUDA error", "fault_class": "illegal-instruction",
             "excerpt": "Traceback ...", "seen_s": 12.0}
    found = j.child_failed(replace(obs, server_fault=fault))
    assert found.fault_class == "illegal-instruction" and found.excerpt == "Traceback ..."
    assert found.problems == [f"{fault['message']} (seen during the phase, 12s after the server's start; server stopped)"]


def test_fault_lines():
    *_, obs = _honest()
    assert j.fault_lines(obs) == j.Found()
    bad = replace(obs, window=obs.window + "[x] RuntimeError: CUDA error: an illegal memory access was encountered\n")
    found = j.fault_lines(bad)
    assert found.fault_class == "illegal-memory-access" and "illegal memory access" in found.excerpt
    assert found.problems[0].startswith("1 fault line(s) in the server log, first: ")


def test_server_exited():
    *_, obs = _honest()
    assert j.server_exited(obs) == j.Found()
    found = j.server_exited(replace(obs, returncode=-9))
    assert (found.problems, found.fault_class) == (["server exited with code -9 during the phase"], "other")
    assert found.excerpt


def test_failed_requests():
    *_, obs = _honest()
    assert j.failed_requests(obs) == j.Found()
    errors = ["", "timeout: no response in 120s"] + [""] * (len(obs.errors) - 2)
    found = j.failed_requests(replace(obs, errors=errors))
    assert found.fault_class == "hang" and found.problems[0].startswith(f"1/{len(errors)} request(s) failed, first #1")
    assert j.failed_requests(replace(obs, errors=["HTTP 500"] + obs.errors[1:])).fault_class == "other"


def test_tokens():
    c, p, e, obs = _honest()
    found = j.tokens(p, e, obs, None)
    assert found.problems == [] and found.measured["tokens"] == sum(len(r["output_ids"]) for r in obs.responses)
    wrong = [dict(r) for r in obs.responses]
    wrong[0] = {**wrong[0], "output_ids": [9] + list(wrong[0]["output_ids"][1:])}
    assert "first difference from the target's greedy chain at 0" in j.tokens(p, e, replace(obs, responses=wrong),
                                                                              None).problems[0]
    baseline = {plan.prompt: [0] * 200 for plan in p.requests}  # a target-only run that disagrees
    assert any("not lossless" in x for x in j.tokens(p, e, obs, baseline).problems)
    empty = [{**obs.responses[0], "output_ids": []}, *obs.responses[1:]]
    assert j.tokens(p, e, replace(obs, responses=empty), None).problems[0] == "request #0 returned 0 tokens"


def test_throughput():
    *_, obs = _honest()
    lines = logparse.decode_lines(obs.window)
    assert j.throughput(obs, 10, lines).problems == []
    assert j.throughput(replace(obs, wall_s=0.0), 10, lines).problems == ["client throughput 0.0 tok/s (must be > 0)"]
    stalled = logparse.decode_lines(line(2.0, 0.5, False, running=1, tput=0.0) + "\n")
    assert "report gen throughput 0" in j.throughput(obs, 10, stalled).problems[0]


def test_cuda_graphs():
    c, _, _, obs = _honest()
    lines = logparse.decode_lines(obs.window)
    assert j.cuda_graphs(c, lines).problems == []
    assert "CUDA graphs on, but none" in j.cuda_graphs(replace(c, cuda_graph=True), lines).problems[0]
    graphed = logparse.decode_lines(line(2.0, 0.5, True) + "\n")
    assert "CUDA graphs off, but 1" in j.cuda_graphs(c, graphed).problems[0]
    assert j.cuda_graphs(c, []) == j.Found()


def test_meta_info_accept():
    _, _, e, obs = _honest()
    found = j.meta_info_accept(e, obs)
    assert found.problems == [] and found.measured["_meta_ok"] and found.measured["meta_verify_ct"] == e.verify_ct
    off = [{**r, "meta_info": {**r["meta_info"], "spec_verify_ct": r["meta_info"]["spec_verify_ct"] + 1}}
           for r in obs.responses]
    problem = j.meta_info_accept(e, replace(obs, responses=off)).problems[0]
    assert problem.startswith("request #0: ") and "more request(s) differ" in problem
    bare = [{**r, "meta_info": {}} for r in obs.responses]
    assert "meta_info has no spec_verify_ct" in j.meta_info_accept(e, replace(obs, responses=bare)).problems[0]


def test_metrics_accept():
    _, _, e, obs = _honest()
    found = j.metrics_accept(e, obs)
    assert found.problems == [] and found.measured["metrics_accept"] == round(e.completion_tokens / e.verify_ct, 6)
    grew = replace(obs, metrics_after=metrics(e.completion_tokens + 1, e.verify_ct, e.uniform))
    assert j.metrics_accept(e, grew).problems[0].startswith("/metrics counters grew by")
    assert j.metrics_accept(e, replace(obs, metrics_before=None)).problems == [
        "/metrics not read before and after the phase"]
    gauge = replace(obs, metrics_after=metrics(e.completion_tokens, e.verify_ct, e.uniform + 1))
    assert any(p.startswith("gauge sglang:spec_accept_length") for p in j.metrics_accept(e, gauge).problems)


def test_decode_line_accept():
    c, _, e, obs = _honest()
    assert j.decode_line_accept(c, e, _accept_lines(obs)).problems == []
    assert j.decode_line_accept(c, e, []).problems == ["no Decode batch line with an accept len in the phase's log window"]
    low = logparse.decode_lines(line(e.uniform - 1, 0.0, False) + "\n")
    assert "expected" in j.decode_line_accept(c, e, low).problems[0]


def test_server_info_accept():
    _, _, _, obs = _honest()
    acc = _accept_lines(obs)
    found = j.server_info_accept(obs, acc)
    assert found.problems == [] and found.measured["server_info_accept"] is not None
    off = replace(obs, server_info={"internal_states": [{"avg_spec_accept_length": 1.5}]})
    assert "matches no weighted mean" in j.server_info_accept(off, acc).problems[0]
    assert j.server_info_accept(replace(obs, server_info=None), acc).problems == [
        "/server_info has no internal_states[0].avg_spec_accept_length"]


def test_zero_accept():
    c, p, e, obs = _honest()
    assert j.zero_accept(e, j.meta_info_accept(e, obs), _accept_lines(obs)) == j.Found()
    rounds = [[1] * r["meta_info"]["spec_verify_ct"] for r in obs.responses]  # every round accepts nothing
    outputs = [r["output_ids"] for r in obs.responses]
    zero = observe(c, p, rounds=rounds, outputs=outputs)
    found = j.zero_accept(e, j.meta_info_accept(e, zero), _accept_lines(zero))
    assert found.zero_accept and "the field symptom" in found.problems[0]
    cn, pn, en = cell("eagle-k1-s8-d9-never-eager", 1)  # drafts never agree: no acceptance is expected
    obs_n = observe(cn, pn)
    assert j.zero_accept(en, j.meta_info_accept(en, obs_n), _accept_lines(obs_n)) == j.Found()


def test_the_field_symptom_leads_the_message_and_the_first_fault_class_wins():
    c, p, e, obs = _honest()
    rounds = [[1] * r["meta_info"]["spec_verify_ct"] for r in obs.responses]
    zero = observe(c, p, rounds=rounds, outputs=[r["output_ids"] for r in obs.responses])
    verdict = j.judge(c, p, e, zero).verdict
    assert verdict.outcome == "zero-accept" and verdict.message.startswith("accept len 1.00")
    both = replace(obs, returncode=1, window=obs.window + "[x] RuntimeError: CUDA error: an illegal instruction was "
                                                          "encountered\n")
    judged = j.judge(c, p, e, both)
    assert (judged.verdict.outcome, judged.verdict.fault_class) == ("fault", "illegal-instruction")


def test_out_of_memory_beside_the_sessions_other_servers_is_the_suites_error_alone_a_fault():
    """Seen on the H200 (2026-12-04): four servers of the scale profile at once, one ran out of memory at 512 requests
    while another held 64 GiB; the same configuration alone served them."""
    from ddtree_compat.e2e.judge import shared_gpu
    from ddtree_compat.outcomes import Verdict

    oom = Verdict("fault", "scheduler raised ...: torch.OutOfMemoryError: CUDA out of memory.", fault_class="out-of-memory")
    shared = shared_gpu(oom, 2)
    assert shared.outcome == "error" and "DDTREE_E2E_PARALLEL=1" in shared.message and "OutOfMemoryError" in shared.message
    assert "DDTREE_E2E_GPU_SESSIONS" in shared.message
    assert shared_gpu(oom, 1) is oom
    other = Verdict("fault", "illegal instruction", fault_class="illegal-instruction")
    assert shared_gpu(other, 8) is other
