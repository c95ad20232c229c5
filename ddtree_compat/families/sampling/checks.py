"""Run one sampling-verify case on one backend and judge it (the one check shape, :mod:`ddtree_compat.harness.calls`).

Exact cases (given uniforms): every output against :mod:`.oracle`, laid out as SGLang's kernels write them
(:func:`.oracle.batch_outputs`): ``predicts`` int32 ``[bs * D]`` and ``accept_index`` int32 ``[bs, S]`` poisoned (an
element the sampler must leave stays POISON), ``accept_token_num`` int32 ``[bs]``; the tree sampler's ``draft_probs``
f32 ``[bs, D, V]`` starts at zeros and must hold exactly the rejected children's target masses afterwards (the
kernel writes them there); the chain sampler's ``draft_probs`` ``[bs, D - 1, V]`` is an input it must leave alone.
Every input is canary-guarded and checked unchanged. Accepted drafts 0 where the oracle accepts more is
``zero-accept``.

Distribution cases (``N`` rows of one tree, seeded coins): one call, then two findings, each its own line: the rows
(the first :data:`ORACLE_ROWS`) that differ from the oracle given their coins, and the stated hypothesis test of the first two emitted tokens against
the sampler's exact law (:mod:`.distribution`: Pearson's chi-square, false-alarm rate
:data:`~.distribution.ALPHA` per cell). A pass states the statistic, its p-value and ``N``; the verdict's
``measured`` carries them into the results.
"""

from __future__ import annotations

import numpy as np
import torch

from ...harness.buffers import POISON, Guarded, Inputs, canary_report, compare, element_diff
from ...harness.calls import Findings, check
from ...outcomes import Verdict
from . import distribution as D
from . import oracle as O
from .records import DEPTH, SamplingCase

NO_WRITE = None
ORACLE_ROWS = 4096
"""A distribution cell compares its first rows with the oracle given their coins (the oracle walks rows in Python,
~0.2 ms a row); the law test counts all ``N``."""


def _dense(rows, vocab: int) -> torch.Tensor:
    out = torch.zeros(len(rows), vocab, dtype=torch.float32)
    for i, row in enumerate(rows):
        for t, m in row.items():
            out[i, t] = m
    return out


def _links(case: SamplingCase, b: int) -> tuple[list[int], list[int], list[int]]:
    links = case.links(b) if case.sampler == "tree" else O.links(case.trees[b])
    return list(links.candidates), list(links.next_token), list(links.next_sibling)


def _outputs(bs: int, nodes: int, width: int, device: str) -> dict[str, Guarded]:
    return {"predicts": Guarded.poisoned(bs * nodes, torch.int32, device),
            "accept_index": Guarded.of(torch.full((bs, width), POISON, dtype=torch.int32), device),
            "accept_token_num": Guarded.poisoned(bs, torch.int32, device)}


def _expected(out: O.BatchOutputs, bs: int, nodes: int, width: int) -> dict[str, torch.Tensor]:
    return {"predicts": torch.tensor([POISON if v is None else v for v in out.predicts], dtype=torch.int32),
            "accept_index": torch.tensor([[POISON if v is None else v for v in row] for row in out.accept_index],
                                         dtype=torch.int32).view(bs, width),
            "accept_token_num": torch.tensor(out.accept_token_num, dtype=torch.int32)}


def _layout(case: SamplingCase, device: str):
    """The inputs of an exact case, guarded, in the samplers' argument order (and the chain's draft rows)."""
    bs, d, v = case.batch, case.nodes, case.vocab
    reqs = case.exact
    inputs = Inputs(device)
    linked = [_links(case, b) for b in range(bs)]
    cand = [list(r.candidates) for r in reqs] if case.sampler == "chain" else [l[0] for l in linked]
    args = dict(
        candidates=inputs.add("candidates", cand, torch.int64),
        retrive_index=inputs.add("retrive_index", [[b * d + k for k in range(d)] for b in range(bs)], torch.int64),
        retrive_next_token=inputs.add("retrive_next_token", [l[1] for l in linked], torch.int64),
        retrive_next_sibling=inputs.add("retrive_next_sibling", [l[2] for l in linked], torch.int64),
        uniform_samples=inputs.add("uniform_samples", [list(r.uniforms) for r in reqs], torch.float32),
        uniform_samples_for_final_sampling=inputs.add("uniform_samples_for_final_sampling",
                                                      [r.uniform_final for r in reqs], torch.float32),
        target_probs=inputs.add("target_probs", torch.stack([_dense(r.target, v) for r in reqs]), torch.float32))
    return inputs, args


