"""The head's data steps on the tiny target: documents to read, feature capture that resumes, written prompts."""

from __future__ import annotations

import pytest
import torch

from specviz.training import store
from specviz.training.answers import eval_prompts
from specviz.training.features import capture, load_features, shard_names
from specviz.training.texts import Text, document_texts, written_prompts

from tiny import wrap

pytestmark = pytest.mark.usefixtures("one_thread")


def test_documents_are_prose_and_code_placed_as_chat_answers(target):
    texts = document_texts(target.tokenizer, max_tokens=3000, chunk_tokens=128)
    assert texts and all(t.source == "documents" for t in texts)
    assert sum(len(t.ids) - t.answer_from for t in texts) >= 3000  # the budget is filled
    assert all(0 < t.answer_from < len(t.ids) for t in texts)  # a prompt as context, then the passage


def test_capture_matches_the_targets_forward_and_resumes_without_running_it(target, tmp_path):
    generator = torch.Generator().manual_seed(0)
    texts = [
        Text("answers" if i < 70 else "documents", torch.randint(2, 90, (5 + i % 9,), generator=generator).tolist(), 2)
        for i in range(80)
    ]  # two shards of answers, one of documents
    manifest = capture(target, texts, tmp_path, batch=16, progress=False, say=lambda m: None)
    # Shards of 64 texts, named by their first text's source, their index and a hash of their tokens.
    assert [n.rsplit("-", 1)[0] for n in sorted(manifest["shards"])] == ["answers-00000", "answers-00001"]
    changed = [Text(t.source, t.ids + [3], t.answer_from) for t in texts[:64]] + texts[64:]
    assert set(shard_names(changed)) & set(manifest["shards"]) == {sorted(manifest["shards"])[1]}  # only the same texts
    got = load_features(tmp_path)
    assert got.positions == sum(len(t.ids) for t in texts)
    by_tokens = {tuple(t.tolist()): f for t, f in zip(got.tokens, got.features)}
    for text in texts[:5]:
        expected = target.model.base_model(torch.tensor([text.ids])).last_hidden_state[0]
        torch.testing.assert_close(by_tokens[tuple(text.ids)].float(), expected, atol=2e-3, rtol=2e-3)  # fp16 on disk

    class Refuses(torch.nn.Module):
        config = target.model.config

        def __getattr__(self, name):
            if name == "base_model":
                raise AssertionError("the target was run although every shard was captured")
            return super().__getattr__(name)

    again = capture(
        wrap("tiny-target", Refuses(), target.tokenizer), texts, tmp_path, progress=False, say=lambda m: None
    )
    assert again["shards"] == manifest["shards"]
    tensors, meta = store.load(tmp_path / sorted(manifest["shards"])[0])
    assert tensors["features"].dtype == torch.float16 and meta["source"] in ("answers", "documents")


def test_written_prompts_are_cached_and_never_an_eval_prompt(target, tmp_path):
    path = tmp_path / "written.json"
    rows = written_prompts(target, 2, path, progress=False)
    assert len(rows) == 14 and all(r["id"].startswith("written-") for r in rows)  # 2 for each of 7 categories
    forbidden = {p["prompt"].strip().lower() for p in eval_prompts()}
    assert not {r["prompt"].lower() for r in rows} & forbidden
    # Cached: a rerun with nothing missing never runs the target (None here would fail if it did).
    assert written_prompts(wrap("tiny-target", None, target.tokenizer), 2, path, progress=False) == rows


def test_a_category_whose_attempts_ran_out_is_not_tried_again(target, tmp_path):
    """Attempts are cached with the prompts: once a category has used its 4 x N, a later run asks nothing more."""
    path = tmp_path / "written.json"
    rows = written_prompts(target, 2, path, progress=False)
    cached = store.load_json(path, {})
    cached["qa"] = cached["qa"][:1]  # as if most of what the target wrote for qa had been refused
    cached["attempts"]["qa"] = 8
    store.save_json(path, cached)
    again = written_prompts(wrap("tiny-target", None, target.tokenizer), 2, path, progress=False)
    assert len(again) == len(rows) - 1 and sum(r["category"] == "qa" for r in again) == 1


