"""A stand-in for ``python -m sglang.launch_server`` that serves the tiny checkpoints on the CPU, so the
e2e tier's orchestration (probe, launch, readiness, phases, judging, recording, teardown) runs in CI.

It reads the target and the draft with :mod:`ddtree_compat.e2e.reference` and decodes with them: the
prefill's token and each verify round's target tokens from the target's forward, the drafts from the draft's
weights (EAGLE / STANDALONE: its top-1 after each token; DFLASH / DDTREE: the DFlash draft's block on the
request's real context), kept while they equal the target's token. Nothing comes from
:mod:`ddtree_compat.e2e.expect`, the expectation the judge checks. It reports the rounds the way SGLang
does: ``output_ids`` and ``meta_info``, one ``Decode batch`` log line per round, ``/metrics`` counters and
gauge, ``/server_info``. ``FAKE_SGLANG_MODES="draft=mode,..."`` makes the
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

    from ddtree_compat.e2e.reference import CausalLM, EagleDraft

    import torch

    target = CausalLM(args.model_path, torch.float32)
    vocab = target.embed.shape[0]
    propose, dpr = None, 0  # propose(context) -> the round's drafted chain (the root is context[-1])
    if args.speculative_algorithm in ("EAGLE", "STANDALONE"):  # the draft's top-1 after each token, from its weights
        tokens = list(range(vocab))
        if args.speculative_algorithm == "EAGLE":
            hidden = torch.zeros(vocab, target.embed.shape[1])  # EAGLE's fc ignores the target features
            logits = EagleDraft(args.speculative_draft_model_path, target).logits(tokens, hidden)
        else:
            logits = CausalLM(args.speculative_draft_model_path, torch.float32).logits(tokens)
        after = logits.argmax(-1).tolist()
        depth = min(args.speculative_num_steps, args.speculative_num_draft_tokens - 1)
        dpr = args.speculative_num_draft_tokens - 1

        def propose(context: list[int]) -> list[int]:
            chain = [context[-1]]
            for _ in range(depth):
                chain.append(after[chain[-1]])
            return chain[1:]

    if args.speculative_algorithm in ("DFLASH", "DDTREE"):  # the DFlash draft's block on the real context
        from ddtree_compat.e2e.reference import DFlashDraft

        dflash = DFlashDraft(args.speculative_draft_model_path, target)
        block = args.speculative_ddtree_block_size or args.speculative_num_draft_tokens
        depth = block - 1 if args.speculative_algorithm == "DFLASH" else min(args.speculative_ddtree_budget, block - 1)
        dpr = block - 1

        def propose(context: list[int]) -> list[int]:
            return dflash.block_logits(context[:-1], context[-1], block)[1:1 + depth].argmax(-1).tolist()

    def greedy_after(context: list[int], drafts: list[int]) -> list[int]:
        """The target's greedy token after ``context + drafts[:j]`` for each ``j``: one forward, as a verify."""
        return target.logits(context + drafts)[len(context) - 1:].argmax(-1).tolist()

    def generate(prompt: list[int], n: int) -> tuple[list[int], list[int]]:
        """``(output_ids, accept length per verify round)``: the prefill's token, then verify rounds (drafts
        kept while they equal the target's token, plus the target's own), or plain greedy decoding."""
        out, rounds = [greedy_after(prompt, [])[0]], []
        while len(out) < n:
            if propose is None:
                out.append(greedy_after(prompt + out, [])[0])
                continue
            drafts = propose(prompt + out)
            want = greedy_after(prompt + out, drafts)
            kept = 0
            while mode not in ("zero-accept", "fault") and kept < len(drafts) and drafts[kept] == want[kept]:
                kept += 1
            out += drafts[:kept] + [want[kept]]
            rounds.append(kept + 1)
        return out[:n], rounds

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
            prompt = list(body["input_ids"])
            output_ids, rounds = generate(prompt, body["sampling_params"]["max_new_tokens"])
            if mode == "fault":
                log("Traceback (most recent call last):")
                print("RuntimeError: CUDA error: an illegal instruction was encountered", flush=True)
            meta = {"completion_tokens": len(output_ids), "prompt_tokens": len(prompt)}
            for a in rounds:
                time.sleep(0.002)
                with lock:
                    stats["accept_tokens"] += a
                    stats["forward"] += 1
                    stats["gauge"] = float(a)
                log(f"Decode batch, #running-req: 1, #token: {len(prompt)}, token usage: 0.00, accept len: {a:.2f}, "
                    f"accept rate: {(a - 1) / dpr:.2f}, cuda graph: {graph}, gen throughput (token/s): 1000.00, "
                    f"#queue-req: 0")
            if not rounds:
                log(f"Decode batch, #running-req: 1, #token: 4, token usage: 0.00, cuda graph: {graph}, "
                    f"gen throughput (token/s): 1000.00, #queue-req: 0")
            if propose is not None:
                correct = sum(a - 1 for a in rounds)
                meta.update(spec_verify_ct=len(rounds), spec_num_correct_drafts=correct,
                            spec_accept_length=len(output_ids) / len(rounds),
                            spec_accept_rate=correct / (len(rounds) * dpr))
            with lock:
                stats["gen"] += len(output_ids)
                stats["verify"] += len(rounds)
            self._send(200, json.dumps({"output_ids": output_ids, "meta_info": meta}).encode())

        def log_message(self, fmt, *a):
            pass

    log("The server is fired up and ready to roll!")
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
