"""The tiny checkpoints compute what the e2e expectations assume (pure-PyTorch forward, CPU, bfloat16).

Every test reads the checkpoints back from the safetensors :mod:`ddtree_compat.e2e.checkpoints` wrote,
so the names, shapes and dtypes the server loads are the ones proven here. ``transformers`` (installed by
``scripts/setup.sh`` from ``requirements/crosscheck.txt``, CI included) also loads and runs the target and the
STANDALONE draft itself: an independent loader.
"""

import json

import pytest
import torch

from ddtree_compat.e2e import checkpoints as ck
from ddtree_compat.e2e.drafts import write_draft
from ddtree_compat.e2e.forward import CausalLM, DFlashDraft, EagleDraft
from ddtree_compat.imports import missing

SHAPE = ck.TinyShape()
V = SHAPE.vocab
AGREEMENTS = [ck.ALWAYS, ck.NEVER, ck.agreement("mod2"), ck.agreement("mod4"), ck.agreement("mod8")]
TOPK_MAX = 8  # the widest draft tree the profiles use
P = ck.poison_token(V)
FREE = [t for t in range(V) if t not in (P - 1, P)]  # tokens a correct run may hold (the target never emits P)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("ckpt")


@pytest.fixture(scope="module", params=[torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def target(request, root):
    return CausalLM(ck.write_target(root, SHAPE), request.param)


def test_target_greedy_is_successor_whatever_the_context(target):
    gen = torch.Generator().manual_seed(0)
    for n in (1, 9):
        prompt = [FREE[i] for i in torch.randint(0, len(FREE) - 8, (n,), generator=gen).tolist()]
        assert target.greedy(prompt, 6) == [(prompt[-1] + i) % V for i in range(1, 7)]


def test_target_margin_at_every_token(target):
    """Each token's successor wins by sqrt(H/2) = 8 logits, at every position of a long context."""
    ids = [FREE[i] for i in torch.randperm(len(FREE), generator=torch.Generator().manual_seed(1))[:200].tolist()]
    logits = target.logits(ids)
    top = logits.topk(2, dim=-1)
    assert top.indices[:, 0].tolist() == [(t + 1) % V for t in ids]
    assert float((top.values[:, 0] - top.values[:, 1]).min()) >= ck.norm_gain(SHAPE) - 0.1


def _scramble(name: str, w: torch.Tensor) -> torch.Tensor:
    """Random q/k/v and gate/up, except the poison head's rows (head 0 of the last layer)."""
    if not name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", "gate_proj.weight", "up_proj.weight")):
        return w
    out = (torch.randn_like(w.float()) * 3).to(w.dtype)
    if name.startswith(f"model.layers.{SHAPE.target_layers - 1}.self_attn."):
        out[:SHAPE.head_dim] = w[:SHAPE.head_dim]
    return out


def test_zeroed_mixers_make_attention_irrelevant(root):
    """o_proj (but the poison head's) and down_proj are zero: scrambling every other q/k/v and gate/up changes no
    logit."""
    cfg, t = ck.load_checkpoint(ck.write_target(root / "a", SHAPE))
    path = ck.write_checkpoint(root / "b", cfg, {k: _scramble(k, v) for k, v in t.items()})
    ids = list(range(5, 300, 7))
    assert torch.equal(CausalLM(root / "a" / "target").logits(ids), CausalLM(path).logits(ids))


def test_the_poison_head_decides_the_token_only_where_the_poison_is_visible(target):
    """With no poison in the context the poison head adds exactly 0 (the same logits as a target without it);
    a query that sees the poison token, 1 or 400 positions back, emits P - 1 instead of its successor; a tree
    node sees it only as an ancestor (verify_logits: ancestor-only mask)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        plain = CausalLM(ck.write_checkpoint(d, ck.target_config(SHAPE), ck.target_tensors(SHAPE, poison=False)),
                         target.dtype)
        ids = FREE[:300:3]
        assert torch.equal(plain.logits(ids), target.logits(ids))
    bad = ck.poison_output(V)
    assert target.greedy([3, P, 40], 1) == [bad]
    assert target.greedy([P] + list(range(10, 410)), 1) == [bad]
    ctx = list(range(100, 110))
    # root 109 -> nodes 110 (child of the root), P (its sibling), 111 (child of 110), 112 (child of P)
    want = target.verify_logits(ctx, [110, P, 111, 112], [-1, -1, 0, 1]).argmax(-1).tolist()
    assert want == [110, 111, bad, 112, bad]
    leaky = target.hidden(ctx + [110, P, 111], torch.tensor([*range(10), 10, 10, 11]))  # causal: 111 sees P
    assert int((leaky[-1] @ target.head.T).argmax()) == bad


def _check_draft(logits: torch.Tensor, tokens: list[int], agree: ck.Agreement):
    """Agreeing tokens: top-1 is succ with probability ~1; others: succ outside the top TOPK_MAX."""
    probs = logits.softmax(-1)
    for t, row, p in zip(tokens, logits, probs):
        if t in (P - 1, P):  # never in a correct run (P - 1 precedes the poison; the target never emits P)
            continue
        s = (t + 1) % V
        if agree.agrees(t):
            assert int(row.argmax()) == s and float(p[s]) > 1 - 1e-3, (t, float(p[s]))
            assert int(row.topk(2).indices[1]) == P, t  # the poison token ranks second
        else:
            rank = int((row > row[s]).sum())
            assert rank >= TOPK_MAX and int(row.argmax()) == P, (t, rank)


@pytest.mark.parametrize("agree", AGREEMENTS, ids=lambda a: a.name)
def test_eagle_draft_agrees_exactly_where_designed(root, target, agree):
    draft = EagleDraft(write_draft(root, ck.DraftSpec(ck.EAGLE, agree), SHAPE), target)
    tokens = list(range(V))
    hidden = torch.randn(V, SHAPE.hidden, generator=torch.Generator().manual_seed(2)) * 5  # ignored by fc
    _check_draft(draft.logits(tokens, hidden), tokens, agree)


@pytest.mark.parametrize("agree", AGREEMENTS, ids=lambda a: a.name)
def test_standalone_draft_agrees_exactly_where_designed(root, target, agree):
    draft = CausalLM(write_draft(root, ck.DraftSpec(ck.STANDALONE, agree), SHAPE), target.dtype)
    tokens = list(range(V))
    _check_draft(draft.logits(tokens), tokens, agree)


def test_agreement_fraction_and_names():
    assert [a.fraction for a in AGREEMENTS] == [1.0, 0.0, 0.5, 0.75, 0.875]
    assert sum(ck.agreement("mod4").agrees(t) for t in range(V)) == 3 * V // 4
    with pytest.raises(ValueError):
        ck.agreement("mod3")


def _chain(root_token: int, n: int) -> list[int]:
    """A consecutive context of ``n`` tokens ending right before ``root_token`` (what the chain prompts and
    the target's own continuation give the DFlash draft)."""
    return [(root_token - n + i) % V for i in range(n)]


DFLASH_AGREEMENTS = [ck.ALWAYS, ck.NEVER, ck.agreement("mod4"), ck.agreement("mod8")]


@pytest.fixture(scope="module")
def dflash_drafts(root, target):
    return {a.name: DFlashDraft(write_draft(root, ck.DraftSpec(ck.DFLASH, a, 16), SHAPE), target)
            for a in DFLASH_AGREEMENTS}


@pytest.mark.parametrize("agree", DFLASH_AGREEMENTS, ids=lambda a: a.name)
def test_dflash_draft_agrees_at_each_depth_where_designed(dflash_drafts, agree):
    """Block [r, mask, ...] after a consecutive context: depth j drafts r + j with probability ~1 where the
    agreement agrees at r + j - 1; elsewhere r + j is outside the top 63 (any DDTree width up to 64)."""
    draft = dflash_drafts[agree.name]
    for root_token, n in ((80, 72), (263, 150), (9, 200), (500, 400)):
        logits = draft.block_logits(_chain(root_token, n), root_token)[1:]
        tokens = [(root_token + j - 1) % V for j in range(1, 16)]  # depth j predicts succ of r + j - 1
        _check_draft(logits, tokens, agree)
        for t, row in zip(tokens, logits):
            if not agree.agrees(t) and t not in (P - 1, P):
                assert int((row > row[(t + 1) % V]).sum()) >= 63, (root_token, t)


def test_dflash_draft_reads_the_context_65_positions_back(dflash_drafts):
    """The drafts follow the context, not the bonus token: a context that is not a run gives other drafts,
    and a run shifted by 64 behind the block gives the run's own continuation."""
    from ddtree_compat.e2e.dflash import LOOKBACK

    draft = dflash_drafts["always"]
    ctx = _chain(300, 100)
    ctx[100 + 3 - LOOKBACK] = 17  # the position depth 3 reads (p + 3 - 65)
    drafts = draft.block_logits(ctx, 300)[1:].argmax(-1).tolist()
    assert drafts[2] == (17 + 64 + 1) % V and drafts[:2] + drafts[3:] == [(300 + j) % V for j in (1, 2, *range(4, 16))]
    assert draft.block_logits(ctx, 7)[1:].argmax(-1).tolist() == drafts  # the bonus token is not read


def test_dflash_selector_margin():
    """The RoPE score of the selected key beats every other context key by at least SELECTOR_MARGIN of the
    peak over MAX_CONTEXT positions (here: in float64, from the construction's constants)."""
    from ddtree_compat.e2e import dflash

    assert dflash.selector_margin() >= dflash.SELECTOR_MARGIN
    assert 8 * dflash.QK_GAIN ** 2 * dflash.SELECTOR_MARGIN >= 30  # nats: one key takes the whole softmax
    d = torch.arange(2, dflash.MAX_CONTEXT + 1)
    assert int(d[dflash.selector_scores(d).argmax()]) == dflash.LOOKBACK


def test_dflash_shift_is_the_a_digit_rotation():
    from ddtree_compat.e2e.dflash import a_digit_shift

    code = ck.pure_code(SHAPE)
    assert torch.equal(code @ a_digit_shift(SHAPE).T, torch.roll(code, shifts=-64, dims=0))


@pytest.mark.parametrize("budget", [8, 12, 13, 15, 16, 32, 64])
@pytest.mark.parametrize("agree", DFLASH_AGREEMENTS, ids=lambda a: a.name)
def test_ddtree_best_first_tree_accepts_what_expect_says(dflash_drafts, agree, budget):
    """The DDTree expectation, proved on the reference draft: the paper's best-first build (the suite's
    oracle) over the block's logits, then the greedy walk against the target (succ of each node's token),
    accepts exactly chain_accepts(agree, min(B, 15)) drafts, with and without pruning to the deepest chains."""
    from ddtree_compat.families.verify import oracle
    from ddtree_compat.e2e.expect import chain_accepts

    want = chain_accepts(agree, min(budget, 15), V)
    for root_token in (8, 64, 200, 333):
        logits = dflash_drafts[agree.name].block_logits(_chain(root_token, 72), root_token)[1:]
        tree = oracle.build_best_first(logits.double(), budget, root_token)
        assert tree.num_nodes == budget + 1
        got = oracle.verify_greedy(tree, [(t + 1) % V for t in tree.tokens]).accepted_drafts
        assert got == want(root_token), (root_token, got)
        depth = [0] * tree.num_nodes
        for i in range(1, tree.num_nodes):
            depth[i] = depth[tree.parents[i]] + 1
        path = oracle.verify_greedy(tree, [(t + 1) % V for t in tree.tokens]).path
        deepest = max(depth)
        # pruning keeps the nodes whose subtree reaches the deepest depth: the accepted path is among them
        reach = list(depth)
        for i in range(tree.num_nodes - 1, 0, -1):
            reach[tree.parents[i]] = max(reach[tree.parents[i]], reach[i])
        assert all(reach[n] == deepest for n in path)


def test_sglang_dflash_config_fields(root):
    cfg = json.loads((write_draft(root, ck.DraftSpec(ck.DFLASH, ck.ALWAYS, 16), SHAPE) / "config.json").read_text())
    assert cfg["num_target_layers"] == SHAPE.target_layers == cfg["dflash_config"]["num_target_layers"]
    assert cfg["dflash_config"]["mask_token_id"] == V - 1 and cfg["block_size"] == 16
    assert all(0 <= i < SHAPE.target_layers for i in cfg["dflash_config"]["target_layer_ids"])


def test_checkpoint_files_and_names(root):
    t = ck.write_target(root, SHAPE)
    cfg, tensors = ck.load_checkpoint(t)
    assert cfg["architectures"] == ["Qwen3ForCausalLM"] and cfg["vocab_size"] == V
    assert all(v.dtype == torch.bfloat16 for v in tensors.values())
    assert len(tensors) == 2 + 11 * SHAPE.target_layers + 1
    e = write_draft(root, ck.DraftSpec(ck.EAGLE, ck.ALWAYS), SHAPE)
    ecfg, et = ck.load_checkpoint(e)
    assert ecfg["architectures"] == ["LlamaForCausalLMEagle"]
    assert "fc.bias" in et and "layers.0.input_layernorm.weight" not in et  # SGLang deletes layer 0's input norm
    assert et["fc.weight"].shape == (SHAPE.hidden, 2 * SHAPE.hidden)
    with pytest.raises(ValueError):
        ck.write_checkpoint(root / "bad", {}, {"x": torch.tensor([float("nan")])})


def test_transformers_runs_the_same_functions(root):
    """Independent loader: HF transformers reads the same files and computes the same greedy functions."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (requirements/crosscheck.txt)")
    t = ck.write_target(root, SHAPE)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(t), dtype=torch.bfloat16)
    out = model.generate(torch.tensor([[3, 400, 7]]), max_new_tokens=10, do_sample=False)
    assert out[0, 3:].tolist() == list(range(8, 18))
    d = write_draft(root, ck.DraftSpec(ck.STANDALONE, ck.agreement("mod4")), SHAPE)
    draft = transformers.AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.bfloat16)
    got = draft(torch.arange(64)[None]).logits[0].argmax(-1).tolist()
    assert [g == (t + 1) % V for t, g in enumerate(got)] == [t % 4 != 3 for t in range(64)]
    e = write_draft(root, ck.DraftSpec(ck.EAGLE, ck.NEVER), SHAPE)
    assert transformers.AutoConfig.from_pretrained(str(e)).architectures == ["LlamaForCausalLMEagle"]


def test_sglang_accepts_the_dflash_config(root):
    """SGLang's own DFlash config parser takes the generated config (skips, naming it, where SGLang or a
    module it imports is not installed)."""
    reason = missing("sglang.srt.speculative.dflash_utils")  # raises if SGLang lacks the module itself
    if reason:  # e.g. torchvision: PyPI has no CPU build of it, so CPU runs skip here; GPU hosts run it
        pytest.skip(f"SGLang's DFlash config parser cannot import here: {reason}")
    from sglang.srt.speculative.dflash_utils import parse_dflash_draft_config

    cfg = json.loads((write_draft(root, ck.DraftSpec(ck.DFLASH, ck.NEVER, 16), SHAPE) / "config.json").read_text())
    parsed = parse_dflash_draft_config(draft_hf_config=cfg)
    assert parsed.block_size == 16 and parsed.mask_token_id == V - 1
    if hasattr(parsed, "num_target_layers"):  # DDTree builds of SGLang read it (without it: draft layers = 1)
        assert parsed.num_target_layers == SHAPE.target_layers
        assert parsed.resolve_target_layer_ids(target_num_layers=SHAPE.target_layers) == [1, 2]
