"""The hybrid target computes what the hybrid profile's expectations assume (our float32 forward, CPU).

The target (:mod:`ddtree_compat.e2e.hybrid`) is read back from the safetensors it was written to; HF transformers'
own ``Qwen3_5ForConditionalGeneration`` loads the same files and must compute the same logits (an independent
forward of the architecture, on a scrambled copy whose every mixer's output counts).
"""

import pytest
import torch

from ddtree_compat.e2e import checkpoints as ck, configs, hybrid
from ddtree_compat.e2e.drafts import write_draft
from ddtree_compat.e2e.expect import DRAFT_LOG_PROBS, tree_accepts
from ddtree_compat.e2e.forward import DFlashDraft, EagleDraft
from ddtree_compat.e2e.hybrid_forward import HybridLM
from ddtree_compat.families.verify import oracle

SHAPE = hybrid.SHAPE
V = SHAPE.vocab
P = ck.poison_token(V)
BAD = ck.poison_output(V)
RUNNER_UP = ck.agreement("mod8-second")
LOGIT_TOL = 1e-4  # float32 forwards of the same weights (ours and HF's); measured 5e-6
LOG_PROB_TOL = 0.05  # the draft's log-probabilities against DRAFT_LOG_PROBS (rounded to 3 decimals there)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("hybrid")


@pytest.fixture(scope="module")
def target(root):
    return HybridLM(hybrid.write_target(root, SHAPE))


@pytest.fixture(scope="module")
def drafts(root, target):
    return {a.name: DFlashDraft(write_draft(root, ck.DraftSpec(ck.DFLASH, a, 16), SHAPE), target)
            for a in (ck.ALWAYS, RUNNER_UP)}


