"""Which cells one serving configuration reaches, at its own shapes (:func:`make_plan`: pure, configuration in,
plan out).

* **Variants.** The configuration as deployed, and the changes the verdict may suggest, each checked by its own
  cells: a DDTree budget whose live width ``D = B + 1`` is below the block size runs in buffers of capacity
  ``C = block size`` (the layout behind the field failure at budgets 8 and 12 on sm120); its variants are the
  block size ``B + 1`` (``D = C``) and the budget ``block size - 1``. A suggestion the run did not check is never
  printed, so a change is a variant here or it is not offered.
* **Concerns.** One line of the answer each: verify, commit, verify attention (the backend SGLang resolved), the
  linear-attention family for a hybrid model, the samplers when the configuration samples, the DDTree kernels
  for a DDTree build, the static builds for the arch. The verify cases are written as files at the configuration's
  budget, block size, capacity and batches; verify, commit and verify attention run on those, the other
  families on their own grids, narrowed to the budget.
* Deployment shapes and the e2e replica are concerns the plan names and leaves unchecked, with the command that
  checks them (:data:`UNCHECKED`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..cases import PLANTS
from .launch import Serving
from .model import ModelShape

GREEDY = "greedy"

BATCHES = (1, 3, 8)
"""Requests per verify case (capped at ``--max-running-requests``); deployment batches are the scale cells'."""

PLANTS_USED = PLANTS
"""Accepted paths planted in every case: root only, one draft, partial, a deepest leaf, a sibling."""

ATTENTION_BACKENDS = {"triton": ("sglang-triton",), "flashinfer": ("flashinfer",)}
"""SGLang ``--attention-backend`` -> the suite's backends that run its verify attention (FA3's verify attention
runs through a DDTree build's FA metadata: that build's column)."""


@dataclass(frozen=True)
class Variant:
    """One shape the plan checks: as deployed (``change == ""``), or with the one change a suggestion names."""

    budget: int
    block_size: int
    capacity: int | None
    change: str = ""

    @property
    def layout(self) -> str:
        return "exact" if self.capacity is None else f"cap{self.capacity}"

    def label(self) -> str:
        return f"budget {self.budget}, block size {self.block_size}, " + (
            f"live width {self.budget + 1} in buffers of capacity {self.capacity}" if self.capacity
            else f"live width {self.budget + 1} = capacity")


@dataclass(frozen=True)
class Concern:
    """One line of the answer: which tests' cells it reads, and how they are narrowed.

    Attributes:
        name: ``verify``, ``commit``, ``attention``, ``linear``, ``sampling``, ``ddtree``, ``static``, ...
        tests: the kernel tests' function names whose cells belong to it.
        keyword: a ``-k`` term narrowing a family that runs its own grid (``""``: the plan's case files drive it).
        backends: only these backends' cells answer it (``()``: every backend's).
        page: only the commit cells at this page size answer it.
        by_budget: its cells are judged per variant (their budget and layout); else all belong to "as deployed".
        unchecked: why the plan leaves it unchecked, and the command that checks it (``""``: it runs).
    """

    name: str
    title: str
    tests: tuple[str, ...] = ()
    keyword: str = ""
    backends: tuple[str, ...] = ()
    page: int | None = None
    by_budget: bool = True
    note: str = ""
    unchecked: str = ""

    def expression(self) -> str:
        tests = " or ".join(self.tests)
        return f"(({tests}) and {self.keyword})" if self.keyword else f"({tests})"


@dataclass(frozen=True)
class Plan:
    """What one configuration reaches: its variants (the first is as deployed), concerns, batches, vocabulary."""

    algorithm: str
    variants: tuple[Variant, ...]
    concerns: tuple[Concern, ...]
    batches: tuple[int, ...]
    vocab: int
    topk: int
    arch: str | None
    sampling: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def deployed(self) -> Variant:
        return self.variants[0]

    def runs(self) -> tuple[Concern, ...]:
        return tuple(c for c in self.concerns if not c.unchecked)

    def keyword_expression(self) -> str:
        """The ``-k`` expression that selects every cell the plan runs."""
        return " or ".join(c.expression() for c in self.runs())

    def topologies(self) -> tuple[str, ...]:
        """The tree shapes the drafter builds: a chain for top-k 1 EAGLE and DFlash; every shape for DDTree."""
        from ..families.verify.topologies import TOPOLOGIES

        if self.algorithm in ("DFLASH",) or (self.algorithm not in ("DDTREE",) and self.topk == 1):
            return ("spine",)
        return tuple(TOPOLOGIES)

    def verify_cases(self) -> list:
        """The verify cases of every variant (each topology that exists at its budget x plant x batch). Token ids
        are drawn from the suite's small vocabulary: verify's buffers do not grow with the vocabulary (the
        logits-sized tensors are the deployment-shape cells')."""
        from ..families.verify.records import DEFAULT_VOCAB, make_case

        out = []
        for v in self.variants:
            for topology in self.topologies():
                for plant in PLANTS_USED:
                    for batch in self.batches:
                        case = make_case(v.budget, topology, plant, batch, v.block_size, DEFAULT_VOCAB,
                                         topk_cap=self.topk if self.algorithm not in ("DDTREE", "DFLASH") else None)
                        if case is None:
                            continue
                        if v.capacity is not None:
                            case = replace(case, capacity=v.capacity, accept_width=v.capacity)
                        out.append(case)
        return out


