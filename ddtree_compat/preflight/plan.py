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
* **Cells preflight runs itself** (:class:`Cell`, :mod:`.cells`), outside the sweep, whose grids cannot take
  their shapes: the deployment-shape cells at exactly the configuration's ``--max-running-requests`` x vocabulary
  x context x budget, and the boundary batches around each kernel's 2^31 / 2^32 limit at that shape (the
  envelope's limit; device only: on a host without a GPU the concern is ``NOT CHECKED``, "needs a GPU"); and
  verify attention at the model's head geometry (query / KV heads, head dim) on the resolved backend.
* **The replica** (:func:`replica_concern`): the configuration's speculative flags served on a tiny target of the
  model's vocabulary and layer types by the e2e tier (profile ``replica``), on a GPU; what the tiny target cannot
  be is said on the line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..cases import PLANTS
from .launch import Serving
from .model import ModelShape

GREEDY = "greedy"

BATCHES = (1, 3, 8)
"""Requests per verify case (capped at ``--max-running-requests``); deployment batches are the scale cells'."""
INTERPRET_BATCHES = (1, 3)
"""The same on a host without a GPU (the interpreter runs every program in Python): one request and a ragged
batch of several; the CPU answer stays within its time (``benchmarks/preflight.py``)."""

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
    own: bool = False
    """Its cells are preflight's own (:class:`Cell`), not the sweep's."""
    narrow: str = ""
    """A ``-k`` term narrowing the plan's own case files' cells (verify attention: one plant, the tiles that apply,
    the resolved backend's cells); unlike ``keyword`` it leaves the cells judged by their variant's layout."""

    def expression(self) -> str:
        tests = " or ".join(self.tests)
        terms = [f"({tests})", *filter(None, (self.keyword, self.narrow))]
        return f"({' and '.join(terms)})" if len(terms) > 1 else terms[0]


@dataclass(frozen=True)
class Cell:
    """One cell preflight runs itself (:mod:`.cells`): ``case`` under the kernel record ``record``, answering
    the concern ``concern`` (its results' nodeid is ``preflight::<concern>[<case id>]``); ``why``: where the
    plan took it from (``at --max-running-requests 256``, ``below-2^31-el-target_probs``)."""

    concern: str
    record: str
    case: object
    why: str = ""


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
    cells: tuple[Cell, ...] = ()
    """The cells preflight runs itself (deployment shapes, head geometry), of the concerns that run."""
    max_running_requests: int | None = None
    """The configuration's ``--max-running-requests`` (``None``: SGLang sizes it by memory): a deployment-shape cell
    of more requests is a limit beyond the configuration, not a failure of it."""
    replica: object = None
    """The :class:`ddtree_compat.e2e.replica.Replica` the ``e2e`` line serves (``None``: it cannot be mirrored)."""

    @property
    def deployed(self) -> Variant:
        return self.variants[0]

    def runs(self) -> tuple[Concern, ...]:
        return tuple(c for c in self.concerns if not c.unchecked)

    def keyword_expression(self) -> str:
        """The ``-k`` expression that selects every sweep cell the plan runs (its own cells: :attr:`cells`); the
        oracle's own cells (they check the reference, not a kernel) left out."""
        return f"({' or '.join(c.expression() for c in self.runs() if c.tests and not c.own)}) and not -oracle-"

    def own_cells(self) -> tuple[Cell, ...]:
        """:attr:`cells` of the concerns that run."""
        running = {c.name for c in self.runs()}
        return tuple(c for c in self.cells if c.concern in running)

    def topologies(self) -> tuple[str, ...]:
        return topologies(self.algorithm, self.topk)

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


def topologies(algorithm: str, topk: int) -> tuple[str, ...]:
    """The tree shapes the drafter builds: a chain for top-k 1 EAGLE and DFlash; every shape for DDTree."""
    from ..families.verify.topologies import TOPOLOGIES

    if algorithm in ("DFLASH",) or (algorithm not in ("DDTREE",) and topk == 1):
        return ("spine",)
    return tuple(TOPOLOGIES)


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


