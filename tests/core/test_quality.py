"""Quality metrics of relaxed outputs and the tolerance sweep, on hand-made inputs and a tiny model.

The tiny target is built here (not taken from conftest.py) so this file stands on its own: a random
LlamaForCausalLM from a LlamaConfig with a wide weight spread, so its next-token distributions are
peaked and its greedy choices never hinge on float rounding.
"""

from __future__ import annotations

import math

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from specviz.config import Decoding, Sampling
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.errors import ConfigError
from specviz.lab import quality
from specviz.models import LoadedModel
from specviz.records import token_agreement

VOCAB = 64
WORDS = ["<unk>", "</s>"] + [f"w{i}" for i in range(VOCAB - 2)]
PROMPT = "w1 w2 w3 w4 w5"


@pytest.fixture(scope="module")
def tiny_target() -> LoadedModel:
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="</s>", unk_token="<unk>")
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         initializer_range=0.5, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.requires_grad_(False)
    return LoadedModel(name="tiny-target", source="built in the test", model=model, tokenizer=tokenizer,
                       device=torch.device("cpu"), dtype=torch.float32)


# --- metrics on hand-made inputs --------------------------------------------------------------
def test_identical_outputs_score_perfectly():
    text = "the cat sat on the mat and looked at the dog"
    assert token_agreement([5, 6, 7, 8], [5, 6, 7, 8]) == 1.0
    assert quality.bleu(text, text) == pytest.approx(100.0)
    assert quality.rouge_l(text, text) == pytest.approx(1.0)


def test_disjoint_outputs_score_zero():
    assert token_agreement([1, 2, 3], [4, 5, 6]) == 0.0
    assert quality.bleu("alpha beta gamma delta", "one two three four") == pytest.approx(0.0)
    assert quality.rouge_l("alpha beta gamma delta", "one two three four") == pytest.approx(0.0)


def test_partial_agreement_counts_over_the_longer_output():
    assert token_agreement([1, 2, 3, 4], [1, 2, 9, 4]) == 0.75
    # A prefix of half the length agrees on every shared position, but only on half of the longer.
    assert token_agreement([1, 2], [1, 2, 3, 4]) == 0.5
    assert token_agreement([], []) == 1.0
    assert token_agreement([], [1]) == 0.0


def test_rouge_l_is_the_f1_of_the_longest_common_subsequence():
    # LCS of "a b c d" and "a x c d" is "a c d": precision = recall = 3/4.
    assert quality.rouge_l("a x c d", "a b c d") == pytest.approx(0.75)


def test_rouge_l_keeps_code_symbols_and_non_latin_words():
    """rouge-score's default tokenizer would drop these and call different outputs identical."""
    assert quality.rouge_l("x = f(y)", "x = g(y)") < 1.0
    assert quality.rouge_l("猫が座った", "犬が走った") == 0.0
    assert quality.rouge_l("Le chat est là", "Le chat est là") == pytest.approx(1.0)


def test_empty_outputs_are_identical_not_zero():
    assert quality.bleu("", "") == 100.0
    assert quality.rouge_l("", " ") == 1.0
    assert quality.bleu("", "something") == 0.0


# --- log-likelihood under the target ----------------------------------------------------------
def test_log_likelihood_matches_the_probabilities_the_loop_recorded(tiny_target):
    """The uncached forward scores each output token exactly as the decoding loop did (no off-by-one)."""
    run = generate(tiny_target, None, PROMPT, Decoding(max_new_tokens=12))
    recorded = sum(math.log(r.next_p) for r in run.rounds) / len(run.rounds)
    assert quality.mean_log_likelihood(tiny_target, run.prompt_ids, run.output_ids) == pytest.approx(recorded, abs=1e-4)


def test_greedy_output_is_more_likely_than_a_shuffled_one(tiny_target):
    run = generate(tiny_target, None, PROMPT, Decoding(max_new_tokens=12))
    out = run.output_ids
    shuffled = [out[i] for i in torch.randperm(len(out), generator=torch.Generator().manual_seed(0)).tolist()]
    assert shuffled != out
    own = quality.mean_log_likelihood(tiny_target, run.prompt_ids, out)
    assert own > quality.mean_log_likelihood(tiny_target, run.prompt_ids, shuffled)
    assert own <= 0.0
    assert math.isnan(quality.mean_log_likelihood(tiny_target, run.prompt_ids, []))


# --- the sweep --------------------------------------------------------------------------------
def layerskip(target: LoadedModel):
    return lambda: build_drafter("layerskip:2", target)


