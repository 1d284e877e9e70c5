"""The head pipeline on a GPU, where there is one (skipped elsewhere): the bug it found on a lent H100 was features
kept on the CPU meeting the target's output head on the GPU (`train_head.draft_vocabulary`)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from specviz.config import Decoding
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.drafters.head_net import save_head
from specviz.fast_path import prepare
from specviz.models import LoadedModel
from specviz.training.answers import target_answers
from specviz.training.features import Features, layer_states
from specviz.training.texts import Text
from specviz.training.train_head import HeadConfig, HeadData, draft_vocabulary, info_for, train

from tiny import VOCAB, WORDS, make_tokenizer, tiny_llama

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


def test_a_fused_head_trains_and_drafts_losslessly_on_the_gpu(tmp_path):
    device = torch.device("cuda")
    model = tiny_llama(0, VOCAB, 64, 4, 4, 2).to(device)
    prepare(model, device)
    target = LoadedModel(name="tiny-cuda", source="built in the test", model=model, tokenizer=make_tokenizer(WORDS),
                         device=device, dtype=torch.float32)
    generator = torch.Generator(device=device).manual_seed(0)
    answers = target_answers(target, [[3, 4, 5], [7, 8]], [True, False], 12, 0.8, 4, generator, fast=True)
    assert [len(a[0]) for a in answers] == [12, 12]
    texts = []
    for i in range(16):
        prompt = " ".join(WORDS[j] for j in torch.randint(2, VOCAB, (3,), generator=torch.Generator().manual_seed(i)))
        run = generate(target, None, prompt, Decoding(max_new_tokens=16))
        texts.append(Text("t", run.prompt_ids + run.output_ids, len(run.prompt_ids)))
    final, inputs = layer_states(target, texts, layers=(1, 2, 4))
    data = HeadData(Features([torch.tensor(t.ids) for t in texts], final, [t.answer_from for t in texts],
                             ["t"] * len(texts), inputs), Counter(), {"trained_positions": 1})
    cfg = HeadConfig(name="cuda-head", steps=20, batch_size=8, seq_len=32, work=str(tmp_path),
                     out=str(tmp_path / "head"), feature_layers=(1, 2, 4), device="cuda")
    vocab = draft_vocabulary(target, data, 64)
    training = train(cfg, target, data, vocab, progress=False)
    save_head(training.model, info_for(cfg, target, vocab, data, training), cfg.out_dir)
    for spec in (f"head:{cfg.out_dir}", f"ngram+head:{cfg.out_dir}"):
        for prompt in ("w1 w2 w3 w4", "w40 w41"):
            alone = generate(target, None, prompt, Decoding(max_new_tokens=12))
            run = generate(target, build_drafter(spec, target), prompt, Decoding(gamma=3, max_new_tokens=12))
            assert run.output_ids == alone.output_ids, (spec, prompt)