NEEDS_GPU = "needs a GPU"
E2E_TEST = "test_serve"
"""The e2e tier's test function: the replica's cells (:mod:`ddtree_compat.e2e.replica`)."""


def replica_concern(serving: Serving, model: ModelShape, sampling: tuple[str, ...], device: bool,
                    e2e_tests: bool) -> tuple[Concern, object]:
    """The ``e2e`` line: the configuration served on a tiny target of the model's vocabulary and layer types
    (:func:`ddtree_compat.e2e.replica.from_serving`), and the replica it serves (``None`` where it cannot)."""
    from ..e2e.replica import from_serving

    temperatures = tuple(0.0 if s == GREEDY else float(s.split("=", 1)[1]) for s in sampling)
    rep, why = from_serving(serving, model, temperatures)
    title = "served end to end (a tiny target of this vocabulary, these speculative flags)"
    if rep is None:
        return Concern("e2e", title, by_budget=False, unchecked=f"no replica: {why}"), None
    what = (f"{rep.algorithm} on a {'hybrid ' if rep.hybrid else ''}target of vocabulary {rep.vocab}, "
            f"attention {rep.attention}, CUDA graphs {'on' if rep.cuda_graph else 'off'}, clients "
            f"{'/'.join(map(str, rep.concurrency))}, {', '.join(sampling)}"
            + (f", flags {' '.join(rep.flags)}" if rep.flags else ""))
    note = what + "; not mirrored: " + "; ".join(rep.not_mirrored)
    unchecked = "" if device and e2e_tests else (
        f"{NEEDS_GPU}: would serve {what}" if not device else
        "the e2e tier's tests are in a checkout of ddtree-compat (tests/e2e/test_serve.py), not in this installation")
    return Concern("e2e", title, (E2E_TEST,), by_budget=False, own=True, note=note, unchecked=unchecked), rep

DEPLOYMENT_KERNELS = {"verify": ("verify_tree_greedy",), "commit": ("assign_req_to_token", "move_kv")}
"""The deployment-shape kernels of the concerns every speculative configuration runs (scale family names)."""
DDTREE_SCALE = ("ddtree_build", "ddtree_prune", "ddtree_follow", "ddtree_compile")
DDTREE_FA_SCALE = ("ddtree_fa_full", "ddtree_fa_suffix")
"""The DDTree build's kernels at deployment shapes; the FlashAttention metadata ones only where FA3 serves (or the
backend is not known)."""


def context_of(serving: Serving, model: ModelShape) -> tuple[int, str]:
    """The context length the pools are sized for: ``--context-length``, else the model's
    ``max_position_embeddings`` (what SGLang takes then), else the scale family's 1M slice; and where it came from."""
    from ..families.scale.records import SLICE

    if serving.get("context_length"):
        return int(serving.get("context_length")), "--context-length"
    if model.context:
        return model.context, "the model's max_position_embeddings"
    return SLICE.context, "not given and not in config.json: the scale family's"


def samplers(serving: Serving, has_ddtree: bool) -> tuple[str, ...]:
    """The sampling kernels the configuration's sampler calls at temperature > 0: DDTree's own sampler, DFlash's
    chain sampler, EAGLE's target-only tree sampler."""
    if serving.algorithm == "DDTREE":
        return ("ddtree_sample",) if has_ddtree else ()
    if serving.algorithm == "DFLASH":
        return ("chain_speculative_sampling",) + (("ddtree_sample",) if serving.ddtree_in_dflash and has_ddtree
                                                  else ())
    return ("tree_speculative_sampling",)


def deployment_kernels(serving: Serving, sampling: tuple[str, ...], has_ddtree: bool) -> tuple[str, ...]:
    """The scale family's kernels this configuration runs: greedy verify, commit's ``assign_req_to_token`` /
    ``move_kv``, the samplers when it samples, the DDTree build's kernels."""
    out = [*DEPLOYMENT_KERNELS["verify"], *DEPLOYMENT_KERNELS["commit"]]
    if any(s != GREEDY for s in sampling):
        out += samplers(serving, has_ddtree)
    if has_ddtree and (serving.algorithm == "DDTREE" or serving.ddtree_in_dflash):
        out += [k for k in DDTREE_SCALE if k != "ddtree_prune" or prunes(serving) is not False]
        if serving.attention_backend in (None, "fa3"):
            out += DDTREE_FA_SCALE
    return tuple(dict.fromkeys(out))


