"""Where the DDTree implementations keep each kernel of this family, read from their code: the Triton wrapper
of the implementation's kernel module and the ``@triton.jit`` kernels it launches (device tier; the static
tier compiles them), or the CPU helpers of its ``ddtree_utils.py`` (any tier). One entry per record; the
implementation backend (:mod:`ddtree_compat.backends.ddtree_impl`) declares what it finds from these, and
calls each as that implementation's worker does (its method of the record's name).

The jit kernels' runtime parameters are all pointers (every size and stride is a constexpr); the constexprs
are the ones their wrappers derive for budget ``B`` at the live width ``q = B + 1`` (block size 16, ``K = B``,
batch 8, a Qwen-sized vocabulary, a 4096-token context), read from each wrapper (``docs/ddtree-impls.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .records import (BUILD, BUILD_CPU, COMPILE, COMPILE_CPU, FA_FULL, FA_SUFFIX, FOLLOW, FOLLOW_CPU, GRAPH_BUCKETS,
                      PRUNE, SAMPLE)

STATIC_BLOCK, STATIC_BATCH, STATIC_VOCAB, STATIC_CONTEXT = 16, 8, 151936, 4096


def next_pow2(x: int) -> int:
    """``1 << (x - 1).bit_length()``, the implementations' Triton block rounding."""
    return 1 << max(0, x - 1).bit_length()


@dataclass(frozen=True)
class Jit:
    """One ``@triton.jit`` kernel a wrapper launches.

    Attributes:
        name: its name in the kernel module (``_build_ddtree_heap_kernel``).
        signature: ``(parameter, Triton type)`` of its runtime parameters.
        constexprs: ``budget -> {constexpr: value}`` as the wrapper derives them.
    """

    name: str
    signature: tuple[tuple[str, str], ...]
    constexprs: Callable[[int], dict]


@dataclass(frozen=True)
class Wrapper:
    """A record's Triton wrapper in the implementation's kernel module (it raises ``ValueError`` on CPU
    tensors) and the jit kernels it launches."""

    record: str
    wrapper: str
    jit: tuple[Jit, ...]


@dataclass(frozen=True)
class Helpers:
    """A record's CPU helpers in the implementation's ``ddtree_utils.py`` (all must be there)."""

    record: str
    helpers: tuple[str, ...]


def _vis(q: int) -> dict:
    return dict(VIS_B_STRIDE=q * q, VIS_ROW_STRIDE=q, VIS_COL_STRIDE=1)


_Q = lambda b: b + 1  # noqa: E731 - the live width of a budget
_CTX = STATIC_CONTEXT

