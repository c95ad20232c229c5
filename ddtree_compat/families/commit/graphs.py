"""The verify + commit launch sequence captured in one CUDA graph at capacity ``C`` and replayed on a runtime
tree of ``D <= C`` nodes (``verify_commit@graph``), and the same steps run eagerly (the CPU check of the
sequence and its judging). The verify launch alone: :mod:`ddtree_compat.families.verify.graphs`.
"""

from __future__ import annotations

import torch

from ...harness import graphs
from ...harness.buffers import POISON, Guarded, canary_report, element_diff
from ...harness.calls import Findings, check
from ..verify.checks import VerifyBuffers, eagle_inputs, expected_outputs, make_verify_buffers
from ..verify.graphs import capture_case
from ..verify.records import VerifyCase
from .checks import freed_set_report, layout, plan_slots
from .records import ACCEPT_OUT_CACHE_LOC, BONUS_TOKENS, COMMIT_OUTPUTS

# --------------------------------------------------------------------------------------------------

GRAPH_COMMIT_KERNELS = (ACCEPT_OUT_CACHE_LOC.name, COMMIT_OUTPUTS.name, BONUS_TOKENS.name)  # required; front optional
COMMIT_GRAPH = "verify_commit@graph"


class _CommitStep:
    """The static buffers of one verify + commit launch sequence (as SGLang's EAGLE verify runs it,
    ``eagle_utils.eagle_sample`` then ``eagle_worker_common``): ``verify_tree_greedy`` on the verify
    buffers (``accept_index`` pre-filled with -1, as SGLang allocates it), ``accept_lens =
    accept_token_num + 1``, ``fill_accept_out_cache_loc`` over ``bs * S`` entries into a ``bs * S``
    buffer, ``fill_front_out_cache_loc_func`` (when the backend has it), ``prepare_verify_commit_outputs``
    and ``fill_bonus_tokens`` over ``predict[accept_index]``. Every output is guarded and poisoned."""

    def __init__(self, capture: VerifyCase, lay, backend, device: str):
        bs, width = capture.batch, capture.width
        self.backend, self.width = backend, width
        self.bufs = make_verify_buffers(capture, device)
        self.bufs.accept_index.view.fill_(-1)  # as SGLang allocates it; the warm-up reads predicts through it
        self.out_cache_loc = Guarded.of(lay.out_cache_loc, device)
        self.seq_lens = Guarded.of(lay.seq_lens, device)
        self.accept_lens = Guarded.of(torch.full((bs,), POISON, dtype=torch.int32), device)
        self.accept_out_cache_loc = Guarded.of(torch.full((bs * width,), POISON, dtype=torch.int64), device)
        self.front = (Guarded.of(torch.full((bs * width,), POISON, dtype=torch.int64), device)
                      if callable(getattr(backend, "front_out_cache_loc", None)) else None)
        self.bonus = Guarded.of(torch.full((bs,), POISON, dtype=torch.int32), device)
        self.commit_outputs: tuple[torch.Tensor, torch.Tensor] | None = None

    def launch(self) -> None:
        b, v = self.backend, self.bufs
        b.verify_tree_greedy(*v.views().values())
        torch.add(v.accept_token_num.view, 1, out=self.accept_lens.view)
        b.accept_out_cache_loc(v.accept_index.view.view(-1), self.out_cache_loc.view, self.accept_out_cache_loc.view)
        if self.front is not None:
            b.front_out_cache_loc(self.accept_lens.view, self.out_cache_loc.view, self.front.view)
        self.commit_outputs = b.commit_outputs(v.predicts.view, v.accept_index.view, self.accept_lens.view,
                                               self.seq_lens.view)
        accept_tokens = v.predicts.view[v.accept_index.view].view(-1)
        b.bonus_tokens(accept_tokens, self.accept_lens.view, self.bonus.view, self.width)

    def load(self, runtime: VerifyCase, lay) -> None:
        """Copy the runtime case in and poison every output (``accept_index``: -1, SGLang's fill)."""
        for name, values in eagle_inputs(runtime).items():
            getattr(self.bufs, name).view.copy_(values)
        self.out_cache_loc.view.copy_(lay.out_cache_loc)
        self.seq_lens.view.copy_(lay.seq_lens)
        self.bufs.accept_index.view.fill_(-1)
        for t in (self.bufs.predicts, self.bufs.accept_token_num, self.accept_lens, self.accept_out_cache_loc,
                  self.front, self.bonus):
            if t is not None:
                t.view.fill_(POISON)
        for t in self.commit_outputs or ():
            t.fill_(POISON)

    def guarded(self) -> dict[str, Guarded]:
        named = {"out_cache_loc": self.out_cache_loc, "seq_lens": self.seq_lens, "accept_lens": self.accept_lens,
                 "accept_out_cache_loc": self.accept_out_cache_loc, "front_out_cache_loc": self.front,
                 "bonus (fill_bonus_tokens)": self.bonus, **self.bufs.guarded()}
        return {k: g for k, g in named.items() if g is not None}