def deployment_cells(serving: Serving, model: ModelShape, budget: int, kernels: tuple[str, ...]) -> list[Cell]:
    """Each kernel's scale cells at the configuration's shape: the batch ``--max-running-requests``, and the
    batches just below and above each 2^31 / 2^32 limit of its tensors at that vocabulary, budget and context
    (those up to the larger of the family's largest batch and ``--max-running-requests``)."""
    from ..families.scale import boundaries as bd
    from ..families.scale.records import ScaleCase

    mrr = serving.max_running_requests
    context, _ = context_of(serving, model)
    out = []
    for kernel in kernels:
        axes = bd.KERNELS[kernel].axes
        shape = bd.Shape(model.vocab if "vocab" in axes else 0, budget if "budget" in axes else 0,
                         context if "context" in axes else 0)
        seen = set()
        if mrr:
            out.append(Cell("deployment", kernel + "@scale", ScaleCase(kernel, int(mrr), shape.vocab, shape.budget,
                                                                       shape.context, "deployed").check(),
                            f"at --max-running-requests {mrr}"))
            seen.add(int(mrr))
        for b in bd.boundaries(kernel, shape, max(bd.MAX_BATCH, int(mrr or 0))):
            if b.side != "top" and b.batch not in seen:
                seen.add(b.batch)
                out.append(Cell("deployment", kernel + "@scale", ScaleCase.of(b).check(), b.label))
    return out


GEOMETRY_PREFIX = {True: 1000, False: 17}
"""Prefix tokens of the head-geometry cells: on a GPU the verify-attention family's device shape, on the
interpreter its interpret shape (the interpreter runs every program in Python)."""


def geometry_cells(vs: tuple[Variant, ...], model: ModelShape, serving: Serving, topologies: tuple[str, ...],
                   arch: str | None, device: bool) -> list[Cell]:
    """Verify attention at the model's own head geometry (query heads, GQA group, head dim), one tree per
    variant and topology kind (a chain, and a branching tree where the drafter builds one), at a batch of
    ``min(3, --max-running-requests)``; natively and, where ``arch`` has a tile choice, under that arch's tiles.
    bf16 on a GPU; on the interpreter fp16 (it has no bf16 arithmetic) and one tree per variant."""
    from ..arch import TILE_ARCHES
    from ..families.attention.records import NATIVE, PAGE_SIZES, AttentionCase
    from ..families.verify.records import DEFAULT_VOCAB, make_case

    if not model.kv_heads or model.heads % model.kv_heads or model.head_dim % 16:
        return []
    batch = min(3, serving.max_running_requests or 3)
    page = serving.page_size if serving.page_size in PAGE_SIZES else 16
    dtype = ("bf16" if "bf" in model.dtype else "fp16") if device else "fp16"
    tiles = (NATIVE, *((arch,) if arch in TILE_ARCHES else ()))
    trees = [t for t in ("spine", "random") if t in topologies] or list(topologies[:1])
    if not device:  # the interpreter: one tree per variant, the branching one where the drafter builds trees
        trees = trees[-1:]
    out = []
    for v in vs:
        for topology in trees:
            tree = make_case(v.budget, topology, "none", batch, v.block_size, DEFAULT_VOCAB)
            if tree is None:
                continue
            if v.capacity is not None:
                tree = replace(tree, capacity=v.capacity, accept_width=v.capacity)
            for t in tiles:
                case = AttentionCase(tree, heads=model.heads, group=model.heads // model.kv_heads,
                                     head_dim=model.head_dim, prefix=GEOMETRY_PREFIX[device], dtype=dtype,
                                     page_size=page, padding="nodes" if tree.slots > tree.num_nodes else "",
                                     tiles=t).check()
                out.append(Cell("geometry", "verify_attention", case, v.label()))
    return out


