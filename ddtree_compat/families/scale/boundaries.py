"""Index boundaries, derived: for every tensor a kernel indexes, the batch at which its last element's offset (or last
byte's, where the kernel computes byte offsets) passes 2^31 and 2^32, from the shapes SGLang and the DDTree workers
allocate. Pure (shapes in, cells out), torch-free: ``tests/unit/test_scale.py`` holds it.

Every tensor's size is affine in the batch: ``numel(bs) = per_batch * bs + fixed`` (the pools' padding rows and
pages are the ``fixed`` part). A 32-bit signed offset breaks at element ``2^31``: the first batch whose last offset
``numel - 1`` reaches the limit is ``above``, the one before it ``below`` (every element's offset fits); the same at
``2^32`` (an unsigned 32-bit offset). A kernel that forms byte offsets (the KV copy's pointer tables) has the same
two limits in bytes.

The shapes, as the systems under test allocate them (facts read from their code, cited by file):

* target probabilities ``[bs, q, V]`` float32, ``q = B + 1`` draft tokens of the tree with its root: SGLang's EAGLE
  worker and the DDTree workers pass the whole verify forward's softmax (``eagle_info.py`` ``verify``,
  ``ddtree_worker*.py``); the tree sampler's ``draft_probs`` has the same shape, the chain sampler's ``[bs, q - 1, V]``;
* ``req_to_token [max_running_requests + 1, context]`` int32: ``ReqToTokenPool`` (``mem_cache/memory_pool.py``,
  ``size + 1`` rows, row 0 the padded batches' row), ``context = context_len + extra``;
* a layer's K (and V) buffer ``[pool_tokens + page_size, kv_heads, head_dim]``: ``MHATokenToKVPool._create_buffers``;
  a pool that serves ``bs`` requests of ``context`` tokens holds ``bs * context`` tokens;
* the FlashAttention tree-verify page table ``[bs * q, context + q]`` int32 (rancy-ddtree's
  ``build_ddtree_fa_full_metadata_triton``; ``docs/ddtree-impls.md``);
* verify attention: the KV pool as above (a request's prefix of ``context`` tokens in it, the pool's last requests
  past 2^31 elements) and the tree mask ``[sum of q * (context + q)]`` (SGLang's ``custom_mask``, flattened per
  request, ``eagle_info.py`` / ``triton_backend.py``);
* the DDTree verify-input compile's packed tree mask: the same ``[sum of q * (past + q)]`` booleans
  (``compile_ddtree_tree_triton``'s ``tree_attention_mask``, past = the context), beside its ``[bs * q]`` ids and
  positions;
* the FlashAttention suffix metadata (tree attention's cascade): its page table ``[bs * q, q]`` and the
  ``req_to_token`` rows it reads (``build_ddtree_fa_suffix_metadata_triton``);
* verify attention on FA3's cascade (a DDTree tree's prefix pass, its suffix pass over
  ``build_ddtree_fa_suffix_metadata_triton``'s page table, and their merge): the KV pool and mask as above;
* the tree build's top-k ``[bs, L, K]`` (``L`` = block size - 1 = 15, ``K`` = ``B``) and its visibility
  ``[bs, B + 1, B + 1]`` (``build_ddtree_tree_triton``), the prune's input and output trees of that shape, the greedy
  follow's ``[bs, q]`` (``follow_verified_tree_triton``) and the tree verify's ``[bs, q]`` int64 tree tensors
  (``verify_tree_greedy``): no boundary within any deployment's batch; their cells sit at the top of the range
  instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...sizes import gib  # noqa: F401 - the scale family's messages name sizes with it

LIMITS = (31, 32)
"""The offsets' widths checked: a signed (2^31) and an unsigned (2^32) 32-bit offset."""
MAX_BATCH = 4096
"""The largest batch (``--max-running-requests``) a deployment runs; a boundary past it is out of range."""
VOCABS = (32000, 128256, 151936, 248320)
"""Llama 2 / Mistral, Llama 3, Qwen2.5 / Qwen3, Qwen3.5 / 3.6."""
BUDGETS = (8, 16, 32, 64, 128)
CONTEXTS = (32768, 131072, 1048576)
KV_LAYOUT = (8, 128, 2)
"""(kv_heads, head_dim, bytes): a Llama 3 8B / Qwen3 8B layer's K buffer in bf16."""
PAGE_SIZE = 1


@dataclass(frozen=True)
class Shape:
    """The dimensions a kernel's tensors are sized from, batch excluded."""

    vocab: int = 0
    budget: int = 0
    context: int = 0
    page_size: int = PAGE_SIZE

    @property
    def q(self) -> int:
        """The verify's live width: ``B + 1`` draft tokens (the tree with its root)."""
        return self.budget + 1


