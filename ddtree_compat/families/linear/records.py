"""The linear-attention layers of a hybrid target in speculative verify: one record per kernel, one case type.

A hybrid target (Qwen3.5 / 3.6 ``Qwen3_5ForCausalLM``, Qwen3-Next) alternates Gated DeltaNet layers with full
attention. In a verify forward each linear-attention layer runs, per request and per verified node:

* the short causal convolution over the node's own input and its ancestors' (``conv_verify_tree``: SGLang's
  ``causal_conv1d_update`` with the tree given as EAGLE retrieve links, which also writes the parent table);
* the gated delta rule from the node's parent's recurrent state (``gdn_verify_tree``: SGLang's Triton
  ``fused_sigmoid_gating_delta_rule_update`` with that parent table; ``gdn_verify_chain``: the same kernel, or
  FlashInfer's ``gated_delta_rule_mtp``, without one, on chains only);
* the state of every node kept in the verify scratch, the persistent caches left as they were;

and after acceptance the state of each request's last accepted node is copied into the persistent caches
(``ssm_state_commit``: SGLang's ``fused_mamba_state_scatter_with_mask``; ``conv_window_commit``:
``fused_conv_window_scatter_with_mask``).

The rule every check holds: a node's state is its parent's state updated by the node's own token, never a
sibling's. Expected values: :mod:`.oracle` (float64). Layout and judging: :mod:`.checks`.

Cases: a verify case (trees, batch, the capacity ``C`` the scratch is sized at) plus the layer's geometry.
Profiles follow the verify-attention profile: ``interpret`` (small head counts, CPU CI) and ``device``
(the Qwen3.5 / 3.6 and Qwen3-Next geometries, their tensor-parallel shards, both state dtypes).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ...contract import CaseContext, KernelRecord
from ...errors import CaseError
from ..verify.records import NestedCase, VerifyCase, make_case

SCHEMA = "ddtree-compat/linear-case/1"
STATE_DTYPES = ("fp32", "bf16")
"""The recurrent state's dtype (SGLang ``--mamba-ssm-dtype``: ``float32``, the Qwen3.5 configs' default, or
``bfloat16``)."""
IO_DTYPES = ("fp32", "bf16")
"""The layer's activations (q, k, v, gates, conv input): bf16 as served; fp32 on the interpret tier."""
CONV_KERNELS = (2, 3, 4)
HEAD_DIMS = (64, 128)
GEOMETRIES = {
    # name: (linear_num_key_heads, linear_num_value_heads, linear_key_head_dim = linear_value_head_dim,
    #        linear_conv_kernel_dim), from the models' public config.json
    "qwen3.5-27b": (16, 48, 128, 4),
    "qwen3-next-80b": (16, 32, 128, 4),
}
"""The head geometry of the field's models (one GPU; a tensor-parallel rank holds ``heads / tp`` of each)."""
PROFILES = ("interpret", "device")


