"""Log, metrics and server-info parsing against real SGLang output (CI).

Two sources: ``fixtures/quoted.json`` (lines and values quoted in the project's notes from real runs) and
``fixtures/captures/`` (whole phases captured by the e2e tier on a GPU: server log, ``/generate``
responses, ``/metrics`` text, ``/server_info``, and the verdict given there). Adding a capture folder is
all it takes: every one found is parsed and judged again here, and must give the verdict it got live.
"""

import json
from pathlib import Path

import pytest

from ddtree_compat.e2e import logparse
from ddtree_compat.e2e.judge import ACCEPT_GAUGE, GEN_TOKENS, VERIFY_CALLS
from ddtree_compat.e2e.runner import load_capture, rejudge
from ddtree_compat.faults import classify

FIXTURES = Path(__file__).with_name("fixtures")
QUOTED = json.loads((FIXTURES / "quoted.json").read_text())
CAPTURES = sorted(p.parent for p in (FIXTURES / "captures").rglob("capture.json"))
SERVER_LOGS = sorted((FIXTURES / "captures").rglob("server.log"))
NONE_YET = "no device captures under tests/e2e/fixtures/captures yet (run the e2e tier on a GPU; docs/e2e.md)"


def _ids(items, key):
    return [f"{i}-{x[key][:30]}" for i, x in enumerate(items)]


@pytest.mark.parametrize("q", QUOTED["decode"], ids=_ids(QUOTED["decode"], "text"))
def test_quoted_decode_lines(q):
    d = logparse.parse_decode_line(q["text"])
    assert d is not None, q["source"]
    assert d.accept_len == q["accept_len"]


@pytest.mark.parametrize("q", QUOTED["server_info"], ids=_ids(QUOTED["server_info"], "source"))
def test_quoted_server_info(q):
    assert logparse.server_info_accept(q["json"]) == q["accept_len"]


@pytest.mark.parametrize("q", QUOTED["faults"], ids=_ids(QUOTED["faults"], "text"))
def test_quoted_fault_lines(q):
    line = f"[2026-11-30 00:00:00] {q['text']}"
    hits = logparse.fault_lines(line)
    assert hits, q
    assert logparse.classify_log(line, hits) == q["class"] == classify(q["text"])


def test_not_a_decode_line():
    assert logparse.parse_decode_line("Prefill batch, #new-seq: 1, #new-token: 4") is None


def test_quoted_names_are_the_ones_the_runner_reads():
    assert ACCEPT_GAUGE in QUOTED["metric_names"]["names"]
    import inspect

    from ddtree_compat.e2e import judge

    src = inspect.getsource(judge)
    assert all(f'"{k}"' in src for k in QUOTED["meta_info_keys"]["keys"])


@pytest.mark.skipif(not CAPTURES, reason=NONE_YET)
@pytest.mark.parametrize("folder", CAPTURES, ids=[str(p.relative_to(FIXTURES / "captures")) for p in CAPTURES])
def test_capture_is_judged_as_it_was_live(folder):
    config, phase, expect, obs, baseline, twin, meta = load_capture(folder)
    j = rejudge(folder)
    assert j.verdict.outcome == meta["verdict"]["outcome"], j.verdict.message
    assert j.verdict.fault_class == meta["verdict"]["fault_class"]
    assert (j.cross.outcome if j.cross else None) == meta["verdict"]["cross"]
    for key in ("tokens", "decode_lines", "meta_accept", "metrics_accept", "log_accept", "server_info_accept",
                "gauge_accept"):
        assert j.measured.get(key) == meta["measured"].get(key), key


@pytest.mark.skipif(not CAPTURES, reason=NONE_YET)
@pytest.mark.parametrize("folder", CAPTURES, ids=[str(p.relative_to(FIXTURES / "captures")) for p in CAPTURES])
def test_capture_parses_completely(folder):
    """Every Decode batch line yields its fields; metrics carry the counters the judge reads."""
    config, phase, expect, obs, *_ = load_capture(folder)
    for d in logparse.decode_lines(obs.history):
        assert d.running is not None and d.cuda_graph is not None and d.gen_throughput is not None, d.text
        if config.speculative:
            assert d.accept_len is not None and d.accept_rate is not None, d.text
    if obs.metrics_after:
        m = logparse.parse_metrics(obs.metrics_after)
        assert GEN_TOKENS in m
        if config.speculative:
            assert VERIFY_CALLS in m and ACCEPT_GAUGE in m
    if config.speculative and obs.server_info:
        assert logparse.server_info_accept(obs.server_info) is not None
    for r in obs.responses:
        if r is not None and config.speculative:
            assert {"spec_verify_ct", "spec_num_correct_drafts", "spec_accept_length"} <= set(r["meta_info"])


def _verdicts(log: Path) -> list[str]:
    return [json.loads(c.read_text())["verdict"]["outcome"] for c in log.parent.rglob("capture.json")]


READY = "The server is fired up and ready to roll!"  # SGLang's launch_server, once it serves
SERVED = [p for p in SERVER_LOGS if READY in p.read_text(errors="replace") and "fault" not in _verdicts(p)]
DIED_AT_START = [p for p in SERVER_LOGS if READY not in p.read_text(errors="replace")]