WRAPPERS = (
    Wrapper(BUILD.name, "build_ddtree_tree_triton", (Jit(
        "_build_ddtree_heap_kernel",
        (("top_log_probs", "*fp32"), ("top_token_ids", "*i64"), ("out_node_token_ids", "*i64"),
         ("out_node_depths", "*i64"), ("out_parents", "*i64"), ("out_visibility", "*i1"),
         ("out_actual_tree_sizes", "*i64"), ("heap_scores", "*fp64"), ("heap_parents", "*i32"),
         ("heap_depths", "*i32"), ("heap_ranks", "*i32")),
        lambda b: dict(BUDGET=b, MAX_NODES=_Q(b), DEPTH_LIMIT=STATIC_BLOCK - 1, TOPK=b, HEAP_CAP=next_pow2(2 * b + 4),
                       NODE_BLOCK=next_pow2(_Q(b)), VIS_BLOCK=next_pow2(_Q(b) * _Q(b)))),)),
    Wrapper(PRUNE.name, "prune_ddtree_deepest_chains_triton", (Jit(
        "_prune_deepest_chains_kernel",
        (("in_node_token_ids", "*i64"), ("in_node_depths", "*i64"), ("in_parents", "*i64"), ("in_visibility", "*i1"),
         ("out_node_token_ids", "*i64"), ("out_node_depths", "*i64"), ("out_parents", "*i64"),
         ("out_visibility", "*i1"), ("out_actual_tree_sizes", "*i64"), ("scratch", "*i32")),
        lambda b: dict(BUDGET=b, MAX_NODES=_Q(b), NODE_BLOCK=next_pow2(_Q(b)), VIS_BLOCK=next_pow2(_Q(b) * _Q(b)),
                       SCRATCH_STRIDE=next_pow2(2 * b + 4))),)),
    Wrapper(COMPILE.name, "compile_ddtree_tree_triton", (
        Jit("_compile_ddtree_verify_inputs_kernel",
            (("root_token_ids", "*i64"), ("node_token_ids", "*i64"), ("node_depths", "*i64"),
             ("start_positions", "*i64"), ("verify_input_ids", "*i64"), ("verify_position_ids", "*i64")),
            lambda b: dict(Q_LEN=_Q(b), NODE_STRIDE=b, BLOCK_Q=next_pow2(_Q(b)))),
        Jit("_pad_ddtree_visibility_kernel", (("visibility", "*i1"), ("actual_tree_sizes", "*i64")),
            lambda b: dict(Q_LEN=_Q(b), BLOCK_Q=next_pow2(_Q(b)), **_vis(_Q(b)))),
        Jit("_compile_ddtree_packed_mask_kernel",
            (("visibility", "*i1"), ("actual_tree_sizes", "*i64"), ("past_lengths", "*i64"),
             ("tree_attention_mask", "*i1")),
            lambda b: dict(Q_LEN=_Q(b), BS=STATIC_BATCH, BLOCK_K=256, **_vis(_Q(b)))))),
    Wrapper(FA_SUFFIX.name, "build_ddtree_fa_suffix_metadata_triton", (Jit(
        "_build_fa_suffix_metadata_kernel",
        (("visibility", "*i1"), ("req_to_token", "*i32"), ("req_pool_indices", "*i64"), ("seq_lens", "*i64"),
         ("page_table", "*i32"), ("cache_seqlens", "*i32")),
        lambda b: dict(Q_LEN=_Q(b), REQ_TO_TOKEN_B_STRIDE=_CTX, BLOCK_Q=next_pow2(_Q(b)), **_vis(_Q(b)))),)),
    Wrapper(FA_FULL.name, "build_ddtree_fa_full_metadata_triton", (
        Jit("_copy_fa_full_prefix_metadata_kernel",
            (("req_to_token", "*i32"), ("req_pool_indices", "*i64"), ("seq_lens", "*i64"), ("page_table", "*i32")),
            lambda b: dict(Q_LEN=_Q(b), PAGE_TABLE_ROW_STRIDE=_CTX + _Q(b), REQ_TO_TOKEN_B_STRIDE=_CTX,
                           PREFIX_CAPACITY=_CTX, BLOCK_N=256)),
        Jit("_append_fa_visible_suffix_metadata_kernel",
            (("visibility", "*i1"), ("req_to_token", "*i32"), ("req_pool_indices", "*i64"), ("seq_lens", "*i64"),
             ("page_table", "*i32"), ("cache_seqlens", "*i32")),
            lambda b: dict(Q_LEN=_Q(b), REQ_TO_TOKEN_B_STRIDE=_CTX, PAGE_TABLE_ROW_STRIDE=_CTX + _Q(b),
                           BLOCK_Q=next_pow2(_Q(b)), **_vis(_Q(b)))))),
    Wrapper(FOLLOW.name, "follow_ddtree_verified_path_triton", (Jit(
        "_follow_verified_tree_kernel",
        (("draft_tokens", "*i64"), ("target_predict", "*i64"), ("parents", "*i64"), ("actual_tree_sizes", "*i64"),
         ("accepted_indices", "*i64"), ("accepted_token_ids", "*i64"), ("accepted_lens", "*i64"),
         ("next_tokens", "*i64")),
        lambda b: dict(Q_LEN=_Q(b), BLOCK_Q=next_pow2(_Q(b)))),)),
    Wrapper(SAMPLE.name, "sample_ddtree_target_probs_triton", (Jit(
        "_sample_ddtree_accept_path_kernel",
        (("target_probs", "*fp32"), ("draft_tokens", "*i64"), ("parents", "*i64"), ("actual_tree_sizes", "*i64"),
         ("uniform_samples", "*fp32"), ("accepted_indices", "*i64"), ("accepted_token_ids", "*i64"),
         ("accepted_lens", "*i64"), ("next_tokens", "*i64"), ("reject_indices", "*i64"),
         ("reject_child_tokens", "*i64"), ("reject_child_counts", "*i64")),
        lambda b: dict(Q_LEN=_Q(b), VOCAB_SIZE=STATIC_VOCAB, BLOCK_Q=next_pow2(_Q(b)))),)),
)
HELPERS = (Helpers(BUILD_CPU.name, ("build_ddtree_tree",)), Helpers(COMPILE_CPU.name, ("compile_ddtree_tree",)),
           Helpers(FOLLOW_CPU.name, ("follow_verified_tree", "build_child_maps_from_parent_metadata")),
           Helpers(GRAPH_BUCKETS.name, ("resolve_ddtree_cuda_graph_buckets", "select_ddtree_cuda_graph_bucket")))
