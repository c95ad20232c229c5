"""Bugs planted in the suite's own code, one at a time, for the mutation check (``tests/unit/test_mutation.py``).

Each :class:`Bug` names the module it breaks, how (``apply(module)``, run right after the module is first
imported, in every Python process of the run: ``sitecustomize.py`` beside this file installs it when
``PLANTED_BUG`` names it), and the tests aimed at it, each of which must then fail. The bugs break
our oracle, commit plan, attention reference, sampling statement (each skew), e2e judge and expectation, SGLang adapters, tile emulation and
static signature typing (each family's ``variants.py`` holds the wrong *backends*; these break the judge's
side). The first eight are the mutation check's original table.

Test-only: nothing in ``ddtree_compat`` imports this.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

ENV = "PLANTED_BUG"
LOG_ENV = "PLANTED_BUG_LOG"


@dataclass(frozen=True)
class Bug:
    """One planted bug.

    Attributes:
        name: its id (``PLANTED_BUG=name``).
        module: the module it breaks (patched right after its first import).
        apply: ``(module) -> None``: breaks it (raises when what it breaks is not there).
        tests: node ids (a test function, or one of its parametrizations) that must each fail with it.
        what: the bug, in words.
    """

    name: str
    module: str
    apply: Callable
    tests: tuple[str, ...]
    what: str


def _wrap(module, attr: str, make: Callable) -> None:
    """``module.attr = make(original)`` (AttributeError when there is no such attribute)."""
    setattr(module, attr, make(getattr(module, attr)))


# ---- the oracle and the expected verify outputs

def _eagle_walk_bonus_plus_one(oracle) -> None:
    def make(real):
        def verify_greedy_eagle(*args, **kwargs):
            out = real(*args, **kwargs)
            predicts = list(out.predicts)
            for row, accepted in zip(out.accept_index, out.accept_token_num):
                predicts[row[accepted]] += 1  # predicts[last] = target + 1
            return dataclasses.replace(out, predicts=tuple(predicts))
        return verify_greedy_eagle
    _wrap(oracle, "verify_greedy_eagle", make)


def _parent_walk_one_short(oracle) -> None:
    def make(real):
        def verify_greedy(tree, target_predict, max_accepted=None):
            out = real(tree, target_predict, max_accepted)
            if len(out.path) < 2:
                return out
            return oracle.VerifyResult(out.path[:-1], int(target_predict[out.path[-2]]))
        return verify_greedy
    _wrap(oracle, "verify_greedy", make)


# ---- the commit plan and the move's inputs

def _plan_front_from_node_one(oracle) -> None:
    def make(real):
        def commit_plan(result, out_cache_loc, seq_len, page_size=1):
            plan = real(result, out_cache_loc, seq_len, page_size)
            block = [int(s) for s in out_cache_loc if int(s) != oracle.PADDING_SLOT]
            return dataclasses.replace(plan, front_slots=tuple(block[1:1 + plan.commit_len]))
        return commit_plan
    _wrap(oracle, "commit_plan", make)


def _move_plan_kept_to_kept(commit) -> None:
    def make(real):
        def move_plan(case, lay):
            _, src = real(case, lay)
            return src, src  # (kept, kept): the move does nothing
        return move_plan
    _wrap(commit, "move_plan", make)


# ---- the verify-attention reference

def _reference_ignores_the_mask(attention) -> None:
    def make(real):
        def verify_attention_reference(q, k, v, visible, sm_scale):
            import torch

            return real(q, k, v, torch.ones_like(visible, dtype=torch.bool), sm_scale)
        return verify_attention_reference
    _wrap(attention, "verify_attention_reference", make)


# ---- the e2e expectation and judge

def _expectation_one_token_ahead(expect) -> None:
    def make(real):
        def expect_request(plan, vocab, accepts, drafts_per_round=0):
            out = real(plan, vocab, accepts, drafts_per_round)
            return dataclasses.replace(out, output_ids=[(t + 1) % vocab for t in out.output_ids])
        return expect_request
    _wrap(expect, "expect_request", make)


def _judge_never_checks_acceptance(judge) -> None:
    for rule in ("zero_accept", "meta_info_accept", "metrics_accept", "decode_line_accept", "server_info_accept"):
        _wrap(judge, rule, lambda real: lambda *args, **kwargs: judge.Found())


def _tree_mask_shows_siblings(reference) -> None:
    """The tree verify's mask is causal in node order (a node also sees earlier siblings and their subtrees)."""
    def make(real):
        def ancestor_mask(parents):
            import torch

            real(parents)  # what it breaks must still be there
            return torch.ones(len(parents), len(parents), dtype=torch.bool).tril()
        return ancestor_mask
    _wrap(reference, "ancestor_mask", make)