def _log_id(p: Path) -> str:
    return str(p.parent.relative_to(FIXTURES / "captures"))


@pytest.mark.skipif(not SERVED, reason=NONE_YET)
@pytest.mark.parametrize("log", SERVED, ids=[_log_id(p) for p in SERVED])
def test_server_log_of_a_server_without_a_fault_has_no_fault_line(log):
    """A server that served and whose phases were judged live without a fault (pass, or wrong: lossy tokens,
    accept figures) logged no fault line, start to end: the fault scan has no false positive."""
    assert logparse.fault_lines(log.read_text(errors="replace")) == []


@pytest.mark.skipif(not DIED_AT_START, reason=NONE_YET)
@pytest.mark.parametrize("log", DIED_AT_START, ids=[_log_id(p) for p in DIED_AT_START])
def test_server_that_died_at_start_logs_a_fault_line_naming_why(log):
    """A server that never became ready (no phase captured) logged a fault line, and the excerpt from it
    ends on the exception that killed it: what the e2e tier reports as that server's cells' fault."""
    text = log.read_text(errors="replace")
    hits = logparse.fault_lines(text)
    assert hits, log
    last = logparse.excerpt(text, hits[0].line_no, before=30, after=10).splitlines()[-1]
    assert last.split(":")[0].endswith(("Error", "Exception")), last
    assert not _verdicts(log)


GRAPH_STARTUP_FAILURE = FIXTURES / "captures/h200-run1-no-flash-mla/servers/eagle-k1-s12-d13-always-graph/server.log"


@pytest.mark.skipif(not GRAPH_STARTUP_FAILURE.exists(), reason=NONE_YET)
def test_excerpt_keeps_the_exception_that_ends_the_traceback():
    """The H200's first CUDA-graph EAGLE server died at start (SGLang 0.5.23 imports flash_mla while
    capturing the draft graphs); the excerpt must reach the line naming that cause, not stop mid-stack."""
    text = GRAPH_STARTUP_FAILURE.read_text()
    hits = logparse.fault_lines(text)
    assert hits and hits[0].pattern == "Scheduler hit an exception"
    cut = logparse.excerpt(text, hits[0].line_no, before=30, after=10)
    assert "ModuleNotFoundError: No module named 'flash_mla'" in cut
    assert cut.splitlines()[-1].startswith("ModuleNotFoundError")
    small = logparse.excerpt(text, hits[0].line_no, before=30, after=10, limit=600)
    assert "it/s]" not in cut  # CUDA-graph capture progress bars are left out
    assert len(small) <= 600 and small.endswith("No module named 'flash_mla'") and "(cut)" in small


DDTREE_V2 = FIXTURES / "captures/h200-ddtree-v2/servers"
OLDER = FIXTURES / "captures/h200-ddtree-older/servers"


@pytest.mark.skipif(not DDTREE_V2.exists(), reason=NONE_YET)
def test_ddtree_v2_below_the_block_width_dies_at_its_first_verify():
    """rancy-ddtree-v2 433c58ed on the H200, budget 8 with block size 16: the scheduler raised at the warm-up
    request's first verify (ddtree_worker_v2.py copies the accepted path as block_size - 1 = 15 tokens out
    of a verify of B + 1 = 9), so the server died before it was ready. The fault scan and the excerpt must
    name that exception."""
    text = (DDTREE_V2 / "ddtree-b8-spine-always-eager/server.log").read_text()
    hits = logparse.fault_lines(text)
    assert hits and hits[0].pattern == "Scheduler hit an exception"
    cut = logparse.excerpt(text, hits[0].line_no, before=30, after=10)
    assert "ddtree_worker_v2.py" in cut
    assert cut.splitlines()[-1].startswith(
        "RuntimeError: The size of tensor a (15) must match the size of tensor b (8)")
    assert "speculative_ddtree_budget=8" in text and "speculative_ddtree_block_size=16" in text


@pytest.mark.skipif(not DDTREE_V2.exists(), reason=NONE_YET)
def test_ddtree_v2_prune_with_four_clients_is_lossy():
    """The same tree with --is-ddtree-prune at budget 16 and four concurrent requests skipped tokens (the
    designed chain 128, 129, 130 came back as 128, 130, 131): the lossless check must report it."""
    j = rejudge(DDTREE_V2 / "ddtree-b16-tree-always-graph-prune/c4")
    assert j.verdict.outcome == "wrong"
    assert "not lossless" in j.verdict.message and "got [130, 131, 132, 133], want [129, 130, 131, 132]" in j.verdict.message


@pytest.mark.skipif(not OLDER.exists(), reason=NONE_YET)
def test_responses_api_traceback_at_start_is_benign():
    """dbguo-ddtree-dev 514ea1f3 logs the optional Responses API's missing openai_harmony as a traceback at
    start, then serves (accept 16.00 there): that line is the log's only fault-pattern line, and it is benign."""
    text = (OLDER / "dflash-ddtree-n16-always-eager/server.log").read_text()
    assert len(logparse.fault_lines(text, benign=())) == 1
    assert "Can not initialize OpenAIServingResponses" in logparse.fault_lines(text, benign=())[0].text
    assert logparse.fault_lines(text) == []
