"""A stand-in for ``python -m sglang.launch_server`` that serves the tiny checkpoints on the CPU, so the
e2e tier's orchestration (probe, launch, readiness, phases, judging, recording, teardown) runs in CI.

It reads the target and the draft with :mod:`ddtree_compat.e2e.forward` and decodes with them
(:func:`decoder`): the prefill's token, then verify rounds: a draft tree from the draft's weights (EAGLE /
STANDALONE: top-k per node for ``--speculative-num-steps`` steps, the ``num_draft_tokens - 1`` best nodes;
top-k 1 is the chain; DFLASH: the DFlash block's argmax chain; DDTREE: the paper's best-first tree of
``--speculative-ddtree-budget`` nodes over the block, depth-major as SGLang PR #29907 relabels it), verified
by one target forward over the context and the tree with the ancestor-only mask
(:meth:`~ddtree_compat.e2e.forward.CausalLM.verify_logits`), then the greedy walk from the root. Rejected
nodes leave nothing behind (the context is the committed tokens). With the poison target a mask that lets a
node see more than its ancestors changes the tokens. Nothing comes from
:mod:`ddtree_compat.e2e.expect`, the expectation the judge checks. It reports the rounds the way SGLang
does: ``output_ids`` and ``meta_info``, one ``Decode batch`` log line per round, ``/metrics`` counters and
gauge, ``/server_info``. ``FAKE_SGLANG_MODES="draft=mode,..."`` makes the
server of a draft checkpoint (folder name, e.g. ``eagle-always``) misbehave: ``zero-accept`` (no draft
ever accepted: the field symptom), ``fault`` (as zero-accept, after logging a CUDA illegal instruction),
``crash`` (exits before it is ready). ``FAKE_SGLANG_DELAY_S`` makes each request take that much longer;
``FAKE_SGLANG_REQUESTS`` names a file each server appends ``port start end`` (epoch seconds) to per request it
served (when servers served at once); ``FAKE_SGLANG_PORT_TAKEN_ONCE`` names a marker file: the first server
started logs that its port was taken and hangs (the marker made). Run with ``--ddtree-probe`` it prints the capabilities line the suite's
probe reads.
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
         "--cuda-graph-max-bs-decode", "--cuda-graph-bs-decode", "--speculative-algorithm", "--speculative-draft-model-path",
         "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
         "--speculative-ddtree-budget", "--speculative-ddtree-block-size", "--is-ddtree-prune",
         "--speculative-ddtree-cpu-build", "--speculative-ddtree-cpu-follow", "--speculative-accept-threshold-single"]


ATTENTION = os.environ.get("FAKE_SGLANG_ATTENTION", "triton,flashinfer,fa3,torch_native")
"""``--attention-backend`` values the stand-in accepts (its probe reports them)."""


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    for f in ("--model-path", "--speculative-algorithm", "--speculative-draft-model-path", "--attention-backend"):
        ap.add_argument(f)
    for f in ("--port", "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
              "--speculative-ddtree-budget", "--speculative-ddtree-block-size"):
        ap.add_argument(f, type=int)
    ap.add_argument("--disable-cuda-graph", action="store_true")
    ap.add_argument("--speculative-accept-threshold-single", type=float, default=1.0)
    ap.add_argument("--random-seed", type=int, default=0)
    return ap.parse_known_args(argv)[0]


def target_law(logits, params: dict):
    """The target's probabilities for a request's ``sampling_params`` (temperature, then top-k, then top-p; equal
    probabilities kept or dropped together); ``None`` at temperature 0 (greedy)."""
    import torch

    temperature = float(params.get("temperature", 1.0))
    if temperature == 0:
        return None
    probs = torch.softmax(logits.double() / temperature, -1)
    top_k = int(params.get("top_k", -1))
    if 0 < top_k < probs.shape[-1]:
        probs = torch.where(probs >= probs.topk(top_k).values[..., -1:], probs, 0.0)  # ties at the edge kept
        probs = probs / probs.sum(-1, keepdim=True)
    top_p = float(params.get("top_p", 1.0))
    if top_p < 1.0:
        ordered = probs.sort(-1, descending=True).values
        before = ordered.cumsum(-1) - ordered
        edge = torch.where(before < top_p, ordered, 2.0).min(-1, keepdim=True).values
        probs = torch.where(probs >= edge, probs, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def resolve_attention() -> None:
    """``--ddtree-resolve-attention``: the stand-in's own choice for each command line on stdin (every
    configuration: ``FAKE_SGLANG_DEFAULT_ATTENTION``, default ``triton``), as SGLang's answer is read."""
    argvs = json.load(sys.stdin)
    choice = os.environ.get("FAKE_SGLANG_DEFAULT_ATTENTION", "triton")
    out = {cid: ({"error": "ValueError: --attention-backend given"} if "--attention-backend" in argv
                 else {"attention_backend": choice}) for cid, argv in argvs.items()}
    print("DDTREE_ATTN " + json.dumps(out))


