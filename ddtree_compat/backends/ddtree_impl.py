"""One backend per DDTree implementation (:mod:`ddtree_compat.impls`): the records of
:mod:`ddtree_compat.kernels.ddtree` it has code for, each called the way that implementation's worker
calls it (scratch buffers allocated as the worker allocates them, keyword arguments as its wrappers take).

Which records a backend implements is read from the implementation's files: a Triton wrapper of its
kernel module (device tier: the wrappers raise ``ValueError`` on CPU tensors), a CPU helper of its
``ddtree_utils.py`` (any tier) or DFlash's ``build_ddtree_tree_one_req``. Its column is the
implementation's name (repo and commit); ``ddtree-impl:PATH`` loads it again (replay lines use that).
"""

from __future__ import annotations

from pathlib import Path

from .. import impls
from ..kernels.ddtree import (BUILD, BUILD_CPU, COMPILE, COMPILE_CPU, EAGLE_LINKS, FA_FULL, FA_SUFFIX, FOLLOW,
                              FOLLOW_CPU, GRAPH_BUCKETS, PRUNE, SAMPLE)
from ..static.kernels import Spec, TritonKernel
from . import Backend, Implementation

SPEC_PREFIX = "ddtree-impl:"


def _next_pow2(x: int) -> int:
    return 1 << max(0, x - 1).bit_length()


# (record, wrapper in the kernel module, its @triton.jit kernels) / (record, helpers of ddtree_utils.py)
TRITON = ((BUILD, "build_ddtree_tree_triton", ("_build_ddtree_heap_kernel",)),
          (PRUNE, "prune_ddtree_deepest_chains_triton", ("_prune_deepest_chains_kernel",)),
          (COMPILE, "compile_ddtree_tree_triton", ("_compile_ddtree_verify_inputs_kernel",
                                                   "_pad_ddtree_visibility_kernel", "_compile_ddtree_packed_mask_kernel")),
          (FA_SUFFIX, "build_ddtree_fa_suffix_metadata_triton", ("_build_fa_suffix_metadata_kernel",)),
          (FA_FULL, "build_ddtree_fa_full_metadata_triton", ("_copy_fa_full_prefix_metadata_kernel",
                                                             "_append_fa_visible_suffix_metadata_kernel")),
          (FOLLOW, "follow_ddtree_verified_path_triton", ("_follow_verified_tree_kernel",)),
          (SAMPLE, "sample_ddtree_target_probs_triton", ("_sample_ddtree_accept_path_kernel",)))
CPU = ((BUILD_CPU, ("build_ddtree_tree",)), (COMPILE_CPU, ("compile_ddtree_tree",)),
       (FOLLOW_CPU, ("follow_verified_tree", "build_child_maps_from_parent_metadata")),
       (GRAPH_BUCKETS, ("resolve_ddtree_cuda_graph_buckets", "select_ddtree_cuda_graph_bucket")))

