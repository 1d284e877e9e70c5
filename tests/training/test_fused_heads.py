"""Heads that read several of the target's layers, fused (EAGLE-3), on tiny targets.

The pairing first: the target's feature at position t, with the token at t+1, predicts the token at t+2. An oracle
head on a target whose final state at t depends on the token at t alone checks it, offline and in the loop. Then the
capture hands training the same fused features the loop hands a drafter, and a trained fused head stays lossless
and drafts only from its reduced vocabulary.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from specviz.config import Decoding, Sampling
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.drafters.head_net import DraftHead, HeadInfo, HeadShape, KVCache, embedding_check, save_head
from specviz.errors import ConfigError
from specviz.training.agreement import HeldOut, agreement
from specviz.training.features import Features, capture, layer_states, load_features
from specviz.training.texts import Text

from tiny import VOCAB, WORDS, tiny_llama, wrap

pytestmark = pytest.mark.usefixtures("one_thread")

LAYERS = (1, 2, 4)  # on the 4-layer tiny target: the outputs of layers 1 and 2, and the final state


def pass_through_target(tokenizer):
    """A target whose layers add nothing (zeroed output projections): its final state at t is norm(e(x_t)), so
    the state at t+1 follows from the token at t+1 alone, and a head can know it exactly."""
    model = tiny_llama(seed=3, vocab_size=VOCAB, hidden=32, layers=2, heads=4, kv_heads=2)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    return wrap("pass-through", model, tokenizer)


def oracle_head(target, layers) -> DraftHead:
    """A head whose output is the target's final state at the token it reads: norm(e(x_{j+1})) = f_{j+1}. It
    ignores the target's features, so only the pairing of tokens decides whether its drafts are right."""
    config = target.model.config
    shape = HeadShape(hidden=config.hidden_size, heads=4, kv_heads=2, intermediate=16, rope_theta=10000.0,
                      eps=config.rms_norm_eps, layers=layers)
    head = DraftHead(shape).eval()
    h = config.hidden_size
    with torch.no_grad():
        for p in head.parameters():
            p.zero_()
        for norm in (head.norm_embedding, head.norm_feature, head.attn_norm, head.mlp_norm):
            norm.weight.fill_(1.0)
        head.fc.weight[:, :h] = torch.eye(h)  # the normalised embedding passes; the feature is dropped
        head.out_norm.weight.copy_(target.model.model.norm.weight)
        if layers:
            head.layer_norm.fill_(1.0)
    return head


def saved(head: DraftHead, target, folder) -> str:
    embedding = target.model.get_input_embeddings().weight.detach().float()
    vocab = list(range(VOCAB))
    info = HeadInfo(head.shape, vocab, target.name, target.model.config.num_hidden_layers, VOCAB,
                    embedding_check(embedding, vocab), {"steps": 0})
    save_head(head, info, folder)
    return f"head:{folder}"


def greedy_texts(target, prompts=("w1 w2 w3 w4 w5", "w40 w41 w7", "w9 w8"), max_new=12) -> list[Text]:
    texts = []
    for prompt in prompts:
        run = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        texts.append(Text("eval", run.prompt_ids + run.output_ids, len(run.prompt_ids)))
    return texts


@pytest.mark.parametrize("layers", [(), (1, 2)])
def test_the_feature_at_t_with_the_token_at_t_plus_1_predicts_the_token_at_t_plus_2(tokenizer, layers):
    target = pass_through_target(tokenizer)
    head = oracle_head(target, layers)
    texts = greedy_texts(target)
    final, inputs = layer_states(target, texts, layers=layers)
    held = HeldOut(Features([torch.tensor(t.ids) for t in texts], final, [t.answer_from for t in texts],
                            ["eval"] * len(texts), inputs), "pass-through", ["x"] * len(texts))
    embedding = target.model.get_input_embeddings().weight.float()
    rows = target.model.get_output_embeddings().weight.float()
    alphas = agreement(head, held, embedding, rows, torch.arange(VOCAB), steps=3)
    assert alphas == pytest.approx([1.0, 1.0, 1.0])  # an off-by-one pairing would guess a token's neighbour


@pytest.mark.parametrize("layers", [(), (1, 2)])
def test_in_the_loop_the_oracle_head_has_every_draft_kept(tokenizer, tmp_path, layers):
    target = pass_through_target(tokenizer)
    drafter = build_drafter(saved(oracle_head(target, layers), target, tmp_path / "oracle"), target)
    assert drafter.reads_layers == layers
    for prompt in ("w1 w2 w3 w4 w5", "w40 w41 w7"):
        run = generate(target, drafter, prompt, Decoding(gamma=4, max_new_tokens=16))
        alone = generate(target, None, prompt, Decoding(max_new_tokens=16))
        assert run.output_ids == alone.output_ids
        drafted = [r for r in run.rounds if r.drafted]
        assert drafted and all(r.n_accepted == len(r.drafted) for r in drafted)


