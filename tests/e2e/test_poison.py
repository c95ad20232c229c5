"""The poison target makes the verify mask visible in the tokens, proved on the CPU with the stand-in server's
decoder (``fake_sglang.decoder``: draft trees from the drafts' weights, one target forward per round with the
ancestor-only mask of :mod:`ddtree_compat.e2e.forward`, the greedy walk). Trees hold poison siblings, so a
mask that shows a node more than its ancestors changes the tokens; the mutation check plants exactly that
(``tree-mask-shows-siblings`` in ``tests/unit/planted/planted_bugs.py``) and this test must then fail."""

import pytest

from ddtree_compat.e2e import checkpoints as ck
from ddtree_compat.e2e.configs import chain_prompt, expected_accept, plan, prompt
from ddtree_compat.e2e.drafts import write_draft
from tests.e2e.fake_sglang import decoder, parse

SHAPE = ck.TinyShape()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("poison")
    ck.write_target(path, SHAPE)
    return path


def _argv(config, root) -> list[str]:
    draft = write_draft(root, config.draft, SHAPE)
    argv = ["--model-path", str(root / "target"), "--speculative-algorithm", config.algorithm,
            "--speculative-draft-model-path", str(draft)]
    if config.algorithm == "DDTREE":
        return argv + ["--speculative-ddtree-budget", str(config.budget), "--speculative-ddtree-block-size",
                       str(config.block_size)]
    return argv + ["--speculative-num-steps", str(config.steps), "--speculative-eagle-topk", str(config.topk),
                   "--speculative-num-draft-tokens", str(config.draft_tokens)]


CONFIGS = {c.shape_id: c for p in ("default", "full", "ddtree") for c in plan(p, attention="triton")}


@pytest.mark.parametrize("cid", ["eagle-k4-s3-d9-always-graph", "eagle-k2-s6-d13-mod4-graph",
                                 "ddtree-b16-tree-always-eager", "ddtree-b32-tree-mod8-eager"])
def test_tree_verify_with_the_ancestor_mask_is_lossless(root, cid):
    """Trees with poison siblings: every round accepts exactly the expectation and the tokens are the
    target's chain (what the e2e judge's lossless check compares)."""
    config = CONFIGS[cid]
    generate, _ = decoder(parse(_argv(config, root)))
    pr = chain_prompt(5) if config.algorithm == "DDTREE" else prompt(5)
    accept = expected_accept(config)
    out, rounds = generate(list(pr), 1 + 3 * accept)
    assert out == [(pr[-1] + i) % SHAPE.vocab for i in range(1, 2 + 3 * accept)]
    assert rounds == [accept] * 3


def test_the_trees_hold_poison_siblings(root):
    """The check above can fail: the drafts put the poison token beside the accepted path."""
    from tests.e2e.fake_sglang import eagle_tree

    import torch
    from ddtree_compat.e2e.forward import CausalLM, EagleDraft

    target = CausalLM(root / "target", torch.float32)
    draft = EagleDraft(write_draft(root, ck.DraftSpec(ck.EAGLE, ck.ALWAYS), SHAPE), target)
    logp = draft.logits(list(range(SHAPE.vocab)), torch.zeros(SHAPE.vocab, SHAPE.hidden)).log_softmax(-1)
    tokens, parents = eagle_tree(logp, 100, 4, 3, 9)
    assert tokens[:2] == [101, ck.poison_token(SHAPE.vocab)] and parents[:2] == [-1, -1]