def test_greedy_sweep_reference_and_its_extremes(tiny_target):
    """τ = 0 is exact again (identical output); τ = 50 with top-k = the vocabulary accepts every draft
    (this model's log-probs at one position span under 30 nats, so every token is within τ of the best)."""
    calls = []
    sweep = quality.tolerance_sweep(
        tiny_target,
        layerskip(tiny_target),
        PROMPT,
        Decoding(gamma=3, max_new_tokens=16),
        [0.0, 50.0],
        top_k=VOCAB,
        on_point=lambda s, done, total: calls.append((done, total)),
    )
    assert sweep.complete and sweep.parameter == quality.TAU and sweep.top_k == VOCAB
    assert calls == [(1, 3), (2, 3), (3, 3)]
    ref = sweep.reference
    assert ref.identical_to_baseline  # exact greedy verification is lossless
    assert (ref.quality.agreement, ref.quality.bleu, ref.quality.rouge_l) == (
        1.0,
        pytest.approx(100.0),
        pytest.approx(1.0),
    )
    tight, loose = sweep.points
    assert tight.comparisons[0].spec.output_ids == ref.comparisons[0].spec.output_ids
    assert tight.quality.agreement == 1.0 and tight.quality.log_likelihood == pytest.approx(ref.quality.log_likelihood)
    assert loose.alpha == 1.0 and loose.mean_accepted > ref.mean_accepted
    # Every point is timed in a pair of its own with the target alone, whose output is always the same.
    runs = [c for p in [ref, *sweep.points] for c in p.comparisons]
    assert all(c.paired for c in runs) and len({id(c.baseline) for c in runs}) == len(runs)
    assert len({tuple(c.baseline.output_ids) for c in runs}) == 1
    frame = sweep.frame()
    assert list(frame["rule"]) == ["exact", "τ=0", "τ=50"]
    assert {"speedup", "alpha", "mean_accepted", "agreement", "bleu", "rouge_l", "log_likelihood"} <= set(frame.columns)
    assert sweep.loosest() is loose
    assert list(sweep.comparisons()) == ["exact", "τ=0", "τ=50"]


def test_sampling_sweep_at_lenience_one_is_the_exact_rule(tiny_target):
    settings = Decoding(gamma=3, max_new_tokens=12, seed=7, sampling=Sampling(temperature=1.0))
    sweep = quality.tolerance_sweep(tiny_target, layerskip(tiny_target), [PROMPT, "w9 w8"], settings, [1.0, 0.2])
    assert sweep.parameter == quality.LENIENCE and sweep.top_k is None
    same, lenient = sweep.points
    assert [c.spec.output_ids for c in same.comparisons] == [c.spec.output_ids for c in sweep.reference.comparisons]
    assert same.quality.agreement == 1.0 and len(same.comparisons) == 2
    assert sweep.loosest() is lenient
    assert list(sweep.comparisons())[:2] == ["exact · prompt 1", "exact · prompt 2"]


def test_stopping_keeps_the_points_done(tiny_target):
    asked = []

    def stop_after_one() -> bool:
        asked.append(1)
        return len(asked) > 1

    sweep = quality.tolerance_sweep(
        tiny_target,
        layerskip(tiny_target),
        PROMPT,
        Decoding(max_new_tokens=8),
        [0.5, 1.0, 2.0],
        should_stop=stop_after_one,
    )
    assert not sweep.complete and sweep.planned == 3
    assert [p.value for p in sweep.points] == [0.5]
    assert len(sweep.frame()) == 2


def test_out_of_range_values_are_refused_before_any_run(tiny_target):
    def never():
        raise AssertionError("no drafter may be built for a refused sweep")

    with pytest.raises(ConfigError, match="lenience"):
        quality.tolerance_sweep(tiny_target, never, PROMPT, Decoding(sampling=Sampling(temperature=1.0)), [0.5, 1.5])
    with pytest.raises(ConfigError, match="tolerance"):
        quality.tolerance_sweep(tiny_target, never, PROMPT, Decoding(), [-1.0])
    with pytest.raises(ConfigError):
        quality.tolerance_sweep(tiny_target, never, PROMPT, Decoding(), [])


# --- task quality: final answers of math prompts ------------------------------------------------------
@pytest.mark.parametrize(
    "text, number",
    [
        ("24 + 18 = 42 muffins, 42 - 29 = 13. He has 13 muffins left.", "13"),
        ("The answer is 13. (Check: 13 + 29 = 42.)", "13"),  # a marked answer wins over later numbers
        ("Final answer: $5.00", "5"),
        ("#### 1,250", "1250"),
        (r"so \boxed{7}", "7"),
        ("It is 3.50 dollars.", "3.5"),
        ("The temperature is -4 degrees.", "-4"),
        ("No number here.", None),
        ("", None),
    ],
)
def test_final_number_reads_the_answer_of_a_worked_solution(text, number):
    assert quality.final_number(text) == number


def test_the_same_value_written_two_ways_matches_and_a_different_one_does_not():
    assert quality.final_answer_match("Maya gets $5 back.", "Her change is $5.00.") is True
    assert quality.final_answer_match("He has 12 left.", "He has 13 left.") is False
    assert quality.final_answer_match("He has 12 left.", "He has some left.") is None  # nothing to check against


def test_answer_match_counts_only_checkable_references():
    m = quality.answer_match(["13", "7", "x", "5"], ["13", "8", "no number", "5.0"])
    assert (m.matched, m.checked, m.prompts) == (2, 3, 4) and m.rate == pytest.approx(2 / 3)
    assert "2 of 3" in m.text()
    assert quality.answer_match(["a"], ["b"]).rate is None
    with pytest.raises(quality.ConfigError):
        quality.answer_match(["a"], [])


def test_answer_rows_compare_every_rule_with_the_target_alone(tiny_target):
    sweep = quality.tolerance_sweep(
        tiny_target, layerskip(tiny_target), PROMPT, Decoding(gamma=3, max_new_tokens=8), [1.0]
    )
    rows = quality.answer_rows(sweep)
    assert [r["rule"] for r in rows] == ["exact", "τ=1"]
    assert all(r["checked"] == 0 and r["exact match"] is None for r in rows)  # tiny words: no numbers to check


def test_digits_inside_words_are_not_answers():
    assert quality.final_number("w62 w7 H2O") is None
    assert quality.final_number("42-29 = 13") == "13"
