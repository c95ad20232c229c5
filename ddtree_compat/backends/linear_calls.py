"""The linear-attention kernels' calls (``ddtree_compat.families.linear``), made as SGLang's hybrid backend makes them,
shared by every backend that has these kernels: SGLang's release (``sglang-triton``) and each DDTree implementation
(its own copy of SGLang's kernels). A backend mixes :class:`LinearCalls` in and says where its functions are
(:meth:`LinearCalls.linear_function`)."""

from __future__ import annotations

from contextlib import nullcontext

from .._triton_env import interpreter_scalar_index
from ..contract import AdapterError, interpreter_on


def _interpreted():
    return interpreter_scalar_index() if interpreter_on() else nullcontext()


class LinearCalls:
    """The five kernel methods of the linear-attention family (signatures: :mod:`ddtree_compat.families.linear.checks`)."""

    def linear_function(self, kernel: str, on_host: bool):
        """``(function, place)`` of ``kernel``: its wrapper, or (``on_host``: the commits' wrappers take CUDA tensors
        only) its ``@triton.jit`` kernel, launched as the wrapper launches it."""
        raise NotImplementedError

    def gdn_verify_tree(self, A_log, dt_bias, q, k, v, a, b, *, ssm_states, cache_indices, query_start_loc,
                        intermediate_states_buffer, intermediate_state_indices, cache_steps,
                        retrieve_parent_token=None):
        """``fused_sigmoid_gating_delta_rule_update`` as the Triton GDN kernel's ``target_verify`` calls it: q/k
        l2-normalized in the kernel, softplus beta 1 / threshold 20, the persistent state not updated, every node's
        state into the scratch, the tree from ``retrieve_parent_token`` (``None``: one chain)."""
        fn, _ = self.linear_function("gdn_verify_tree", False)
        with _interpreted():
            return fn(A_log=A_log, dt_bias=dt_bias, q=q, k=k, v=v, a=a, b=b, initial_state_source=ssm_states,
                      initial_state_indices=cache_indices, cu_seqlens=query_start_loc, use_qk_l2norm_in_kernel=True,
                      softplus_beta=1.0, softplus_threshold=20.0, is_kda=False, disable_state_update=True,
                      intermediate_states_buffer=intermediate_states_buffer,
                      intermediate_state_indices=intermediate_state_indices, cache_steps=cache_steps,
                      retrieve_parent_token=retrieve_parent_token)

    def gdn_verify_chain(self, A_log, dt_bias, q, k, v, a, b, **kwargs):
        """The same call without a parent table (a verify of top-k 1)."""
        return self.gdn_verify_tree(A_log, dt_bias, q, k, v, a, b, **kwargs, retrieve_parent_token=None)

    def conv_verify_tree(self, x, conv_states, weight, bias, cache_indices, intermediate_conv_window,
                         intermediate_state_indices, retrieve_next_token, retrieve_next_sibling, retrieve_parent_token):
        """``causal_conv1d_update`` as the GDN backend's target verify calls it (SiLU, the tree's retrieve links,
        every node's window into the scratch, the parent table written for the recurrent kernel)."""
        fn, _ = self.linear_function("conv_verify_tree", False)
        with _interpreted():
            return fn(x, conv_states, weight, bias, "silu", conv_state_indices=cache_indices,
                      intermediate_conv_window=intermediate_conv_window,
                      intermediate_state_indices=intermediate_state_indices, retrieve_next_token=retrieve_next_token,
                      retrieve_next_sibling=retrieve_next_sibling, retrieve_parent_token=retrieve_parent_token)

    def ssm_state_commit(self, dst, src, dst_indices, step_indices) -> None:
        """``fused_mamba_state_scatter_with_mask(dst, src, dst_indices, step_indices)``; on a CPU target its kernel,
        launched as that wrapper launches it: grid ``(requests, layers, entry / 1024)``, source rows ``0 .. bs``."""
        self._scatter("ssm_state_commit", dst, src, dst_indices, step_indices, window=False)

    def conv_window_commit(self, dst, src, dst_indices, step_indices) -> None:
        """``fused_conv_window_scatter_with_mask``; on a CPU target its kernel, launched as the wrapper does."""
        self._scatter("conv_window_commit", dst, src, dst_indices, step_indices, window=True)

    def _scatter(self, kernel, dst, src, dst_indices, step_indices, window: bool) -> None:
        import torch
        import triton

        on_host = dst.device.type == "cpu"
        fn, place = self.linear_function(kernel, on_host)
        if not on_host:
            fn(dst, src, dst_indices, step_indices)
            return
        names = tuple(getattr(fn, "arg_names", ()))
        if names[:4] != ("src_ptr", "dst_ptr", "dst_indices_raw_ptr", "step_indices_raw_ptr"):
            raise AdapterError(f"{place} takes other arguments here: its CPU launch is not mirrored ({names[:6]})")
        rows = (torch.arange(step_indices.numel(), dtype=torch.int32, device=step_indices.device),) \
            if "src_indices_raw_ptr" in names else ()  # older kernels read source row = request
        entry = dst.numel() // (dst.shape[0] * dst.shape[1])
        grid = (step_indices.numel(), dst.shape[0], triton.cdiv(entry, 1024))
        strides = (*src.stride()[:5], dst.stride(0), dst.stride(1)) if window else (*src.stride()[:3], *dst.stride()[:2])
        head = (src, dst, dst_indices, step_indices, *rows, entry) + ((dst.shape[3],) if window else ())
        with _interpreted():
            fn[grid](*head, *strides, src.shape[1], src.shape[2], dst.shape[1], BLOCK_SIZE=1024)