def best_first(logp, budget: int) -> tuple[list[int], list[int]]:
    """The paper's best-first tree of ``budget`` nodes over per-depth log-probs ``logp [L, V]`` (top-k per
    depth, ``k = min(budget, V)``), relabelled depth-major: ``(tokens, parents)``."""
    import heapq

    top = logp.topk(min(budget, logp.shape[1]), dim=-1)
    vals, ids = top.values.tolist(), top.indices.tolist()
    heap = [(-vals[0][0], 0, 0, -1)]  # (-score, depth index, rank, parent node)
    nodes: list[tuple[int, int, int]] = []  # (depth index, token, parent)
    while heap and len(nodes) < budget:
        neg, d, r, parent = heapq.heappop(heap)
        nodes.append((d, ids[d][r], parent))
        me = len(nodes) - 1
        if r + 1 < len(ids[d]):
            heapq.heappush(heap, (neg + vals[d][r] - vals[d][r + 1], d, r + 1, parent))
        if d + 1 < len(ids):
            heapq.heappush(heap, (neg - vals[d + 1][0], d + 1, 0, me))
    order = sorted(range(len(nodes)), key=lambda i: (nodes[i][0], i))
    where = {old: new for new, old in enumerate(order)}
    return [nodes[i][1] for i in order], [where[nodes[i][2]] if nodes[i][2] >= 0 else -1 for i in order]


def eagle_tree(logp, root: int, topk: int, steps: int, nodes: int) -> tuple[list[int], list[int]]:
    """An EAGLE-style tree from per-token draft log-probs ``logp [V, V]``: each step expands the ``topk`` best
    leaves of the last step by their ``topk`` best tokens; the ``nodes - 1`` best of all candidates are kept,
    depth-major: ``(tokens, parents)``. Top-k 1 is the greedy chain."""
    cands: list[tuple[float, int, int, int]] = []  # (score, depth, token, parent candidate index)
    frontier = [(0.0, root, -1)]
    for depth in range(1, steps + 1):
        step = []
        for score, token, parent in frontier:
            row = logp[token].topk(topk)
            for v, t in zip(row.values.tolist(), row.indices.tolist()):
                cands.append((score + v, depth, t, parent))
                step.append((score + v, t, len(cands) - 1))
        frontier = sorted(step, key=lambda x: -x[0])[:topk]
    keep = sorted(range(len(cands)), key=lambda i: -cands[i][0])[: nodes - 1]
    keep = sorted(keep, key=lambda i: (cands[i][1], -cands[i][0]))
    where = {old: new for new, old in enumerate(keep)}
    return [cands[i][2] for i in keep], [where.get(cands[i][3], -1) for i in keep]


def decoder(args: argparse.Namespace, honest: bool = True):
    """``(generate, drafts_per_round)``: ``generate(prompt, n) -> (output_ids, accept length per round)``
    for the server ``args`` describe (``honest=False``: no draft is ever accepted)."""
    from ddtree_compat.e2e.forward import CausalLM, DFlashDraft, EagleDraft

    import torch

    target = CausalLM(args.model_path, torch.float32)
    vocab = target.embed.shape[0]
    propose, dpr = None, 0  # propose(context) -> (tokens, parents) of the round's tree (root: context[-1])
    if args.speculative_algorithm in ("EAGLE", "STANDALONE"):  # the draft's log-probs after each token
        tokens = list(range(vocab))
        if args.speculative_algorithm == "EAGLE":
            hidden = torch.zeros(vocab, target.embed.shape[1])  # EAGLE's fc ignores the target features
            logits = EagleDraft(args.speculative_draft_model_path, target).logits(tokens, hidden)
        else:
            logits = CausalLM(args.speculative_draft_model_path, torch.float32).logits(tokens)
        logp = logits.log_softmax(-1)
        dpr = args.speculative_num_draft_tokens - 1

        def propose(context: list[int]) -> tuple[list[int], list[int]]:
            return eagle_tree(logp, context[-1], args.speculative_eagle_topk, args.speculative_num_steps,
                              args.speculative_num_draft_tokens)

    if args.speculative_algorithm in ("DFLASH", "DDTREE"):  # the DFlash draft's block on the real context
        dflash = DFlashDraft(args.speculative_draft_model_path, target)
        block = args.speculative_ddtree_block_size or args.speculative_num_draft_tokens
        dpr = block - 1

        def propose(context: list[int]) -> tuple[list[int], list[int]]:
            rows = dflash.block_logits(context[:-1], context[-1], block)[1:]
            if args.speculative_algorithm == "DFLASH":
                return rows.argmax(-1).tolist(), list(range(-1, block - 2))
            return best_first(rows.log_softmax(-1), args.speculative_ddtree_budget)

    rng = torch.Generator().manual_seed(args.random_seed)
    single = args.speculative_accept_threshold_single

    def pick(logits, params: dict) -> int:
        probs = target_law(logits, params)
        return int(logits.argmax()) if probs is None else int(torch.multinomial(probs, 1, generator=rng))

    def verify(context: list[int], tokens: list[int], parents: list[int], params: dict) -> list[int]:
        """One target forward over the tree (ancestor-only mask), then the walk: greedy, or (temperature > 0) the
        target-only tree rule: siblings in order against one coin per depth, the running target mass decides, the
        bonus drawn from the target without the rejected siblings' mass (``--speculative-accept-threshold-single``
        accepts any sibling whose target probability reaches it)."""
        logits = target.verify_logits(context, tokens, parents)
        laws = target_law(logits, params)
        out, node = [], -1
        while True:
            kids = [i for i, p in enumerate(parents) if p == node]
            if laws is None:
                token = int(logits[node + 1].argmax())
                child = next((i for i in kids if tokens[i] == token), None)
            else:
                law, coin, mass, child = laws[node + 1].clone(), float(torch.rand((), generator=rng)), 0.0, None
                for i in kids:
                    mass += float(law[tokens[i]])
                    if coin < mass or float(law[tokens[i]]) >= single:
                        child, token = i, tokens[i]
                        break
                if child is None:
                    law[[tokens[i] for i in kids]] = 0.0
                    token = int(torch.multinomial(law / law.sum(), 1, generator=rng))
            if child is None or not honest:
                return out + [token]
            out.append(token)
            node = child

    def generate(prompt: list[int], n: int, params: dict | None = None) -> tuple[list[int], list[int]]:
        """``(output_ids, accept length per verify round)``: the prefill's token, then verify rounds, or plain
        decoding (``params``: the request's ``sampling_params``; none: greedy)."""
        params = params or {"temperature": 0}
        out, rounds = [pick(target.logits(prompt)[-1], params)], []
        while len(out) < n:
            if propose is None:
                out.append(pick(target.logits(prompt + out)[-1], params))
                continue
            committed = verify(prompt + out, *propose(prompt + out), params)
            out += committed
            rounds.append(len(committed))
        return out[:n], rounds

    return generate, dpr