@dataclass(frozen=True)
class Indexed:
    """A tensor a kernel indexes: its dims at batch ``bs``, its element size, and whether the kernel forms byte
    offsets into it."""

    name: str
    dims: Callable[[Shape, int], tuple[int, ...]]
    itemsize: int
    byte_offsets: bool = False

    def numel(self, shape: Shape, bs: int) -> int:
        n = 1
        for d in self.dims(shape, bs):
            n *= d
        return n

    def affine(self, shape: Shape) -> tuple[int, int]:
        """``(per_batch, fixed)``: ``numel(bs) = per_batch * bs + fixed`` (every size here is affine in ``bs``)."""
        fixed = self.numel(shape, 0)
        return self.numel(shape, 1) - fixed, fixed

    def nbytes(self, shape: Shape, bs: int) -> int:
        return self.numel(shape, bs) * self.itemsize


_KV_HEADS, _HEAD_DIM, _KV_BYTES = KV_LAYOUT

TARGET_PROBS = Indexed("target_probs", lambda s, bs: (bs, s.q, s.vocab), 4)
TREE_DRAFT_PROBS = Indexed("draft_probs", lambda s, bs: (bs, s.q, s.vocab), 4)
CHAIN_DRAFT_PROBS = Indexed("draft_probs", lambda s, bs: (bs, s.q - 1, s.vocab), 4)
TREE_TENSORS = Indexed("candidates", lambda s, bs: (bs, s.q), 8)
REQ_TO_TOKEN = Indexed("req_to_token", lambda s, bs: (bs + 1, s.context), 4)
K_BUFFER = Indexed("k_buffer", lambda s, bs: (bs * s.context + s.page_size, _KV_HEADS, _HEAD_DIM), _KV_BYTES,
                   byte_offsets=True)
ATTN_HEADS = 32
"""Query heads of the verify-attention cells (GQA over :data:`KV_LAYOUT`'s 8 KV heads: Llama 3 8B / Qwen3 8B)."""
KV_POOL = Indexed("k_buffer", lambda s, bs: (bs * s.context + s.page_size, _KV_HEADS, _HEAD_DIM), _KV_BYTES)
V_POOL = Indexed("v_buffer", lambda s, bs: (bs * s.context + s.page_size, _KV_HEADS, _HEAD_DIM), _KV_BYTES)
TREE_MASK = Indexed("custom_mask", lambda s, bs: (bs * s.q * (s.context + s.q),), 1)
FA_PAGE_TABLE = Indexed("page_table", lambda s, bs: (bs * s.q, s.context + s.q), 4)
FA_SUFFIX_TABLE = Indexed("page_table", lambda s, bs: (bs * s.q, s.q), 4)
COMPILE_MASK = Indexed("tree_attention_mask", lambda s, bs: (bs * s.q * (s.context + s.q),), 1)
BUILD_DEPTHS = 15
"""``L``: the tree build's depth limit at block size 16 (the field's)."""
TOP_LOG_PROBS = Indexed("top_log_probs", lambda s, bs: (bs, BUILD_DEPTHS, s.budget), 4)
TOP_TOKEN_IDS = Indexed("top_token_ids", lambda s, bs: (bs, BUILD_DEPTHS, s.budget), 8)
BUILD_VISIBILITY = Indexed("out_visibility", lambda s, bs: (bs, s.q, s.q), 1)
IN_VISIBILITY = Indexed("in_visibility", lambda s, bs: (bs, s.q, s.q), 1)
FOLLOW_TENSORS = Indexed("draft_tokens", lambda s, bs: (bs, s.q), 8)


@dataclass(frozen=True)
class Kernel:
    """A kernel's indexed tensors and the dimensions its scale cells sweep (the rest stay 0)."""

    name: str
    tensors: tuple[Indexed, ...]
    axes: tuple[str, ...]  # which of vocab / budget / context its tensors depend on

    def shapes(self, vocabs=VOCABS, budgets=BUDGETS, contexts=CONTEXTS) -> list[Shape]:
        values = {"vocab": vocabs if "vocab" in self.axes else (0,),
                  "budget": budgets if "budget" in self.axes else (0,),
                  "context": contexts if "context" in self.axes else (0,)}
        return [Shape(v, b, c) for v in values["vocab"] for b in values["budget"] for c in values["context"]]

    def nbytes(self, shape: Shape, bs: int) -> int:
        """Bytes the kernel's indexed tensors take at batch ``bs``."""
        return sum(t.nbytes(shape, bs) for t in self.tensors)