def variants(serving: Serving) -> tuple[Variant, ...]:
    """As deployed, then the changes that move a DDTree budget's live width onto its capacity."""
    budget, block = serving.budget, serving.block_size
    if serving.algorithm != "DDTREE" or budget + 1 >= block:
        return (Variant(budget, block if serving.algorithm in ("DDTREE", "DFLASH") else max(16, budget + 1), None),)
    block_flag = "--speculative-ddtree-block-size" if "speculative_ddtree_block_size" in serving.fields \
        else "--speculative-num-draft-tokens"
    return (Variant(budget, block, block),
            Variant(budget, budget + 1, None, f"{block_flag} {budget + 1}"),
            Variant(block - 1, block, None, f"--speculative-ddtree-budget {block - 1}"))


UNCHECKED = {
    "deployment": "deployment shapes (KV cache and logits past 2^31 / 2^32 elements at --max-running-requests "
                  "{mrr}, vocabulary {vocab}): not in this preflight; run `python -m ddtree_compat sweep --profile "
                  "scale --vocab {vocab}` on the serving GPU, then `python -m ddtree_compat envelope "
                  "results/latest-<arch>-scale.jsonl` (docs/results.md)",
    "e2e": "a served replica (a tiny target with this vocabulary and these speculative flags): not in this "
           "preflight; the e2e tier serves the field's configurations: `pytest tests/e2e` on a GPU (docs/e2e.md)",
}


def make_plan(serving: Serving, model: ModelShape, arch: str | None, sampling: tuple[str, ...] = (GREEDY, "T=1"),
              has_ddtree: bool = False, ddtree_name: str = "") -> Plan:
    """The plan for one resolved configuration on ``arch`` (``None``: no GPU here and no ``--arch``).

    ``has_ddtree``: a DDTree build is under test (its kernels); ``ddtree_name``: its column, which runs FA3's
    verify attention through the build's FA metadata.
    """
    algorithm = serving.algorithm
    if not algorithm or serving.budget is None:
        vs: tuple[Variant, ...] = ()
    else:
        vs = variants(serving)
    mrr = serving.max_running_requests
    batches = tuple(sorted({min(b, mrr) for b in BATCHES})) if mrr else BATCHES
    budget = vs[0].budget if vs else 0
    attention = serving.attention_backend
    if attention == "fa3" and ddtree_name:
        att_backends, att_note = (ddtree_name,), "--attention-backend fa3, through the DDTree build's FA metadata"
    elif attention in ATTENTION_BACKENDS:
        att_backends, att_note = ATTENTION_BACKENDS[attention], f"--attention-backend {attention}"
    elif attention:
        att_backends, att_note = (), f"--attention-backend {attention}: the suite's every verify-attention column"
    else:
        why = "" if serving.resolved else f" (SGLang could not resolve it here: {serving.unresolved[:120]})"
        att_backends, att_note = (), "SGLang's choice of attention backend is not known" + why + \
            ": every verify-attention backend the suite has was checked"
    concerns = []
    if vs:
        concerns += [
            Concern("verify", "tree verify (greedy accept walk)", ("test_verify_tree_greedy",
                                                                   "test_verify_graph_replay_padded")),
            Concern("commit", "KV-cache commit of the accepted nodes", ("test_commit_kernel",
                                                                        "test_verify_commit_graph_replay_padded"),
                    page=serving.page_size,
                    note=f"page size {serving.page_size}" if serving.page_size else
                    "page size not resolved here: page sizes 1 / 16 / 64"),
            Concern("attention", "verify attention (ancestor-only mask)", ("test_verify_attention",),
                    backends=att_backends, note=att_note),
        ]
        if model.hybrid:
            concerns.append(Concern("linear", "linear attention: recurrent state per node, conv update, state commit",
                                    ("test_linear_attention",), keyword=f"b{budget}-",
                                    note=f"{model.linear_key_heads}/{model.linear_value_heads} GDN heads in the "
                                         "model; the family's Qwen3.5 / Qwen3-Next shapes"))
        if any(s != GREEDY for s in sampling):
            concerns.append(Concern("sampling", "speculative sampling (temperature > 0)", ("test_sampling",),
                                    by_budget=False, note="the samplers at the family's own budgets"))
        if algorithm == "DDTREE" or serving.ddtree_in_dflash:
            concerns.append(Concern("ddtree", "the DDTree build's own kernels (tree build, follow, metadata)",
                                    ("test_ddtree_kernel", "test_ddtree_round_in_one_cuda_graph"),
                                    keyword=f"b{budget}", unchecked="" if has_ddtree else
                                    "no DDTree build under test: point DDTREE_IMPLS at the DDTree SGLang you serve"))
    if arch:
        concerns.append(Concern("static", f"compiles and fits on {arch} (static builds)", ("test_static",),
                                keyword=f"static-{arch}-", by_budget=False))
    else:
        concerns.append(Concern("static", "compiles and fits on the serving GPU", by_budget=False,
                                unchecked="no GPU here and no --arch: give --arch sm120 (or the serving card's)"))
    for name, text in UNCHECKED.items():
        concerns.append(Concern(name, name, by_budget=False,
                                unchecked=text.format(mrr=mrr or "(SGLang's default)", vocab=model.vocab)))
    notes = () if vs else ("no speculative decoding in these flags: only the static builds apply",)
    return Plan(algorithm, vs, tuple(concerns), batches, model.vocab, serving.topk, arch, tuple(sampling), notes)
