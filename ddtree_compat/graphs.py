"""CUDA-graph replay at capacity: capture the verify launch with buffers sized for capacity ``C`` and
replay it on a runtime tree of ``D < C`` nodes (padding -1), the shape mismatch behind the field
failure (SGLang DDTree sizes verify buffers and the captured graph by ``max(block_size, B + 1)``, so
B = 8 and 12 in spine mode run D = 9 / 13 inside a graph of 16).
"""

from __future__ import annotations

import time

import torch

from .buffers import POISON, VerifyBuffers, eagle_inputs, make_verify_buffers
from .cases import VerifyCase, make_case
from .harness import Verdict, fault_verdict, judge


def capture_case(batch: int, capacity: int, block_size: int = 16) -> VerifyCase:
    """A full-capacity case (``D == C``) whose shapes the graph is captured with."""
    return make_case(capacity - 1, "random", "deep", batch, block_size)


def run_verify_graph(runtime: VerifyCase, backend, device: str) -> Verdict:
    """Capture ``backend.verify_tree_greedy`` at ``runtime``'s capacity, then replay with ``runtime``'s data.

    ``runtime`` must be a padded case (``capacity > D``, ``accept_width`` = capacity's). The static
    buffers are the capture case's; the runtime inputs are copied in and the outputs re-poisoned
    before the replay, then judged exactly against the oracle.
    """
    cap = capture_case(runtime.batch, runtime.slots, runtime.block_size)
    try:
        bufs = make_verify_buffers(cap, device)
        args = list(bufs.views().values())
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            backend.verify_tree_greedy(*args)  # warm-up: JIT compile outside the capture
        torch.cuda.current_stream(device).wait_stream(stream)
        torch.cuda.synchronize(device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            backend.verify_tree_greedy(*args)
        for name, values in eagle_inputs(runtime).items():
            getattr(bufs, name).view.copy_(values.to(device))
        for name in VerifyBuffers.OUTPUTS:
            getattr(bufs, name).view.fill_(POISON)
        inputs_before = {name: getattr(bufs, name).view.cpu().clone() for name in VerifyBuffers.INPUTS}
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize(device)
        duration = time.perf_counter() - start
    except Exception as e:  # noqa: BLE001 - capture or replay failure is a classified fault
        return fault_verdict(e)
    verdict = judge(runtime, bufs, inputs_before)
    verdict.duration_s = duration
    if verdict.outcome != "pass":
        verdict.message = f"padded-layout failure (graph captured at C={runtime.slots}, D={runtime.num_nodes}): " \
                          + verdict.message
    return verdict