def _fault_scan_blind(logparse) -> None:
    _wrap(logparse, "fault_lines", lambda real: lambda text, benign=None: [])


# ---- SGLang adapters, tile emulation, static signatures

def _adapter_names_a_missing_module(sglang_triton) -> None:
    cls = sglang_triton.SGLangTritonBackend
    kernels = [i.kernel for i in cls.implements]
    if "verify_tree_greedy" not in kernels:
        raise AttributeError(f"SGLangTritonBackend has no verify_tree_greedy implementation ({kernels})")
    def renamed(impl):
        return dataclasses.replace(impl, places=tuple(dataclasses.replace(p, module=p.module + "_renamed")
                                                      for p in impl.places))

    cls.implements = tuple(renamed(i) if i.kernel == "verify_tree_greedy" else i for i in cls.implements)


def _front_writes_zeros(sglang_triton) -> None:
    cls = sglang_triton.SGLangTritonBackend
    getattr(cls, "front_out_cache_loc")

    def front_out_cache_loc(self, num_front, out_cache_loc, front_out_cache_loc):
        front_out_cache_loc.zero_()

    cls.front_out_cache_loc = front_out_cache_loc


def _tile_module_raises(sglang_tiles) -> None:
    def make(real):
        def extend_attention_module():
            raise RuntimeError("planted: extend_attention_module() raises")
        return extend_attention_module
    _wrap(sglang_tiles, "extend_attention_module", make)


def _device_guards_kept(impls) -> None:
    _wrap(impls, "without_device_guards", lambda real: lambda tree: (tree, ()))


def _signature_empty(attention_aot) -> None:
    _wrap(attention_aot, "signature_of", lambda real: lambda fn, args, kwargs: ((), ()))


# ---- the sampling family's statement of SGLang's samplers (the exact cells' expected rows, the reference column)

def _skewed_sampler(skew: str) -> Callable:
    """``families.sampling.oracle``'s tree and chain samplers take ``skew`` where they were called without one (and
    the skew applies to their mode): the planted skew is the statement's own."""
    def apply(oracle) -> None:
        from ddtree_compat.families.sampling import skews

        def tree(real):
            def tree_target_only(*args, skew=None, **kwargs):
                return real(*args, skew=skew or (planted if planted in skews.TREE_SKEWS else None), **kwargs)
            return tree_target_only

        def chain(real):
            def chain_rejection(*args, skew=None, **kwargs):
                block = kwargs.get("block", args[6] if len(args) > 6 else False)
                mode = skews.BLOCK_SKEWS if block else skews.CHAIN_SKEWS
                return real(*args, skew=skew or (planted if planted in mode else None), **kwargs)
            return chain_rejection

        planted = skew
        _wrap(oracle, "tree_target_only", tree)
        _wrap(oracle, "chain_rejection", chain)
    return apply


SAMPLING_SKEWS = ("keep-rejected", "child-row", "fresh-uniform", "no-accumulate", "stale-coin", "reused-coin",
                  "unscaled-coin", "inverted-ratio", "unscaled-residual")
"""``families.sampling.skews.SKEWS`` (a test keeps the two equal)."""
_SAMPLING_LAW = "tests/unit/test_sampling_oracle.py::test_law_agrees_with_the_decision_oracle"
_SAMPLING_AIMED = {skew: (_SAMPLING_LAW, "tests/unit/test_sampling_checks.py::"
                          "test_the_reference_passes_the_distribution_cells_and_states_the_test") for skew in SAMPLING_SKEWS}
_SAMPLING_AIMED["unscaled-residual"] = (  # 11,768 rows to see in a law (the CPU's cells: 512): the stated exact
    "tests/unit/test_sampling_oracle.py::test_triton_chain_sampler_matches_the_oracle_on_the_exact_cases",)  # case