KERNELS: dict[str, Kernel] = {k.name: k for k in (
    Kernel("tree_speculative_sampling", (TARGET_PROBS, TREE_DRAFT_PROBS, TREE_TENSORS), ("vocab", "budget")),
    Kernel("chain_speculative_sampling", (TARGET_PROBS, CHAIN_DRAFT_PROBS, TREE_TENSORS), ("vocab", "budget")),
    Kernel("ddtree_sample", (TARGET_PROBS, TREE_TENSORS), ("vocab", "budget")),
    Kernel("verify_tree_greedy", (TREE_TENSORS,), ("budget",)),
    Kernel("assign_req_to_token", (REQ_TO_TOKEN,), ("context",)),
    Kernel("move_kv", (K_BUFFER,), ("context",)),
    Kernel("ddtree_fa_full", (FA_PAGE_TABLE, REQ_TO_TOKEN), ("budget", "context")),
    Kernel("verify_attention", (KV_POOL, V_POOL, TREE_MASK), ("budget", "context")),
    Kernel("ddtree_compile", (COMPILE_MASK,), ("budget", "context")),
    Kernel("ddtree_fa_suffix", (FA_SUFFIX_TABLE, REQ_TO_TOKEN), ("budget", "context")),
    Kernel("ddtree_build", (TOP_LOG_PROBS, TOP_TOKEN_IDS, BUILD_VISIBILITY), ("budget",)),
    Kernel("ddtree_prune", (BUILD_VISIBILITY, IN_VISIBILITY), ("budget",)),
    Kernel("ddtree_follow", (FOLLOW_TENSORS,), ("budget",)),
    Kernel("verify_attention_cascade", (KV_POOL, V_POOL, TREE_MASK), ("budget", "context")),
)}
"""Every kernel with scale cells, by the backend method it calls."""


@dataclass(frozen=True)
class Boundary:
    """One derived cell: ``kernel`` at ``shape`` and ``batch``, on one side of ``tensor``'s ``2^bits`` limit in
    ``unit`` (``elements`` or ``bytes``); ``side`` ``below`` / ``above``, or ``top`` (no limit within the range: the
    range's largest batch)."""

    kernel: str
    shape: Shape
    batch: int
    tensor: str
    unit: str
    bits: int
    side: str

    @property
    def label(self) -> str:
        """``below-2^31-el-target_probs``, ``top``."""
        if self.side == "top":
            return "top"
        return f"{self.side}-2^{self.bits}-{'el' if self.unit == 'elements' else 'B'}-{self.tensor}"


def crossing(tensor: Indexed, shape: Shape, bits: int, unit: str = "elements") -> int | None:
    """The first batch whose last offset into ``tensor`` (in ``unit``) is ``>= 2^bits``; ``None`` when no batch is
    (a tensor that does not grow with the batch)."""
    per, fixed = tensor.affine(shape)
    scale = tensor.itemsize if unit == "bytes" else 1
    per, fixed = per * scale, fixed * scale
    if per <= 0:
        return None
    need = (1 << bits) + 1 - fixed  # per * bs + fixed - 1 >= 2^bits
    return max(1, -(-need // per))


def boundaries(kernel: str, shape: Shape, max_batch: int = MAX_BATCH) -> list[Boundary]:
    """The cells of ``kernel`` at ``shape``: for each tensor and limit, the batch below and the batch above it
    (those within ``1..max_batch``), one per batch (the first limit a batch meets names it), ascending; ``[top]`` at
    ``max_batch`` when no limit falls within the range.

    Raises:
        KeyError: ``kernel`` has no scale cells.
    """
    k = KERNELS[kernel]
    found: dict[int, Boundary] = {}
    for t in k.tensors:
        for unit in (("elements", "bytes") if t.byte_offsets else ("elements",)):
            for bits in LIMITS:
                above = crossing(t, shape, bits, unit)
                if above is None or above > max_batch:
                    continue
                for bs, side in ((above - 1, "below"), (above, "above")):
                    if bs >= 1:
                        found.setdefault(bs, Boundary(kernel, shape, bs, t.name, unit, bits, side))
    if not found:
        return [Boundary(kernel, shape, max_batch, "", "", 0, "top")]
    return [found[bs] for bs in sorted(found)]


def derived(kernel: str, vocabs=VOCABS, budgets=BUDGETS, contexts=CONTEXTS,
            max_batch: int = MAX_BATCH) -> list[Boundary]:
    """Every boundary cell of ``kernel`` over the deployment dimensions it depends on."""
    return [b for s in KERNELS[kernel].shapes(vocabs, budgets, contexts) for b in boundaries(kernel, s, max_batch)]