@dataclass(frozen=True)
class LinearCase(NestedCase):
    """One verify of a linear-attention layer (and its commit).

    Attributes:
        verify: the trees, batch and capacity ``C`` (the scratch's draft-token pitch, as the DDTree workers size it).
        key_heads: ``H`` (q and k heads of the layer on this rank).
        value_heads: ``HV`` (v heads; a multiple of ``H``).
        head_dim: ``K = V`` (128 in the field's models).
        conv_kernel: the short convolution's width ``W`` (4 in the field's models).
        state_dtype: ``fp32`` | ``bf16``: the recurrent state and the conv windows' scratch.
        io_dtype: ``fp32`` | ``bf16``: q, k, v, the gate inputs and the conv input.
        tp: the tensor-parallel degree the head counts were divided by (informational, in the id).
    """

    SCHEMA = SCHEMA
    KIND = "linear"

    verify: VerifyCase
    key_heads: int
    value_heads: int
    head_dim: int = 128
    conv_kernel: int = 4
    state_dtype: str = "fp32"
    io_dtype: str = "bf16"
    tp: int = 1
    rows: int = 0
    """A deployment-shape case: the batch's requests are the last of ``rows`` (scratch rows ``rows - batch ..
    rows - 1`` of a scratch of ``rows + 1``, as SGLang numbers a verify's rows by batch position), so the kernel's
    offsets reach those of a verify of ``rows`` requests (:func:`deployment_cases`). ``0``: the scratch holds the
    batch alone."""

    @property
    def serial(self) -> bool:
        """Holds GBs of GPU memory (a deployment-shape case): run one at a time."""
        return bool(self.rows)

    @property
    def conv_dim(self) -> int:
        """Channels of the short convolution: q, k and v of the layer side by side (``2 H K + HV V``)."""
        return (2 * self.key_heads + self.value_heads) * self.head_dim

    @property
    def shape(self) -> str:
        tp = f"-tp{self.tp}" if self.tp != 1 else ""
        rows = f"-rows{self.rows}" if self.rows else ""
        return (f"h{self.key_heads}v{self.value_heads}d{self.head_dim}w{self.conv_kernel}"
                f"-s{self.state_dtype}-io{self.io_dtype}{tp}{rows}")

    @property
    def is_chain(self) -> bool:
        """Every node's parent is the node before it: what a verify without a parent table assumes."""
        return all(p == i - 1 for i, p in enumerate(self.verify.requests[0].parents)) and all(
            r.parents == self.verify.requests[0].parents for r in self.verify.requests)

    @property
    def id(self) -> str:
        return f"{self.verify.id}-{self.shape}"

    def coordinates(self) -> dict:
        return {**self.verify.coordinates(), "shape": self.shape}

    def check(self) -> "LinearCase":
        where = f"linear-attention case {self.id}"
        if self.state_dtype not in STATE_DTYPES:
            raise CaseError("state_dtype", self.state_dtype, ", ".join(STATE_DTYPES), "unknown state dtype", where)
        if self.io_dtype not in IO_DTYPES:
            raise CaseError("io_dtype", self.io_dtype, ", ".join(IO_DTYPES), "unknown activation dtype", where)
        if self.head_dim not in HEAD_DIMS:
            raise CaseError("head_dim", self.head_dim, ", ".join(map(str, HEAD_DIMS)), "unsupported head dim", where)
        if self.conv_kernel not in CONV_KERNELS:
            raise CaseError("conv_kernel", self.conv_kernel, ", ".join(map(str, CONV_KERNELS)),
                            "unsupported conv width", where)
        if self.key_heads < 1 or self.value_heads < 1 or self.value_heads % self.key_heads:
            raise CaseError("value_heads", (self.key_heads, self.value_heads),
                            "positive head counts, value heads a multiple of key heads", "bad head geometry", where)
        if self.rows and self.rows < self.verify.batch:
            raise CaseError("rows", self.rows, f"at least the batch ({self.verify.batch})", "fewer rows than requests",
                            where)
        self.verify.check()
        return self


