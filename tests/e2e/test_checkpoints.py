"""The tiny checkpoints compute what the e2e expectations assume (pure-PyTorch forward, CPU, bfloat16).

Every test reads the checkpoints back from the safetensors :mod:`ddtree_compat.e2e.checkpoints` wrote,
so the names, shapes and dtypes the server loads are the ones proven here. With ``transformers``
installed (the GPU host has it; CI does not) the target and the STANDALONE draft are also loaded and run
by ``transformers`` itself.
"""

import json

import pytest
import torch

from ddtree_compat.e2e import checkpoints as ck
from ddtree_compat.e2e.reference import CausalLM, DFlashDraft, EagleDraft

SHAPE = ck.TinyShape()
V = SHAPE.vocab
AGREEMENTS = [ck.ALWAYS, ck.NEVER, ck.agreement("mod2"), ck.agreement("mod4"), ck.agreement("mod8")]
TOPK_MAX = 8  # the widest draft tree the profiles use


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("ckpt")


@pytest.fixture(scope="module", params=[torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def target(request, root):
    return CausalLM(ck.write_target(root, SHAPE), request.param)


def test_target_greedy_is_successor_whatever_the_context(target):
    gen = torch.Generator().manual_seed(0)
    for n in (1, 9):
        prompt = torch.randint(0, V, (n,), generator=gen).tolist()
        assert target.greedy(prompt, 6) == [(prompt[-1] + i) % V for i in range(1, 7)]


def test_target_margin_at_every_token(target):
    """Each token's successor wins by sqrt(H/2) = 8 logits, at every position of a long context."""
    ids = torch.randperm(V, generator=torch.Generator().manual_seed(1))[:200].tolist()
    logits = target.logits(ids)
    top = logits.topk(2, dim=-1)
    assert top.indices[:, 0].tolist() == [(t + 1) % V for t in ids]
    assert float((top.values[:, 0] - top.values[:, 1]).min()) >= ck.norm_gain(SHAPE) - 0.1


def test_zeroed_mixers_make_attention_irrelevant(root):
    """o_proj and down_proj are zero: scrambling q/k/v and gate/up changes no logit."""
    cfg, t = ck.load_checkpoint(ck.write_target(root / "a", SHAPE))
    scrambled = {k: (torch.randn_like(v.float()) * 3).to(v.dtype) if k.endswith(("q_proj.weight", "k_proj.weight",
                 "v_proj.weight", "gate_proj.weight", "up_proj.weight")) else v for k, v in t.items()}
    path = ck.write_checkpoint(root / "b", cfg, scrambled)
    ids = list(range(5, 300, 7))
    assert torch.equal(CausalLM(root / "a" / "target").logits(ids), CausalLM(path).logits(ids))


def _check_draft(logits: torch.Tensor, tokens: list[int], agree: ck.Agreement):
    """Agreeing tokens: top-1 is succ with probability ~1; others: succ outside the top TOPK_MAX."""
    probs = logits.softmax(-1)
    for t, row, p in zip(tokens, logits, probs):
        s = (t + 1) % V
        if agree.agrees(t):
            assert int(row.argmax()) == s and float(p[s]) > 1 - 1e-4, (t, float(p[s]))
        else:
            rank = int((row > row[s]).sum())
            assert rank >= TOPK_MAX, (t, rank)


@pytest.mark.parametrize("agree", AGREEMENTS, ids=lambda a: a.name)
def test_eagle_draft_agrees_exactly_where_designed(root, target, agree):
    draft = EagleDraft(ck.write_draft(root, ck.DraftSpec(ck.EAGLE, agree), SHAPE), target)
    tokens = list(range(V))
    hidden = torch.randn(V, SHAPE.hidden, generator=torch.Generator().manual_seed(2)) * 5  # ignored by fc
    _check_draft(draft.logits(tokens, hidden), tokens, agree)


@pytest.mark.parametrize("agree", AGREEMENTS, ids=lambda a: a.name)
def test_standalone_draft_agrees_exactly_where_designed(root, target, agree):
    draft = CausalLM(ck.write_draft(root, ck.DraftSpec(ck.STANDALONE, agree), SHAPE), target.dtype)
    tokens = list(range(V))
    _check_draft(draft.logits(tokens), tokens, agree)


def test_agreement_fraction_and_names():
    assert [a.fraction for a in AGREEMENTS] == [1.0, 0.0, 0.5, 0.75, 0.875]
    assert sum(ck.agreement("mod4").agrees(t) for t in range(V)) == 3 * V // 4
    with pytest.raises(ValueError):
        ck.agreement("mod3")


def test_dflash_draft_drafts_successor_of_the_mask_token(root, target):
    """Block [bonus, mask, ...]: every draft row (1..B-1) is succ(mask) = 0, whatever the bonus."""
    spec = ck.DraftSpec(ck.DFLASH, ck.NEVER, 16)
    path = ck.write_draft(root, spec, SHAPE)
    cfg = json.loads((path / "config.json").read_text())
    mask = cfg["dflash_config"]["mask_token_id"]
    assert mask == V - 1 and all(i <= SHAPE.target_layers - 2 for i in cfg["dflash_config"]["target_layer_ids"])
    draft = DFlashDraft(path, target)
    for bonus in (7, 100, 300):
        drafts = draft.block_logits([bonus] + [mask] * 15, start=40).argmax(-1)[1:]
        assert drafts.tolist() == [0] * 15


def test_checkpoint_files_and_names(root):
    t = ck.write_target(root, SHAPE)
    cfg, tensors = ck.load_checkpoint(t)
    assert cfg["architectures"] == ["Qwen3ForCausalLM"] and cfg["vocab_size"] == V
    assert all(v.dtype == torch.bfloat16 for v in tensors.values())
    assert len(tensors) == 2 + 11 * SHAPE.target_layers + 1
    e = ck.write_draft(root, ck.DraftSpec(ck.EAGLE, ck.ALWAYS), SHAPE)
    ecfg, et = ck.load_checkpoint(e)
    assert ecfg["architectures"] == ["LlamaForCausalLMEagle"]
    assert "fc.bias" in et and "layers.0.input_layernorm.weight" not in et  # SGLang deletes layer 0's input norm
    assert et["fc.weight"].shape == (SHAPE.hidden, 2 * SHAPE.hidden)
    with pytest.raises(ValueError):
        ck.write_checkpoint(root / "bad", {}, {"x": torch.tensor([float("nan")])})


def test_transformers_runs_the_same_functions(root):
    """Independent loader: HF transformers reads the same files and computes the same greedy functions."""
    transformers = pytest.importorskip("transformers", reason="transformers not installed (CI); the GPU host has it")
    t = ck.write_target(root, SHAPE)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(t), dtype=torch.bfloat16)
    out = model.generate(torch.tensor([[3, 400, 7]]), max_new_tokens=10, do_sample=False)
    assert out[0, 3:].tolist() == list(range(8, 18))
    d = ck.write_draft(root, ck.DraftSpec(ck.STANDALONE, ck.agreement("mod4")), SHAPE)
    draft = transformers.AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.bfloat16)
    got = draft(torch.arange(64)[None]).logits[0].argmax(-1).tolist()
    assert [g == (t + 1) % V for t, g in enumerate(got)] == [t % 4 != 3 for t in range(64)]
    e = ck.write_draft(root, ck.DraftSpec(ck.EAGLE, ck.NEVER), SHAPE)
    assert transformers.AutoConfig.from_pretrained(str(e)).architectures == ["LlamaForCausalLMEagle"]


def test_sglang_accepts_the_dflash_config(root):
    """SGLang's own DFlash config parser takes the generated config (skips where sglang's module won't import)."""
    try:
        from sglang.srt.speculative.dflash_utils import parse_dflash_draft_config
    except Exception as e:  # noqa: BLE001 - e.g. torchvision missing on the CPU box
        pytest.skip(f"sglang.srt.speculative.dflash_utils does not import here: {type(e).__name__}: {e}")
    cfg = json.loads((ck.write_draft(root, ck.DraftSpec(ck.DFLASH, ck.NEVER, 16), SHAPE) / "config.json").read_text())
    parsed = parse_dflash_draft_config(draft_hf_config=cfg)
    assert parsed.block_size == 16 and parsed.mask_token_id == V - 1
