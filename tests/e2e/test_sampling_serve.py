"""The ``sampling`` e2e profile on stand-in servers (``fake_sglang.py`` samples as it is asked, with the target-only
tree rule): the target's law holds with speculation on and off, the planted skew reads ``wrong``, and top-p 0.5 is
judged as greedy."""

import json
from pathlib import Path

from .test_session import TEST, use_stand_in_servers

SELECT = "target-t1 or eagle-k1-s8-d9-always-eager-t1 or eagle-k1-s8-d9-never"


def test_sampling_profile_on_stand_in_servers(pytester, monkeypatch):
    use_stand_in_servers(monkeypatch, "120", DDTREE_E2E_PROFILE="sampling", FAKE_SGLANG_FLASHINFER="1")
    pytester.makepyfile(test_serve=TEST)
    results = pytester.path / "e2e.jsonl"
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-static=off", "-m", "e2e", "-k", SELECT,
                                        "--ddtree-results", str(results), "--ddtree-e2e-dir", str(pytester.path / "e2e"))
    every = {r["case_id"].replace("-attn-default", ""): r
             for r in map(json.loads, results.read_text().splitlines()) if r["kind"] == "result"}
    law = ("target-t1-c8", "eagle-k1-s8-d9-always-eager-t1-c8", "eagle-k1-s8-d9-always-eager-t1-k71-c8")
    for cid in law:
        r = every[cid]
        assert r["outcome"] == "pass", r["message"]
        assert "law:" in r["message"] and "alpha 1e-06" in r["message"]
    assert "accepted drafts per round" in every["eagle-k1-s8-d9-always-eager-t1-c8"]["message"]
    skew = every["eagle-k1-s8-d9-always-eager-t1-skew-accept-all-c8"]
    assert skew["outcome"] == "wrong" and skew["message"].startswith("planted skew")
    assert "not the target's law at t1" in skew["message"]
    for cid in ("eagle-k1-s8-d9-always-eager-t1-p0.5-bs1", "eagle-k1-s8-d9-always-eager-t1-p0.5-c4",
                "eagle-k1-s8-d9-never-eager-t1-p0.5-c4"):
        assert every[cid]["outcome"] == "pass", every[cid]["message"]
    assert "expected 9.00" in every["eagle-k1-s8-d9-always-eager-t1-p0.5-bs1"]["message"]
    marks = [json.loads(line) for line in (pytester.path / "e2e" / "timeline.jsonl").read_text().splitlines()]
    warmed = [m for m in marks if m["event"] == "warm-up"]
    served = {m["server"] for m in marks if m["event"] == "phase"}
    assert {m["server"] for m in warmed} == served and not any("error" in m for m in warmed)  # every server sampled
    # the capture judges again to the same verdict
    from ddtree_compat.e2e.runner import rejudge

    cap = Path(skew["case_path"])
    assert rejudge(cap).verdict.outcome == "wrong"


def test_a_sampled_server_answers_one_warm_up_request_at_its_sampling_before_its_phases(monkeypatch):
    """SGLang's own warm-up is greedy: a kernel only the sampled path calls is built (JIT) at its first use, which
    must not fall inside a judged phase's request deadline (DFLASH at top-p 0.5 on fa3, H200, 2026-12-05)."""
    from types import SimpleNamespace

    from ddtree_compat.e2e import runner
    from ddtree_compat.e2e.configs import plan

    sent = []
    monkeypatch.setattr(runner, "post_generate", lambda url, body, timeout: (sent.append((url, body, timeout)),
                                                                            (None, "timeout: no response in 7s"))[1])
    server = SimpleNamespace(base_url="http://127.0.0.1:9")
    configs = plan("sampling", attention="triton")
    greedy = next(c for c in plan("default", attention="triton") if c.sampling is None)
    assert runner.warm_up(server, greedy, 7.0) is None and sent == []
    for config in (c for c in configs if c.sampling is not None):
        sent.clear()
        seconds, error = runner.warm_up(server, config, 7.0)
        assert seconds >= 0 and error == "timeout: no response in 7s"
        [(url, body, timeout)] = sent
        assert url == server.base_url and timeout == 7.0
        assert body == {"input_ids": list(config.phases[0].requests[0].prompt),
                        "sampling_params": {**config.sampling.params(), "max_new_tokens": runner.WARM_UP_TOKENS,
                                            "ignore_eos": True}}
