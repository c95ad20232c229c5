"""One backend per DDTree implementation (:mod:`ddtree_compat.impls`): the records of
:mod:`ddtree_compat.families.ddtree.records` it has code for, each called the way that implementation's worker
calls it (scratch buffers allocated as the worker allocates them, keyword arguments as its wrappers take).

Which records a backend implements is read from the implementation's files: a Triton wrapper of its
kernel module (device tier: the wrappers raise ``ValueError`` on CPU tensors), a CPU helper of its
``ddtree_utils.py`` (any tier) or DFlash's ``build_ddtree_tree_one_req``. Its column is the
implementation's name (repo and commit); ``ddtree-impl:PATH`` loads it again (replay lines use that).
"""

from __future__ import annotations

from pathlib import Path

from .. import impls
from ..contract import AdapterError, Backend, KernelImpl, interpreter_on, locate
from ..families.attention.places import FA3, MERGE_STATE
from ..families.attention.records import CASCADE_KERNEL, KERNEL as VERIFY_ATTENTION
from ..families.ddtree import places
from ..families.ddtree.records import BUILD_CPU, EAGLE_LINKS, FA_FULL, FA_SUFFIX, SAMPLE
from ..families.sampling.records import DDTREE_LAW, interpret_refusal
from ..static.kernels import Spec, TritonKernel
from .linear_calls import LinearCalls


SPEC_PREFIX = "ddtree-impl:"


def _specs(jit: places.Jit):
    def specs(cases, arch: str):
        budgets = sorted({c.budget for c in cases if getattr(c, "budget", 0) >= 1})
        return [Spec(f"b{b}", tuple(jit.constexprs(b).items())) for b in budgets]

    return specs


def _no_prune(where: str):
    def refuse(target, case) -> str | None:
        return f"{where}'s build_ddtree_tree_one_req has no deepest-chain prune" if case.prune else None

    return refuse


def _fa3_refuse(target, case) -> str | None:
    """FA3 is Hopper's (sgl-kernel builds its ``flash_ops`` kernels for sm90a; SGLang picks ``fa3`` there); the
    implementations' FA verify metadata takes page size 1 (their backends raise for others)."""
    if target.arch != "sm90":
        return f"FA3 (sgl-kernel flash_ops) runs on sm90 only; this target is {target.arch}"
    if case is not None and case.page_size != 1:
        return (f"the implementation's FA verify metadata takes page size 1 only (its flashattention backend raises "
                f"for page size {case.page_size})")
    return None


def _fa3_cascade_refuse(target, case) -> str | None:
    """As :func:`_fa3_refuse`; also sgl-kernel's ``merge_state_v2`` must load, and every request needs a prefix
    (a server's target verify always has one, its prompt: a prefix pass over no keys is not a case it meets)."""
    from ..contract import reason

    why = _fa3_refuse(target, case)
    if why or case is None:
        return why
    if min(case.prefix_lens) == 0:
        return ("a request without a prefix: SGLang's target verify always has one (the prompt), the cascade's "
                "prefix pass needs it")
    return reason(MERGE_STATE)


def interpret_subset(target, case) -> str | None:
    """On the interpret tier an implementation's Triton kernels run on
    :func:`~ddtree_compat.families.ddtree.records.interpret_ids`' cells only (Triton's interpreter is slow);
    the others are a counted skip that says the device tier runs them."""
    from ..families.ddtree.records import interpret_ids

    if target.tier != "interpret" or case is None or getattr(case, "id", None) in interpret_ids():
        return None
    return ("the interpret tier runs an implementation's Triton kernels on the default grid's pairwise cells with "
            "B <= 16 only (Triton's interpreter: up to 25 s a cell on a CPU core); this cell runs on the device tier")


def _linear_interpret_subset(target, case) -> str | None:
    """On the interpret tier an implementation's linear-attention kernels run on the cells of budget <= 12 only (the
    release's run every cell there; Triton's interpreter: 1-5 s a cell)."""
    if target.tier != "interpret" or case is None or case.verify.budget <= 12:
        return None
    return ("the interpret tier runs an implementation's linear-attention kernels at budgets up to 12 only (the "
            "release's kernels run every cell there); this cell runs on the device tier")


def static_entries(impl: impls.DDTreeImpl, jits: tuple[places.Jit, ...]) -> tuple[TritonKernel, ...]:
    """Static-tier entries of an implementation's kernels, at the grid's budgets (``q = B + 1``)."""
    return tuple(TritonKernel(kernel=j.name.strip("_"), fn=f"{impl.kernel_module}::{j.name}", signature=j.signature,
                              specialize_all=_specs(j))
                 for j in jits if j.name in impl.kernel_functions)