BUGS = {b.name: b for b in (
    Bug("eagle-walk-bonus-plus-one", "ddtree_compat.families.verify.oracle", _eagle_walk_bonus_plus_one,
        ("tests/unit/test_harness.py::test_oracle_backend_passes",),
        "families.verify.oracle.verify_greedy_eagle (the oracle backend's walk) writes predicts[last] = target + 1"),
    Bug("parent-walk-one-short", "ddtree_compat.families.verify.oracle", _parent_walk_one_short,
        ("tests/unit/test_harness.py::test_oracle_backend_passes",),
        "families.verify.oracle.verify_greedy (the expected outputs' walk) accepts one draft fewer"),
    Bug("move-plan-kept-to-kept", "ddtree_compat.families.commit.checks", _move_plan_kept_to_kept,
        ("tests/unit/test_commit.py::test_oracle_backend_passes",),
        "families.commit.checks.move_plan returns (kept, kept): the move_kv kernel's inputs do nothing"),
    Bug("plan-front-from-node-one", "ddtree_compat.families.commit.oracle", _plan_front_from_node_one,
        ("tests/unit/test_commit.py::test_oracle_backend_passes",),
        "families.commit.oracle.commit_plan takes the block's front slots from node 1 on"),
    Bug("front-writes-zeros", "ddtree_compat.backends.sglang_triton", _front_writes_zeros,
        ("tests/unit/test_graphs.py::test_sglang_triton_sequence_interpreted",),
        "the sglang-triton adapter's front_out_cache_loc writes zeros"),
    Bug("adapter-names-a-missing-module", "ddtree_compat.backends.sglang_triton", _adapter_names_a_missing_module,
        ("tests/unit/test_harness.py::test_sglang_triton_interpret_matches_oracle_on_a_grid_slice",),
        "the sglang-triton adapter's verify kernel names modules the installed SGLang does not have"),
    Bug("tile-module-raises", "ddtree_compat.families.attention.tiles", _tile_module_raises,
        ("tests/unit/test_attention.py::test_emulation_patches_sglang_and_restores",),
        "sglang_tiles.extend_attention_module() raises (the tile emulation's module lookup)"),
    Bug("attention-reference-ignores-mask", "ddtree_compat.families.attention.oracle", _reference_ignores_the_mask,
        ("tests/unit/test_attention.py::test_oracle_backend_passes",),
        "the verify-attention judge's reference ignores the mask"),
    Bug("expectation-one-token-ahead", "ddtree_compat.e2e.expect", _expectation_one_token_ahead,
        ("tests/e2e/test_runner.py::test_an_honest_server_passes",),
        "the e2e expectation's tokens are shifted by one (an honest stand-in server must then fail)"),
    Bug("device-guards-kept", "ddtree_compat.impls", _device_guards_kept,
        ("tests/unit/test_ddtree_grid.py::test_the_interpret_tier_runs_the_implementations_triton_kernels",),
        "the interpret tier keeps the DDTree wrappers' CUDA guards (their Triton kernels would never run on a CPU)"),
    Bug("signature-empty", "ddtree_compat.static.attention_aot", _signature_empty,
        ("tests/unit/test_static.py::test_attention_launch_is_recorded_from_sglang_per_arch",),
        "static attention_aot.signature_of returns empty (typed in the compile worker, interpreter on or off)"),
    Bug("judge-never-checks-acceptance", "ddtree_compat.e2e.judge", _judge_never_checks_acceptance,
        ("tests/e2e/test_runner.py::test_zero_acceptance_is_the_field_symptom",
         "tests/e2e/test_runner.py::test_wrong_accept_length_is_wrong"),
        "the e2e judge never checks the accept figures"),
    Bug("fault-scan-blind", "ddtree_compat.e2e.logparse", _fault_scan_blind,
        ("tests/e2e/test_runner.py::test_a_cuda_fault_in_the_log_wins_and_carries_the_excerpt",
         "tests/e2e/test_fixtures.py::test_server_that_died_at_start_logs_a_fault_line_naming_why"),
        "the e2e judge's fault scan of the server log finds nothing"),
    Bug("tree-mask-shows-siblings", "ddtree_compat.e2e.forward", _tree_mask_shows_siblings,
        ("tests/e2e/test_poison.py::test_tree_verify_with_the_ancestor_mask_is_lossless",),
        "the e2e reference's tree verify mask is causal in node order (siblings visible): the poison target "
        "must change the tokens"),
    *(Bug(f"sampling-oracle-{skew}", "ddtree_compat.families.sampling.oracle", _skewed_sampler(skew), _SAMPLING_AIMED[skew],
          f"families.sampling.oracle's samplers plant the skew {skew!r} (the reference column and the rows the exact "
          "cells expect)") for skew in SAMPLING_SKEWS),
)}