def test_captured_fused_features_are_the_target_states_the_loop_hands_the_head(target, tmp_path):
    texts = greedy_texts(target)
    manifest = capture(target, texts, tmp_path / "features", progress=False, layers=LAYERS)
    data = load_features(tmp_path / "features", sorted(manifest["shards"]))
    by_ids = {tuple(t.tolist()): (f, i) for t, f, i in zip(data.tokens, data.features, data.inputs)}
    for text in texts:
        final, inputs = by_ids[tuple(text.ids)]
        out = target.model.base_model(torch.tensor([text.ids]), output_hidden_states=True)
        expected = torch.cat([out.hidden_states[i][0] for i in LAYERS], dim=-1)
        assert inputs.shape == (len(text.ids), len(LAYERS) * target.model.config.hidden_size)
        torch.testing.assert_close(inputs.float(), expected, atol=2e-3, rtol=2e-3)
        torch.testing.assert_close(final.float(), out.last_hidden_state[0], atol=2e-3, rtol=2e-3)


@pytest.fixture(scope="module")
def fused_head_dir(target, tmp_path_factory):
    """A fused-feature head for the tiny target, trained here in seconds on the target's own greedy text."""
    from specviz.training.train_head import HeadConfig, HeadData, draft_vocabulary, info_for, train

    generator = torch.Generator().manual_seed(0)
    prompts = [" ".join(WORDS[i] for i in torch.randint(2, VOCAB, (3,), generator=generator).tolist())
               for _ in range(24)]
    texts = greedy_texts(target, prompts, 20)
    final, inputs = layer_states(target, texts, layers=LAYERS)
    data = HeadData(Features([torch.tensor(t.ids) for t in texts], final, [t.answer_from for t in texts],
                             ["tiny"] * len(texts), inputs), Counter(), {"trained_positions": 1})
    work = tmp_path_factory.mktemp("fused")
    cfg = HeadConfig(name="tiny-fused", steps=60, batch_size=8, seq_len=64, lr=3e-3, warmup=5, work=str(work),
                     out=str(work / "tiny-fused"), feature_layers=LAYERS)
    vocab = draft_vocabulary(target, data, 64)
    training = train(cfg, target, data, vocab, progress=False)
    save_head(training.model, info_for(cfg, target, vocab, data, training), cfg.out_dir)
    return cfg.out_dir


@pytest.mark.parametrize("spec", ["head:{}", "ngram+head:{}"])
def test_greedy_output_with_a_fused_head_is_the_targets_own(target, fused_head_dir, spec):
    for prompt, max_new in (("w1 w2 w3 w4 w5", 13), ("w40 w41 w7", 11), ("w90", 7)):
        drafter = build_drafter(spec.format(fused_head_dir), target)
        assert drafter.reads_layers == LAYERS
        alone = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        run = generate(target, drafter, prompt, Decoding(gamma=4, max_new_tokens=max_new))
        assert run.output_ids == alone.output_ids


def test_a_fused_head_drafts_only_its_vocabulary_and_its_cache_holds_the_true_pairs(target, fused_head_dir, fp32_heads):
    drafter = build_drafter(f"head:{fused_head_dir}", target)
    outside = set(range(VOCAB)) - set(drafter.vocab_ids.tolist())
    assert outside, "the tiny fused head has a reduced vocabulary"
    run = generate(target, drafter, "w1 w2 w3", Decoding(gamma=3, max_new_tokens=10,
                                                        sampling=Sampling(temperature=1.0)))
    assert not outside & {t for r in run.rounds for t in r.drafted}
    drafter = build_drafter(f"head:{fused_head_dir}", target)
    run = generate(target, drafter, "w1 w2 w3 w4 w5", Decoding(gamma=4, max_new_tokens=13))
    ids = run.prompt_ids + run.output_ids[:-1]
    _, inputs = layer_states(target, [Text("x", ids, 0)], layers=LAYERS)
    fresh = KVCache()
    with torch.no_grad():
        drafter.head.step(drafter.embedding[torch.tensor(ids[1 : drafter.read + 1])],
                          drafter.head.lift(inputs[0][: drafter.read].float()), fresh)
    assert drafter.cache.length == fresh.length == drafter.read
    torch.testing.assert_close(drafter.cache.k[:, : fresh.length], fresh.k[:, : fresh.length], atol=5e-3, rtol=5e-3)


def test_a_head_reading_layers_the_target_lacks_is_refused(target, fused_head_dir, tmp_path):
    import json
    import shutil

    folder = tmp_path / "damaged"
    shutil.copytree(fused_head_dir, folder)
    raw = json.loads((folder / "head.json").read_text())
    raw["shape"]["layers"] = [1, 2, 9]
    (folder / "head.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="reads layers"):
        build_drafter(f"head:{folder}", target)
