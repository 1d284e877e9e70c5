"""The speculative loop on tiny models: lossless output, cache rollback, records, reproducibility.

p = the target's distribution, q = the draft's, gamma = the number of drafted tokens per round.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields

import hypothesis
import pytest
import torch
from hypothesis import strategies as st

from specviz.comparison import Comparison, dumps, loads
from specviz.config import Decoding, Sampling, TreeShape, Verification
from specviz.decode import generate
from specviz.drafters import DRAFTERS as KINDS
from specviz.drafters import NgramDrafter, Reason, build_drafter, layer_skip_view, parse_spec
from specviz.errors import ConfigError, IncompatiblePairError, ModelLoadError, SpecVizError
from specviz.records import BONUS, RESAMPLED, TARGET, Round, Run
from specviz.verify import distribution

from tiny import PADDED_ROWS, VOCAB, WORDS, first_two_tokens, pooled_fit

pytestmark = pytest.mark.usefixtures("one_thread")

# (prompt, max new tokens): the counts divide evenly into no round length (gamma + 1 for γ in 1, 2, 4, 8),
# and the last prompt is one token long, so the loop starts with nothing prefilled.
CASES = [("w1 w2 w3 w4 w5", 13), ("w40 w41 w7", 11), ("w90", 7)]
DRAFTERS = ["ngram", "suffix", "recycle", "blend", "auto", "layerskip:1", "target", "tiny-draft", "tiny-padded"]
HEADS = {"head", "ngram+head"}  # kinds that need a head trained for the target: tests/training/test_heads.py
GAMMAS = [1, 2, 4, 8]
TIMING = {"draft_seconds", "verify_seconds"}


@pytest.fixture(scope="module")
def baseline(target):
    """The target alone, greedy, for each case (computed once)."""
    runs = {}

    def get(prompt: str, max_new: int, **settings) -> Run:
        key = (prompt, max_new, tuple(sorted(settings.items())))
        if key not in runs:
            runs[key] = generate(target, None, prompt, Decoding(max_new_tokens=max_new, **settings))
        return runs[key]

    return get


def replay(run: Run) -> list[int]:
    """The output rebuilt from the rounds alone: accepted drafts, then the next token, cut to `emitted`."""
    tokens = []
    for r in run.rounds:
        tokens += (r.drafted[: r.n_accepted] + [r.next_token])[: r.emitted]
    return tokens


def check_rounds(run: Run, max_new: int) -> None:
    """What every run's records must satisfy, whatever the drafter."""
    assert replay(run) == run.output_ids, "the rounds do not add up to the output"
    assert [r.index for r in run.rounds] == list(range(len(run.rounds)))
    produced = 0
    for r in run.rounds:
        k = len(r.drafted)
        assert k <= r.gamma <= max(max_new - produced - 1, 0), "a draft lies past max-new-tokens"
        assert 0 <= r.n_accepted <= k
        assert len(r.p) == len(r.q) == k
        # The target's head runs lazily: every position when the first draft is accepted (or none was
        # drafted), else the first position only; p is None exactly where it was never computed.
        scored = k + 1 if r.n_accepted > 0 or k == 0 else 1
        assert len(r.alternatives) == scored
        assert [v is None for v in r.p] == [i >= scored for i in range(k)]
        expected_kind = RESAMPLED if r.n_accepted < k else (BONUS if k else TARGET)
        assert r.next_kind == expected_kind
        assert r.rejected_position == (r.n_accepted if r.n_accepted < k else None)
        produced += r.emitted
    assert produced == len(run.output_ids) <= max_new