def judge_commit_step(runtime: VerifyCase, lay, step: _CommitStep) -> list[str]:
    """Every output of the sequence against the oracle (``commit.layout``'s plans); one line per problem.

    Past each request's accepted path nothing may be written: ``accept_index`` keeps -1, the compacted
    slot lists keep POISON after ``sum(commit_len)`` entries, canaries and inputs are unchanged, and
    the freed-slot set implied by the kept (page size 1) or front (page size > 1) slots is the oracle's.
    """
    cap, n = runtime.slots, sum(plan.commit_len for plan in lay.plans)
    want = expected_outputs(runtime)
    want["accept_index"][want["accept_index"] == POISON] = -1
    problems = [element_diff(name, getattr(step.bufs, name).view.cpu(), want[name])
                for name in VerifyBuffers.OUTPUTS if not torch.equal(getattr(step.bufs, name).view.cpu(), want[name])]

    def tail(values: torch.Tensor, total: int) -> torch.Tensor:
        return torch.cat([values, torch.full((total - values.numel(),), POISON, dtype=values.dtype)])

    expect = {
        "accept_lens": torch.tensor([plan.commit_len for plan in lay.plans], dtype=torch.int32),
        "accept_out_cache_loc": tail(plan_slots(lay, "kept_slots"), step.accept_out_cache_loc.view.numel()),
        "bonus (fill_bonus_tokens)": torch.tensor([plan.bonus_token for plan in lay.plans], dtype=torch.int32),
    }
    got = {"accept_lens": step.accept_lens.view.cpu(), "accept_out_cache_loc": step.accept_out_cache_loc.view.cpu(),
           "bonus (fill_bonus_tokens)": step.bonus.view.cpu()}
    if step.front is not None:
        expect["front_out_cache_loc"] = tail(plan_slots(lay, "front_slots"), step.front.view.numel())
        got["front_out_cache_loc"] = step.front.view.cpu()
    new_seq, bonus = step.commit_outputs
    expect["new_seq_lens"] = torch.tensor([plan.new_seq_len for plan in lay.plans])
    got["new_seq_lens"] = new_seq.cpu().to(torch.int64)
    expect["bonus (prepare_verify_commit_outputs)"] = expect["bonus (fill_bonus_tokens)"]
    got["bonus (prepare_verify_commit_outputs)"] = bonus.cpu().to(torch.int32)
    for name, w in expect.items():
        g = got[name]
        if g.shape != w.shape:
            problems.append(f"{name}: shape {tuple(g.shape)} (want {tuple(w.shape)})")
        elif not torch.equal(g, w):
            problems.append(element_diff(name, g, w))
    problems += canary_report(step.guarded())
    for name, before in {**eagle_inputs(runtime), "out_cache_loc": lay.out_cache_loc, "seq_lens": lay.seq_lens}.items():
        now = (getattr(step.bufs, name) if name in VerifyBuffers.INPUTS else getattr(step, name)).view.cpu()
        if not torch.equal(now, before):
            problems.append(f"input {name} was modified")
    page = lay.plans[0].page_size if lay.plans else 1
    keep = got["accept_out_cache_loc"] if page == 1 else got.get("front_out_cache_loc")
    if keep is not None:
        problems += freed_set_report(lay, cap, committed=keep[:n].tolist())
    return problems


def _accepted(case) -> list[int]:
    return [len(p) - 1 for p in layout(case).paths]


@check(accepted=_accepted)
def run_commit_graph(case, backend, device: str, graph: bool = True):
    """Capture verify + the backend's commit kernels at ``case``'s capacity ``C`` (a full ``D == C``
    tree), then replay with ``case``'s data (``D <= C``); judge with :func:`judge_commit_step`.

    ``case``: a :class:`~ddtree_compat.families.commit.records.CommitCase` whose verify case is padded to
    ``C`` with ``accept_width`` ``C``. A mismatch is a ``padded-layout failure`` naming ``C`` and ``D``.
    ``graph=False`` runs the same steps eagerly (warm-up on the capture case, load, launch; no capture):
    the CPU check of the sequence and its judging.
    """
    runtime = case.verify
    lay = layout(case)
    cap = capture_case(runtime.batch, runtime.slots, runtime.block_size)
    step = _CommitStep(cap, lay, backend, device)
    if graph:
        cuda_graph = graphs.capture(step.launch, device)  # warm-up on the capture case, then the capture
        step.load(runtime, lay)
        graphs.replay(cuda_graph, device)
    else:
        step.launch()
        step.load(runtime, lay)
        step.launch()
    how = "graph captured" if graph else "eager"
    return lambda: Findings(judge_commit_step(runtime, lay, step), accepted_got=step.bufs.accept_token_num.view.cpu().tolist(),
                            prefix=f"padded-layout failure ({how} at C={runtime.slots}, D={runtime.num_nodes}): ")
