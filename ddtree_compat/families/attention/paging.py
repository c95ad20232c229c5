"""The verify-attention case's buffers as a paged KV cache: each request's tokens are its prefix (the case's
``kv_indices``) then its tree rows, written into a copy of the pool as SGLang's ``set_kv_buffer`` writes
them before the attention call. Backends whose kernel reads KV through a page table (FlashInfer's paged
prefill; FA3 with a DDTree implementation's page-table metadata) lay the case out with it; pure torch,
on any device (unit-tested on the CPU).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PagedLayout:
    """FlashInfer's view of one verify-attention call.

    Attributes:
        k_cache, v_cache: ``[pages, page_size, Hk, Dh]``: a copy of the pool with the tree rows written.
        kv_indptr: int32 ``[bs + 1]``: pages per request, cumulative.
        kv_indices: int32: each request's pages in token order.
        last_page_len: int32 ``[bs]``: tokens in each request's last page.
        kv_lens: ``P_b + n_b`` per request.
        mask: bool, flattened ``n_b x (P_b + n_b)`` blocks (the case's, without a stale tail).
    """

    k_cache: "object"
    v_cache: "object"
    kv_indptr: "object"
    kv_indices: "object"
    last_page_len: "object"
    kv_lens: list[int]
    mask: "object"


def request_pages(prefix_slots: list[int], tokens: int, page_size: int, next_page: int) -> tuple[list[int], int]:
    """Request pages in token order for ``tokens`` tokens whose first ``len(prefix_slots)`` are at
    ``prefix_slots``: the prefix's pages, then fresh pages numbered from ``next_page``. Returns the pages
    and the next fresh page number.

    Raises:
        ValueError: the prefix is not laid out page by page (token ``t`` at ``page * page_size + t % page_size``).
    """
    pages = []
    for t, slot in enumerate(prefix_slots):
        if slot % page_size != t % page_size or (t % page_size and slot // page_size != pages[-1]):
            raise ValueError(f"prefix token {t} at slot {slot} is not paged by {page_size}")
        if t % page_size == 0:
            pages.append(slot // page_size)
    needed = -(-tokens // page_size)
    while len(pages) < needed:
        pages.append(next_page)
        next_page += 1
    return pages, next_page


def paged_layout(k, v, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr,
                 page_size: int, spare_pages: int = 0) -> PagedLayout:
    """The case's buffers as FlashInfer's paged KV cache: request ``b``'s tokens are its prefix
    (``kv_indices[kv_indptr[b]:kv_indptr[b + 1]]``) then its ``n_b`` tree rows (``k[qo_indptr[b]:...]``),
    paged by ``page_size``; the tree rows go into the prefix's last page, then into pages appended to a
    copy of the pool (plus ``spare_pages`` more), as SGLang's ``set_kv_buffer`` writes them before the
    attention call. The inputs are left unmodified.

    Args:
        k, v: the tree rows' K/V ``[rows, Hk, Dh]`` (fp16 / bf16; rows past ``qo_indptr[-1]`` are not read).
        k_buffer, v_buffer: the KV pool ``[slots, Hk, Dh]``, ``slots`` a multiple of ``page_size``.
        qo_indptr: int32 ``[bs + 1]``; kv_indptr: int32 ``[bs + 1]`` (prefix lengths, cumulative);
            kv_indices: int64 prefix slots (a stale tail past ``kv_indptr[-1]`` is ignored).
        custom_mask: bool or uint8, the flattened ``n_b x (P_b + n_b)`` blocks; mask_indptr: int ``[bs + 1]``.
        page_size: slots per page (1: SGLang's call, token slots as pages).
        spare_pages: pages appended beyond what the rows need (the graph call's capture layout).

    Raises:
        ValueError: a prefix not laid out page by page (:func:`request_pages`).
    """
    import torch

    qo, kv = qo_indptr.tolist(), kv_indptr.tolist()
    bs = len(qo) - 1
    slots = kv_indices.tolist()
    pool_pages = k_buffer.shape[0] // page_size
    fresh = -(-(qo[-1]) // page_size) + bs + spare_pages
    shape = (pool_pages + fresh, page_size, *k_buffer.shape[1:])
    k_cache = torch.cat([k_buffer[:pool_pages * page_size].reshape(pool_pages, page_size, *k_buffer.shape[1:]),
                         torch.zeros(fresh, page_size, *k_buffer.shape[1:], dtype=k_buffer.dtype,
                                     device=k_buffer.device)])
    v_cache = torch.cat([v_buffer[:pool_pages * page_size].reshape(pool_pages, page_size, *v_buffer.shape[1:]),
                         torch.zeros_like(k_cache[pool_pages:])])
    assert tuple(k_cache.shape) == shape
    indptr, indices, last, lens = [0], [], [], []
    next_page = pool_pages
    flat_k, flat_v = k_cache.view(-1, *k_buffer.shape[1:]), v_cache.view(-1, *v_buffer.shape[1:])
    for b in range(bs):
        prefix = slots[kv[b]:kv[b + 1]]
        n = qo[b + 1] - qo[b]
        total = len(prefix) + n
        pages, next_page = request_pages(prefix, total, page_size, next_page)
        tree = torch.tensor([pages[t // page_size] * page_size + t % page_size for t in range(len(prefix), total)],
                            dtype=torch.int64, device=k_buffer.device)
        flat_k[tree], flat_v[tree] = k[qo[b]:qo[b + 1]], v[qo[b]:qo[b + 1]]
        indices += pages
        indptr.append(len(indices))
        last.append(total - (len(pages) - 1) * page_size)
        lens.append(total)
    device = k_buffer.device
    size = int(mask_indptr[-1])
    return PagedLayout(k_cache=k_cache, v_cache=v_cache,
                       kv_indptr=torch.tensor(indptr, dtype=torch.int32, device=device),
                       kv_indices=torch.tensor(indices, dtype=torch.int32, device=device),
                       last_page_len=torch.tensor(last, dtype=torch.int32, device=device),
                       kv_lens=lens, mask=custom_mask[:size].bool())


def paged_layout_nbytes(pool_bytes: int, pool_slots: int, prefix_tokens: int, rows: int, bs: int) -> int:
    """Device bytes :func:`paged_layout` allocates at page size 1 (SGLang's) for a pool of ``pool_slots`` token slots
    holding ``pool_bytes`` of K (and as many of V), ``bs`` requests with ``prefix_tokens`` prefix tokens and ``rows``
    tree rows in all: the copies of K and V with the rows' pages appended, and the int32 page indices, indptr and last
    page lengths (the mask is the case's own). What an adapter built on it needs beside a case's own tensors (the
    deployment-shape cells' memory check: ``families.scale.checks.paged_copy_nbytes``)."""
    pages = pool_slots + rows + bs
    return 2 * pool_bytes * pages // pool_slots + 4 * (prefix_tokens + rows + 2 * bs + 1)


def gather_keys(layout: PagedLayout, request: int, page_size: int):
    """Request ``request``'s keys and values ``[P + n, Hk, Dh]`` (the pool's dtype) read back through the page
    table, the way FlashInfer addresses token ``t``: page ``kv_indices[kv_indptr[b] + t // page_size]``, row
    ``t % page_size`` (for the unit tests of :func:`paged_layout`)."""
    import torch

    start, end = layout.kv_indptr[request].item(), layout.kv_indptr[request + 1].item()
    pages = layout.kv_indices[start:end].long()
    total = layout.kv_lens[request]
    t = torch.arange(total, device=pages.device)
    rows = pages[t // page_size] * page_size + t % page_size
    flat_k = layout.k_cache.reshape(-1, *layout.k_cache.shape[2:])
    flat_v = layout.v_cache.reshape(-1, *layout.v_cache.shape[2:])
    return flat_k[rows], flat_v[rows]
