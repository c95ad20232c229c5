"""The kernels the static tier compiles: one entry per kernel, declared by the backend that launches it.

A backend lists its entries in ``static_kernels`` (see :mod:`ddtree_compat.backends`). Two kinds:

* :class:`TritonKernel`: a ``@triton.jit`` function, its runtime signature and a ``specialize``
  function mapping one verify case and one arch to the :class:`Spec` SGLang would launch there
  (constexprs from the case's shapes; block sizes / ``num_warps`` / ``num_stages`` as SGLang picks
  them on that arch). Compiled with ``triton.compile`` for ``GPUTarget("cuda", cc, 32)``.
* :class:`CudaJitKernel`: a tvm-ffi JIT module of SGLang, built the way its ``load_jit`` builds it
  (same ``build.ninja``, same nvcc flags) for the arch's ``-gencode``.
* :class:`SGLangAttentionKernel`: SGLang's Triton verify attention with the launch it makes on each arch.
* :class:`FlashInferPrefillKernel`: FlashInfer's custom-mask paged prefill (SGLang's flashinfer backend's
  target verify), built the way FlashInfer's JIT builds it for the arch.
* :class:`CuteDslKernel`: the CuTe DSL GDN verify kernels SGLang runs (its ReplaySSM fold's own, FlashInfer's
  through its FlashInferGDNKernel), compiled by CuTe DSL for the arch as on a GPU of that arch
  (:mod:`~ddtree_compat.static.cutedsl_aot`).

Entries are plain data (strings, tuples, module-level functions): the compile itself runs in a
worker process (:mod:`ddtree_compat.static.runner`), which imports the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from ..contract import Place
from ..families.attention.records import KERNEL as VERIFY_ATTENTION
from ..families.commit.places import ACCEPT_OUT_CACHE_LOC_KERNEL, ASSIGN_EXTEND_CACHE_LOCS_KERNEL, MOVE_KV_KERNEL
from ..families.commit.records import KV_DTYPE_BYTES, KV_DTYPES, KV_SHAPES, MOVE_KV
from ..families.linear.places import CONV_UPDATE_KERNEL, FLASHINFER_GDN_STATE, GDN_RECURRENT_KERNEL
from ..families.linear.records import geometry
from ..families.sampling.places import CHAIN_SAMPLING_KERNEL, TREE_SAMPLING_LOADER
from ..families.sampling.records import CHAIN as CHAIN_SAMPLING, TREE as TREE_SAMPLING
from ..families.verify.places import VERIFY_CUDA_LOADER, VERIFY_TRITON_KERNEL
from ..families.verify.records import VERIFY, VerifyCase
from . import attention_aot, cutedsl_aot, flashinfer_aot, nvcc, triton_aot
from .build import Build, BuildError, Spec, Unavailable  # noqa: F401 - the entries' vocabulary, re-exported
from .sgl_kernel_libs import SglKernelLibrary


def _unique(specs: Iterable[Spec]) -> list[Spec]:
    return list(dict.fromkeys(specs))


@dataclass(frozen=True)
class TritonKernel:
    """A Triton kernel the static tier compiles for each arch and specialization.

    Attributes:
        kernel: name in the matrix (``verify_tree_greedy``).
        fn: where the ``@triton.jit`` function is: an SGLang kernel's places (a tuple of
            :class:`~ddtree_compat.contract.Place`, from its family's ``places.py``: the first the installed SGLang
            has is compiled), ``module:attr`` (one of ours), or ``/path/file.py::attr`` (a file's function: a DDTree
            implementation's kernel module).
        signature: ``(parameter, Triton type)`` for every runtime parameter (``*i32``, ``*i64``, ``i32``);
            the rest are constexprs. Pointers are specialised as 16-byte aligned, as Triton does for
            freshly allocated tensors; an integer typed ``i32:16`` as a multiple of 16 (Triton's ``D``
            specialization of an integer argument, e.g. a stride).
        specialize: ``(case, arch) -> Spec``, one per verify case; or
        specialize_all: ``(cases, arch) -> specs``, for kernels whose specializations are not one per
            case (a bound over the cases, or the launch configurations of a pool).
        default_archs: a heavy build's archs outside the ``full`` profile (``()``: every arch).
        in_default: ``spec -> bool``: the specializations built outside the ``full`` profile (``None``: all).
    """

    kernel: str
    fn: str | tuple[Place, ...]
    signature: tuple[tuple[str, str], ...]
    specialize: Callable[[VerifyCase, str], Spec] | None = None
    specialize_all: Callable[[tuple[VerifyCase, ...], str], Iterable[Spec]] | None = None
    default_archs: tuple[str, ...] = ()
    in_default: Callable[[Spec], bool] | None = None

    def specs(self, cases: Iterable[VerifyCase], arch: str) -> list[Spec]:
        """Distinct specializations over ``cases``, in first-seen order."""
        if self.specialize_all is not None:
            return _unique(self.specialize_all(tuple(cases), arch))
        return _unique(self.specialize(c, arch) for c in cases)

    def job(self, spec: Spec, arch: str, cache_dir: str) -> tuple[Callable, tuple]:
        return triton_aot.compile_kernel, (self.fn, self.signature, spec.constexprs, spec.num_warps,
                                           spec.num_stages, arch, cache_dir)


@dataclass(frozen=True)
class SGLangAttentionKernel:
    """SGLang's verify attention kernel (``_fwd_kernel`` of ``extend_attention_fwd``), compiled per arch
    with the launch SGLang makes on that arch (:mod:`~ddtree_compat.static.attention_aot`): its own tile
    choice, ``num_warps``/``num_stages`` and flags, recorded from ``extend_attention_fwd`` itself.

    Attributes:
        kernel: name in the matrix (``verify_attention``).
        head_dims: ``Lq = Lv`` values, one spec each (``d128-bf16``).
        dtype: ``fp16`` or ``bf16`` (q/k/v/o and the KV pool).

    A spec's ``constexprs`` beyond ``head_dim`` (and its ``num_warps``) override the recorded launch:
    a tile config SGLang does not choose, for tests.
    """

    kernel: str
    head_dims: tuple[int, ...]
    dtype: str

    def specs(self, cases: Iterable[VerifyCase], arch: str) -> list[Spec]:
        return [Spec(f"d{h}-{self.dtype}", (("head_dim", h),)) for h in self.head_dims]

    def job(self, spec: Spec, arch: str, cache_dir: str) -> tuple[Callable, tuple]:
        overrides = dict(spec.constexprs)
        head_dim = overrides.pop("head_dim")
        if spec.num_warps is not None:
            overrides["num_warps"] = spec.num_warps
        return attention_aot.compile_attention, (head_dim, self.dtype, tuple(overrides.items()), arch, cache_dir)


@dataclass(frozen=True)
class FlashInferPrefillKernel:
    """FlashInfer's paged prefill with a custom mask (``BatchPrefillWithPagedKVCacheKernel``, MaskMode 2),
    one JIT module per dtype x head dim, compiled per arch by FlashInfer's own build
    (:mod:`~ddtree_compat.static.flashinfer_aot`). Spec ids ``d128-bf16``."""

    kernel: str
    head_dims: tuple[int, ...]
    dtypes: tuple[str, ...]
    default_archs: tuple[str, ...] = ()  # outside the full profile, these archs only (each build ~30 s of a core)

    def specs(self, cases: Iterable[VerifyCase], arch: str) -> list[Spec]:
        return [Spec(f"d{h}-{dt}", (("head_dim", h),)) for dt in self.dtypes for h in self.head_dims]

    def job(self, spec: Spec, arch: str, cache_dir: str) -> tuple[Callable, tuple]:
        return flashinfer_aot.build_prefill, (spec.id.split("-")[1], dict(spec.constexprs)["head_dim"], arch,
                                              cache_dir)


@dataclass(frozen=True)
class CudaJitKernel:
    """A kernel in one of SGLang's tvm-ffi JIT modules (compiled by nvcc, once per arch).

    Attributes:
        kernel: name in the matrix.
        loader: the places of the function whose call runs SGLang's ``load_jit`` for the module (a
            ``cache_once`` function; its ``__wrapped__`` is called), from its family's ``places.py``.
        function: substring of the device function's (mangled) name to check.
        threads: threads per block of its launch (read from the host code that launches it).
        id: ``case_id`` in the matrix (the module and the loader's arguments).
        loader_args: the arguments the loader takes (the module's template parameters), as a release's wrapper
            passes them.
        headers: ``(package, distribution)`` of header-only dependencies SGLang's JIT reads from an installed
            package (``("flashinfer", "flashinfer-python")``): absent, the cell is a skip naming the distribution.
        toolkit: CUDA toolkit headers it includes that a minimal toolkit lacks (``curand.h``; see
            :data:`~ddtree_compat.static.nvcc.TOOLKIT_HEADERS`).
        default_archs: outside the full profile, these archs only (a heavy build).
    """

    kernel: str
    loader: tuple[Place, ...]
    function: str
    threads: int
    id: str
    loader_args: tuple = ()
    headers: tuple[tuple[str, str], ...] = ()
    toolkit: tuple[str, ...] = ()
    default_archs: tuple[str, ...] = ()
    in_default: Callable[[Spec], bool] | None = None

    def specs(self, cases: Iterable[VerifyCase], arch: str) -> list[Spec]:
        return [Spec(self.id)]

    def job(self, spec: Spec, arch: str, cache_dir: str) -> tuple[Callable, tuple]:
        return nvcc.build_module, (self.loader, self.function, self.threads, arch, cache_dir, self.loader_args,
                                   self.headers, self.toolkit)


# ------------------------------------------------------------------------------------------------
# SGLang 0.5.23's DDTree kernels
# ------------------------------------------------------------------------------------------------


def verify_spec(case: VerifyCase, arch: str) -> Spec:
    """``verify_tree_greedy_triton`` specialises on ``bs``, ``accept_index`` width and ``C`` (any arch)."""
    return Spec(f"bs{case.batch}-w{case.width}-c{case.slots}",
                (("batch_size", case.batch), ("num_speculative_tokens", case.width),
                 ("num_draft_tokens", case.slots)))


def fill_accept_spec(case: VerifyCase, arch: str) -> Spec:
    """The commit step launches ``fill_accept_out_cache_loc`` with ``size_upper = next_pow2(bs * width)``."""
    size = case.batch * case.width
    upper = 1 << max(0, size - 1).bit_length()
    return Spec(f"n{upper}", (("size_upper", upper),))


SGLANG_VERIFY_TRITON = TritonKernel(
    kernel=VERIFY,
    fn=VERIFY_TRITON_KERNEL,
    signature=(("predicts_ptr", "*i32"), ("accept_index_ptr", "*i32"), ("accept_token_num_ptr", "*i32"),
               ("candidates_ptr", "*i64"), ("retrieve_index_ptr", "*i64"), ("retrieve_next_token_ptr", "*i64"),
               ("retrieve_next_sibling_ptr", "*i64"), ("target_predict_ptr", "*i64")),
    specialize=verify_spec,
)

SGLANG_FILL_ACCEPT_TRITON = TritonKernel(
    kernel="fill_accept_out_cache_loc",
    fn=ACCEPT_OUT_CACHE_LOC_KERNEL,
    signature=(("accept_index", "*i32"), ("out_cache_loc", "*i64"), ("accept_out_cache_loc", "*i64")),
    specialize=fill_accept_spec,
)

# tree.cuh launches VerifyTreeGreedy with LaunchKernel(batch_size, 1, ...): one thread per block.
SGLANG_VERIFY_CUDA = CudaJitKernel(
    kernel=VERIFY,
    loader=VERIFY_CUDA_LOADER,
    function="VerifyTreeGreedy",
    threads=1,
    id="jit-speculative_tree",
)


def _next_pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def front_out_specs(cases: tuple[VerifyCase, ...], arch: str) -> list[Spec]:
    """``fill_front_out_cache_loc_func`` launches ``assign_extend_cache_locs`` with ``pool_len`` = the
    window (``C`` slots per request) and ``bs_upper = next_pow2(bs)`` (its ``tl.arange`` width). Only
    ``bs_upper`` sizes the kernel, so one spec bounds the cases: their largest ``C`` and ``bs``."""
    if not cases:
        return []
    slots, upper = max(c.slots for c in cases), _next_pow2(max(c.batch for c in cases))
    return [Spec(f"c{slots}-bs{upper}", (("pool_len", slots), ("bs_upper", upper)))]


def kv_copy_config(row_bytes: int) -> dict:
    """Launch parameters of ``copy_all_layer_kv_cache_tiled`` as SGLang 0.5.23's token KV pool picks
    them (``MHATokenToKVPool._init_kv_copy_and_warmup``) for slot rows of ``row_bytes``: a byte tile
    of 512 / 256 / 128 for rows of >= 8192 / >= 4096 / fewer bytes, 8 warps for 512-byte tiles (else
    4), and at most 128 (512-byte tiles) or 256 slots per launch (``num_locs_upper``)."""
    tile = 512 if row_bytes >= 8192 else 256 if row_bytes >= 4096 else 128
    return {"bytes_per_tile": tile, "byte_tiles": -(-row_bytes // tile), "num_warps": 8 if tile > 256 else 4,
            "num_locs_upper": 128 if tile >= 512 else 256}


def move_kv_specs(cases: tuple[VerifyCase, ...], arch: str) -> list[Spec]:
    """``copy_all_layer_kv_cache_tiled`` as the token KV pool launches it for the commit tier's pool
    layouts (``commit.KV_SHAPES`` x ``commit.KV_DTYPES``): each tile config ``kv_copy_config`` picks
    (``BYTES_PER_TILE``, ``num_warps``), at its largest ``num_locs_upper`` (the pool's per-launch
    cap, >= every launch of the suite), ``num_stages=2`` as ``copy_all_layer_kv_cache_func`` passes."""
    specs = []
    for heads, dim in KV_SHAPES:
        for dtype in KV_DTYPES:
            cfg = kv_copy_config(heads * dim * KV_DTYPE_BYTES[dtype])
            tile, warps, upper = cfg["bytes_per_tile"], cfg["num_warps"], cfg["num_locs_upper"]
            specs.append(Spec(f"t{tile}-w{warps}-n{upper}", (("num_locs_upper", upper), ("BYTES_PER_TILE", tile)),
                              num_warps=warps, num_stages=2))
    return sorted(set(specs), key=lambda s: dict(s.constexprs)["BYTES_PER_TILE"])


# fill_front_out_cache_loc_func: rows = arange(bs) (int64), the out_cache_loc window (int64),
# starts = zeros_like(num_front) and num_front (int32: accept_lens), the packed output (int64).
SGLANG_FRONT_OUT_TRITON = TritonKernel(
    kernel="front_out_cache_loc",
    fn=ASSIGN_EXTEND_CACHE_LOCS_KERNEL,
    signature=(("req_pool_indices", "*i64"), ("req_to_token", "*i64"), ("start_offset", "*i32"),
               ("end_offset", "*i32"), ("out_cache_loc", "*i64")),
    specialize_all=front_out_specs,
)

# MHATokenToKVPool: a uint64 pointer table, int64 byte strides, int64 slot lists; num_locs a runtime i32.
SGLANG_MOVE_KV_TRITON = TritonKernel(
    kernel=MOVE_KV.name,
    fn=MOVE_KV_KERNEL,
    signature=(("data_ptrs", "*u64"), ("strides", "*i64"), ("tgt_loc_ptr", "*i64"), ("src_loc_ptr", "*i64"),
               ("num_locs", "i32")),
    specialize_all=move_kv_specs,
)

# The target verify's attention, at the head dims of the verify-attention tier, in bf16 (smem and
# tiles are the same in fp16).
SGLANG_VERIFY_ATTENTION = SGLangAttentionKernel(kernel=VERIFY_ATTENTION, head_dims=(64, 128, 256), dtype="bf16")
# The field's shape (head dim 128, bf16: the Qwen3 family): one FlashInfer compile is ~30 s of one CPU core, so
# the default profile (CI, the README's commands) builds it for sm120 (the field's card; FlashInfer is SGLang's
# choice there) and the full profile (the nightly workflow, DDTREE_PROFILE=full) for every arch; the other
# dtype x head-dim modules run on the device tier (each JIT-built there), not here.
FLASHINFER_VERIFY_ATTENTION = FlashInferPrefillKernel(kernel=VERIFY_ATTENTION, head_dims=(128,), dtypes=("bf16",),
                                                      default_archs=("sm120",))
# sgl-kernel's prebuilt op libraries (no compile: the library each arch loads is read, sgl_kernel_libs)
SGL_KERNEL_OPS = SglKernelLibrary()

# sampling.cuh launches TreeSpeculativeSamplingTargetOnly with 1024 threads per block, one block per request, its
# CUB scan/reduce storage in dynamic shared memory; the wrapper's template arguments are vec_size = gcd(4, V) (4 at
# every real vocabulary: 128256, 151936, 248320) and deterministic (SGLang's workers pass True). It builds on
# FlashInfer's headers (flashinfer-python): an nvcc build of ~a minute of a core, so the default profile builds it
# for sm120 (the field's card), the full profile for every arch.
SGLANG_TREE_SAMPLING_CUDA = CudaJitKernel(
    kernel=TREE_SAMPLING,
    loader=TREE_SAMPLING_LOADER,
    function="TreeSpeculativeSamplingTargetOnly",
    threads=1024,
    id="jit-speculative_sampling-v4-det",
    loader_args=(4, True),
    headers=(("flashinfer", "flashinfer-python"),),
    toolkit=("curand.h",),  # FlashInfer's sampling.cuh includes it
    default_archs=("sm120",),
)

CHAIN_SAMPLING_VOCAB, CHAIN_SAMPLING_SLOTS = 151936, 8
"""The chain sampler's static spec: Qwen's vocabulary, a DFLASH block of 8 draft tokens."""


def chain_sampling_specs(cases, arch: str) -> list[Spec]:
    """``chain_speculative_sampling_triton``'s launch at a real vocabulary with block verification (its larger
    reduction: ``BLOCK_REDUCE = min(next_pow2(V), 32768)``, 8 warps past 4096), the heavier of its two modes."""
    reduce = min(_next_pow2(CHAIN_SAMPLING_VOCAB), 32768)
    return [Spec(f"v{CHAIN_SAMPLING_VOCAB}-s{CHAIN_SAMPLING_SLOTS}-block",
                 (("NUM_SLOTS", CHAIN_SAMPLING_SLOTS), ("VOCAB_SIZE", CHAIN_SAMPLING_VOCAB), ("BLOCK_V", 4096),
                  ("BLOCK_VERIFICATION", True), ("BLOCK_REDUCE", reduce)), num_warps=8 if reduce > 4096 else 4)]


# The strides are runtime i32 here (a real call's unit vocabulary stride would be specialised to 1 by Triton).
SGLANG_CHAIN_SAMPLING_TRITON = TritonKernel(
    kernel=CHAIN_SAMPLING,
    fn=CHAIN_SAMPLING_KERNEL,
    signature=(("Predicts", "*i32"), ("AcceptIndex", "*i32"), ("AcceptTokenNum", "*i32"), ("Candidates", "*i64"),
               ("RetriveIndex", "*i64"), ("UniformSamples", "*fp32"), ("UniformSamplesFinal", "*fp32"),
               ("TargetProbs", "*fp32"), ("DraftProbs", "*fp32"),
               *((s, "i32") for s in ("stride_cand_b", "stride_cand_s", "stride_idx_b", "stride_idx_s",
                                      "stride_uni_b", "stride_uni_s", "stride_tp_b", "stride_tp_s", "stride_tp_v",
                                      "stride_dp_b", "stride_dp_s", "stride_dp_v"))),
    specialize_all=chain_sampling_specs,
)


# ---- linear attention (the Gated DeltaNet layers of a hybrid target)

LINEAR_STATIC_BUDGETS = (8, 12, 15, 16, 64)
"""The live widths ``D = B + 1`` the linear-attention kernels are built at: the field's spine budgets at block 16
(8, 12, 15) and branching budgets (16, 64)."""
LINEAR_STATIC_LAYERS = (("qwen3.5-27b", 1), ("qwen3.5-27b", 4))
"""Qwen3.5 / 3.6-27B's layer on one GPU and on a 4-way tensor-parallel rank (bf16 activations, fp32 state: its
config's ``mamba_ssm_dtype``)."""


def _int(value: int) -> str:
    """A runtime integer as Triton specializes it: divisible by 16, or not."""
    return "i32:16" if value % 16 == 0 else "i32"


def gdn_launches(arch: str, batch_le_64: bool) -> tuple[int, int]:
    """``(BV, num_warps)`` SGLang's GDN recurrent kernel takes in target verify at head dims 128: value tiles of 4
    on sm90 for batches up to 64, else 32 (``_select_recurrent_launch_config``)."""
    return (4, 1) if arch == "sm90" and batch_le_64 else (32, 1)


def gdn_verify_specs(tree: bool):
    """The GDN recurrent kernel's target-verify specializations: :data:`LINEAR_STATIC_LAYERS` x the padded live
    width ``NP2_T`` of :data:`LINEAR_STATIC_BUDGETS` x each launch the arch takes; with (``tree``) or without the
    parent table."""

    def specs(cases, arch: str) -> list[Spec]:
        out = []
        for name, tp in LINEAR_STATIC_LAYERS:
            g = geometry(name, tp)
            h, hv, d = g["key_heads"], g["value_heads"], g["head_dim"]
            for width in sorted({_next_pow2(b + 1) for b in LINEAR_STATIC_BUDGETS}):
                for small in ((True, False) if arch == "sm90" else (True,)):
                    bv, warps = gdn_launches(arch, small)
                    consts = dict(
                        NP2_T=width, B=1, H=h, HV=hv, K=d, V=d, BK=d, BV=bv, USE_INITIAL_STATE=True,
                        USE_QK_L2NORM_IN_KERNEL=True, IS_VARLEN=True, IS_KDA=False, USE_LOWER_BOUND=False,
                        DISABLE_STATE_UPDATE=True, CACHE_INTERMEDIATE_STATES=True,
                        HAS_EAGLE_TREE_CUSTOM_ATTN_MASK=tree, stride_retrieve_parent_token_seq=width if tree else 0,
                        stride_retrieve_parent_token_token=1 if tree else 0,
                        replayssm_rawv=None, replayssm_rawk=None, replayssm_g=None, replayssm_beta=None,
                        stride_rawv_slot=0, stride_rawk_slot=0, stride_g_slot=0, stride_beta_slot=0, MAX_CACHE_LEN=0,
                        CACHE_RING=False, SPLIT_N_HV_GRID=True, USE_GDC=arch_major(arch) >= 9,
                        MATCH_CUTEDSL_DECODE=False, ROUND_STATE_TO_BF16=False)
                    if not tree:
                        consts["retrieve_parent_token_ptr"] = None
                    out.append(Spec(f"h{h}v{hv}d{d}-t{width}-bv{bv}", tuple(consts.items()), num_warps=warps,
                                    num_stages=3))
        return out

    return specs


def arch_major(arch: str) -> int:
    from ..arch import parse_arch

    return parse_arch(arch)[0]


def _gdn_signature(tree: bool, hv: int = 48, h: int = 16, d: int = 128) -> tuple[tuple[str, str], ...]:
    """The runtime arguments as the Triton GDN kernel backend's ``target_verify`` passes them: bf16 activations, an
    fp32 state pool and scratch, int32 slot and row indices, the int64 parent table (tree only)."""
    return (("A_log", "*fp32"), ("a", "*bf16"), ("dt_bias", "*fp32"), ("softplus_beta", "fp32"),
            ("softplus_threshold", "fp32"), ("lower_bound", "fp32"), ("q", "*bf16"), ("k", "*bf16"), ("v", "*bf16"),
            ("b", "*bf16"), ("o", "*bf16"), ("h0_source", "*fp32"), ("h0_indices", "*i32"),
            ("stride_h0_source", _int(hv * d * d)), ("cu_seqlens", "*i32"), ("intermediate_states_buffer", "*fp32"),
            ("intermediate_state_indices", "*i32"), ("cache_steps", "i32"),
            *((("retrieve_parent_token_ptr", "*i64"),) if tree else ()),
            ("scale", "fp32"), ("T", "i32"), ("stride_a", "i32"), ("stride_q", "i32:16"), ("stride_k", "i32:16"),
            ("stride_v", "i32:16"), ("stride_b", "i32"))


def gdn_in_default(spec: Spec) -> bool:
    """Outside the full profile: the one-GPU layer at the spine budgets' width (``NP2_T`` 16: budgets 8, 12, 15)."""
    consts = dict(spec.constexprs)
    return consts["HV"] == geometry(*LINEAR_STATIC_LAYERS[0])["value_heads"] and consts["NP2_T"] <= 16


SGLANG_GDN_VERIFY_TREE_TRITON = TritonKernel(kernel="gdn_verify_tree", fn=GDN_RECURRENT_KERNEL,
                                             signature=_gdn_signature(True), specialize_all=gdn_verify_specs(True),
                                             in_default=gdn_in_default)
SGLANG_GDN_VERIFY_CHAIN_TRITON = TritonKernel(kernel="gdn_verify_chain", fn=GDN_RECURRENT_KERNEL,
                                              signature=_gdn_signature(False), specialize_all=gdn_verify_specs(False),
                                              in_default=gdn_in_default)


def conv_verify_specs(cases, arch: str) -> list[Spec]:
    """The verify-time conv kernel as the GDN backend launches it in target verify: x a transposed view of
    ``[bs, D, dim]``, the conv pool ``[P + 1, dim, W - 1]`` and window scratch ``[P + 1, C, dim, W - 1]`` (strides
    and the pool's rows are constexpr: P = 256, ``--max-running-requests 256``; C = ``max(16, D)``), the tree's
    retrieve links, SiLU, no bias, ``BLOCK_N = 256``, Triton's default launch. The live width is unrolled, so one
    build per ``D``: the spine budgets 8 / 12 / 15 and budget 16 (outside the full profile: on sm120, budgets 8 and 12,
    the field's)."""
    out = []
    for name, tp in LINEAR_STATIC_LAYERS[:1]:
        g = geometry(name, tp)
        dim, w = (2 * g["key_heads"] + g["value_heads"]) * g["head_dim"], g["conv_kernel"]
        rows = 257
        for budget in LINEAR_STATIC_BUDGETS[:4]:
            d = budget + 1
            c = max(16, d)
            consts = dict(
                bias_ptr=None, cache_seqlens_ptr=None, num_accept_tokens_ptr=None, dim=dim, seqlen=d, state_len=w - 1,
                num_cache_lines=rows, stride_x_seq=d * dim, stride_x_dim=1, stride_x_token=dim, stride_w_dim=w,
                stride_w_width=1, stride_conv_state_seq=dim * (w - 1), stride_conv_state_dim=w - 1,
                stride_conv_state_tok=1, stride_state_indices=1, stride_inter_seq=c * dim * (w - 1),
                stride_inter_step=dim * (w - 1), stride_inter_dim=w - 1, stride_inter_win=1,
                stride_intermediate_state_indices=1, stride_retrieve_next_token_seq=d,
                stride_retrieve_next_token_token=1, stride_retrieve_next_sibling_seq=d,
                stride_retrieve_next_sibling_token=1, stride_retrieve_parent_token_seq=d,
                stride_retrieve_parent_token_token=1, stride_o_seq=dim * d, stride_o_dim=d, stride_o_token=1,
                pad_slot_id=-1, HAS_BIAS=False, KERNEL_WIDTH=w, SILU_ACTIVATION=True, IS_CONTINUOUS_BATCHING=True,
                IS_SPEC_DECODING=False, NP2_STATELEN=_next_pow2(w - 1), NP2_SEQLEN=_next_pow2(d), USE_PAD_SLOT=True,
                BLOCK_N=256, SAVE_INTERMEDIATE=True, HAS_EAGLE_TREE_CUSTOM_ATTN_MASK=True,
                USE_GDC=arch_major(arch) >= 9)
            out.append(Spec(f"dim{dim}-w{w}-d{d}", tuple(consts.items())))
    return out


SGLANG_CONV_VERIFY_TRITON = TritonKernel(
    kernel="conv_verify_tree", fn=CONV_UPDATE_KERNEL,
    signature=(("x_ptr", "*bf16"), ("w_ptr", "*bf16"), ("conv_state_ptr", "*bf16"), ("conv_state_indices_ptr", "*i32"),
               ("intermediate_conv_window_ptr", "*bf16"), ("intermediate_state_indices_ptr", "*i32"),
               ("retrieve_next_token_ptr", "*i64"), ("retrieve_next_sibling_ptr", "*i64"),
               ("retrieve_parent_token_ptr", "*i64"), ("o_ptr", "*bf16"), ("batch", "i32")),
    specialize_all=conv_verify_specs, default_archs=("sm120",),
    in_default=lambda spec: dict(spec.constexprs)["seqlen"] in (9, 13))


@dataclass(frozen=True)
class CuteDslKernel:
    """A CuTe DSL GDN kernel SGLang runs in chain verify, made by ``call`` (:data:`~ddtree_compat.static.cutedsl_aot.
    CALLS`), one build per layer geometry x live width x batch (the batch can pick the variant: SGLang's fold kernel
    runs an ILP-4 kernel for few value-head tiles, a wide-vector one with a value tile sized from ``batch x value
    heads``). Spec ids ``<prefix>-h16v48d128-t16-bs8`` (the ``flashinfer-mtp`` call's end in the state dtype). Archs
    where SGLang never makes the call are skips naming the kernel that verifies there.

    Attributes:
        routed: the ``(arch major, state dtype)`` pairs where SGLang makes the call; a spec's state dtype is its
            arch's (bf16 where the arch has none).
    """

    kernel: str
    call: str
    prefix: str
    layers: tuple[tuple[str, int], ...]
    widths: tuple[int, ...]
    batches: tuple[int, ...]
    routed: tuple[tuple[int, str], ...]
    default_archs: tuple[str, ...] = ()
    in_default: Callable[[Spec], bool] | None = None

    def state(self, arch: str) -> str:
        """The state pool dtype (``"fp32"`` / ``"bf16"``) SGLang pairs with this call on ``arch`` (``routed``);
        bf16 where it never makes the call (the build is then a skip)."""
        return dict(self.routed).get(arch_major(arch), "bf16")

    def specs(self, cases: Iterable[VerifyCase], arch: str) -> list[Spec]:
        """One spec per layer x live width x batch (``cases`` unused: the chains are the widths), constexprs
        ``B`` (requests), ``T`` (draft tokens each), ``H`` / ``HV`` (key / value heads), ``K`` (head dim), ``state``."""
        out, state = [], self.state(arch)
        tail = f"-{state}" if len({st for _, st in self.routed}) > 1 else ""
        for name, tp in self.layers:
            g = geometry(name, tp)
            h, hv, d = g["key_heads"], g["value_heads"], g["head_dim"]
            out += [Spec(f"{self.prefix}-h{h}v{hv}d{d}-t{t}-bs{b}{tail}",
                         (("B", b), ("T", t), ("H", h), ("HV", hv), ("K", d), ("state", state)))
                    for t in self.widths for b in self.batches]
        return out

    def job(self, spec: Spec, arch: str, cache_dir: str) -> tuple[Callable, tuple]:
        """:func:`~ddtree_compat.static.cutedsl_aot.build_gdn` and its arguments (run in the static worker)."""
        return cutedsl_aot.build_gdn, (self.call, spec.constexprs, arch, cache_dir, self.routed)


def _gdn_default(batch: int):
    """Outside the full profile (each build ~20 s of a core): the one-GPU layer at 16 draft tokens (a DFLASH block
    of 16) at ``batch`` requests."""
    hv = geometry(*LINEAR_STATIC_LAYERS[0])["value_heads"]
    return lambda spec: (lambda c: c["T"] == 16 and c["B"] == batch and c["HV"] == hv)(dict(spec.constexprs))


CHAIN_STATIC_WIDTHS = (4, 8, 16)
"""The draft tokens per request of the chain verifies the CuTe DSL GDN kernels serve (they take no tree, so no
DDTree verify reaches them): EAGLE at top-k 1 with 3 steps, DFLASH blocks of 8 and 16."""
FLASHINFER_GDN_ROUTED = tuple(FLASHINFER_GDN_STATE.items())
"""Where SGLang verifies through FlashInfer's GDN kernel: SM90 with an fp32 state pool, SM100 with bf16."""
SGLANG_GDN_FOLD_CUTEDSL = CuteDslKernel(
    kernel="gdn_verify_chain", call="ring", prefix="ring", layers=LINEAR_STATIC_LAYERS, widths=CHAIN_STATIC_WIDTHS,
    batches=(1, 8, 32), routed=tuple((m, st) for m, st in FLASHINFER_GDN_ROUTED if st == "bf16"),
    default_archs=("sm100",), in_default=lambda spec: False)
"""SGLang's fold kernel (FlashInfer's verify with a bf16 state: SM100), which serves only under
``--enable-linear-replayssm``: the full profile builds it (the unit tests build its ILP-4 variant), the default one
does not."""
FLASHINFER_GDN_MTP_CUTEDSL = CuteDslKernel(
    kernel="gdn_verify_chain", call="flashinfer-mtp", prefix="mtp", layers=LINEAR_STATIC_LAYERS,
    widths=CHAIN_STATIC_WIDTHS, batches=(1, 8, 32), routed=FLASHINFER_GDN_ROUTED, default_archs=("sm90",),
    in_default=_gdn_default(8))
"""FlashInfer's GDN verify through SGLang's FlashInferGDNKernel (SM90 fp32, SM100 bf16); the default profile
builds 8 requests on sm90."""