STATIC_ATTENTION = ("sglang-triton", "flashinfer")
"""The backends with static builds of verify attention."""
STATIC_SAMPLERS = ("tree_speculative_sampling", "chain_speculative_sampling")
STATIC_LINEAR = ("gdn_verify_tree", "gdn_verify_chain", "conv_verify_tree")
STATIC_RING = "gdn_verify_chain-ring"
"""The CuTe DSL kernel of SGLang's ReplaySSM fold (``--enable-linear-replayssm``)."""


def static_narrowing(serving: Serving, model: ModelShape, sampling: tuple[str, ...], att_backends: tuple[str, ...],
                     has_ddtree: bool) -> str:
    """The static builds this configuration loads: verify attention of the resolved backend only (every one's
    when it is not known), the samplers of its drafter when it samples (none when greedy), the linear-attention
    kernels for a hybrid model only (the ReplaySSM fold's CuTe DSL kernel only where ReplaySSM is on)."""
    drop = []
    if att_backends:
        drop += [f"-{b}-verify_attention-" for b in STATIC_ATTENTION if b not in att_backends]
    used = samplers(serving, has_ddtree) if serving.algorithm and any(s != GREEDY for s in sampling) else ()
    drop += [f"-{k}-" for k in STATIC_SAMPLERS if k not in used]
    if not model.hybrid:
        drop += [f"-{k}-" for k in STATIC_LINEAR]
    elif not serving.get("enable_linear_replayssm"):
        drop.append(f"-{STATIC_RING}-")  # SGLang's CuTe DSL fold runs under ReplaySSM only
    return " and ".join(f"not {d}" for d in drop)


def attention_narrowing(backends: tuple[str, ...], arch: str | None) -> str:
    """The verify-attention cells of the plan's case files that answer it: one plant per tree (the mask does not
    depend on the accepted path), the native tiles and ``arch``'s, the resolved backend's."""
    from ..arch import TILE_ARCHES

    tiles = "(native or emulated-" + arch + ")" if arch in TILE_ARCHES else "native"
    terms = ["-none-bs", tiles]
    if backends:
        terms.append("(" + " or ".join(f"-{b}-" for b in backends) + ")")
    return " and ".join(terms)


def prunes(serving: Serving) -> bool | None:
    """Whether the DDTree build prunes its trees here (``is_ddtree_prune``); ``None``: this build has no such flag."""
    return bool(serving.get("is_ddtree_prune")) if "is_ddtree_prune" in serving.fields else None


def ddtree_narrowing(serving: Serving, sampling: tuple[str, ...]) -> str:
    """The DDTree build's kernel cells this configuration reaches: its FlashAttention metadata kernels only under
    FA3 (or an attention backend not resolved here), its prune kernel and prune buckets only where it prunes, its
    sampling verify only where it samples."""
    terms = []
    if serving.attention_backend not in (None, "fa3"):
        terms.append("not ddtree_fa_")
    if prunes(serving) is False:
        terms += ["not -ddtree_prune-", "not -prune-"]
    if all(s == GREEDY for s in sampling):
        terms.append("not ddtree_sample")
    return " and ".join(terms)


