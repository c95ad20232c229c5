"""CUDA-graph capture and replay, the one way every family's graph cells do it.

:func:`capture` warms the step up on a side stream (Triton and JIT compiles happen outside the capture),
then captures it; the caller copies the runtime data into the static buffers and re-poisons the outputs;
:func:`replay` runs the graph once, synchronised, and returns its seconds. Both run the kernels under test, so what
they raise is the kernel's (:class:`~ddtree_compat.harness.calls.KernelRaised`): a graph cell's
:func:`~ddtree_compat.harness.calls.check` makes it a classified fault.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from .calls import kernel_running


def capture(step: Callable[[], object], device: str) -> "torch.cuda.CUDAGraph":
    """Warm ``step`` up once on a side stream, then capture it in a new CUDA graph on ``device``.

    Raises:
        KernelRaised: the warm-up or the capture raised (the kernel's, for the fault rule).
    """
    with kernel_running():
        return _capture(step, device)


def _capture(step: Callable[[], object], device: str) -> "torch.cuda.CUDAGraph":
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        step()  # warm-up: JIT compiles outside the capture
    torch.cuda.current_stream(device).wait_stream(stream)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


def replay(graph: "torch.cuda.CUDAGraph", device: str) -> float:
    """Replay ``graph`` once after the device is idle; the replay's seconds.

    Raises:
        KernelRaised: the replay (or the synchronize after it) raised.
    """
    with kernel_running():
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize(device)
    return time.perf_counter() - start