def _accepted(case: SamplingCase) -> list[int]:
    return [r.accepted_drafts for r in case.expected()] if case.kind == "exact" else []


@check(accepted=_accepted)
def tree_speculative_sampling(case: SamplingCase, backend, device: str):
    """SGLang's target-only tree sampler: an exact case's every output, or a distribution case's rows and law."""
    if case.kind == "distribution":
        return _distribution(case, backend, device)
    bs, d, s, v = case.batch, case.nodes, case.accept_width, case.vocab
    inputs, args = _layout(case, device)
    draft = Guarded.of(torch.zeros(bs, d, v, dtype=torch.float32), device)
    outs = _outputs(bs, d, s, device)
    backend.tree_speculative_sampling(outs["predicts"].view, outs["accept_index"].view, outs["accept_token_num"].view,
                                      *args.values(), draft.view, case.threshold_single, case.threshold_acc, True)

    def judge() -> Findings:
        want_out = case.expected_outputs()
        want = _expected(want_out, bs, d, s)
        problems = [element_diff(n, outs[n].view.cpu(), w) for n, w in want.items()
                    if not torch.equal(outs[n].view.cpu(), w)]
        written = torch.zeros(bs, d, v, dtype=torch.float32)
        for b, writes in enumerate(want_out.draft_probs):
            for (n, t), m in writes.items():
                written[b, n, t] = m
        problems += compare("draft_probs (the rejected children's target masses)", draft.view.cpu(), written)
        problems += canary_report({**outs, "draft_probs": draft}) + inputs.problems()
        return Findings(problems, accepted_got=outs["accept_token_num"].view.cpu().tolist())

    return judge


@check(accepted=_accepted)
def chain_speculative_sampling(case: SamplingCase, backend, device: str):
    """SGLang's rejection (chain) sampler, with or without block verification."""
    if case.kind == "distribution":
        return _distribution(case, backend, device)
    bs, d, v = case.batch, case.nodes, case.vocab
    inputs, args = _layout(case, device)
    draft = inputs.add("draft_probs", torch.stack([_dense(r.draft, v) for r in case.exact]), torch.float32)
    outs = _outputs(bs, d, d, device)  # accept_index is written with retrive_index's strides: [bs, D]
    backend.chain_speculative_sampling(outs["predicts"].view, outs["accept_index"].view,
                                       outs["accept_token_num"].view, *args.values(), draft, 1.0, 1.0, True,
                                       case.block)

    def judge() -> Findings:
        want = _expected(case.expected_outputs(), bs, d, d)
        problems = [element_diff(n, outs[n].view.cpu(), w) for n, w in want.items()
                    if not torch.equal(outs[n].view.cpu(), w)]
        problems += canary_report(outs) + inputs.problems()
        return Findings(problems, accepted_got=outs["accept_token_num"].view.cpu().tolist())

    return judge


@check
def ddtree_sample_distribution(case: SamplingCase, backend, device: str):
    """A DDTree implementation's sampler over ``N`` rows of one tree: its rows against the oracle given the
    uniforms it drew (read back from the buffers it was given), and the law of what it emitted."""
    return _distribution(case, backend, device)


# --------------------------------------------------------------------------------------------------
# Distribution cells
# --------------------------------------------------------------------------------------------------