def geometry(name: str, tp: int = 1) -> dict:
    """A model's layer geometry on one of ``tp`` ranks, as :class:`LinearCase` fields.

    Raises:
        CaseError: an unknown model, or a degree that does not divide its head counts.
    """
    if name not in GEOMETRIES:
        raise CaseError("geometry", name, ", ".join(GEOMETRIES), "unknown head geometry")
    h, hv, d, w = GEOMETRIES[name]
    if tp < 1 or h % tp or hv % tp:
        raise CaseError("tp", tp, f"a divisor of {h} and {hv}", "does not divide the heads", name)
    return dict(key_heads=h // tp, value_heads=hv // tp, head_dim=d, conv_kernel=w, tp=tp)


def worker_capacity(budget: int, block_size: int = 16) -> int:
    """The draft-token pitch the DDTree workers size the verify scratch at: ``max(block_size, B + 1)`` (16 for
    budgets 8 and 12 at block 16: the live width ``B + 1`` is below it)."""
    return max(block_size, budget + 1)


def _tree(budget: int, topology: str, plant: str, batch: int, capacity: int | None) -> VerifyCase:
    case = make_case(budget, topology, plant, batch, capacity=capacity)
    if case is None:
        raise CaseError("tree", (budget, topology, plant, batch), "a topology that exists at this budget", "no such tree")
    return case


# (budget, topology, plant, batch, capacity: None exact | "worker"), then the layer: (H, HV, d, W, state, io)
INTERPRET_CELLS = (
    (8, "spine", "deep", 2, "worker", (1, 2, 128, 4, "fp32", "fp32")),
    (12, "spine", "partial", 2, "worker", (1, 2, 128, 4, "bf16", "fp32")),
    (15, "spine", "deep", 1, None, (1, 1, 128, 4, "fp32", "fp32")),
    (7, "fanout", "first", 2, "worker", (1, 2, 128, 4, "fp32", "fp32")),
    (16, "bf-flat", "sibling", 2, None, (1, 2, 128, 4, "fp32", "fp32")),
    (16, "balanced", "deep", 1, None, (2, 2, 64, 3, "bf16", "fp32")),
    (32, "bf-peaked", "deep", 1, None, (1, 2, 128, 4, "fp32", "fp32")),
    (12, "random", "partial", 3, "worker", (1, 1, 128, 2, "fp32", "fp32")),
)
"""Small shapes for the CPU interpreter: spine budgets 8 / 12 / 15 at block 16 (8 and 12 with the worker's
capacity 16 above the live width), a flat fan-out, branching best-first and balanced trees, a random tree;
both state dtypes; conv widths 2 / 3 / 4."""

DEVICE_TREES = ((8, "spine", "deep", 8, "worker"), (12, "spine", "partial", 8, "worker"), (15, "spine", "deep", 4, None),
                (16, "bf-flat", "sibling", 4, None), (32, "bf-peaked", "deep", 4, None), (64, "random", "partial", 4, None),
                (7, "fanout", "first", 8, "worker"), (64, "balanced", "deep", 2, None))
DEVICE_LAYERS = ((geometry("qwen3.5-27b"), "fp32"), (geometry("qwen3.5-27b"), "bf16"),
                 (geometry("qwen3.5-27b", tp=4), "fp32"), (geometry("qwen3-next-80b", tp=2), "fp32"),
                 (geometry("qwen3-next-80b"), "bf16"))
"""The device profile's layers: Qwen3.5 / 3.6-27B's (one GPU, fp32 and bf16 state), a 4-way tensor-parallel rank of
it, and Qwen3-Next-80B's (2-way, and one GPU in bf16), bf16 activations as served. The default grid gives each tree of
:data:`DEVICE_TREES` one of them in turn (every layer and both state dtypes met; the verify-time conv kernel compiles
once per live width and channel count, 5-36 s each on an H100); the full grid, every tree at every layer."""


def _capacity(budget: int, capacity) -> int | None:
    return worker_capacity(budget) if capacity == "worker" else capacity


@lru_cache(maxsize=4)
def linear_cases(profile: str, full: bool = False) -> tuple[LinearCase, ...]:
    """The cases of a profile, in a stable order: :data:`INTERPRET_CELLS`, or :data:`DEVICE_TREES` with
    :data:`DEVICE_LAYERS` in turn (``full``: every tree at every layer)."""
    if profile not in PROFILES:
        raise CaseError("linear-attention profile", profile, ", ".join(PROFILES), "unknown profile")
    if profile == "interpret":
        cases = [LinearCase(_tree(b, t, p, bs, _capacity(b, cap)), key_heads=h, value_heads=hv, head_dim=d,
                            conv_kernel=w, state_dtype=s, io_dtype=io)
                 for b, t, p, bs, cap, (h, hv, d, w, s, io) in INTERPRET_CELLS]
    else:
        cases = [LinearCase(_tree(b, t, p, bs, _capacity(b, cap)), state_dtype=s, io_dtype="bf16", **layer)
                 for i, (b, t, p, bs, cap) in enumerate(DEVICE_TREES) for j, (layer, s) in enumerate(DEVICE_LAYERS)
                 if full or j == i % len(DEVICE_LAYERS)]
    return tuple({c.id: c.check() for c in cases}.values())


EVERY_LIMIT = ((31, "fp32"), (32, "fp32"), (31, "bf16"))
"""The 2^31 and 2^32 element limits of the scratch's offsets, fp32 state; 2^31 in a bf16 state too (offsets count
elements: the same rows, half the bytes)."""
DEPLOYMENT_TREES = (((15, "spine", "deep", 2, None), EVERY_LIMIT),
                    ((8, "spine", "deep", 2, "worker"), ((31, "fp32"),)),
                    ((15, "random", "partial", 2, None), ((31, "fp32"),)))
"""The deployment-shape cases' trees and the limits each is tried at: the field's spine budget 15 at every limit, budget
8 in the worker's capacity 16 and a branching tree at 2^31; two requests each (the verify's last two)."""


def deployment_rows(capacity: int, value_heads: int, head_dim: int, bits: int) -> tuple[int, int, int]:
    """The verify sizes (requests ``n``, scratch rows ``0 .. n - 1``) around ``2^bits`` in one layer's
    ``[rows + 1, C, HV, V, K]`` scratch, a row being ``C * HV * V * K`` elements: the largest ``n`` whose every offset
    stays below the limit, the first whose last element's offset reaches it (a kernel that forms the whole offset in
    32 bits wraps there), and the first whose last row *starts* past it (one that multiplies the row index alone in
    32 bits wraps there)."""
    per = capacity * value_heads * head_dim * head_dim
    last = -(-((1 << bits) + 1) // per)  # n * per - 1 >= 2^bits
    start = -(-(1 << bits) // per) + 1  # (n - 1) * per >= 2^bits
    return last - 1, last, start


@lru_cache(maxsize=2)
def deployment_cases(model: str = "qwen3.5-27b") -> tuple[LinearCase, ...]:
    """The verify at deployment sizes: for each tree of :data:`DEPLOYMENT_TREES` and each of its limits, the verify
    of the most requests whose scratch offsets stay below ``2^bits``, of the fewest whose last element passes it and
    of the fewest whose last row starts past it (:func:`deployment_rows`: 170, 171 and 172 requests at capacity 16
    in the Qwen3.5 / 3.6-27B layer's 48 value heads at 2^31), one GPU's layer. SGLang 0.5.23 widens the scratch row
    to 64 bits before it multiplies (its kernel's own comment says why); a copy of the kernel that does not wraps
    there."""
    layer = geometry(model)
    out = []
    for (b, t, p, bs, cap), limits in DEPLOYMENT_TREES:
        tree = _tree(b, t, p, bs, _capacity(b, cap))
        for bits, state in limits:
            for rows in dict.fromkeys(deployment_rows(tree.slots, layer["value_heads"], layer["head_dim"], bits)):
                out.append(LinearCase(tree, state_dtype=state, io_dtype="bf16", rows=rows, **layer))
    return tuple({c.id: c.check() for c in out}.values())


def _cases(ctx: CaseContext) -> tuple:
    return linear_cases(ctx.attention_profile, ctx.profile == "full")


def _verify_tree_cases(ctx: CaseContext) -> tuple:
    """The verify's cases, and on the device profile its deployment-shape cases."""
    return _cases(ctx) + (deployment_cases() if ctx.attention_profile == "device" else ())


def conv_build(case: LinearCase) -> tuple:
    """What SGLang's verify-time conv kernel compiles once for (its live width, channels and width are constexpr)."""
    return case.verify.num_nodes, case.conv_dim, case.conv_kernel


def _chains(ctx: CaseContext) -> tuple:
    return tuple(c for c in _cases(ctx) if c.is_chain)


def _record(name: str, summary: str, cases=_cases) -> KernelRecord:
    return KernelRecord(name=name, summary=summary, case_param="ddtree_linear_case", case_type=LinearCase,
                        cases=cases, run=f"ddtree_compat.families.linear.checks:{name}")


GDN_VERIFY_TREE = _record(
    "gdn_verify_tree",
    "SGLang's Triton fused_sigmoid_gating_delta_rule_update in target verify with a parent table: each node's "
    "output and recurrent state from its parent's state, the scratch [slots + 1, C, HV, V, K] written per node, "
    "the persistent state untouched; at deployment sizes, the last requests of a verify past 2^31 / 2^32 scratch "
    "elements", cases=_verify_tree_cases)
GDN_VERIFY_CHAIN = _record(
    "gdn_verify_chain",
    "the same verify without a parent table (SGLang's Triton kernel; FlashInfer's gated_delta_rule_mtp where the "
    "arch has it): the nodes run as one chain, so only chain trees are its cases", cases=_chains)
CONV_VERIFY_TREE = _record(
    "conv_verify_tree",
    "SGLang's causal_conv1d_update in target verify with EAGLE retrieve links: each node's convolution over "
    "itself and its ancestors, its window [C, dim, W - 1] in the scratch, the parent table written")
SSM_STATE_COMMIT = _record(
    "ssm_state_commit",
    "SGLang's fused_mamba_state_scatter_with_mask after verify (update_mamba_state_after_mtp_verify): the "
    "recurrent state of each request's last accepted node copied from the scratch into its persistent slot, every "
    "layer; a request whose step is -1 left as it was")
CONV_WINDOW_COMMIT = _record(
    "conv_window_commit",
    "SGLang's fused_conv_window_scatter_with_mask after verify: the conv window of each request's last accepted "
    "node copied into its persistent slot, every layer")

RECORDS = (GDN_VERIFY_TREE, GDN_VERIFY_CHAIN, CONV_VERIFY_TREE, SSM_STATE_COMMIT, CONV_WINDOW_COMMIT)
KERNELS = tuple(r.name for r in RECORDS)