def make_plan(serving: Serving, model: ModelShape, arch: str | None, sampling: tuple[str, ...] = (GREEDY, "T=1"),
              has_ddtree: bool = False, ddtree_name: str = "", device: bool = False, e2e_tests: bool = True) -> Plan:
    """The plan for one resolved configuration on ``arch`` (``None``: no GPU here and no ``--arch``).

    ``has_ddtree``: a DDTree build is under test (its kernels); ``ddtree_name``: its column, which runs FA3's
    verify attention through the build's FA metadata; ``device``: a GPU is here (the deployment-shape cells and the
    replica run); ``e2e_tests``: the e2e tier's test file is here (a checkout).
    """
    algorithm = serving.algorithm
    if not algorithm or serving.budget is None:
        vs: tuple[Variant, ...] = ()
    else:
        vs = variants(serving)
    mrr = serving.max_running_requests
    grid = BATCHES if device else INTERPRET_BATCHES
    batches = tuple(sorted({min(b, mrr) for b in grid})) if mrr else grid
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
    own: list[Cell] = []
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
                    backends=att_backends, note=att_note, narrow=attention_narrowing(att_backends, arch)),
        ]
        if model.hybrid:
            concerns.append(Concern("linear", "linear attention: recurrent state per node, conv update, state commit",
                                    ("test_linear_attention",), keyword=f"b{budget}-",
                                    note=f"{model.linear_key_heads}/{model.linear_value_heads} GDN heads in the "
                                         "model; the family's Qwen3.5 / Qwen3-Next shapes"))
        if any(s != GREEDY for s in sampling):
            used = samplers(serving, has_ddtree)
            concerns.append(Concern("sampling", "speculative sampling (temperature > 0)", ("test_sampling",),
                                    keyword="(" + " or ".join(used) + ")" if used else "", by_budget=False,
                                    note=f"{', '.join(used)} at the family's own budgets",
                                    unchecked="" if used else "DDTree samples with its build's own kernel: no "
                                    "DDTree build under test (DDTREE_IMPLS)"))
        if algorithm == "DDTREE" or serving.ddtree_in_dflash:
            concerns.append(Concern("ddtree", "the DDTree build's own kernels (tree build, follow, metadata)",
                                    ("test_ddtree_kernel", "test_ddtree_round_in_one_cuda_graph"),
                                    keyword=f"b{budget}", narrow=ddtree_narrowing(serving, sampling),
                                    unchecked="" if has_ddtree else
                                    "no DDTree build under test: point DDTREE_IMPLS at the DDTree SGLang you serve"))
        geometry = f"{model.heads} query / {model.kv_heads} KV heads, head dim {model.head_dim}"
        cells = geometry_cells(vs, model, serving, topologies(algorithm, serving.topk), arch, device)
        concerns.append(Concern("geometry", f"verify attention at the model's heads ({geometry})",
                                ("geometry",), backends=att_backends, own=True,
                                note=f"{att_note}; {'bf16' if device else 'fp16 (the interpreter has no bf16)'}, "
                                     f"prefix {GEOMETRY_PREFIX[device]}",
                                unchecked="" if cells else f"{geometry}: no verify-attention case has this shape "
                                                           "(heads a multiple of KV heads, head dim of 16s)"))
        own.extend(cells)
        kernels = deployment_kernels(serving, sampling, has_ddtree)
        context, where = context_of(serving, model)
        mrr_text = f"--max-running-requests {mrr}" if mrr else "no --max-running-requests (SGLang sizes it by memory)"
        what = (f"{', '.join(kernels)} at {mrr_text} x vocabulary {model.vocab} x context {context} ({where}) "
                f"x budget {budget}, and each kernel's batches around 2^31 / 2^32")
        cells = deployment_cells(serving, model, budget, kernels)
        own.extend(cells)
        concerns.append(Concern("deployment", "deployment shapes (pools and logits past 2^31 / 2^32 elements)",
                                ("deployment",), by_budget=False, own=True, note=f"{len(cells)} cells: {what}",
                                unchecked="" if device else f"{NEEDS_GPU}: would run {len(cells)} cells: {what}"))
    if arch:
        concerns.append(Concern("static", f"compiles and fits on {arch} (static builds)", ("test_static",),
                                keyword=f"static-{arch}-", by_budget=False,
                                narrow=static_narrowing(serving, model, sampling, att_backends, has_ddtree)))
    else:
        concerns.append(Concern("static", "compiles and fits on the serving GPU", by_budget=False,
                                unchecked="no GPU here and no --arch: give --arch sm120 (or the serving card's)"))
    replica = None
    if vs:
        concern, replica = replica_concern(serving, model, sampling, device, e2e_tests)
        concerns.append(concern)
    notes = () if vs else ("no speculative decoding in these flags: only the static builds apply",)
    return Plan(algorithm, vs, tuple(concerns), batches, model.vocab, serving.topk, arch, tuple(sampling), notes,
                tuple(own), int(mrr) if mrr else None, replica)
