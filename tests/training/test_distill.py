"""Distillation end to end on a tiny random target: its answers, training, the shipped folder, resuming.

The target is a tiny LlamaForCausalLM with the word-level test tokenizer whose layers write nothing
back to the residual stream, so its next token depends on the last token only: a bigram model a
tiny draft can learn in a few dozen steps (a random deep target is chaotic in its context and
would need far more data). The draft learns from the target's greedy and sampled answers. A distilled draft must
load the way
shipped drafts load (`load_model(folder)`, fp16 on disk, fp32 in memory), draft losslessly, and
agree with the target more than the same draft untrained.
"""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from specviz import distill_command
from specviz.config import Decoding
from specviz.decode import generate
from specviz.drafters import ModelDrafter, build_drafter
from specviz.models import SHIPPED_DRAFTS, load_model
from specviz.prompts import load_prompt_set
from specviz.training.distill import DistillConfig, generate_data, new_draft, save_draft, train

from tiny import VOCAB, WORDS, make_tokenizer, tiny_llama, wrap

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPTS = [
    {
        "id": f"p{i}",
        "category": "chat",
        "prompt": " ".join(f"w{(7 * i + 3 * j) % (VOCAB - 2)}" for j in range(3 + i % 4)),
    }
    for i in range(12)
]


def config(tmp_path, **changes) -> DistillConfig:
    settings = dict(
        name="tiny-draft",
        layers=1,
        hidden=32,
        intermediate=128,
        steps=40,
        batch_size=8,
        seq_len=32,
        lr=1e-2,
        warmup=2,
        samples=2,
        max_new_tokens=12,
        gen_batch=16,
        top_k=8,
        checkpoint_every=4,
        work=str(tmp_path / "work"),
        out=str(tmp_path / "tiny-draft"),
    )
    settings.update(changes)
    return DistillConfig(**settings)


@pytest.fixture(scope="module")
def target():
    model = tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=4, heads=4, kv_heads=2)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    return wrap("tiny-target", model, make_tokenizer(WORDS))


@pytest.fixture(scope="module")
def data(target, tmp_path_factory):
    cfg = config(tmp_path_factory.mktemp("data"))
    return generate_data(target, cfg, prompts=PROMPTS, progress=False)


@pytest.fixture(scope="module")
def trained(target, data, tmp_path_factory):
    cfg = config(tmp_path_factory.mktemp("trained"))
    return cfg, train(cfg, target, data, progress=False)


def test_data_is_the_targets_own_greedy_and_sampled_answers(target, data):
    assert len(data.sequences) == len(PROMPTS) * 3  # one greedy answer and two samples per prompt
    for s in data.sequences:
        assert 1 <= len(s.answer) <= 12
        assert s.topk_ids.shape == s.topk_logp.shape == (len(s.answer), 8)
    for s in (s for s in data.sequences if s.sample == 0):
        prompt = next(p["prompt"] for p in PROMPTS if p["id"] == s.prompt_id)
        alone = generate(target, None, prompt, Decoding(max_new_tokens=12)).output_ids
        assert s.answer.tolist() == alone  # batched with left padding, the same tokens as decoding alone
        assert torch.equal(s.topk_ids[:, 0], s.answer)  # greedy: the answer is argmax p everywhere
    sampled = {tuple(s.answer.tolist()) for s in data.sequences if s.sample > 0}
    assert len(sampled) > len(PROMPTS)  # samples differ from one another


def test_generated_data_is_cached_and_not_generated_again(target, tmp_path):
    cfg = config(tmp_path, samples=1)
    first = generate_data(target, cfg, prompts=PROMPTS[:4], progress=False)

    class Refuses(torch.nn.Module):
        def forward(self, *args, **kwargs):
            raise AssertionError("the target was run although every answer was cached")

    again = generate_data(wrap("tiny-target", Refuses(), target.tokenizer), cfg, prompts=PROMPTS[:4], progress=False)
    assert [s.answer.tolist() for s in again.sequences] == [s.answer.tolist() for s in first.sequences]


def test_training_lowers_the_loss_and_logs_every_step(trained):
    cfg, training = trained
    losses = [row["loss"] for row in training.log]
    assert len(losses) == cfg.steps
    assert sum(losses[-4:]) / 4 < 0.7 * sum(losses[:4]) / 4
    logged = [json.loads(line) for line in (cfg.run_dir / "loss.jsonl").read_text().splitlines()]
    assert [row["step"] for row in logged] == list(range(cfg.steps))