# --- lossless greedy output ------------------------------------------------------------------
def test_every_registered_kind_is_in_the_lossless_matrix():
    """A new drafter kind is one file and one registry entry: this makes sure its greedy output is checked too."""
    assert set(KINDS) - HEADS <= {parse_spec(spec).kind for spec in DRAFTERS}


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("spec", DRAFTERS)
def test_greedy_speculative_output_is_the_targets_own(target, make_drafter, baseline, spec, gamma):
    for prompt, max_new in CASES:
        alone = baseline(prompt, max_new)
        assert len(alone.output_ids) == max_new and not alone.stopped_at_eos  # these cases run to the limit
        run = generate(target, make_drafter(spec), prompt, Decoding(gamma=gamma, max_new_tokens=max_new))
        assert run.output_ids == alone.output_ids, f"{spec}, γ={gamma}, {prompt!r}: output differs from the target's"
        assert run.text == alone.text
        check_rounds(run, max_new)
        assert all(r.gamma == min(gamma, max_new - sum(x.emitted for x in run.rounds[: r.index]) - 1)
                   for r in run.rounds)
        assert all(t < VOCAB for r in run.rounds for t in r.drafted), "a draft outside the tokenizer's vocabulary"
        if spec == "target":  # the target drafting for itself is always right: α = 1
            assert run.acceptance_rate == 1.0
            assert len(run.rounds) == -(-max_new // (gamma + 1))


@pytest.mark.parametrize("max_new", [1, 2])
@pytest.mark.parametrize("spec", DRAFTERS)
def test_one_or_two_new_tokens(target, make_drafter, baseline, spec, max_new):
    """The shortest runs: with one token left nothing may be drafted (verification adds one)."""
    run = generate(target, make_drafter(spec), "w1 w2 w3 w4 w5", Decoding(gamma=4, max_new_tokens=max_new))
    assert run.output_ids == baseline("w1 w2 w3 w4 w5", max_new).output_ids
    assert len(run.output_ids) == max_new
    check_rounds(run, max_new)
    assert run.rounds[0].gamma == max_new - 1  # 1 token: nothing drafted; 2 tokens: at most one draft


# Prompts as random word ids (every id but <unk>), or short random strings (unknown words become <unk>).
RANDOM_PROMPTS = st.one_of(
    st.lists(st.integers(2, VOCAB - 1), min_size=1, max_size=12).map(lambda ids: " ".join(WORDS[i] for i in ids)),
    st.text(alphabet="w0123456789 x", min_size=1, max_size=24).filter(str.strip),
)


@hypothesis.settings(max_examples=25, deadline=None, derandomize=True, database=None)
@hypothesis.given(prompt=RANDOM_PROMPTS, gamma=st.integers(1, 8), max_new=st.integers(1, 14),
                  spec=st.sampled_from(DRAFTERS))
def test_greedy_output_is_the_targets_own_on_random_prompts(target, make_drafter, prompt, gamma, max_new, spec):
    """The lossless property over prompts nobody picked: greedy speculative output = the target alone."""
    alone = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
    run = generate(target, make_drafter(spec), prompt, Decoding(gamma=gamma, max_new_tokens=max_new))
    assert run.output_ids == alone.output_ids, f"{spec}, γ={gamma}, {prompt!r}: output differs from the target's"
    check_rounds(run, max_new)


def test_partial_acceptance_happens_on_these_tiny_models(target, make_drafter):
    """Guards the tests above: the drafts must sometimes be partly accepted, or rollback goes untested."""
    outcomes = set()
    for spec in ("layerskip:1", "tiny-padded"):
        for prompt, max_new in CASES:
            run = generate(target, make_drafter(spec), prompt, Decoding(gamma=4, max_new_tokens=max_new))
            outcomes |= {"none" if r.n_accepted == 0 else "some" for r in run.rounds if r.drafted}
    assert outcomes == {"none", "some"}


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("spec", ["ngram", "layerskip:1", "target", "tiny-draft-eos"])
def test_generation_stops_at_eos_inside_a_round(eos_case, spec, gamma):
    alone = generate(eos_case.target, None, eos_case.prompt, Decoding(max_new_tokens=16))
    assert alone.stopped_at_eos and alone.output_ids[-1] == eos_case.eos_id
    assert len(alone.output_ids) == eos_case.eos_index + 1

    run = generate(eos_case.target, eos_case.drafter(spec), eos_case.prompt, Decoding(gamma=gamma, max_new_tokens=16))
    assert run.output_ids == alone.output_ids
    assert run.stopped_at_eos
    assert WORDS[eos_case.eos_id] not in run.text.split(), "the EOS token leaked into the text"
    check_rounds(run, 16)
    last = run.rounds[-1]
    if spec == "target" and eos_case.eos_index % (gamma + 1) != gamma:
        # every draft is accepted, so EOS is an accepted draft and the round's later tokens are dropped
        assert last.emitted < last.n_accepted + 1, "EOS fell inside a round but the round was not cut there"


def test_relaxed_greedy_accepts_more_drafts_within_its_rule(target, make_drafter, baseline):
    """Relaxed verification is lossy on purpose: more drafts kept, each within τ nats and the top-k."""
    tolerance, top_k = 3.0, 5
    for prompt, max_new in CASES[:2]:
        exact = generate(target, make_drafter("tiny-padded"), prompt, Decoding(gamma=4, max_new_tokens=max_new))
        relaxed = generate(target, make_drafter("tiny-padded"), prompt, Decoding(
            gamma=4, max_new_tokens=max_new, verification=Verification("relaxed", tolerance=tolerance, top_k=top_k)))
        neutral = generate(target, make_drafter("tiny-padded"), prompt, Decoding(
            gamma=4, max_new_tokens=max_new, verification=Verification("relaxed")))
        assert relaxed.acceptance_rate > exact.acceptance_rate
        assert neutral.output_ids == exact.output_ids == baseline(prompt, max_new).output_ids
        check_rounds(relaxed, max_new)
        for r in relaxed.rounds:
            for i in range(r.n_accepted):
                best = r.alternatives[i][0].p  # the target's top token at that position
                assert math.log(best) - math.log(r.p[i]) <= tolerance + 1e-5
                assert sum(a.p > r.p[i] for a in r.alternatives[i][:top_k]) < top_k


# --- drafters: padded, incompatible, bad specs -----------------------------------------------
def test_padded_draft_never_proposes_ids_outside_the_vocabulary(target, tiny_models, make_drafter):
    padded = tiny_models["tiny-padded"]
    ids = torch.tensor([target.tokenizer("w1 w2 w3 w4 w5")["input_ids"]])
    with torch.no_grad():
        unrestricted = padded.model(ids).logits[0].argmax(-1)
    assert padded.model.lm_head.weight.shape[0] == PADDED_ROWS > VOCAB == padded.vocab_size
    assert (unrestricted >= VOCAB).all(), "precondition: the padding rows would win without the cut"
    run = generate(target, make_drafter("tiny-padded"), "w1 w2 w3 w4 w5",
                   Decoding(gamma=4, max_new_tokens=20, sampling=Sampling(temperature=1.0), seed=3))
    assert run.drafted > 0
    assert all(t < VOCAB for r in run.rounds for t in r.drafted + [r.next_token])


def test_padded_target_emits_only_tokenizer_ids_and_stays_lossless(tiny_models, load, baseline):
    """A target whose lm_head is padded (as many hub models are) drafted for by an unpadded model."""
    padded_target = tiny_models["tiny-padded"]
    alone = generate(padded_target, None, "w40 w41 w7", Decoding(max_new_tokens=17))
    assert all(t < VOCAB for t in alone.output_ids)
    for gamma in (2, 5):
        run = generate(padded_target, build_drafter("tiny-draft", padded_target, load=load), "w40 w41 w7",
                       Decoding(gamma=gamma, max_new_tokens=17))
        assert run.output_ids == alone.output_ids


@pytest.mark.parametrize(
    "name, words",
    [("tiny-foreign", ["tokenizers differ", "tiny-foreign"]), ("tiny-other-eos", ["eos_token_id"])],
)
def test_draft_with_another_vocabulary_is_refused(make_drafter, name, words):
    with pytest.raises(IncompatiblePairError) as info:
        make_drafter(name)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("spec", ["", "   ", "layerskip:0", "layerskip:4", "layerskip:9", "layerskip:x", "layerskip",
                                  "ngram:0", "ngram:two"])
def test_bad_drafter_spec_is_refused(make_drafter, spec):
    with pytest.raises(ConfigError):
        make_drafter(spec)


def test_unknown_draft_model_reports_the_loader_error(make_drafter):
    with pytest.raises(ModelLoadError, match="no-such-model"):
        make_drafter("no-such-model")
    with pytest.raises(ModelLoadError, match="no-such-model"):
        make_drafter("model:no-such-model")


def test_ngram_drafter_continues_the_latest_earlier_occurrence(target):
    drafter = NgramDrafter(max_ngram=3)
    drafter.start(torch.tensor([[5, 6, 7, 8, 9, 5, 6, 7, 4, 6, 7]]), Decoding(gamma=3))
    context = torch.tensor([[5, 6, 7, 8, 9, 5, 6, 7, 4, 6, 7]])
    proposal = drafter.propose(context, 3, Sampling(), None)
    assert proposal.probs is None  # one-hot q
    assert proposal.ids.tolist() == [4, 6], "the latest continuation of (6, 7) is 4, 6, 7; a 2-token match drafts 2"
    # the longest n-gram wins: (5, 6, 7) was followed by 8 once and by 4 later
    context = torch.cat([context, torch.tensor([[5, 6, 7]])], 1)
    assert drafter.propose(context, 2, Sampling(), None).ids.tolist() == [4, 6]
    assert drafter.propose(context, 3, Sampling(), None).ids.tolist() == [4, 6, 7], "a 3-token match drafts up to k"
    assert drafter.propose(torch.tensor([[1, 2, 3]]), 0, Sampling(), None).ids.numel() == 0


# --- adaptive gamma --------------------------------------------------------------------------
@pytest.mark.parametrize("spec, start", [("target", 1), ("layerskip:1", 4), ("tiny-padded", 3)])
def test_adaptive_gamma_follows_plus_two_minus_one(target, make_drafter, baseline, spec, start):
    prompt, max_new = "w1 w2 w3 w4 w5", 30
    run = generate(target, make_drafter(spec), prompt, Decoding(gamma=start, adaptive=True, max_new_tokens=max_new))
    assert run.output_ids == baseline(prompt, max_new).output_ids
    check_rounds(run, max_new)
    scheduled, produced, moves = start, 0, set()
    for r in run.rounds:
        assert r.gamma == min(scheduled, max_new - produced - 1), f"round {r.index}"
        if r.drafted:
            following = scheduled + 2 if r.n_accepted == len(r.drafted) else max(1, scheduled - 1)
            moves.add("up" if following > scheduled else "down" if following < scheduled else "floor")
            scheduled = following
        produced += r.emitted
    if spec == "target":
        assert [r.gamma for r in run.rounds[:4]] == [1, 3, 5, 7]
    else:
        assert {"up", "down"} <= moves, "the schedule should have moved both ways on this run"


# --- cache rollback against a recomputation without any cache --------------------------------
def draft_module(spec, target, tiny_models):
    if spec == "target":
        return target.model
    if spec.startswith("layerskip:"):
        return layer_skip_view(target.model, int(spec.split(":")[1]))
    return tiny_models[spec].model


@pytest.mark.parametrize("sampling", [Sampling(), Sampling(temperature=0.8)], ids=["greedy", "sampling"])
@pytest.mark.parametrize("spec", ["tiny-draft", "tiny-padded", "layerskip:3", "target"])
def test_recorded_p_and_q_match_a_recomputation_without_cache(target, tiny_models, make_drafter, spec, sampling):
    """Rolled-back KV caches must leave both models exactly where an uncached forward would be.

    For each round, the target's p and the draft's q at the drafted tokens (and p at the next
    token) are recomputed from scratch over prompt + output so far + drafts.
    """
    drafter_model = draft_module(spec, target, tiny_models)
    for prompt in ("w1 w2 w3 w4 w5", "w90"):
        settings = Decoding(gamma=3, adaptive=True, max_new_tokens=16, sampling=sampling, seed=11)
        run = generate(target, make_drafter(spec), prompt, settings)
        check_rounds(run, 16)
        produced = 0
        for r in run.rounds:
            context = run.prompt_ids + run.output_ids[:produced]
            n = len(context)
            with torch.no_grad():
                p = distribution(target.model(torch.tensor([context + r.drafted])).logits[0, :, :VOCAB], sampling)
                q = distribution(drafter_model(torch.tensor([context + r.drafted[:-1]])).logits[0, :, :VOCAB], sampling)
            for i, token in enumerate(r.drafted):
                if r.p[i] is not None:  # None: after a first-position rejection, never computed
                    where = f"{prompt!r} round {r.index}: p of draft {i}"
                    assert abs(r.p[i] - float(p[n - 1 + i, token])) < 1e-4, where
                assert abs(r.q[i] - float(q[n - 1 + i, token])) < 1e-4, f"{prompt!r} round {r.index}: q of draft {i}"
                if sampling.greedy:
                    assert token == int(q[n - 1 + i].argmax()), "the draft did not propose its own greedy token"
            row = p[n - 1 + r.n_accepted]
            assert abs(r.next_p - float(row[r.next_token])) < 1e-4
            if sampling.greedy:
                assert r.next_token == int(row.argmax())
            produced += r.emitted


# --- sampling: reproducibility and the distribution ------------------------------------------
def comparable(run: Run) -> list[dict]:
    return [{f.name: getattr(r, f.name) for f in fields(Round) if f.name not in TIMING} for r in run.rounds]


@pytest.mark.parametrize("spec", [None, "ngram", "layerskip:3", "tiny-draft"])
def test_same_seed_same_run_different_seed_different_output(target, make_drafter, spec):
    def sample(seed):
        settings = Decoding(gamma=3, max_new_tokens=12, seed=seed, sampling=Sampling(temperature=1.0))
        return generate(target, make_drafter(spec) if spec else None, "w40 w41 w7", settings)

    first, again = sample(5), sample(5)
    assert first.output_ids == again.output_ids
    assert comparable(first) == comparable(again)
    outputs = {tuple(sample(seed).output_ids) for seed in range(4)}
    assert len(outputs) == 4, "different seeds should give different samples"


def test_speculative_sampling_draws_from_the_targets_distribution(target, make_drafter):
    """End to end on the tiny models: the first two tokens of a speculative run follow p.

    The draft (the target's first 2 layers, padded) and the target disagree: their top-3 sets differ, so
    drafts outside p's support are rejected and p's third token is reachable only by resampling.
    γ = 1 and 2 new tokens: the first round keeps or replaces the draft, and after a rejection a
    second round starts from rolled-back caches.
    """
    prompt, sampling, trials = "w55 w56 w57", Sampling(temperature=1.0, top_k=3), 300
    cells, expected = first_two_tokens(target, target.tokenizer(prompt)["input_ids"], sampling, VOCAB)

    counts = dict.fromkeys(cells, 0)
    accepted = 0
    for seed in range(trials):
        run = generate(target, make_drafter("tiny-padded"), prompt,
                       Decoding(gamma=1, max_new_tokens=2, seed=seed, sampling=sampling))
        pair = tuple(run.output_ids)
        assert pair in counts, f"seed {seed}: {pair} has probability 0 under the target"
        counts[pair] += 1
        accepted += run.rounds[0].n_accepted
    assert 0.2 * trials < accepted < 0.8 * trials, "precondition: the draft is neither always right nor always wrong"
    # Pool the rare cells so each tested cell expects at least 5 draws.
    fit, observed, probs = pooled_fit(counts, cells, expected, trials)
    assert fit.p_value > 1e-3, f"first two tokens {observed} vs p {probs}: chi2 {fit.statistic:.1f}, df {fit.df}"


# --- the shared target is never changed ------------------------------------------------------
def test_layerskip_leaves_the_shared_target_unchanged(target, make_drafter, baseline):
    model = target.model
    ids = torch.tensor([target.tokenizer("w1 w2 w3 w4 w5")["input_ids"]])
    layers_before = list(model.model.layers)
    state_before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        logits_before = model(ids).logits
    alone_before = baseline("w1 w2 w3 w4 w5", 13).output_ids

    drafter = make_drafter("layerskip:1")
    assert len(drafter.model.model.layers) == 1
    assert drafter.model.model.layers[0] is layers_before[0], "the view shares the target's layers, not copies"
    for sampling in (Sampling(), Sampling(temperature=1.0)):
        settings = Decoding(gamma=4, max_new_tokens=13, sampling=sampling)
        generate(target, make_drafter("layerskip:1"), "w1 w2 w3 w4 w5", settings)

    assert list(model.model.layers) == layers_before
    assert model.config.num_hidden_layers == len(layers_before) == 4
    assert not model.training
    state_after = model.state_dict()
    assert state_after.keys() == state_before.keys()
    assert all(torch.equal(state_after[k], v) for k, v in state_before.items())
    with torch.no_grad():
        assert torch.equal(model(ids).logits, logits_before)
    assert generate(target, None, "w1 w2 w3 w4 w5", Decoding(max_new_tokens=13)).output_ids == alone_before


@pytest.mark.parametrize("spec", ["tiny-draft", "layerskip:2", "ngram"])
def test_a_drafter_never_changes_the_shared_target(target, make_drafter, spec):
    """The app shares one cached target between sessions: a drafter may read it, never change it.

    Beyond the weights' values (checked above for layer-skip): the same tensors in the same
    memory, the same config (layer count included) and the same generation config.
    """
    model = target.model
    before = {
        "pointers": {name: p.data_ptr() for name, p in model.named_parameters()},
        "config": model.config.to_dict(),
        "generation": model.generation_config.to_dict(),
        "layers": [id(layer) for layer in model.model.layers],
    }
    for sampling in (Sampling(), Sampling(temperature=1.0)):
        generate(target, make_drafter(spec), "w1 w2 w3 w4 w5", Decoding(gamma=3, max_new_tokens=9, sampling=sampling))
    assert {name: p.data_ptr() for name, p in model.named_parameters()} == before["pointers"]
    assert model.config.to_dict() == before["config"] and model.config.num_hidden_layers == 4
    assert model.generation_config.to_dict() == before["generation"]
    assert [id(layer) for layer in model.model.layers] == before["layers"]
    assert not model.training and not any(p.requires_grad for p in model.parameters())


# --- records ---------------------------------------------------------------------------------
def test_run_figures_agree_with_the_rounds(target, make_drafter):
    run = generate(target, make_drafter("tiny-padded"), "w40 w41 w7", Decoding(gamma=4, max_new_tokens=30))
    check_rounds(run, 30)
    drafted = sum(len(r.drafted) for r in run.rounds)
    accepted = sum(r.n_accepted for r in run.rounds)
    assert 0 < accepted < drafted
    assert run.drafted == drafted and run.accepted == accepted
    assert run.acceptance_rate == pytest.approx(accepted / drafted)
    assert run.mean_accepted_tokens == pytest.approx(len(run.output_ids) / len(run.rounds))
    by_position = []
    for i in range(max(len(r.drafted) for r in run.rounds)):
        reached = [r for r in run.rounds if len(r.drafted) > i]
        by_position.append(sum(r.n_accepted > i for r in reached) / len(reached))
    assert run.acceptance_by_position() == pytest.approx(by_position)
    summary = run.summary()
    assert summary["rounds"] == len(run.rounds) and summary["new_tokens"] == len(run.output_ids) == 30
    assert summary["acceptance_rate"] == run.acceptance_rate
    assert run.draft == "tiny-padded" and run.target == "tiny-target"
    for r in run.rounds:
        statuses = [s for _, _, s in r.statuses()]
        assert statuses == ["accepted"] * r.n_accepted + ["rejected"] * (len(r.drafted) - r.n_accepted) + [r.next_kind]
        assert [t for t, _, _ in r.statuses()] == r.drafted + [r.next_token]
        assert r.drafted_text == [WORDS[t] for t in r.drafted] and r.next_text == WORDS[r.next_token]


@pytest.mark.parametrize("tree", [TreeShape(), TreeShape(budget=6, branching=2)], ids=["chain", "tree"])
def test_the_drafter_learns_the_times_the_round_records(target, make_drafter, tree):
    """The loop times each round and hands the times to the drafter: what a drafter that weighs cost learns from
    is what the Rounds page shows, the verification forward's seconds and the drafts it read."""
    drafter, timings = make_drafter("tiny-draft"), []
    feedback = drafter.feedback
    drafter.feedback = lambda kept, hidden=None, timing=None, verified=None: (
        timings.append(timing), feedback(kept, hidden, timing, verified))
    run = generate(target, drafter, "w40 w41 w7", Decoding(gamma=3, max_new_tokens=20, tree=tree))
    assert len(timings) == len(run.rounds) and any(r.verified for r in run.rounds)
    for timing, r in zip(timings, run.rounds):
        assert timing.verify_seconds == r.verify_seconds and timing.verified == r.verified
        assert 0 < timing.draft_seconds <= r.draft_seconds  # the round's drafting also counts the feedback


def test_a_rounds_why_is_worded_after_the_timed_loop(target):
    """A drafter gives its reason in numbers; the words for the Rounds timeline are written once the clock stops."""
    worded = []

    class Counted(Reason):
        def __init__(self, n: int):
            self.n = n

        def text(self) -> str:
            worded.append(self.n)
            return f"{self.n} drafted"

    class Telling(NgramDrafter):
        def draft(self, context, k, sampling, generator):
            proposal = super().draft(context, k, sampling, generator)
            proposal.reason = Counted(proposal.ids.shape[0])
            return proposal

        def feedback(self, kept, hidden=None, timing=None, verified=None):
            assert not worded, "a reason was put into words while the loop ran"
            super().feedback(kept, hidden, timing, verified)

    for detail in (True, False):
        worded.clear()
        run = generate(target, Telling(), "w1 w2 w3 w4 w5 w1 w2 w3", Decoding(gamma=4, max_new_tokens=13), detail)
        assert [r.why for r in run.rounds] == [f"{r.verified} drafted" for r in run.rounds]


def test_baseline_run_records_one_target_token_per_round(baseline):
    run = baseline("w40 w41 w7", 17)
    check_rounds(run, 17)
    assert run.draft is None
    assert len(run.rounds) == 17
    assert all(r.next_kind == TARGET and r.drafted == [] and r.emitted == 1 for r in run.rounds)
    assert (run.drafted, run.acceptance_rate, run.mean_accepted_tokens) == (0, 0.0, 1.0)
    assert run.acceptance_by_position() == []


def test_acceptance_by_position_on_hand_built_rounds():
    def round_(index, drafted, n_accepted):
        return Round(index, len(drafted), drafted, [0.5] * len(drafted), [0.5] * len(drafted), n_accepted, 1,
                     RESAMPLED if n_accepted < len(drafted) else BONUS, 0.5, n_accepted + 1,
                     [[] for _ in range(len(drafted) + 1)], 0.0, 0.0)

    run = Run("t", "d", "x", [1], Decoding().to_dict(), "cpu", "float32",
              [round_(0, [1, 2, 3], 3), round_(1, [4, 5], 0), round_(2, [6, 7, 8], 1)],
              [0] * 8, "", 0.0, 1.0)
    assert run.acceptance_by_position() == pytest.approx([2 / 3, 1 / 3, 1 / 2])
    assert run.acceptance_rate == pytest.approx(4 / 8)
    assert run.mean_accepted_tokens == pytest.approx(8 / 3)
    assert run.mean_gamma == pytest.approx(8 / 3)


def test_run_and_comparison_survive_a_json_round_trip(target, make_drafter, baseline):
    settings = Decoding(gamma=3, max_new_tokens=15, seed=4, sampling=Sampling(temperature=0.9, top_p=0.9),
                        verification=Verification("relaxed", lenience=0.8))
    run = generate(target, make_drafter("layerskip:3"), "w1 w2 w3 w4 w5", settings)
    text = dumps(run)
    json.loads(text)  # plain JSON
    back = loads(text)
    assert isinstance(back, Run) and back == run
    assert loads(text.encode()) == run

    comparison = Comparison(run, baseline("w1 w2 w3 w4 w5", 15))
    back = loads(dumps(comparison))
    assert isinstance(back, Comparison)
    assert back.spec == run and back.baseline == comparison.baseline
    assert back.summary() == comparison.summary()


@pytest.fixture(scope="module")
def exported(target, baseline):
    return dumps(baseline("w90", 11))


def _damaged(text: str, change) -> str:
    data = json.loads(text)
    change(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    "damage",
    [
        lambda t: t[: len(t) // 2],
        lambda t: "",
        lambda t: "null",
        lambda t: "[1, 2, 3]",
        lambda t: b"\xff\xfe\x00garbage",
        lambda t: _damaged(t, lambda d: d.update(schema="specviz.run/0")),
        lambda t: _damaged(t, lambda d: d.pop("schema")),
        lambda t: _damaged(t, lambda d: d.pop("output_ids")),
        lambda t: _damaged(t, lambda d: d.pop("rounds")),
        lambda t: _damaged(t, lambda d: d.update(rounds=[5])),
        lambda t: _damaged(t, lambda d: d["rounds"][0].pop("n_accepted")),
        lambda t: _damaged(t, lambda d: d["rounds"][0].update(alternatives=[[{"p": 0.1}]])),
        lambda t: json.dumps({"spec": json.loads(t), "baseline": 3}),
    ],
    ids=["truncated", "empty", "null", "list", "binary", "old-schema", "no-schema", "no-output", "no-rounds",
         "round-not-object", "round-missing-field", "bad-alternative", "comparison-half-broken"],
)
def test_damaged_json_is_refused_with_a_specviz_error(exported, damage):
    with pytest.raises(SpecVizError):
        loads(damage(exported))


# --- prompts ---------------------------------------------------------------------------------
def test_empty_or_too_long_prompt_is_refused(target):
    with pytest.raises(SpecVizError, match="empty"):
        generate(target, None, "   ", Decoding())
    too_long = " ".join(["w5"] * 250)  # the tiny target's context is 256 positions
    with pytest.raises(SpecVizError, match="250 tokens"):
        generate(target, None, too_long, Decoding(max_new_tokens=16))


# --- records loaded from a file: values of the wrong type -----------------------------------
@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["rounds"][0].update(n_accepted="1"),
        lambda d: d["rounds"][0].update(drafted=None),
        lambda d: d.update(seconds="fast"),
        lambda d: d.update(output_ids=None),
    ],
    ids=["count-as-text", "drafted-null", "seconds-as-text", "output-null"],
)
def test_a_loaded_record_is_either_refused_or_usable(target, make_drafter, damage):
    """Valid JSON with values of the wrong type: replay must show an error, not crash on the first figure.

    `loads` promises a checked record ("for replay without models"); the app computes the summary
    and per-position acceptance of whatever it returns.
    """
    run = generate(target, make_drafter("layerskip:1"), "w1 w2", Decoding(gamma=2, max_new_tokens=6))
    data = json.loads(dumps(run))
    damage(data)
    try:
        record = loads(json.dumps(data))
    except SpecVizError:
        return
    record.summary()
    record.acceptance_by_position()