def main() -> None:
    if "--ddtree-probe" in sys.argv:
        print("DDTREE_PROBE " + json.dumps({"sglang": "fake", "flags": FLAGS, "error": None,
                                            "algorithms": ["EAGLE", "STANDALONE", "DFLASH", "DDTREE", "NONE"],
                                            "modules": {"flashinfer": os.environ.get("FAKE_SGLANG_FLASHINFER") == "1",
                                                        "flash_mla": True, "sgl_kernel.flash_ops": False},
                                            "attention_choices": [a for a in ATTENTION.split(",") if a],
                                            "capability": [9, 0],
                                            "path": "", "eagle_graphs_import_flash_mla": True}))
        return
    if "--ddtree-resolve-attention" in sys.argv:
        resolve_attention()
        return
    args = parse(sys.argv[1:])
    modes = dict(m.split("=") for m in os.environ.get("FAKE_SGLANG_MODES", "").split(",") if m)
    draft = os.path.basename(os.path.normpath(args.speculative_draft_model_path or ""))
    mode = modes.get(draft, "honest")
    log = lambda msg: print(f"[2026-12-01 10:00:00] {msg}", flush=True)  # noqa: E731
    log(f"fake sglang: {' '.join(sys.argv[1:])}")
    once = os.environ.get("FAKE_SGLANG_PORT_TAKEN_ONCE")
    if once and not os.path.exists(once):  # the first server started finds its port taken, as uvicorn logs it
        open(once, "w").close()
        log(f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {args.port}): address "
            "already in use")
        time.sleep(300)  # SGLang then waits for its warmup request, which never gets an answer
    if mode == "crash":
        log("Scheduler hit an exception: Traceback (most recent call last):")
        print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
        sys.exit(1)

    generate, dpr = decoder(args, honest=mode not in ("zero-accept", "fault"))
    propose = args.speculative_algorithm not in (None, "NONE")

    lock, draw = threading.Lock(), threading.Lock()
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
            started = time.time()
            time.sleep(float(os.environ.get("FAKE_SGLANG_DELAY_S", "0")))
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = list(body["input_ids"])
            with draw:  # one generator: requests drawn one at a time
                output_ids, rounds = generate(prompt, body["sampling_params"]["max_new_tokens"], body["sampling_params"])
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
            if propose:
                correct = sum(a - 1 for a in rounds)
                meta.update(spec_verify_ct=len(rounds), spec_num_correct_drafts=correct,
                            spec_accept_length=len(output_ids) / len(rounds),
                            spec_accept_rate=correct / (len(rounds) * dpr))
            with lock:
                stats["gen"] += len(output_ids)
                stats["verify"] += len(rounds)
            self._send(200, json.dumps({"output_ids": output_ids, "meta_info": meta}).encode())
            if os.environ.get("FAKE_SGLANG_REQUESTS"):
                with open(os.environ["FAKE_SGLANG_REQUESTS"], "a") as f:
                    f.write(f"{args.port} {started} {time.time()}\n")

        def log_message(self, fmt, *a):
            pass

    log("The server is fired up and ready to roll!")
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
