"""``flashinfer``: FlashInfer's paged prefill, ``BatchPrefillWithPagedKVCacheWrapper``, as SGLang's
flashinfer attention backend calls it for target verify (``DDTREE_VERIFY``, ``DFLASH_VERIFY``, EAGLE trees
with top-k > 1): backend ``fa2``, layout ``NHD``, the tree as a custom mask that FlashInfer packs
(``segment_packbits``), ``sm_scale`` at plan time. SGLang picks this backend by default on sm120 (and on
most archs when FlashInfer imports); see ``docs/verify-attention.md``.

It also answers the linear-attention family's ``gdn_verify_chain`` (a verify of top-k 1 on a hybrid target)
through SGLang's own ``FlashInferGDNKernel.target_verify``: FlashInfer's ``gated_delta_rule_mtp``, which SGLang
runs on SM90 (fp32 state pool) and SM100 (bf16 state pool) and nowhere else; it takes no tree.
Its static cells build FlashInfer's kernel through that call for each arch
(:data:`~ddtree_compat.static.kernels.FLASHINFER_GDN_MTP_CUTEDSL`), and SGLang's own CuTe DSL GDN kernel, which its
ReplaySSM fold runs in place of FlashInfer's when this verify has a bf16 state
(:data:`~ddtree_compat.static.kernels.SGLANG_GDN_FOLD_CUTEDSL`).

Two attention kernels, both judged by the attention family's oracle and checks:

* ``verify_attention``: plan, then run, on the case's buffers.
* ``verify_attention_graph``: the CUDA-graph wrapper (``use_cuda_graph=True``, fixed index, mask and
  indptr buffers): planned and captured at capacity (``C`` rows per request, a captured batch), then
  planned again at the live layout (live width ``n <= C``, live batch ``<= captured``, the rest padding
  requests as SGLang's graph runner pads them) and replayed.

The adapter's own work (pure torch, also on the CPU, unit-tested): the attention family's
:func:`~ddtree_compat.families.attention.paging.paged_layout` writes the tree
rows' K/V into a copy of the KV pool after each request's prefix, as SGLang's ``set_kv_buffer`` does before
the attention call, and gives FlashInfer's page table for the case's page size. Page size 1 is the call
SGLang's flashinfer backend makes (token slots as pages); page size 16 is FlashInfer's native paging of the
same pool.
"""

from __future__ import annotations

from ..contract import AdapterError, Backend, KernelImpl, locate
from ..families.attention.paging import PagedLayout, paged_layout
from ..families.attention.places import FLASHINFER_PREFILL as PLACES
from ..families.attention.records import GRAPH_KERNEL, KERNEL as VERIFY_ATTENTION
from ..families.linear.places import FLASHINFER_GDN, FLASHINFER_GDN_STATE as GDN_STATE
from ..families.linear.records import GDN_VERIFY_CHAIN
from ..static.kernels import FLASHINFER_GDN_MTP_CUTEDSL, FLASHINFER_VERIFY_ATTENTION, SGLANG_GDN_FOLD_CUTEDSL

WORKSPACE_BYTES = 384 << 20  # SGLang's default flashinfer workspace (SGLANG_FLASHINFER_WORKSPACE_SIZE; 512 MB for
# Qwen-family targets): split-KV partial outputs of long prefixes need over 128 MB (h32 d128, prefix 1000, bs 3)
FLASHINFER_BACKEND = "fa2"  # what SGLang's flashinfer backend asks for in target verify (prefill_backend)
WHAT = "FlashInfer's BatchPrefillWithPagedKVCacheWrapper (fa2, NHD, custom mask)"
GDN_WHAT = "FlashInfer's gated_delta_rule_mtp through SGLang's FlashInferGDNKernel.target_verify"