class DDTreeImplBackend(LinearCalls, Backend):
    """A DDTree implementation as a backend (see the module docstring).

    Args:
        impl: the implementation found on disk.
    """

    def __init__(self, impl: impls.DDTreeImpl):
        self.impl = impl
        self.name = impl.name
        where = f"{impl.name} ({impl.repo or impl.package})"
        declared = []
        for w in places.WRAPPERS:
            if impl.kernel_module is not None and w.wrapper in impl.kernel_functions:
                declared.append(KernelImpl(w.record, "triton", what=f"{where}'s Triton {w.wrapper}",
                                           static=static_entries(impl, w.jit), refuse=interpret_subset))
        for h in places.HELPERS:
            if impl.utils_module is not None and all(f in impl.utils_functions for f in h.helpers):
                declared.append(KernelImpl(h.record, "host", what=f"{where}'s {h.helpers[0]}"))
        if any(i.kernel == SAMPLE.name for i in declared):  # the same sampler, judged by its law over N rows
            declared.append(KernelImpl(DDTREE_LAW, "triton", what=f"{where}'s Triton sample_ddtree_target_probs_triton",
                                       refuse=interpret_refusal))
        if any(i.kernel == FA_FULL.name for i in declared):
            declared.append(KernelImpl(VERIFY_ATTENTION, "cuda", places=FA3, refuse=_fa3_refuse,
                                       what=f"{where}'s one-pass FA verify metadata feeding sgl-kernel's FA3"))
        if any(i.kernel == FA_SUFFIX.name for i in declared):
            declared.append(KernelImpl(CASCADE_KERNEL, "cuda", places=FA3, refuse=_fa3_cascade_refuse,
                                       what=f"{where}'s FA suffix metadata: sgl-kernel's FA3 cascade"))
        if impl.dflash_builder is not None:
            if not any(i.kernel == BUILD_CPU.name for i in declared):
                declared.append(KernelImpl(BUILD_CPU.name, "host", what=f"{where}'s build_ddtree_tree_one_req",
                                               refuse=_no_prune(where)))
            declared.append(KernelImpl(EAGLE_LINKS.name, "host", what=f"{where}'s build_ddtree_tree_one_req"))
        declared += self._linear_kernels(where)
        self.implements = tuple(declared)

    # ---- the tree's own copies of SGLang's linear-attention kernels (families/linear; calls: LinearCalls)
    LINEAR = {"gdn_verify_tree": ("fused_sigmoid_gating_recurrent", "fused_sigmoid_gating_delta_rule_update"),
              "gdn_verify_chain": ("fused_sigmoid_gating_recurrent", "fused_sigmoid_gating_delta_rule_update"),
              "ssm_state_commit": ("mamba_state_scatter_triton", "fused_mamba_state_scatter_with_mask"),
              "conv_window_commit": ("mamba_state_scatter_triton", "fused_conv_window_scatter_with_mask")}
    LINEAR_KERNELS = {"ssm_state_commit": "_fused_mamba_state_scatter_with_mask_kernel",
                      "conv_window_commit": "_fused_conv_window_scatter_with_mask_kernel"}

    def _linear_kernels(self, where: str) -> list[KernelImpl]:
        modules = {name: functions for name, _, functions in self.impl.linear_modules}
        return [KernelImpl(kernel, "triton", what=f"{where}'s Triton {function}", refuse=_linear_interpret_subset)
                for kernel, (module, function) in self.LINEAR.items() if function in modules.get(module, ())]

    def linear_function(self, kernel: str, on_host: bool):
        module, function = self.LINEAR[kernel]
        path = next(p for name, p, _ in self.impl.linear_modules if name == module)
        if on_host and kernel in self.LINEAR_KERNELS:
            function = self.LINEAR_KERNELS[kernel]
        try:
            return getattr(impls.load_module(path), function), f"{path}::{function}"
        except (ImportError, AttributeError) as e:
            raise AdapterError(f"cannot load {path}::{function}: {e}") from None

    # ---- loading the implementation's code
    def _kernels(self):
        """The kernel module as written; under Triton's interpreter (the interpret tier) with its wrappers'
        device guards lifted at load time (:func:`ddtree_compat.impls.load_module`), so its own wrappers and
        kernels run on CPU tensors."""
        return impls.load_module(self.impl.kernel_module, interpreter_on())

    def _utils(self):
        return impls.load_module(self.impl.utils_module)

    def _dflash_builder(self):
        return impls.load_function(self.impl.dflash_builder, "build_ddtree_tree_one_req")

    # ---- Triton wrappers (device tier)
    def ddtree_build(self, top_log_probs, top_token_ids, budget, out_tokens, out_depths, out_parents, out_visibility,
                     out_sizes) -> None:
        import torch

        bs, cap = top_log_probs.shape[0], places.next_pow2(2 * budget + 4)
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

        scratch = torch.empty(in_tokens.shape[0], places.next_pow2(2 * budget + 4), dtype=torch.int32, device=in_tokens.device)
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

    def scale_adapter_nbytes(self, case) -> int:
        """Device bytes the FA3 adapters allocate beside a deployment-shape case's tensors, so that a cell which
        cannot hold them is a skip saying so, not our out-of-memory error: the paged copy of the KV pool
        (:func:`~..families.scale.checks.paged_copy_nbytes`), the int32 ``req_to_token [bs, context + q]`` and the
        int32 page table (full: ``[bs q, context + q]``, a row per query row over prefix and tree; cascade:
        ``[bs q, q]``, over the tree); 0 for another kernel."""
        from ..families.scale.checks import paged_copy_nbytes

        if case.kernel not in (VERIFY_ATTENTION, CASCADE_KERNEL):
            return 0
        bs, q, width = case.batch, case.q, case.context + case.q
        table = bs * q * (width if case.kernel == VERIFY_ATTENTION else q)
        return paged_copy_nbytes(case) + 4 * (bs * width + table)

    def _fa3_inputs(self, k, v, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr, n,
                    page_size):
        """The case as SGLang's fa3 target verify sees it (page size 1): the pool with the tree rows written after
        each prefix, ``req_to_token`` rows (prefix slots, then tree slots), the tree's visibility ``[bs, n, n]``
        from the mask blocks, the prefix lengths, and the page-table width (prefix capacity + ``n``).

        Raises:
            AdapterError: the case does not lay out that way (ours, never a kernel fault).
        """
        import torch

        from ..families.attention.paging import paged_layout

        try:
            qo, kv, mi = qo_indptr.tolist(), kv_indptr.tolist(), mask_indptr.tolist()
            bs, device = len(qo) - 1, k.device
            if any(qo[b + 1] - qo[b] != n for b in range(bs)) or page_size != 1:
                raise ValueError(f"needs {n} rows per request and page size 1")
            layout = paged_layout(k, v, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                                  mask_indptr, 1)
            prefixes = [kv[b + 1] - kv[b] for b in range(bs)]
            width = max(max(prefixes), 1) + n  # page-table row: prefix capacity + the tree (SGLang: context + q)
            req_to_token = torch.zeros(bs, width, dtype=torch.int32, device=device)
            for b in range(bs):
                slots = layout.kv_indices[layout.kv_indptr[b]:layout.kv_indptr[b + 1]]
                req_to_token[b, :slots.numel()] = slots
            blocks = [custom_mask[mi[b]:mi[b + 1]].view(n, prefixes[b] + n)[:, prefixes[b]:].bool()
                      for b in range(bs)]
            return (layout, req_to_token, torch.stack(blocks),
                    torch.tensor(prefixes, dtype=torch.int64, device=device), width)
        except Exception as e:  # noqa: BLE001 - our layout, not the implementation's
            raise AdapterError(f"FA3 verify adapter: {type(e).__name__}: {e}") from e

    def verify_attention(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                         mask_indptr, max_len_extend, sm_scale, page_size, tiles="native") -> dict:
        """Target verify on SGLang's ``fa3`` backend with this implementation's DDTree path (the one-pass
        "full" expand, its default without tree attention): the implementation's
        ``build_ddtree_fa_full_metadata_triton`` gives each query row a page-table row of its prefix and visible
        tree nodes, then sgl-kernel's ``flash_attn_with_kvcache`` runs over it, non-causal, one query row per
        sequence, as its flashattention backend calls it."""
        import torch

        fa3, _ = locate(FA3)
        device, n = q.device, max_len_extend
        layout, req_to_token, visibility, seq_lens, width = self._fa3_inputs(
            k, v, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr, n, page_size)
        bs = seq_lens.numel()
        rows = bs * n
        page_table = torch.zeros(rows, width, dtype=torch.int32, device=device)
        cache_seqlens = torch.zeros(rows, dtype=torch.int32, device=device)
        self.ddtree_fa_full(visibility, req_to_token, torch.arange(bs, dtype=torch.int64, device=device), seq_lens,
                            page_table, cache_seqlens, n)
        cu_k = torch.zeros(rows + 1, dtype=torch.int32, device=device)
        cu_k[1:] = torch.cumsum(cache_seqlens, 0, dtype=torch.int32)
        out = fa3(q=q[:rows].contiguous(), k_cache=layout.k_cache, v_cache=layout.v_cache, page_table=page_table,
                  cache_seqlens=cache_seqlens, cu_seqlens_q=torch.arange(rows + 1, dtype=torch.int32, device=device),
                  cu_seqlens_k_new=cu_k, max_seqlen_q=1, softmax_scale=sm_scale, causal=False, window_size=(-1, -1),
                  softcap=0.0, return_softmax_lse=False, ver=3)
        o[:rows] = out
        return {"call": f"{self.name} FA full metadata + sgl-kernel FA3 flash_attn_with_kvcache"}

    def verify_attention_cascade(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices,
                                 custom_mask, mask_indptr, max_len_extend, sm_scale, page_size) -> dict:
        """Target verify on SGLang's ``fa3`` backend with this implementation's tree attention (cascade): FA3 over
        each request's prefix for all its ``n`` rows (non-causal, with the log-sum-exp), FA3 over the tree with
        the implementation's ``build_ddtree_fa_suffix_metadata_triton`` (each row one sequence over its
        ancestors and itself), then sgl-kernel's ``merge_state_v2`` of the two, as its flashattention backend
        does."""
        import torch

        fa3, _ = locate(FA3)
        merge, _ = locate(MERGE_STATE)
        device, n = q.device, max_len_extend
        layout, req_to_token, visibility, seq_lens, width = self._fa3_inputs(
            k, v, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr, n, page_size)
        bs = seq_lens.numel()
        rows = bs * n
        q_rows = q[:rows].contiguous()
        prefix_k = torch.zeros(bs + 1, dtype=torch.int32, device=device)
        prefix_k[1:] = torch.cumsum(seq_lens, 0, dtype=torch.int32)
        o_prefix, lse_prefix, *_ = fa3(
            q=q_rows, k_cache=layout.k_cache, v_cache=layout.v_cache, page_table=req_to_token,
            cache_seqlens=seq_lens.to(torch.int32), cu_seqlens_q=torch.arange(0, rows + 1, n, dtype=torch.int32,
                                                                               device=device),
            cu_seqlens_k_new=prefix_k, max_seqlen_q=n, softmax_scale=sm_scale, causal=False, window_size=(-1, -1),
            softcap=0.0, return_softmax_lse=True, ver=3)
        page_table = torch.zeros(rows, n, dtype=torch.int32, device=device)
        cache_seqlens = torch.zeros(rows, dtype=torch.int32, device=device)
        self.ddtree_fa_suffix(visibility, req_to_token, torch.arange(bs, dtype=torch.int64, device=device), seq_lens,
                              page_table, cache_seqlens, n)
        cu_k = torch.zeros(rows + 1, dtype=torch.int32, device=device)
        cu_k[1:] = torch.cumsum(cache_seqlens, 0, dtype=torch.int32)
        o_tree, lse_tree, *_ = fa3(
            q=q_rows, k_cache=layout.k_cache, v_cache=layout.v_cache, page_table=page_table,
            cache_seqlens=cache_seqlens, cu_seqlens_q=torch.arange(rows + 1, dtype=torch.int32, device=device),
            cu_seqlens_k_new=cu_k, max_seqlen_q=1, softmax_scale=sm_scale, causal=False, window_size=(-1, -1),
            softcap=0.0, return_softmax_lse=True, ver=3)
        merged, _ = merge(o_prefix, lse_prefix.T.contiguous(), o_tree, lse_tree.T.contiguous())
        o[:rows] = merged
        return {"call": f"{self.name} FA3 cascade: prefix pass, FA suffix metadata pass, merge_state_v2"}

    def ddtree_follow(self, draft, target, parents, sizes, out_indices, out_tokens, out_lens, out_next) -> None:
        self._kernels().follow_ddtree_verified_path_triton(
            draft_tokens=draft, target_predict=target, parents=parents, actual_tree_sizes=sizes,
            accepted_indices=out_indices, accepted_token_ids=out_tokens, accepted_lens=out_lens, next_tokens=out_next)

    def ddtree_sample(self, target_probs, draft, parents, sizes, out_indices, out_tokens, out_lens, out_next, uniforms,
                      uniform_final) -> None:
        """The uniform buffers the check gives (the wrapper fills them from torch's generator and its kernel
        reads them), the worker's scratch for the reject outputs."""
        import torch

        bs, q = draft.shape
        device = draft.device
        self._kernels().sample_ddtree_target_probs_triton(
            target_probs=target_probs, draft_tokens=draft, parents=parents, actual_tree_sizes=sizes,
            uniform_samples=uniforms, uniform_final=uniform_final,
            accepted_indices=out_indices, accepted_token_ids=out_tokens, accepted_lens=out_lens, next_tokens=out_next,
            reject_indices=torch.empty(bs, dtype=torch.int64, device=device),
            reject_child_tokens=torch.empty(bs, q, dtype=torch.int64, device=device),
            reject_child_counts=torch.empty(bs, dtype=torch.int64, device=device))

    def ddtree_sample_distribution(self, *args) -> None:
        """The sampling family's law cells call the same sampler (:meth:`ddtree_sample`)."""
        self.ddtree_sample(*args)

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
