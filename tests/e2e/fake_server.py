"""A stand-in for ``python -m sglang.launch_server`` (for the harness tests): serves ``/ready`` and
``/health`` on ``--port``, spawns worker processes like SGLang does, and misbehaves on request.

Modes: ``ready`` (ready after 0.3 s, with a worker and a grandchild), ``escape`` (as ready, plus a worker
that leaves the process group with ``setsid``), ``crash`` (prints a CUDA fault and exits 3), ``never``
(answers 503 forever), ``health-only`` (no ``/ready`` route: 404; ``/health`` 200).
"""

import argparse
import http.server
import os
import subprocess
import sys
import time

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", default="ready")
    ap.add_argument("--pidfile", default="")
    args = ap.parse_args()
    print(f"fake server starting in mode {args.mode}", flush=True)
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

        def log_message(self, fmt, *a):
            print("http: " + fmt % a, flush=True)

    http.server.HTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