def test_saved_draft_loads_in_fp32_and_drafts_losslessly_better_than_untrained(target, trained):
    cfg, training = trained
    folder = save_draft(training.model, target, cfg.out_dir)
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    assert json.loads((folder / "config.json").read_text())["dtype"] == "float16"
    draft = load_model(str(folder), device="cpu")
    assert all(p.dtype == torch.float32 for p in draft.model.parameters())
    untrained = new_draft(cfg, target).eval()

    def acceptance(make) -> float:
        accepted = drafted = 0
        for item in PROMPTS[:6]:
            settings = Decoding(gamma=4, max_new_tokens=12)
            run = generate(target, make(), item["prompt"], settings)
            assert run.output_ids == generate(target, None, item["prompt"], settings).output_ids  # lossless
            accepted, drafted = accepted + run.accepted, drafted + run.drafted
        return accepted / drafted

    distilled = acceptance(lambda: build_drafter(str(folder), target, load=lambda _: draft))
    before = acceptance(lambda: ModelDrafter("untrained", untrained, VOCAB))
    assert distilled > before + 0.2, (distilled, before)


def test_resume_continues_from_the_checkpoint(target, data, trained, tmp_path):
    _, full = trained
    cfg = config(tmp_path)  # the same run in another work folder, stopped after the checkpoint at step 8

    def stop_at_step_10(row):
        if row["step"] == 9:  # interrupted during step 10, after the checkpoint written at step 8
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, target, data, progress=False, on_step=stop_at_step_10)
    resumed = train(DistillConfig(**{**cfg.__dict__, "resume": True}), target, data, progress=False)
    assert [row["step"] for row in resumed.log] == list(range(cfg.steps))  # steps 8 and 9 redone once, none twice
    assert resumed.log[8]["loss"] == pytest.approx(full.log[8]["loss"], rel=1e-5)
    for (name, mine), theirs in zip(resumed.model.state_dict().items(), full.model.state_dict().values()):
        assert torch.allclose(mine, theirs, atol=1e-5), name  # as if never interrupted


def test_command_distils_evaluates_and_writes_the_model_card(target, tmp_path, capsys):
    target.model.save_pretrained(tmp_path / "target")
    target.tokenizer.save_pretrained(tmp_path / "target")
    parser = argparse.ArgumentParser()
    distill_command.add_arguments(parser)
    args = parser.parse_args(
        [
            "--target",
            str(tmp_path / "target"),
            "--name",
            "tiny-cli",
            "--layers",
            "1",
            "--hidden",
            "16",
            "--steps",
            "3",
            "--batch-size",
            "4",
            "--samples",
            "1",
            "--max-new-tokens",
            "8",
            "--max-prompts",
            "1",
            "--eval-prompts",
            "1",
            "--out",
            str(tmp_path / "tiny-cli"),
            "--work",
            str(tmp_path / "work"),
        ]
    )
    assert distill_command.run(args) == 0
    card = (tmp_path / "tiny-cli" / "README.md").read_text()
    assert "14 sequences (7 greedy, 7 sampled" in card  # one train prompt per category, greedy and sampled
    assert "| **all** | 7 |" in card and "identical output" in card  # one eval prompt per category
    assert "7/7 |" in card  # every speculative output was the target's own
    assert "all " in capsys.readouterr().out


SHIPPED = sorted(p.name for p in SHIPPED_DRAFTS.glob("*") if (p / "config.json").is_file())


@pytest.fixture(scope="module")
def smol():
    """The embedded target, loaded once for every shipped draft."""
    return load_model("default")


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_draft_loads_offline_by_name_and_drafts_for_the_default_target(name, smol):
    draft = load_model(name)  # found under assets/drafts, fp16 on disk, fp32 in memory
    assert draft.source == str(SHIPPED_DRAFTS / name)
    assert all(p.dtype == torch.float32 for p in draft.model.parameters())
    assert (SHIPPED_DRAFTS / name / "README.md").read_text().count("| **all** |") == 1  # the card has its figures
    prompt = load_prompt_set("chat", split="eval")[0]["prompt"]
    settings = Decoding(gamma=4, max_new_tokens=32)
    run = generate(smol, build_drafter(name, smol, load=lambda _: draft), prompt, settings)
    assert run.output_ids == generate(smol, None, prompt, settings).output_ids
    assert run.accepted > 0


def test_at_least_two_drafts_of_different_cost_are_shipped_within_60_mb():
    assert len(SHIPPED) >= 2
    sizes = {n: sum(f.stat().st_size for f in (SHIPPED_DRAFTS / n).iterdir()) for n in SHIPPED}
    assert sum(sizes.values()) <= 60 * 2**20, sizes
    widths = {json.loads((SHIPPED_DRAFTS / n / "config.json").read_text())["hidden_size"] for n in SHIPPED}
    assert len(widths) >= 2