def _distribution(case: SamplingCase, backend, device: str):
    """One call of ``N`` rows; the judge compares every row with the oracle and tests the law."""
    n, d, v = case.batch, case.nodes, case.vocab
    data = case.distribution_inputs()
    tree = case.trees[0]
    if case.sampler == "ddtree":
        return _ddtree_rows(case, backend, device, data)
    inputs = Inputs(device)
    if case.sampler == "chain":
        cand = data["candidates"]
        nxt = np.tile(np.array([*range(1, d), -1], dtype=np.int64), (n, 1))
        sib = np.full((n, d), -1, dtype=np.int64)
        target = data["target"]
    else:
        cand0, nxt0, sib0 = _links(case, 0)
        cand = np.tile(np.array(cand0, dtype=np.int64), (n, 1))
        nxt = np.tile(np.array(nxt0, dtype=np.int64), (n, 1))
        sib = np.tile(np.array(sib0, dtype=np.int64), (n, 1))
        target = np.broadcast_to(data["target"], (n, d, v))
    width = case.accept_width if case.sampler == "tree" else d
    args = [inputs.add("candidates", torch.from_numpy(cand), torch.int64),
            inputs.add("retrive_index", torch.arange(n * d, dtype=torch.int64).view(n, d), torch.int64),
            inputs.add("retrive_next_token", torch.from_numpy(nxt), torch.int64),
            inputs.add("retrive_next_sibling", torch.from_numpy(sib), torch.int64),
            inputs.add("uniform_samples", torch.from_numpy(data["uniforms"]), torch.float32),
            inputs.add("uniform_samples_for_final_sampling", torch.from_numpy(data["uniform_final"]), torch.float32),
            inputs.add("target_probs", torch.from_numpy(np.ascontiguousarray(target)), torch.float32)]
    outs = _outputs(n, d, width, device)
    if case.sampler == "tree":
        draft = Guarded.of(torch.zeros(n, d, v, dtype=torch.float32), device)
        backend.tree_speculative_sampling(outs["predicts"].view, outs["accept_index"].view,
                                          outs["accept_token_num"].view, *args, draft.view, case.threshold_single,
                                          case.threshold_acc, True)
    else:
        draft = Guarded.of(torch.from_numpy(data["draft"]), device)
        backend.chain_speculative_sampling(outs["predicts"].view, outs["accept_index"].view,
                                           outs["accept_token_num"].view, *args, draft.view, 1.0, 1.0, True,
                                           case.block)

    def judge() -> Verdict:
        emitted = _emitted_tree_rows(outs, n, d, width)
        want = [_oracle_row(case, data, r, tree) for r in range(min(n, ORACLE_ROWS))]
        guards = {**outs, **({"draft_probs": draft} if case.sampler == "tree" else {})}
        return _judged(case, emitted, want, canary_report(guards) + inputs.problems()
                       + (["input draft_probs was modified"] if case.sampler == "chain" and not torch.equal(
                           draft.view.cpu(), torch.from_numpy(data["draft"])) else []))

    return judge


def _emitted_tree_rows(outs: dict[str, Guarded], n: int, d: int, width: int) -> list[tuple[int, ...] | None]:
    """Per row, the tokens SGLang's sampler emitted (accepted drafts, then the bonus token), read back: the tokens at
    ``predicts[accept_index[r, 0..k]]`` (the next token of each accepted node, the bonus at the last); ``None``
    where the outputs are not a path (a malformed row)."""
    predicts = outs["predicts"].view.cpu().view(n, d).tolist()
    accept = outs["accept_index"].view.cpu().tolist()
    nums = outs["accept_token_num"].view.cpu().tolist()
    rows = []
    for r in range(n):
        k = nums[r]
        if not 0 <= k < width:
            rows.append(None)
            continue
        at = accept[r][:k + 1]
        if any(not r * d <= a < (r + 1) * d for a in at):
            rows.append(None)
            continue
        rows.append(tuple(predicts[r][a - r * d] for a in at))
    return rows


def _oracle_row(case: SamplingCase, data: dict, r: int, tree) -> tuple[int, ...]:
    """What the oracle emits for row ``r`` given its coins (accepted drafts, then the bonus token)."""
    d, v = case.nodes, case.vocab
    uniforms, final = [float(x) for x in data["uniforms"][r]], float(data["uniform_final"][r])
    if case.sampler == "chain":
        cand = [int(x) for x in data["candidates"][r]]
        target = [_sparse(data["target"][r, i]) for i in range(d)]
        draft = [_sparse(data["draft"][r, i]) for i in range(d - 1)]
        return O.chain_rejection(cand, target, draft, uniforms, final, v, block=case.block).emitted
    rows = _tree_rows(case, data)
    if case.sampler == "tree":
        return O.tree_target_only(case.links(), rows, uniforms, final, v, case.accept_width, case.threshold_single,
                                  case.threshold_acc).emitted
    return O.ddtree_native(list(tree.tokens), list(tree.parents), d, d, rows, uniforms, final, v).emitted


