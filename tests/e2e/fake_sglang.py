"""A stand-in for ``python -m sglang.launch_server`` that serves the tiny checkpoints on the CPU, so the
e2e tier's orchestration (probe, launch, readiness, phases, judging, recording, teardown) runs in CI.

It reads the target and the draft with :mod:`ddtree_compat.e2e.reference` (so the draft's agreement comes
from its weights, not from its name; DFLASH / DDTREE: the DFlash draft's block on a chain context), simulates verify rounds with :mod:`ddtree_compat.e2e.expect`, and
reports them the way SGLang does: ``output_ids`` and ``meta_info``, one ``Decode batch`` log line per
round, ``/metrics`` counters and gauge, ``/server_info``. ``FAKE_SGLANG_MODES="draft=mode,..."`` makes the
server of a draft checkpoint (folder name, e.g. ``eagle-always``) misbehave: ``zero-accept`` (no draft
ever accepted: the field symptom), ``fault`` (as zero-accept, after logging a CUDA illegal instruction),
``crash`` (exits before it is ready). Run with ``--ddtree-probe`` it prints the capabilities line the
suite's probe reads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FLAGS = ["--model-path", "--host", "--port", "--attention-backend", "--sampling-backend", "--disable-radix-cache",
         "--skip-tokenizer-init", "--dtype", "--mem-fraction-static", "--max-total-tokens", "--enable-metrics",
         "--decode-log-interval", "--max-running-requests", "--random-seed", "--nccl-port", "--disable-cuda-graph",
         "--cuda-graph-max-bs-decode", "--speculative-algorithm", "--speculative-draft-model-path",
         "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
         "--speculative-ddtree-budget", "--speculative-ddtree-block-size", "--is-ddtree-prune",
         "--speculative-ddtree-cpu-build", "--speculative-ddtree-cpu-follow"]


def main() -> None:
    if "--ddtree-probe" in sys.argv:
        print("DDTREE_PROBE " + json.dumps({"sglang": "fake", "flags": FLAGS, "error": None,
                                            "algorithms": ["EAGLE", "STANDALONE", "DFLASH", "DDTREE", "NONE"],
                                            "modules": {"flashinfer": os.environ.get("FAKE_SGLANG_FLASHINFER") == "1",
                                                        "flash_mla": True},
                                            "path": "", "eagle_graphs_import_flash_mla": True}))
        return
    ap = argparse.ArgumentParser()
    for f in ("--model-path", "--speculative-algorithm", "--speculative-draft-model-path"):
        ap.add_argument(f)
    for f in ("--port", "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
              "--speculative-ddtree-budget", "--speculative-ddtree-block-size"):
        ap.add_argument(f, type=int)
    ap.add_argument("--disable-cuda-graph", action="store_true")
    args, _ = ap.parse_known_args()
    modes = dict(m.split("=") for m in os.environ.get("FAKE_SGLANG_MODES", "").split(",") if m)
    draft = os.path.basename(os.path.normpath(args.speculative_draft_model_path or ""))
    mode = modes.get(draft, "honest")
    log = lambda msg: print(f"[2026-12-01 10:00:00] {msg}", flush=True)  # noqa: E731
    log(f"fake sglang: {' '.join(sys.argv[1:])}")
    if mode == "crash":
        log("Scheduler hit an exception: Traceback (most recent call last):")
        print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
        sys.exit(1)

    from ddtree_compat.e2e.expect import RequestPlan, expect_request
    from ddtree_compat.e2e.reference import CausalLM, EagleDraft

    import torch

    target = CausalLM(args.model_path, torch.float32)
    vocab = target.embed.shape[0]
    accepts, dpr = None, 0
    if args.speculative_algorithm in ("EAGLE", "STANDALONE"):
        tokens = list(range(vocab))
        if args.speculative_algorithm == "EAGLE":
            hidden = torch.zeros(vocab, target.embed.shape[1])  # EAGLE's fc ignores the target features
            logits = EagleDraft(args.speculative_draft_model_path, target).logits(tokens, hidden)
        else:
            logits = CausalLM(args.speculative_draft_model_path, torch.float32).logits(tokens)
        agree = [int(a) == (t + 1) % vocab for t, a in enumerate(logits.argmax(-1))]
        depth = min(args.speculative_num_steps, args.speculative_num_draft_tokens - 1)
        dpr = args.speculative_num_draft_tokens - 1

        def accepts(root: int) -> int:
            if mode in ("zero-accept", "fault"):
                return 0
            k = 0
            while k < depth and agree[(root + k) % vocab]:
                k += 1
            return k

    if args.speculative_algorithm in ("DFLASH", "DDTREE"):  # the positional DFlash draft on a chain context
        from ddtree_compat.e2e.reference import DFlashDraft

        dflash = DFlashDraft(args.speculative_draft_model_path, target)
        block = args.speculative_ddtree_block_size or args.speculative_num_draft_tokens
        depth = block - 1 if args.speculative_algorithm == "DFLASH" else min(args.speculative_ddtree_budget, block - 1)
        dpr = block - 1

        def accepts(root: int) -> int:
            if mode in ("zero-accept", "fault"):
                return 0
            drafts = dflash.block_logits([(root - 72 + i) % vocab for i in range(72)], root, block)[1:].argmax(-1)
            k = 0
            while k < depth and int(drafts[k]) == (root + k + 1) % vocab:
                k += 1
            return k

    lock = threading.Lock()
    stats = {"gen": 0, "verify": 0, "accept_tokens": 0, "forward": 0, "gauge": 0.0}
    graph = not args.disable_cuda_graph

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802
            if self.path in ("/ready", "/health"):
                self._send(200, b"")
            elif self.path == "/server_info":
                with lock:
                    avg = stats["accept_tokens"] / stats["forward"] if stats["forward"] else None
                self._send(200, json.dumps({"internal_states": [{"avg_spec_accept_length": avg}]}).encode())
            elif self.path == "/metrics":
                with lock:
                    text = (f"# TYPE sglang:generation_tokens counter\n"
                            f'sglang:generation_tokens_total{{model_name="fake"}} {stats["gen"]}.0\n'
                            f"# TYPE sglang:spec_verify_calls counter\n"
                            f'sglang:spec_verify_calls_total{{model_name="fake"}} {stats["verify"]}.0\n'
                            f"# TYPE sglang:spec_accept_length gauge\n"
                            f'sglang:spec_accept_length{{model_name="fake"}} {stats["gauge"]}\n')
                self._send(200, text.encode(), "text/plain; version=0.0.4")
            else:
                self._send(404, b"{}")

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            plan = RequestPlan(tuple(body["input_ids"]), body["sampling_params"]["max_new_tokens"])
            e = expect_request(plan, vocab, accepts, dpr)
            if mode == "fault":
                log("Traceback (most recent call last):")
                print("RuntimeError: CUDA error: an illegal instruction was encountered", flush=True)
            meta = {"completion_tokens": len(e.output_ids), "prompt_tokens": len(plan.prompt)}
            for a in e.round_accepts:
                time.sleep(0.002)
                with lock:
                    stats["accept_tokens"] += a
                    stats["forward"] += 1
                    stats["gauge"] = float(a)
                log(f"Decode batch, #running-req: 1, #token: {len(plan.prompt)}, token usage: 0.00, accept len: {a:.2f}, "
                    f"accept rate: {(a - 1) / dpr:.2f}, cuda graph: {graph}, gen throughput (token/s): 1000.00, "
                    f"#queue-req: 0")
            if not e.round_accepts:
                log(f"Decode batch, #running-req: 1, #token: 4, token usage: 0.00, cuda graph: {graph}, "
                    f"gen throughput (token/s): 1000.00, #queue-req: 0")
            if accepts is not None:
                meta.update(spec_verify_ct=e.verify_ct, spec_num_correct_drafts=e.correct_drafts,
                            spec_accept_length=float(e.accept_length), spec_accept_rate=float(e.accept_rate))
            with lock:
                stats["gen"] += len(e.output_ids)
                stats["verify"] += e.verify_ct
            self._send(200, json.dumps({"output_ids": e.output_ids, "meta_info": meta}).encode())

        def log_message(self, fmt, *a):
            pass

    log("The server is fired up and ready to roll!")
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
