"""CUDA-graph replay at capacity: capture the verify launch with buffers sized for capacity ``C`` and replay
it on a runtime tree of ``D < C`` nodes (padding -1), the shape mismatch behind the field failure (SGLang
DDTree sizes verify buffers and the captured graph by ``max(block_size, B + 1)``, so B = 8 and 12 in spine
mode run D = 9 / 13 inside a graph of 16). The verify + commit sequence in one graph:
:mod:`ddtree_compat.families.commit.graphs`.
"""

from __future__ import annotations

from ...harness import graphs
from ...harness.buffers import POISON
from ...harness.calls import Findings, check
from .checks import VerifyBuffers, eagle_inputs, judge, make_verify_buffers
from .records import VerifyCase, make_case


def capture_case(batch: int, capacity: int, block_size: int = 16) -> VerifyCase:
    """A full-capacity case (``D == C``) whose shapes the graph is captured with."""
    return make_case(capacity - 1, "random", "deep", batch, block_size)


@check
def run_verify_graph(runtime: VerifyCase, backend, device: str):
    """Capture ``backend.verify_tree_greedy`` at ``runtime``'s capacity, then replay with ``runtime``'s data.

    ``runtime`` must be a padded case (``capacity > D``, ``accept_width`` = capacity's). The static
    buffers are the capture case's; the runtime inputs are copied in and the outputs re-poisoned
    before the replay, then judged exactly against the oracle (a difference is a ``padded-layout
    failure`` naming ``C`` and ``D``).
    """
    cap = capture_case(runtime.batch, runtime.slots, runtime.block_size)
    bufs = make_verify_buffers(cap, device)
    args = list(bufs.views().values())
    graph = graphs.capture(lambda: backend.verify_tree_greedy(*args), device)
    for name, values in eagle_inputs(runtime).items():
        getattr(bufs, name).view.copy_(values.to(device))
    for name in VerifyBuffers.OUTPUTS:
        getattr(bufs, name).view.fill_(POISON)
    inputs_before = {name: getattr(bufs, name).view.cpu().clone() for name in VerifyBuffers.INPUTS}
    graphs.replay(graph, device)

    def judged() -> Findings:
        found = judge(runtime, bufs, inputs_before)
        found.prefix = f"padded-layout failure (graph captured at C={runtime.slots}, D={runtime.num_nodes}): "
        return found

    return judged
