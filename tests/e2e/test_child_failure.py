"""Reading a failed child from a server log (``logparse.child_failure``: a traceback's last frame and exception
line, or SGLang's SIGQUIT line), on log text laid out as SGLang's processes write it and on the device captures
(CPU). The harness that polls with it: ``test_server.py``."""

import json
from pathlib import Path

import pytest

from ddtree_compat.e2e import logparse
from ddtree_compat.e2e.logparse import child_failure, raised_traceback, sigquit_line

CAPTURES = Path(__file__).with_name("fixtures") / "captures"

# The main process (tokenizer manager, HTTP), the scheduler (TP0 prefix) and the detokenizer write one file;
# the scheduler raises at its first DDTree verify, the main process logs a request in the middle of the
# traceback, then SGLang's SIGQUIT line. Frames and lines are in the layout of Python 3.12 and SGLang 0.5.
SAMPLE = """\
[2026-12-02 14:02:58] server_args=ServerArgs(model_path='/tmp/e2e/checkpoints/target', port=31337, watchdog_timeout=300, custom_sigquit_handler=None, speculative_algorithm='DDTREE')
[2026-12-02 14:03:02 TP0] Init torch distributed begin.
[2026-12-02 14:03:04 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=131.02 GB, mem usage=0.01 GB.
[2026-12-02 14:03:06 TP0] max_total_num_tokens=16384, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=8, context_len=512
[2026-12-02 14:03:08] INFO:     Started server process [40121]
[2026-12-02 14:03:08] INFO:     Waiting for application startup.
[2026-12-02 14:03:08] INFO:     Application startup complete.
[2026-12-02 14:03:08] INFO:     Uvicorn running on http://127.0.0.1:31337 (Press CTRL+C to quit)
[2026-12-02 14:03:09] INFO:     127.0.0.1:51200 - "GET /ready HTTP/1.1" 200 OK
[2026-12-02 14:03:09] The server is fired up and ready to roll!
[2026-12-02 14:03:11 TP0] Prefill batch, #new-seq: 1, #new-token: 5, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0
[2026-12-02 14:03:11 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2874, in run_scheduler_process
    scheduler.event_loop_normal()
  File "/opt/torch/.venv/lib/python3.12/site-packages/torch/utils/_contextlib.py", line 116, in decorate_context
    return func(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^
  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 1016, in event_loop_normal
    result = self.run_batch(batch)
             ^^^^^^^^^^^^^^^^^^^^^
[2026-12-02 14:03:11] INFO:     127.0.0.1:51214 - "GET /metrics HTTP/1.1" 200 OK
  File "/opt/sglang/python/sglang/srt/speculative/ddtree_worker.py", line 288, in forward_batch_generation
    accepted = self.verify(batch, tree)
               ^^^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/sglang/python/sglang/srt/speculative/ddtree_worker.py", line 412, in verify
    torch.cuda.synchronize()
RuntimeError: CUDA error: an illegal instruction was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

[2026-12-02 14:03:11] Received sigquit from a child process. It usually means the child failed.
[2026-12-02 14:03:11] Sleeping 5 seconds before crash diagnostics to let GPU activity settle.
"""
WORKER = "/opt/sglang/python/sglang/srt/speculative/ddtree_worker.py"
EXCEPTION = "RuntimeError: CUDA error: an illegal instruction was encountered"


def test_the_last_frame_and_the_exception_line_of_a_scheduler_traceback():
    tb = raised_traceback(SAMPLE)
    assert (tb.process, tb.file, tb.line, tb.function, tb.exception) == ("scheduler", WORKER, 412, "verify", EXCEPTION)
    assert SAMPLE.splitlines()[tb.line_no].endswith("Scheduler hit an exception: Traceback (most recent call last):")
    failure = child_failure(SAMPLE)
    assert failure.message == f"scheduler raised at {WORKER}:412 in verify: {EXCEPTION}"
    assert failure.fault_class == "illegal-instruction" and failure.line_no == tb.line_no


def test_an_illegal_memory_access_is_classed_as_the_kernel_tiers_class_it():
    text = SAMPLE.replace(EXCEPTION, "torch.AcceleratorError: CUDA error: an illegal memory access was encountered")
    failure = child_failure(text)
    assert failure.fault_class == "illegal-memory-access"
    assert failure.message.endswith("in verify: torch.AcceleratorError: CUDA error: an illegal memory access was "
                                    "encountered")


def test_the_sigquit_line_alone_is_a_failed_child():
    """SGLang's three wordings; the class comes from the log's fault lines (here the watchdog: ``hang``)."""
    for line in ("Received sigquit from a child process. It usually means the child failed.",
                 "SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
                 "Subprocess scheduler_0 (pid=1007) crashed with exit code -11. Triggering SIGQUIT for cleanup..."):
        text = ("[2026-12-02 14:08:11 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)\n"
                f"[2026-12-02 14:08:16] {line}\n")
        assert raised_traceback(text) is None
        assert sigquit_line(text).line_no == 1
        failure = child_failure(text)
        assert failure.message == f"SGLang says a child process failed: [2026-12-02 14:08:16] {line}"
        assert (failure.fault_class, failure.line_no) == ("hang", 1)
    assert child_failure("[2026-12-02 14:08:16] Received sigquit from a child process.\n").fault_class == "other"


