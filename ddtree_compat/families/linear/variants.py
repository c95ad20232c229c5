"""Deliberately wrong linear-attention backends (test-only), each wrapping the reference
(:class:`.reference.LinearReference`): every check of the family must call them ``wrong`` on the cases that can
show the fault (a tree with a branch for the chain leak, an accepted path longer than the root for the commit)."""

from __future__ import annotations

from .reference import LinearReference


class TreeAsChain(LinearReference):
    """Runs a tree as one chain: each node from the node before it, so a sibling's update leaks into a node (what a
    verify without the parent table does to a branching tree)."""

    name = "mutant-tree-as-chain"

    def gdn_verify_tree(self, *args, retrieve_parent_token=None, **kwargs):
        return super().gdn_verify_tree(*args, **kwargs, retrieve_parent_token=None)


class CommitsWrongStep(LinearReference):
    """Commits the state and window of the step after the last accepted node (of the root when it is the last)."""

    name = "mutant-commits-wrong-step"

    def ssm_state_commit(self, dst, src, dst_indices, step_indices) -> None:
        shifted = step_indices.clone()
        shifted[shifted >= 0] = (shifted[shifted >= 0] + 1) % src.shape[2]
        super().ssm_state_commit(dst, src, dst_indices, shifted)

    def conv_window_commit(self, dst, src, dst_indices, step_indices) -> None:
        self.ssm_state_commit(dst, src, dst_indices, step_indices)


class ConvWindowShifted(LinearReference):
    """Keeps each node's conv window shifted by one: its parent's inputs, the node's own missing."""

    name = "mutant-conv-window-shifted"

    def conv_verify_tree(self, x, conv_states, weight, bias, cache_indices, intermediate_conv_window,
                         intermediate_state_indices, retrieve_next_token, retrieve_next_sibling, retrieve_parent_token):
        out = super().conv_verify_tree(x, conv_states, weight, bias, cache_indices, intermediate_conv_window,
                                       intermediate_state_indices, retrieve_next_token, retrieve_next_sibling,
                                       retrieve_parent_token)
        for r in range(x.shape[0]):
            row = int(intermediate_state_indices[r])
            window = intermediate_conv_window[row, :x.shape[2]].clone()
            intermediate_conv_window[row, :x.shape[2], :, 1:] = window[:, :, :-1]
        return out