def test_a_batch_of_answers_equals_each_answer_alone_when_rows_stop_early(eos_case):
    """Rows that end leave the batch; the rows still writing must not notice (greedy, fp32)."""
    from specviz.prompts import encode
    from specviz.training.answers import target_answers

    target = eos_case.target
    prompts = [eos_case.prompt, "w5 w8 w2", "w3 w14 w15 w9 w26 w1 w4", "w11"]
    ids = [encode(target.tokenizer, p) for p in prompts]
    generator = torch.Generator().manual_seed(0)
    batch = target_answers(target, ids, [True] * 4, 12, 1.0, 3, generator)
    alone = [target_answers(target, [i], [True], 12, 1.0, 3, generator)[0] for i in ids]
    assert len(batch[0][0]) == eos_case.eos_index + 1 < 12  # the first row stopped at EOS, early
    for (answer, top_ids, top_logp), (one, one_ids, one_logp) in zip(batch, alone):
        assert answer.tolist() == one.tolist()
        assert top_ids[:, 0].tolist() == one_ids[:, 0].tolist()
        assert torch.allclose(top_logp.float(), one_logp.float(), atol=2e-3)


def test_sampling_draws_from_the_softmax():
    from specviz.training.answers import sample

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05, 0.0]])).repeat(20_000, 1)
    draws = sample(logits, torch.Generator().manual_seed(0))
    share = torch.bincount(draws, minlength=5).float() / len(draws)
    assert torch.allclose(share, torch.tensor([0.5, 0.3, 0.15, 0.05, 0.0]), atol=0.012)  # ~4 standard errors
    assert share[4] == 0  # a token of probability 0 is never drawn


def test_a_data_curve_subset_is_random_texts_up_to_the_positions_asked():
    from specviz.training.features import Features, subset

    tokens = [torch.arange(10 + i) for i in range(40)]
    data = Features(tokens, [torch.zeros(len(t), 4) for t in tokens], [2] * 40, ["answers"] * 40)
    small = subset(data, 100, seed=0)
    assert 100 <= small.trained_positions < 100 + 48  # stops at the first text past the count
    assert [len(t) for t in small.tokens] != [
        len(t) for t in data.tokens[: len(small.tokens)]
    ]  # drawn, not the first ones
    assert subset(data, 100, seed=0).tokens[0].tolist() == small.tokens[0].tolist()  # the same draw for the same seed
    assert subset(data, 10**6, seed=0).trained_positions == data.trained_positions


def test_a_grown_text_list_reads_only_its_new_texts(target, tmp_path):
    generator = torch.Generator().manual_seed(1)
    old = [Text("written", torch.randint(2, 90, (4 + i % 7,), generator=generator).tolist(), 1) for i in range(70)]
    capture(target, old, tmp_path, batch=16, progress=False, say=lambda m: None)
    new = [Text("written", torch.randint(2, 90, (4 + i % 5,), generator=generator).tolist(), 1) for i in range(30)]
    grown = old[:35] + new + old[35:]  # new answers land between old ones, so every shard's name changes

    read = []

    class Counts(torch.nn.Module):
        config = target.model.config

        @property
        def base_model(self):
            def forward(ids, **options):
                read.extend(ids.tolist())
                return target.model.base_model(ids, **options)

            return forward

    manifest = capture(
        wrap("tiny-target", Counts(), target.tokenizer), grown, tmp_path, batch=16, progress=False, say=lambda m: None
    )
    assert len(read) == len(new)  # one row per new text, none for the 70 already captured
    names = shard_names(grown)
    assert sum(manifest["shards"][n]["copied"] for n in names) == sum(len(t.ids) for t in old)
    got = load_features(tmp_path, names)
    by_tokens = {tuple(t.tolist()): f for t, f in zip(got.tokens, got.features)}
    assert len(got.tokens) == 100
    for text in [old[0], old[-1], new[0]]:
        expected = target.model.base_model(torch.tensor([text.ids])).last_hidden_state[0]
        torch.testing.assert_close(by_tokens[tuple(text.ids)].float(), expected, atol=2e-3, rtol=2e-3)