# The kernels' runtime parameters (all pointers; every size and stride is a constexpr) and the constexprs
# their wrappers derive, from the wrappers' launches (``../shared/ddtree-impls/README.md``).
SIGNATURES = {
    "_build_ddtree_heap_kernel": (("top_log_probs", "*fp32"), ("top_token_ids", "*i64"), ("out_node_token_ids", "*i64"),
                                  ("out_node_depths", "*i64"), ("out_parents", "*i64"), ("out_visibility", "*i1"),
                                  ("out_actual_tree_sizes", "*i64"), ("heap_scores", "*fp64"),
                                  ("heap_parents", "*i32"), ("heap_depths", "*i32"), ("heap_ranks", "*i32")),
    "_prune_deepest_chains_kernel": (("in_node_token_ids", "*i64"), ("in_node_depths", "*i64"), ("in_parents", "*i64"),
                                     ("in_visibility", "*i1"), ("out_node_token_ids", "*i64"),
                                     ("out_node_depths", "*i64"), ("out_parents", "*i64"), ("out_visibility", "*i1"),
                                     ("out_actual_tree_sizes", "*i64"), ("scratch", "*i32")),
    "_compile_ddtree_verify_inputs_kernel": (("root_token_ids", "*i64"), ("node_token_ids", "*i64"),
                                             ("node_depths", "*i64"), ("start_positions", "*i64"),
                                             ("verify_input_ids", "*i64"), ("verify_position_ids", "*i64")),
    "_pad_ddtree_visibility_kernel": (("visibility", "*i1"), ("actual_tree_sizes", "*i64")),
    "_compile_ddtree_packed_mask_kernel": (("visibility", "*i1"), ("actual_tree_sizes", "*i64"),
                                           ("past_lengths", "*i64"), ("tree_attention_mask", "*i1")),
    "_build_fa_suffix_metadata_kernel": (("visibility", "*i1"), ("req_to_token", "*i32"), ("req_pool_indices", "*i64"),
                                         ("seq_lens", "*i64"), ("page_table", "*i32"), ("cache_seqlens", "*i32")),
    "_copy_fa_full_prefix_metadata_kernel": (("req_to_token", "*i32"), ("req_pool_indices", "*i64"),
                                             ("seq_lens", "*i64"), ("page_table", "*i32")),
    "_append_fa_visible_suffix_metadata_kernel": (("visibility", "*i1"), ("req_to_token", "*i32"),
                                                  ("req_pool_indices", "*i64"), ("seq_lens", "*i64"),
                                                  ("page_table", "*i32"), ("cache_seqlens", "*i32")),
    "_follow_verified_tree_kernel": (("draft_tokens", "*i64"), ("target_predict", "*i64"), ("parents", "*i64"),
                                     ("actual_tree_sizes", "*i64"), ("accepted_indices", "*i64"),
                                     ("accepted_token_ids", "*i64"), ("accepted_lens", "*i64"), ("next_tokens", "*i64")),
    "_sample_ddtree_accept_path_kernel": (("target_probs", "*fp32"), ("draft_tokens", "*i64"), ("parents", "*i64"),
                                          ("actual_tree_sizes", "*i64"), ("uniform_samples", "*fp32"),
                                          ("accepted_indices", "*i64"), ("accepted_token_ids", "*i64"),
                                          ("accepted_lens", "*i64"), ("next_tokens", "*i64"), ("reject_indices", "*i64"),
                                          ("reject_child_tokens", "*i64"), ("reject_child_counts", "*i64")),
}
STATIC_BLOCK, STATIC_BATCH, STATIC_VOCAB, STATIC_CONTEXT = 16, 8, 151936, 4096


def _constexprs(kernel: str, budget: int) -> dict:
    """The constexprs the wrapper derives for budget ``B`` at the live width ``q = B + 1`` (block size 16,
    ``K = B``, batch 8, a Qwen-sized vocabulary, a 4096-token context)."""
    q, depth = budget + 1, STATIC_BLOCK - 1
    vis = dict(VIS_B_STRIDE=q * q, VIS_ROW_STRIDE=q, VIS_COL_STRIDE=1)
    return {
        "_build_ddtree_heap_kernel": dict(BUDGET=budget, MAX_NODES=q, DEPTH_LIMIT=depth, TOPK=budget,
                                          HEAP_CAP=_next_pow2(2 * budget + 4), NODE_BLOCK=_next_pow2(q),
                                          VIS_BLOCK=_next_pow2(q * q)),
        "_prune_deepest_chains_kernel": dict(BUDGET=budget, MAX_NODES=q, NODE_BLOCK=_next_pow2(q),
                                             VIS_BLOCK=_next_pow2(q * q), SCRATCH_STRIDE=_next_pow2(2 * budget + 4)),
        "_compile_ddtree_verify_inputs_kernel": dict(Q_LEN=q, NODE_STRIDE=budget, BLOCK_Q=_next_pow2(q)),
        "_pad_ddtree_visibility_kernel": dict(Q_LEN=q, BLOCK_Q=_next_pow2(q), **vis),
        "_compile_ddtree_packed_mask_kernel": dict(Q_LEN=q, BS=STATIC_BATCH, BLOCK_K=256, **vis),
        "_build_fa_suffix_metadata_kernel": dict(Q_LEN=q, REQ_TO_TOKEN_B_STRIDE=STATIC_CONTEXT, BLOCK_Q=_next_pow2(q),
                                                 **vis),
        "_copy_fa_full_prefix_metadata_kernel": dict(Q_LEN=q, PAGE_TABLE_ROW_STRIDE=STATIC_CONTEXT + q,
                                                     REQ_TO_TOKEN_B_STRIDE=STATIC_CONTEXT,
                                                     PREFIX_CAPACITY=STATIC_CONTEXT, BLOCK_N=256),
        "_append_fa_visible_suffix_metadata_kernel": dict(Q_LEN=q, REQ_TO_TOKEN_B_STRIDE=STATIC_CONTEXT,
                                                          PAGE_TABLE_ROW_STRIDE=STATIC_CONTEXT + q,
                                                          BLOCK_Q=_next_pow2(q), **vis),
        "_follow_verified_tree_kernel": dict(Q_LEN=q, BLOCK_Q=_next_pow2(q)),
        "_sample_ddtree_accept_path_kernel": dict(Q_LEN=q, VOCAB_SIZE=STATIC_VOCAB, BLOCK_Q=_next_pow2(q)),
    }[kernel]