def _refuse_gdn(target, case) -> str | None:
    """What SGLang never sends to FlashInfer's GDN verify: another arch, the other state dtype, a deployment-rows
    case (FlashInfer writes the scratch rows in batch order: the last requests of a verify of ``rows`` cannot be
    run alone)."""
    from ..arch import parse_arch

    major = parse_arch(target.arch)[0] if target.arch else 0
    if major not in GDN_STATE:
        return (f"SGLang runs FlashInfer's GDN verify on SM90 and SM100 only (FlashInferGDNKernel."
                f"supports_target_verify); {target.arch} runs the Triton kernel")
    if case.state_dtype != GDN_STATE[major]:
        return (f"SGLang pairs FlashInfer's GDN kernels on {target.arch} with a {GDN_STATE[major]} state pool "
                f"(--mamba-ssm-dtype); a {case.state_dtype} pool runs the Triton kernel")
    if case.rows:
        return (f"FlashInfer writes verify scratch rows in batch order: the last {case.verify.batch} requests of a "
                f"verify of {case.rows} cannot run alone")
    if target.tier == "device":
        cls, _ = locate(FLASHINFER_GDN)
        try:
            cls()  # SGLang's own check: FlashInfer >= 0.6.14 with its GDN prefill, decode and MTP kernels
        except RuntimeError as e:
            return f"SGLang's FlashInferGDNKernel cannot be made here: {e}"
    return None


def graph_layouts(k, v, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr, n: int,
                  page_size: int, capacity: int, captured_batch: int):
    """The two layouts of a CUDA-graph call, ``(qo_capture, capture, qo_live, live)``: every request (the
    ``bs`` live ones over their prefixes, then padding requests over no prefix) with ``capacity`` tree rows
    of zeros under a causal mask (what a graph runner captures with), then with the live ``n`` rows (the
    case's K/V and mask; padding requests causal over zeros). Same pool, so the live page table fits the
    captured buffers. Arguments as :func:`~ddtree_compat.families.attention.paging.paged_layout`'s;
    ``qo_*`` are int32 ``[captured_batch + 1]`` (``b * capacity``, ``b * n``).

    Raises:
        ValueError: a request without exactly ``n`` rows, ``n > capacity`` or more requests than
            ``captured_batch`` (and :func:`~ddtree_compat.families.attention.paging.request_pages`'s).
    """
    import torch

    device, dtype = k.device, k.dtype
    qo = qo_indptr.tolist()
    bs = len(qo) - 1
    if any(qo[b + 1] - qo[b] != n for b in range(bs)) or n > capacity or bs > captured_batch:
        raise ValueError(f"{bs} requests of {n} rows do not fit a graph of {captured_batch} x {capacity}")
    kv, mi = kv_indptr.tolist(), mask_indptr.tolist()
    prefixes = [kv[b + 1] - kv[b] for b in range(bs)] + [0] * (captured_batch - bs)
    kv_all = torch.tensor([0, *torch.tensor(prefixes).cumsum(0).tolist()], dtype=torch.int32, device=device)

    def causal(prefix: int, width: int):
        block = torch.ones(width, prefix + width, dtype=torch.bool, device=device)
        block[:, prefix:] = torch.ones(width, width, dtype=torch.bool, device=device).tril()
        return block

    def layout(width: int, rows_k, rows_v, block_of):
        qo_all = torch.arange(0, (captured_batch + 1) * width, width, dtype=torch.int32, device=device)
        blocks = [block_of(b, p).flatten() for b, p in enumerate(prefixes)]
        sizes = torch.tensor([0] + [blk.numel() for blk in blocks]).cumsum(0).to(device)
        return qo_all, paged_layout(rows_k, rows_v, k_buffer, v_buffer, qo_all, kv_all, kv_indices,
                                    torch.cat(blocks), sizes, page_size, spare_pages=captured_batch)

    heads_dim = k.shape[1:]
    zeros = torch.zeros(captured_batch * capacity, *heads_dim, dtype=dtype, device=device)
    qo_cap, cap = layout(capacity, zeros, zeros, lambda b, p: causal(p, capacity))
    pad_rows = torch.zeros((captured_batch - bs) * n, *heads_dim, dtype=dtype, device=device)
    live_mask = custom_mask[:mi[bs]].bool()

    def live_block(b, p):
        return live_mask[mi[b]:mi[b + 1]].view(n, p + n) if b < bs else causal(p, n)

    qo_live, live = layout(n, torch.cat([k[:bs * n], pad_rows]), torch.cat([v[:bs * n], pad_rows]), live_block)
    return qo_cap, cap, qo_live, live


def _ours(build):
    """Run a step of this adapter (not FlashInfer's): its failure is the suite's ``error``, never a fault."""
    try:
        return build()
    except Exception as e:  # noqa: BLE001
        raise AdapterError(f"flashinfer adapter: {type(e).__name__}: {e}") from e