def test_config_layer_kinds_agree():
    """SGLang reads ``full_attention_interval``, HF ``layer_types``: both name layers 0..2 linear, layer 3 full."""
    text = hybrid.target_config(SHAPE)["text_config"]
    assert text["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    assert [i for i in range(hybrid.LAYERS) if (i + 1) % text["full_attention_interval"] == 0] == [3]
    assert hybrid.target_config(SHAPE)["architectures"] == [hybrid.ARCHITECTURE]
    with pytest.raises(ValueError):
        hybrid.target_config(ck.TinyShape())


def test_greedy_is_successor_with_margin(target):
    gen = torch.Generator().manual_seed(0)
    ids = [t for t in torch.randint(0, V, (120,), generator=gen).tolist() if t not in (P - 1, P)]
    logits = target.logits(ids)
    assert logits.argmax(-1).tolist() == [(t + 1) % V for t in ids]
    top2 = logits.topk(2, -1).values
    assert float((top2[:, 0] - top2[:, 1]).min()) > 4.0  # bf16 serving moves logits by far less


def test_state_poison_is_exact_zero_without_the_poison_token(root, target):
    """Without P anywhere the poison head's state stays exactly zero: the same logits as a target without the
    poison; once P enters the convolution's window the state holds it, 1 or 200 tokens later."""
    plain = HybridLM(ck.write_checkpoint(root / "plain", hybrid.target_config(SHAPE),
                                         hybrid.target_tensors(SHAPE, poison=False)))
    ids = [t for t in range(0, V, 3) if t not in (P - 1, P)]
    assert torch.equal(plain.logits(ids), target.logits(ids))
    assert target.logits([3, P, 40]).argmax(-1).tolist()[1:] == [BAD, BAD]
    long = target.logits([P] + list(range(10, 210)))[1:].argmax(-1)
    assert long.tolist() == [BAD] * 200


def _tree_verify(target, ctx, tokens, parents, chain):
    return target.verify_logits(ctx, tokens, parents, chain=chain).argmax(-1).tolist()


def test_tree_verify_takes_each_node_state_from_its_parent(target):
    """Root 109 -> nodes 110 (child of the root), P (its sibling), 111 (child of 110). In tree mode 111 continues
    110's state; verified as one chain in node order it continues P's and emits P - 1."""
    ctx = list(range(100, 110))
    assert _tree_verify(target, ctx, [110, P, 111], [-1, -1, 0], chain=False) == [110, 111, BAD, 112]
    assert _tree_verify(target, ctx, [110, P, 111], [-1, -1, 0], chain=True) == [110, 111, BAD, BAD]
    # an EAGLE tree of one step whose draft ranks P first: root 109 -> P, 110; 110 is accepted after its sibling
    assert _tree_verify(target, ctx, [P, 110], [-1, -1], chain=False) == [110, BAD, 111]
    assert _tree_verify(target, ctx, [P, 110], [-1, -1], chain=True) == [110, BAD, BAD]


def test_transformers_computes_the_same_logits(root):
    """HF's own class on a copy whose every out_proj, o_proj, down_proj and norm is random (so every layer's
    output counts): float32 logits within LOGIT_TOL of ours."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (requirements/crosscheck.txt)")
    cls = getattr(transformers, hybrid.ARCHITECTURE, None)
    if cls is None:
        pytest.skip(f"transformers {transformers.__version__} has no {hybrid.ARCHITECTURE}")
    tensors = hybrid.target_tensors(SHAPE)
    gen = torch.Generator().manual_seed(5)
    for k, v in tensors.items():
        if k.endswith(("out_proj.weight", "o_proj.weight", "down_proj.weight")):
            tensors[k] = torch.randn(v.shape, generator=gen) * 0.3
        elif k.endswith("norm.weight") and "linear_attn" not in k:
            tensors[k] = torch.randn(v.shape, generator=gen) * 0.1
    path = ck.write_checkpoint(root / "scrambled", hybrid.target_config(SHAPE), tensors)
    ids = [3, 77, P, 12, 400] + list(range(100, 150))
    hf = cls.from_pretrained(str(path), dtype=torch.float32)
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor([ids])).logits[0]
    ours = HybridLM(path).logits(ids)
    assert float((theirs - ours).abs().max()) < LOGIT_TOL


def _chain(root_token: int, n: int) -> list[int]:
    return [(root_token - n + i) % V for i in range(n)]


def test_runner_up_draft_ranks_succ_second(drafts):
    """Where mod8-second disagrees the draft ranks P first and succ second (DRAFT_LOG_PROBS['second']); where it
    agrees succ first and P second (['agree'])."""
    for root_token in (128, 200):  # contexts clear of P (it would poison the features the draft reads)
        lp = drafts[RUNNER_UP.name].block_logits(_chain(root_token, 72), root_token)[1:].log_softmax(-1)
        for j, row in enumerate(lp):
            t = (root_token + j) % V
            s, p, rest = DRAFT_LOG_PROBS["agree" if RUNNER_UP.agrees(t) else "second"]
            others = row.clone()
            others[[(t + 1) % V, P]] = float("-inf")
            assert abs(float(row[(t + 1) % V]) - s) < LOG_PROB_TOL, (t, float(row[(t + 1) % V]))
            assert abs(float(row[P]) - p) < LOG_PROB_TOL, (t, float(row[P]))
            assert float(others.max()) < rest + LOG_PROB_TOL


def test_never_second_eagle_draft_ranks_the_poison_then_succ(root, target):
    """EAGLE's never-second draft: P first and succ second at every token, 4 logits apart, the rest 4 lower still
    (bfloat16 keeps that order): a top-2 step always holds succ, as P's sibling."""
    draft = EagleDraft(write_draft(root, ck.DraftSpec(ck.EAGLE, ck.agreement("never-second")), SHAPE), target)
    tokens = [t for t in range(V) if t not in (P - 1, P)]
    logits = draft.logits(tokens, torch.zeros(len(tokens), SHAPE.hidden))
    top = logits.topk(3, -1)
    assert top.indices[:, 0].tolist() == [P] * len(tokens)
    assert top.indices[:, 1].tolist() == [(t + 1) % V for t in tokens]
    gaps = top.values[:, :2] - top.values[:, 1:]
    assert float(gaps.min()) >= 3.9, float(gaps.min())


def _walk(tree, predict):
    return oracle.verify_greedy(tree, predict).accepted_drafts


@pytest.mark.parametrize("budget", [8, 12, 15, 16, 32, 64])
def test_tree_accepts_is_what_the_target_accepts(target, drafts, budget):
    """The runner-up expectation proved on the real forwards: the best-first tree of the draft's block, verified
    by the hybrid target in tree mode, accepts tree_accepts(...)(root) drafts. Verified as one chain in node order
    a budget above 15 accepts less, or emits P - 1 at the last accepted node."""
    want = tree_accepts(RUNNER_UP, budget, 15, V)
    for root_token in (128, 195):
        ctx = _chain(root_token, 72)
        tree = oracle.build_best_first(drafts[RUNNER_UP.name].block_logits(ctx, root_token)[1:].double(), budget,
                                       root_token)
        nodes, parents = list(tree.tokens[1:]), [p - 1 for p in tree.parents[1:]]
        tree_mode = _tree_verify(target, ctx + [root_token], nodes, parents, chain=False)
        assert _walk(tree, tree_mode) == want(root_token), root_token
        chain_mode = _tree_verify(target, ctx + [root_token], nodes, parents, chain=True)
        path = oracle.verify_greedy(tree, chain_mode).path
        if budget > 15 and root_token % 8 == 0:
            assert (_walk(tree, chain_mode), chain_mode[path[-1]]) != (want(root_token), tree_mode[path[-1]])


def test_tree_accepts_per_budget():
    """From a root 0 mod 8: the spine budgets accept 7 (the chain's), 16 one more through the poison's sibling,
    32 and 64 the whole block."""
    assert {b: tree_accepts(RUNNER_UP, b, 15, V)(0) for b in (8, 12, 15, 16, 32, 64)} == {
        8: 7, 12: 7, 15: 7, 16: 8, 32: 15, 64: 15}


def test_hybrid_plan_has_no_overshoot():
    cs = configs.plan("hybrid", SHAPE)
    assert configs.shape_for("hybrid") == SHAPE
    assert {c.budget for c in cs if c.algorithm == configs.DDTREE and c.draft.agree.runner_up} == {12, 16, 32, 64}
    for c in cs:
        for phase in c.phases:
            assert all(r.overshoot == 0 for r in c.expectation(phase, SHAPE).requests), (c.id, phase.name)
    with pytest.raises(ValueError, match="runner-up"):
        configs._spec(ck.EAGLE, 4, 3, 9, "mod8-second", False)
    eagle = next(c for c in cs if c.algorithm == ck.EAGLE and c.draft.agree.runner_up)
    assert configs.expected_accept(eagle) == 2 and eagle.round_accepts(SHAPE)(5) == 1
