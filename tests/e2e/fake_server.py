"""A stand-in for ``python -m sglang.launch_server`` (for the harness tests): serves ``/ready`` and
``/health`` on ``--port``, spawns worker processes like SGLang does, and misbehaves on request.

Modes: ``ready`` (ready after 0.3 s, with a worker and a grandchild), ``escape`` (as ready, plus a worker
that leaves the process group with ``setsid``), ``crash`` (prints a CUDA fault and exits 3), ``never``
(answers 503 forever), ``health-only`` (no ``/ready`` route: 404; ``/health`` 200), ``raise-before-ready``
(logs the scheduler's traceback and SGLang's SIGQUIT line, then hangs without exiting or serving, as SGLang
lingers over its crash diagnostics), ``port-taken`` (logs uvicorn's failed bind of its port, then hangs), ``raise-at-verify`` (ready; the first ``POST /generate`` logs the same and
hangs, without an answer and without exiting), ``raise-survived`` (ready; each ``POST /generate`` logs a
warning that quotes a traceback, not at a line's start, and answers 200).
"""

import argparse
import http.server
import os
import subprocess
import sys
import time

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]

SCHEDULER_RAISES = """\
[2026-12-02 14:03:11 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2874, in run_scheduler_process
    scheduler.event_loop_normal()
  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 1016, in event_loop_normal
    result = self.run_batch(batch)
             ^^^^^^^^^^^^^^^^^^^^^
  File "/opt/sglang/python/sglang/srt/speculative/ddtree_worker.py", line 288, in forward_batch_generation
    accepted = self.verify(batch, tree)
               ^^^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/sglang/python/sglang/srt/speculative/ddtree_worker.py", line 412, in verify
    torch.cuda.synchronize()
RuntimeError: CUDA error: an illegal instruction was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1

[2026-12-02 14:03:11] Received sigquit from a child process. It usually means the child failed.
[2026-12-02 14:03:11] Sleeping 5 seconds before crash diagnostics to let GPU activity settle."""
"""What SGLang's log shows when the scheduler raises at its first verify (the server exits only minutes later)."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", default="ready")
    ap.add_argument("--pidfile", default="")
    args = ap.parse_args()
    print(f"fake server starting in mode {args.mode}", flush=True)
    if args.mode == "raise-before-ready":
        print(SCHEDULER_RAISES, flush=True)
        time.sleep(300)
    if args.mode == "port-taken":  # uvicorn could not bind; SGLang then waits for a warmup that never answers
        print(f"[2026-12-02 07:13:08] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', "
              f"{args.port}): address already in use", flush=True)
        time.sleep(300)
    if args.mode == "crash":
        print("[2026-11-30 12:00:00] Scheduler hit an exception: Traceback (most recent call last):", flush=True)
        print("RuntimeError: CUDA error: an illegal instruction was encountered", flush=True)
        sys.exit(3)
    pids = [os.getpid()]
    if args.mode in ("ready", "escape", "health-only"):
        worker = subprocess.Popen([sys.executable, "-c",
                                   "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
                                   "'import time; time.sleep(300)']); time.sleep(300)"])
        pids.append(worker.pid)
    if args.mode == "escape":
        pids.append(subprocess.Popen(SLEEPER, start_new_session=True).pid)
    if args.pidfile:
        with open(args.pidfile, "w") as f:
            f.write(" ".join(map(str, pids)))
    t0 = time.time()
    mode = args.mode

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            up = time.time() - t0 > 0.3 and mode != "never"
            if self.path == "/ready" and mode == "health-only":
                code = 404
            elif self.path in ("/ready", "/health"):
                code = 200 if up else 503
            else:
                code = 404
            self.send_response(code)
            self.end_headers()

        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if mode == "raise-at-verify":
                print(SCHEDULER_RAISES, flush=True)
                time.sleep(300)  # the request hangs; the server does not exit
            if mode == "raise-survived":
                print("[2026-12-02 14:03:12] Can not initialize OpenAIServingResponses, error: Traceback (most recent "
                      "call last):\n  File \"/opt/sglang/python/sglang/srt/entrypoints/http_server.py\", line 372, in "
                      "lifespan\nModuleNotFoundError: No module named 'openai_harmony'", flush=True)
            body = b'{"output_ids": [1], "meta_info": {}}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *a):
            print("http: " + fmt % a, flush=True)

    http.server.HTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