def _tree_rows(case: SamplingCase, data: dict) -> list[dict]:
    cache = case.__dict__.setdefault("_dense_rows", {})
    if "rows" not in cache:
        cache["rows"] = [_sparse(row) for row in data["target"]]
    return cache["rows"]


def _sparse(row: np.ndarray) -> dict[int, float]:
    return {int(t): float(row[t]) for t in np.flatnonzero(row)}


def _judged(case: SamplingCase, emitted: list, want: list, problems: list[str]) -> Verdict:
    """The two findings of a distribution cell (rows against the oracle, the law test) as one verdict, with the
    test's figures in ``measured``."""
    n, compared = len(emitted), len(want)
    differ = [r for r in range(compared) if emitted[r] != want[r]]
    if differ:
        shown = ", ".join(f"row {r}: {emitted[r]} (oracle {want[r]})" for r in differ[:4])
        problems.append(f"{len(differ)} of the first {compared} rows differ from the oracle given their coins: {shown}")
    samples = [tuple(e[:DEPTH]) if e is not None else ("malformed",) for e in emitted]
    result = D.gof_test(D.counts(samples), case.categories())
    measured = {"statistic": round(result.statistic, 4), "p_value": result.p_value, "dof": result.dof, "rows": n,
                "alpha": result.alpha}
    if result.reject:
        problems.append(f"law test rejects: {result.describe()}")
    if problems:
        return Verdict("wrong", "; ".join(problems), measured=measured)
    rows = "every row" if compared == n else f"the first {compared} rows"
    return Verdict("pass", f"law test: {result.describe()}; {rows} the oracle's", measured=measured)


def _ddtree_rows(case: SamplingCase, backend, device: str, data: dict):
    """A DDTree implementation's sampler on ``N`` rows of one tree (the DDTree family's buffers, exact widths): it
    draws its own coins into the buffers it is given (torch seeded by the case), read back after the call."""
    n, d, v = case.batch, case.nodes, case.vocab
    tree = case.trees[0]
    inputs = Inputs(device)
    probs = inputs.add("target_probs", torch.from_numpy(np.ascontiguousarray(
        np.broadcast_to(data["target"], (n, d, v)))), torch.float32)
    draft = inputs.add("draft_tokens", [list(tree.tokens)] * n, torch.int64)
    parents = inputs.add("parents", [list(tree.parents)] * n, torch.int64)
    sizes = inputs.add("actual_tree_sizes", [d] * n, torch.int64)
    outs = {"accepted_indices": Guarded.of(torch.full((n, d), POISON, dtype=torch.int64), device),
            "accepted_token_ids": Guarded.of(torch.full((n, d), POISON, dtype=torch.int64), device),
            "accepted_lens": Guarded.of(torch.full((n,), POISON, dtype=torch.int64), device),
            "next_tokens": Guarded.of(torch.full((n,), POISON, dtype=torch.int64), device)}
    uniforms = torch.full((n, d), float("nan"), dtype=torch.float32, device=device)
    final = torch.full((n,), float("nan"), dtype=torch.float32, device=device)
    from ...cases import stable_seed

    torch.manual_seed(stable_seed("sampling-ddtree-uniforms", case.id) % (2 ** 31))
    backend.ddtree_sample_distribution(probs, draft, parents, sizes, *(g.view for g in outs.values()), uniforms, final)

    def judge() -> Verdict:
        u, uf = uniforms.cpu().numpy(), final.cpu().numpy()
        if not (np.isfinite(u).all() and np.isfinite(uf).all()):
            return Verdict("wrong", "uniform buffers after the call are not all drawn (NaN left): the rows cannot be "
                                    "read back")
        lens = outs["accepted_lens"].view.cpu().tolist()
        tokens = outs["accepted_token_ids"].view.cpu().tolist()
        nexts = outs["next_tokens"].view.cpu().tolist()
        emitted = [tuple(tokens[r][1:lens[r]]) + (nexts[r],) if 1 <= lens[r] <= d else None for r in range(n)]
        read_back = {"uniforms": u, "uniform_final": uf, "target": data["target"]}
        want = [_oracle_row(case, read_back, r, tree) for r in range(min(n, ORACLE_ROWS))]
        return _judged(case, emitted, want, canary_report(outs) + inputs.problems())

    return judge