def _specs(kernel: str):
    def specs(cases, arch: str):
        budgets = sorted({c.budget for c in cases if getattr(c, "budget", 0) >= 1})
        return [Spec(f"b{b}", tuple(_constexprs(kernel, b).items())) for b in budgets]

    return specs


def _no_prune(where: str):
    def refuse(target, case) -> str | None:
        return f"{where}'s build_ddtree_tree_one_req has no deepest-chain prune" if case.prune else None

    return refuse


def static_entries(impl: impls.DDTreeImpl, jit_names: tuple[str, ...]) -> tuple[TritonKernel, ...]:
    """Static-tier entries of an implementation's kernels, at the grid's budgets (``q = B + 1``)."""
    return tuple(TritonKernel(kernel=name.strip("_"), fn=f"{impl.kernel_module}::{name}", signature=SIGNATURES[name],
                              specialize_all=_specs(name))
                 for name in jit_names if name in impl.kernel_functions and name in SIGNATURES)


class DDTreeImplBackend(Backend):
    """A DDTree implementation as a backend (see the module docstring).

    Args:
        impl: the implementation found on disk.
    """

    def __init__(self, impl: impls.DDTreeImpl):
        self.impl = impl
        self.name = impl.name
        where = f"{impl.name} ({impl.repo or impl.package})"
        declared = []
        for record, wrapper, jit in TRITON:
            if impl.kernel_module is not None and wrapper in impl.kernel_functions:
                declared.append(Implementation(record.name, "cuda", what=f"{where}'s Triton {wrapper} (it raises "
                                               "ValueError on CPU tensors)",
                                               static=static_entries(impl, jit)))
        for record, helpers in CPU:
            if impl.utils_module is not None and all(h in impl.utils_functions for h in helpers):
                declared.append(Implementation(record.name, "host", what=f"{where}'s {helpers[0]}"))
        if impl.dflash_builder is not None:
            if not any(i.kernel == BUILD_CPU.name for i in declared):
                declared.append(Implementation(BUILD_CPU.name, "host", what=f"{where}'s build_ddtree_tree_one_req",
                                               refuse=_no_prune(where)))
            declared.append(Implementation(EAGLE_LINKS.name, "host", what=f"{where}'s build_ddtree_tree_one_req"))
        self.implements = tuple(declared)

    # ---- loading the implementation's code
    def _kernels(self):
        return impls.load_module(self.impl.kernel_module)

    def _utils(self):
        return impls.load_module(self.impl.utils_module)

    def _dflash_builder(self):
        return impls.load_function(self.impl.dflash_builder, "build_ddtree_tree_one_req")

    # ---- Triton wrappers (device tier)
    def ddtree_build(self, top_log_probs, top_token_ids, budget, out_tokens, out_depths, out_parents, out_visibility,
                     out_sizes) -> None:
        import torch

        bs, cap = top_log_probs.shape[0], _next_pow2(2 * budget + 4)
        device = top_log_probs.device
        scratch = dict(heap_scores=torch.empty(bs, cap, dtype=torch.float64, device=device),
                       heap_parents=torch.empty(bs, cap, dtype=torch.int32, device=device),
                       heap_depths=torch.empty(bs, cap, dtype=torch.int32, device=device),
                       heap_ranks=torch.empty(bs, cap, dtype=torch.int32, device=device))
        self._kernels().build_ddtree_tree_triton(
            top_log_probs=top_log_probs, top_token_ids=top_token_ids, tree_budget=budget,
            out_node_token_ids=out_tokens, out_node_depths=out_depths, out_parents=out_parents,
            out_visibility=out_visibility, out_actual_tree_sizes=out_sizes, **scratch)

    def ddtree_prune(self, in_tokens, in_depths, in_parents, in_visibility, out_tokens, out_depths, out_parents,
                     out_visibility, out_sizes, budget) -> None:
        import torch

        scratch = torch.empty(in_tokens.shape[0], _next_pow2(2 * budget + 4), dtype=torch.int32, device=in_tokens.device)
        self._kernels().prune_ddtree_deepest_chains_triton(
            in_node_token_ids=in_tokens, in_node_depths=in_depths, in_parents=in_parents, in_visibility=in_visibility,
            out_node_token_ids=out_tokens, out_node_depths=out_depths, out_parents=out_parents,
            out_visibility=out_visibility, out_actual_tree_sizes=out_sizes, scratch=scratch, tree_budget=budget)

    def ddtree_compile(self, root, tokens, depths, visibility, start, past, sizes, out_ids, out_positions, out_mask,
                       q, max_kv_len) -> None:
        self._kernels().compile_ddtree_tree_triton(
            root_token_ids=root, node_token_ids=tokens, node_depths=depths, visibility=visibility,
            start_positions=start, past_lengths=past, actual_tree_sizes=sizes, verify_input_ids=out_ids,
            verify_position_ids=out_positions, tree_attention_mask=out_mask, q_len=q, max_kv_len=max_kv_len,
            pad_visibility=out_mask is None)

    def ddtree_fa_suffix(self, visibility, req_to_token, req_pool_indices, seq_lens, page_table, cache_seqlens,
                         q) -> None:
        self._kernels().build_ddtree_fa_suffix_metadata_triton(
            visibility=visibility, req_to_token=req_to_token, req_pool_indices=req_pool_indices, seq_lens=seq_lens,
            page_table=page_table, cache_seqlens=cache_seqlens, q_len=q)

    def ddtree_fa_full(self, visibility, req_to_token, req_pool_indices, seq_lens, page_table, cache_seqlens,
                       q) -> None:
        self._kernels().build_ddtree_fa_full_metadata_triton(
            visibility=visibility, req_to_token=req_to_token, req_pool_indices=req_pool_indices, seq_lens=seq_lens,
            page_table=page_table, cache_seqlens=cache_seqlens, q_len=q)

    def ddtree_follow(self, draft, target, parents, sizes, out_indices, out_tokens, out_lens, out_next) -> None:
        self._kernels().follow_ddtree_verified_path_triton(
            draft_tokens=draft, target_predict=target, parents=parents, actual_tree_sizes=sizes,
            accepted_indices=out_indices, accepted_token_ids=out_tokens, accepted_lens=out_lens, next_tokens=out_next)

    def ddtree_sample(self, target_probs, draft, parents, sizes, out_indices, out_tokens, out_lens, out_next) -> None:
        """The worker's scratch for sampling: uniforms ``[bs, q]`` and ``[bs]``, reject outputs."""
        import torch

        bs, q = draft.shape
        device = draft.device
        self._kernels().sample_ddtree_target_probs_triton(
            target_probs=target_probs, draft_tokens=draft, parents=parents, actual_tree_sizes=sizes,
            uniform_samples=torch.empty(bs, q, dtype=torch.float32, device=device),
            uniform_final=torch.empty(bs, dtype=torch.float32, device=device),
            accepted_indices=out_indices, accepted_token_ids=out_tokens, accepted_lens=out_lens, next_tokens=out_next,
            reject_indices=torch.empty(bs, dtype=torch.int64, device=device),
            reject_child_tokens=torch.empty(bs, q, dtype=torch.int64, device=device),
            reject_child_counts=torch.empty(bs, dtype=torch.int64, device=device))

    # ---- CPU helpers (any tier)
    def ddtree_build_cpu(self, top_log_probs, top_token_ids, budget, prune):
        """``ddtree_utils.build_ddtree_tree`` from top-k tensors (CPU); or, for DFlash's builder, one
        ``build_ddtree_tree_one_req`` per request laid out as the CPU builder pads (zeros, -1, False)."""
        import torch

        if self.impl.utils_module is not None and "build_ddtree_tree" in self.impl.utils_functions:
            tokens, depths, parents, _, visibility, sizes, _ = self._utils().build_ddtree_tree(
                None, budget, torch.device("cpu"), draft_top_log_probs=top_log_probs,
                draft_top_token_ids=top_token_ids, prune_to_deepest_chains=prune)
            return tokens, depths, parents, visibility, sizes
        fn = self._dflash_builder()
        bs = top_log_probs.shape[0]
        tokens = torch.zeros(bs, budget, dtype=torch.int64)
        depths = torch.zeros(bs, budget, dtype=torch.int64)
        parents = torch.full((bs, budget + 1), -1, dtype=torch.int64)
        visibility = torch.zeros(bs, budget + 1, budget + 1, dtype=torch.bool)
        sizes = torch.zeros(bs, dtype=torch.int64)
        for b in range(bs):
            node_tokens, node_depths, par, _, vis, _, _ = fn(top_token_ids[b], top_log_probs[b], budget)
            n = len(par)
            tokens[b, :n - 1], depths[b, :n - 1] = node_tokens, node_depths
            parents[b, :n] = torch.tensor(par, dtype=torch.int64)
            visibility[b, :n, :n] = torch.as_tensor(vis, dtype=torch.bool)
            sizes[b] = n
        return tokens, depths, parents, visibility, sizes

    def ddtree_eagle_links(self, top_log_probs, top_token_ids, budget):
        import torch

        fn = self._dflash_builder()
        rows = [fn(top_token_ids[b], top_log_probs[b], budget)[5:7] for b in range(top_log_probs.shape[0])]
        width = budget + 1
        pad = lambda t: torch.cat([torch.as_tensor(t, dtype=torch.int64),  # noqa: E731
                                   torch.full((width - len(t),), -1, dtype=torch.int64)])[:width]
        return torch.stack([pad(n) for n, _ in rows]), torch.stack([pad(s) for _, s in rows])

    def ddtree_compile_cpu(self, root, tokens, depths, visibility, start, past, sizes, q, build_mask):
        import torch

        ids, pos, mask, _ = self._utils().compile_ddtree_tree(
            root, tokens, depths, visibility, start, past, tokens.shape[1], sizes, torch.device("cpu"),
            past_lens_cpu=past.tolist(), actual_sizes_cpu=sizes.tolist(), verify_token_num=q,
            build_attention_mask=build_mask)
        return ids, pos, mask

    def ddtree_follow_cpu(self, draft, target, parents, sizes):
        utils = self._utils()
        maps = utils.build_child_maps_from_parent_metadata(draft.tolist(), parents.tolist(), sizes.tolist())
        paths, _, nexts = utils.follow_verified_tree(maps, target)
        return paths, nexts

    def ddtree_graph_buckets(self, budget, prune, configured):
        utils = self._utils()
        buckets = utils.resolve_ddtree_cuda_graph_buckets(tree_budget=budget, is_ddtree_prune=prune,
                                                          configured_buckets=list(configured) or None)
        return buckets, {s: utils.select_ddtree_cuda_graph_bucket(s, buckets) for s in range(0, budget + 3)}


def backends_for(paths: list[str]) -> list[DDTreeImplBackend]:
    """A backend per implementation :func:`ddtree_compat.impls.discover` finds (``paths`` plus the installed
    sglang's when it has DDTree modules)."""
    return [DDTreeImplBackend(i) for i in impls.discover(paths)]


def from_spec(spec: str) -> DDTreeImplBackend:
    """``ddtree-impl:PATH`` -> that implementation's backend.

    Raises:
        DDTreeInputError: no DDTree implementation at ``PATH``.
    """
    from ..errors import DDTreeInputError

    path = spec[len(SPEC_PREFIX):]
    impl = impls.describe(path)
    if impl is None:
        raise DDTreeInputError("--backend", spec, "ddtree-impl:PATH of an SGLang tree with DDTree code", "none there")
    return DDTreeImplBackend(impl)


def spec_of(backend: DDTreeImplBackend) -> str:
    return f"{SPEC_PREFIX}{Path(backend.impl.package)}"