def _wrapper_class():
    cls, _ = locate(PLACES)
    return cls


def _plan(wrapper, qo_indptr, layout: PagedLayout, heads: int, kv_heads: int, head_dim: int, page_size: int,
          sm_scale: float, dtype) -> None:
    wrapper.plan(qo_indptr, layout.kv_indptr, layout.kv_indices, layout.last_page_len, heads, kv_heads, head_dim,
                 page_size, custom_mask=layout.mask, sm_scale=sm_scale, q_data_type=dtype, kv_data_type=dtype)


class FlashInferBackend(Backend):
    name = "flashinfer"
    implements = (
        KernelImpl(VERIFY_ATTENTION, "cuda", WHAT, places=PLACES, static=(FLASHINFER_VERIFY_ATTENTION,)),
        KernelImpl(GRAPH_KERNEL, "cuda", WHAT + " in a CUDA graph", places=PLACES),
        KernelImpl(GDN_VERIFY_CHAIN.name, "cuda", GDN_WHAT, places=FLASHINFER_GDN, refuse=_refuse_gdn,
                   static=(FLASHINFER_GDN_MTP_CUTEDSL, SGLANG_GDN_FOLD_CUTEDSL)),
    )

    def __init__(self):
        self._workspaces = {}  # device -> the float workspace, one per device as SGLang keeps one
        self._gdn = None  # SGLang's FlashInferGDNKernel, made once as its GDN backend makes it

    def gdn_verify_chain(self, A_log, dt_bias, q, k, v, a, b, *, ssm_states, cache_indices, query_start_loc,
                         intermediate_states_buffer, intermediate_state_indices, cache_steps):
        """``FlashInferGDNKernel().target_verify(...)`` with no parent table, as SGLang's GDN backend calls it at
        top-k 1 (SGLang 0.5.23, ``srt/layers/attention/linear/kernels/gdn_flashinfer.py``). Arguments, shapes and
        dtypes as :mod:`ddtree_compat.families.linear.checks` lays them out: q, k ``[1, bs * D, H, K]``, v
        ``[1, bs * D, HV, V]``, a, b ``[bs * D, HV]``, ``A_log`` / ``dt_bias`` fp32 ``[HV]``, one layer's state pool
        ``[P + 1, HV, V, K]`` and scratch ``[P + 1, C, HV, V, K]``, int32 slots, ``query_start_loc`` and scratch rows;
        returns o ``[1, bs * D, HV, V]``. FlashInfer ignores ``cache_steps`` (see the known issue
        ``flashinfer-gdn-verify-scratch-at-live-width-pitch``).

        Raises:
            AdapterError: a state pool or scratch off FlashInfer's 32-byte alignment, where SGLang would run the
                Triton kernel instead: the column would not be FlashInfer's.
        """
        if self._gdn is None:
            cls, _ = locate(FLASHINFER_GDN)
            self._gdn = cls()
        aligned = getattr(self._gdn, "_mutable_inputs_are_aligned", None)
        if aligned is not None and not aligned(("ssm_states", ssm_states),
                                               ("intermediate_states_buffer", intermediate_states_buffer)):
            raise AdapterError("flashinfer adapter: the state pool or scratch is not 32-byte aligned: SGLang would "
                               "run the Triton kernel instead")
        return self._gdn.target_verify(A_log, dt_bias, q, k, v, a, b, ssm_states=ssm_states,
                                       cache_indices=cache_indices, query_start_loc=query_start_loc,
                                       intermediate_states_buffer=intermediate_states_buffer,
                                       intermediate_state_indices=intermediate_state_indices,
                                       cache_steps=cache_steps, retrieve_parent_token=None)

    def _workspace(self, device):
        import torch

        key = str(device)
        if key not in self._workspaces:
            self._workspaces[key] = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        return self._workspaces[key]

    def scale_adapter_nbytes(self, case) -> int:
        """Device bytes this adapter allocates beside a deployment-shape case's tensors: the paged copy of its KV
        pool (:func:`~..families.scale.checks.paged_copy_nbytes`), so that a cell which cannot hold it is a skip
        saying so, not our out-of-memory error; 0 for another kernel."""
        from ..families.scale.checks import paged_copy_nbytes

        return paged_copy_nbytes(case) if case.kernel == VERIFY_ATTENTION else 0

    def verify_attention(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                         mask_indptr, max_len_extend, sm_scale, page_size, tiles="native") -> dict:
        """Plan, then run on ``q[:qo_indptr[-1]]`` writing ``o``'s rows as far (FlashInfer checks that ``q``
        has exactly those rows; ``o``'s later rows must stay unwritten). Returns what was called."""
        layout = _ours(lambda: paged_layout(k, v, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                                            mask_indptr, page_size))
        wrapper = _wrapper_class()(self._workspace(q.device), "NHD", backend=FLASHINFER_BACKEND)
        _plan(wrapper, qo_indptr, layout, q.shape[1], k.shape[1], q.shape[2], page_size, sm_scale, q.dtype)
        rows = int(qo_indptr[-1])  # FlashInfer takes exactly qo_indptr[-1] rows (SGLang's eager verify has no more)
        wrapper.run(q[:rows], (layout.k_cache, layout.v_cache), out=o[:rows])
        return {"call": f"plan+run page_size={page_size}"}

    def verify_attention_graph(self, q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices,
                               custom_mask, mask_indptr, max_len_extend, sm_scale, page_size, capacity: int,
                               captured_batch: int) -> dict:
        """The CUDA-graph wrapper: planned and captured for ``captured_batch`` requests of ``capacity`` rows
        (request ``b < bs`` over its own prefix, padding requests over none), then planned at the live layout
        (``n = max_len_extend`` rows per live request, padding requests ``n`` rows over their own ``n``
        keys) and replayed; the live rows are copied from the graph's output buffer into ``o``."""
        import torch

        device, dtype = q.device, q.dtype
        heads, kv_heads, dim = q.shape[1], k.shape[1], q.shape[2]
        qo, kv = qo_indptr.tolist(), kv_indptr.tolist()
        bs, n = len(qo) - 1, max_len_extend
        qo_cap, cap, qo_live, live = _ours(lambda: graph_layouts(
            k, v, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr, n, page_size,
            capacity, captured_batch))
        prefixes, pad = [kv[b + 1] - kv[b] for b in range(bs)], captured_batch - bs
        mask_bytes = sum(-(-capacity * (p + capacity) // 8) for p in prefixes + [0] * pad) + 64
        buffers = dict(
            qo_indptr_buf=torch.empty(captured_batch + 1, dtype=torch.int32, device=device),
            paged_kv_indptr_buf=torch.empty(captured_batch + 1, dtype=torch.int32, device=device),
            paged_kv_indices_buf=torch.empty(cap.kv_indices.numel() + 64, dtype=torch.int32, device=device),
            paged_kv_last_page_len_buf=torch.empty(captured_batch, dtype=torch.int32, device=device),
            custom_mask_buf=torch.empty(mask_bytes, dtype=torch.uint8, device=device),
            mask_indptr_buf=torch.empty(captured_batch + 1, dtype=torch.int32, device=device))
        wrapper = _wrapper_class()(self._workspace(device), "NHD", use_cuda_graph=True, backend=FLASHINFER_BACKEND,
                                   **buffers)
        q_buf = torch.zeros(captured_batch * capacity, heads, dim, dtype=dtype, device=device)
        o_buf = torch.zeros_like(q_buf)
        k_cache, v_cache = cap.k_cache, cap.v_cache
        _plan(wrapper, qo_cap, cap, heads, kv_heads, dim, page_size, sm_scale, dtype)
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            wrapper.run(q_buf, (k_cache, v_cache), out=o_buf)  # warm-up, as the graph runner does
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            wrapper.run(q_buf, (k_cache, v_cache), out=o_buf)

        if live.k_cache.shape[0] > k_cache.shape[0]:
            raise AdapterError("the live layout needs more pages than the captured one")
        k_cache[:live.k_cache.shape[0]].copy_(live.k_cache)
        v_cache[:live.v_cache.shape[0]].copy_(live.v_cache)
        _plan(wrapper, qo_live, live, heads, kv_heads, dim, page_size, sm_scale, dtype)
        q_buf.zero_()
        q_buf[:bs * n] = q[:bs * n]
        o_buf.fill_(float("nan"))
        graph.replay()
        o[:bs * n] = o_buf[:bs * n]
        return {"call": f"graph captured {captured_batch}x{capacity}, replayed {bs}x{n} (+{pad} padding) "
                        f"page_size={page_size}"}
