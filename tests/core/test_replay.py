"""Replaying a greedy answer through a token-only drafter gives the rounds a real run of the target makes."""

from __future__ import annotations

import pytest

from specviz.config import Decoding, TreeShape
from specviz.decode import generate
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.suffix import SuffixDrafter
from specviz.drafters.suffix_index import SuffixCorpus
from specviz.lab.replay import replay

from tiny import PROMPTS

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("tree", [TreeShape(), TreeShape(budget=6, branching=2)])
def test_replay_makes_the_rounds_of_a_real_greedy_run(target, tree):
    corpus_run, corpus_replay = SuffixCorpus(), SuffixCorpus()  # each side learns from its own finished runs
    v = lambda n: 1.0 + 0.05 * n  # noqa: E731  the same verification cost on both sides (a run would time its own)
    kept = drafted = 0
    for prompt in PROMPTS * 2:
        settings = Decoding(gamma=4, max_new_tokens=32, tree=tree)
        run = generate(target, SuffixDrafter(corpus=corpus_run, verify_cost=v), prompt, settings)
        replayed = replay(SuffixDrafter(corpus=corpus_replay, verify_cost=v), run.prompt_ids, run.output_ids, settings)
        assert replayed.rounds == len(run.rounds)
        assert replayed.tokens == len(run.output_ids)
        assert replayed.accepted == sum(r.n_accepted for r in run.rounds)
        assert replayed.drafted == sum(r.tree.size if r.tree else len(r.drafted) for r in run.rounds)
        assert sum(replayed.sizes.values()) == replayed.rounds and replayed.steps(v) >= replayed.rounds
        kept, drafted = kept + replayed.accepted, drafted + replayed.drafted
    assert drafted > 0 and kept > 0  # rounds with kept and refused drafts were compared (the suffix drafter
    # learns from the first pass over the prompts; the random tiny target never repeats itself for n-gram lookup)


def test_a_drafter_that_guesses_nothing_replays_one_token_per_round():
    class Silent(NgramDrafter):
        def draft(self, context, k, sampling, generator):
            return super().draft(context[:, :1], 0, sampling, generator)

    replayed = replay(Silent("none"), [1, 2, 3], [4, 5, 6, 7], Decoding(gamma=4))
    assert (replayed.rounds, replayed.tokens, replayed.drafted, replayed.tokens_per_round) == (4, 4, 0, 1.0)