def test_what_is_not_a_failed_child():
    """A header inside other text (a warning that quotes a traceback: the older DDTree trees log one at start and
    serve), a header with no frame line after it, and ``custom_sigquit_handler`` in the server's arguments."""
    quoted = ("[2026-12-01 09:20:24] Can not initialize OpenAIServingResponses, error: Traceback (most recent call "
              "last):\n  File \"/opt/sglang/python/sglang/srt/entrypoints/http_server.py\", line 372, in lifespan\n"
              "    from sglang.srt.entrypoints.openai.serving_responses import (\n"
              "ModuleNotFoundError: No module named 'openai_harmony'\n\n"
              "[2026-12-01 09:20:24] INFO:     Application startup complete.\n")
    no_frame = ("[2026-12-02 14:03:11] Traceback (most recent call last):\n"
                "[2026-12-02 14:03:11] INFO:     127.0.0.1:51214 - \"GET /metrics HTTP/1.1\" 200 OK\n"
                "RuntimeError: not a traceback: no frame line after the header\n")
    before = SAMPLE.split("[2026-12-02 14:03:11 TP0] Scheduler hit")[0]
    for text in (quoted, no_frame, before, "[2026-12-02 14:03:11] warning: see the Traceback above\n"):
        assert raised_traceback(text) is None and child_failure(text) is None, text
    assert raised_traceback(quoted.replace("error: Traceback", "error:\nTraceback")) is not None  # at a line start


def test_a_traceback_cut_before_its_exception_line():
    cut = SAMPLE.split("RuntimeError:")[0]
    tb = raised_traceback(cut)
    assert (tb.file, tb.line, tb.exception) == (WORKER, 412, "")
    assert tb.summary == f"scheduler raised at {WORKER}:412 in verify (its exception line not written yet)"
    assert child_failure(cut).message == tb.summary


def test_a_chained_traceback_names_the_exception_that_was_raised():
    text = ("[2026-12-02 14:03:11 DetokenizerManager] DetokenizerManager hit an exception: Traceback (most recent "
            "call last):\n"
            '  File "/opt/sglang/python/sglang/srt/managers/detokenizer_manager.py", line 140, in event_loop\n'
            "    recv_obj = self.recv_from_scheduler.recv_pyobj()\n"
            "KeyError: 7\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\n"
            '  File "/opt/sglang/python/sglang/srt/managers/detokenizer_manager.py", line 151, in event_loop\n'
            "    self.handle(recv_obj)\n"
            '  File "/opt/sglang/python/sglang/srt/managers/detokenizer_manager.py", line 98, in handle\n'
            "    raise ValueError(recv_obj)\n"
            "ValueError: 7\n")
    tb = raised_traceback(text)
    assert (tb.process, tb.line, tb.function, tb.exception) == ("detokenizer manager", 98, "handle", "ValueError: 7")
    assert tb.line_no == 0


def test_the_device_captures_that_raised():
    """Logs of the lent H200: a DDTree tree's scheduler raising at verify, SGLang 0.5.23 missing ``flash_mla``."""
    ddtree = (CAPTURES / "h200-ddtree-v2/servers/ddtree-b8-spine-always-eager/server.log").read_text()
    failure = child_failure(ddtree)
    tb = failure.traceback
    assert (Path(tb.file).name, tb.line, tb.function) == ("ddtree_worker_v2.py", 872, "forward_batch_generation")
    assert tb.exception == ("RuntimeError: The size of tensor a (15) must match the size of tensor b (8) at "
                            "non-singleton dimension 1")
    mla = (CAPTURES / "h200-run1-no-flash-mla/servers/eagle-k1-s12-d13-always-graph/server.log").read_text()
    failure = child_failure(mla)
    assert failure.message.endswith("flash_mla_interface.py:15 in <module>: ModuleNotFoundError: No module named "
                                    "'flash_mla'")
    assert failure.message.startswith("scheduler raised at ") and failure.fault_class == "other"


@pytest.mark.parametrize("capture", sorted(CAPTURES.rglob("capture.json")),
                         ids=lambda p: str(p.parent.relative_to(CAPTURES)))
def test_no_failed_child_in_a_served_phase(capture):
    """No false alarm while serving: up to the end of each captured phase (none of them a fault) the log shows no
    failed child; SGLang's SIGQUIT lines come after the harness stops the server."""
    meta = json.loads(capture.read_text())
    end = meta["observation"]["offsets"][1]
    log = (capture.parent.parent / "server.log").read_bytes()
    assert meta["verdict"]["outcome"] != "fault"
    assert child_failure(log[:end].decode("utf-8", "replace")) is None
    assert sigquit_line(log.decode("utf-8", "replace")) is not None  # the lines are there, after the stop


def test_a_warning_quoting_a_traceback_is_no_failed_child_in_a_device_log():
    log = (CAPTURES / "h200-ddtree-older/servers/dflash-ddtree-n16-always-eager/server.log").read_text()
    served = log.split("SIGTERM received")[0]
    assert "error: Traceback (most recent call last):" in served and logparse.decode_lines(served)
    assert child_failure(served) is None
