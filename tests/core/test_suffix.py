"""The suffix drafter: its suffix structures, how it sets the draft length, what it learns, and that it is lossless."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

from specviz.config import Decoding, TreeShape
from specviz.decode import generate
from specviz.drafters.suffix import SuffixDrafter, corpus_for
from specviz.drafters.suffix_index import SEPARATOR, LocalIndex, SuffixCorpus, suffix_array

from tiny import PROMPTS

pytestmark = pytest.mark.usefixtures("one_thread")


def test_suffix_array_sorts_like_python_with_short_and_separated_suffixes_first():
    rng = random.Random(0)
    for _ in range(300):
        tokens = [SEPARATOR if rng.random() < 0.1 else rng.randrange(4) for _ in range(rng.randrange(1, 40))]
        order = suffix_array(np.array(tokens)).tolist()
        assert [tokens[i:] for i in order] == sorted(tokens[i:] for i in range(len(tokens)))


def test_corpus_counts_what_followed_the_longest_match_and_never_across_documents():
    corpus = SuffixCorpus([[1, 2, 3, 4], [9, 2, 3, 5], [2, 3, 4], [7, 1, 2]])
    match = corpus.longest_match([8, 1, 2, 3])
    assert match.depth == 3 and match.counts() == {4: 1}  # "1 2 3" once, followed by 4
    short = corpus.longest_match([6, 2, 3])
    assert short.depth == 2 and short.counts() == {4: 2, 5: 1}
    ends = corpus.longest_match([7, 1, 2])  # "7 1 2" ends a document
    assert ends is not None and ends.depth == 2
    assert short.follow(5) is None  # "2 3 5" ends its document: nothing follows it
    walk = corpus.longest_match([8, 1, 2])  # "1 2": continued by 3 once, and once at a document's end
    assert walk.depth == 2 and walk.counts() == {3: 1} and walk.follow(3).counts() == {4: 1}
    assert corpus.longest_match([42]) is None


def test_corpus_leaves_out_the_excluded_document_and_keeps_to_its_bound():
    corpus = SuffixCorpus()
    corpus.add([1, 2, 3, 4, 5], key=7)
    corpus.add([1, 2, 3, 9], key=8)
    assert corpus.longest_match([1, 2, 3, 4]).depth == 4
    assert corpus.longest_match([1, 2, 3]).counts() == {4: 1, 9: 1}
    assert corpus.longest_match([1, 2, 3], exclude=7).counts() == {9: 1}
    assert corpus.longest_match([1, 2, 3, 4], exclude=7) is None
    corpus.add([1, 2, 3, 6], key=7)  # the same key replaces its document
    assert corpus.longest_match([1, 2, 3]).counts() == {9: 1, 6: 1}
    bounded = SuffixCorpus(max_tokens=10)
    for start in range(0, 40, 4):
        bounded.add(list(range(start, start + 4)))
    assert bounded.size <= 10 and bounded.longest_match([0, 1]) is None and bounded.longest_match([36, 37]) is not None


def test_local_index_finds_the_longest_earlier_suffix():
    index = LocalIndex(max_depth=4)
    index.extend([5, 6, 7, 8, 1, 6, 7, 9, 6, 7])
    match = index.longest_match(index.tokens)
    assert match.depth == 2 and match.counts() == {8: 1, 9: 1}
    assert match.follow(8).counts() == {1: 1}


@pytest.fixture(scope="module")
def baseline(target):
    """The target alone, greedy (computed once per prompt and length)."""
    runs = {}

    def get(prompt: str, max_new: int):
        if (prompt, max_new) not in runs:
            runs[prompt, max_new] = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        return runs[prompt, max_new]

    return get


def drafter_for(tokens_seen: list[list[int]], **kw) -> SuffixDrafter:
    return SuffixDrafter(corpus=SuffixCorpus(tokens_seen), **kw)


def test_draft_length_follows_the_confidence_of_the_match_and_the_cost_of_verifying(target):
    import torch

    sure = drafter_for([[3, 4, 5, 6, 7, 8, 9, 10]] * 5)
    sure.start(torch.tensor([[1, 2]]), Decoding(gamma=6))
    proposal = sure.propose(torch.tensor([[1, 2, 3, 4, 5]]), 6, Decoding().sampling, None)
    assert proposal.ids.tolist() == [6, 7, 8, 9, 10]
    assert "earlier answers" in proposal.reason.text()
    split = [[3, 4, 5, 6], [3, 4, 5, 7], [3, 4, 5, 8], [3, 4, 5, 9], [3, 4, 5, 10]]  # a 5-way split after "3 4 5"
    cheap = drafter_for(split, verify_cost=lambda n: 1.0 + 0.01 * n)
    dear = drafter_for(split, verify_cost=lambda n: 1.0 + 0.5 * n)
    for drafter in (cheap, dear):
        drafter.start(torch.tensor([[1, 2]]), Decoding(gamma=6))
    assert len(cheap.propose(torch.tensor([[1, 2, 3, 4, 5]]), 6, Decoding().sampling, None).ids) == 1
    proposal = dear.propose(torch.tensor([[1, 2, 3, 4, 5]]), 6, Decoding().sampling, None)
    assert proposal.ids.tolist() == []
    assert "not worth v(1) = 1.50" in proposal.reason.text()


def test_the_cut_maximises_expected_tokens_per_step():
    drafter = SuffixDrafter(verify_cost=lambda n: 1.0 + 0.1 * n)
    chances = [0.9, 0.8, 0.3, 0.05]
    rates = [(1 + sum(chances[:n])) / (1.0 + 0.1 * n) for n in range(5)]
    assert drafter._cut(chances) == max(range(5), key=rates.__getitem__) == 3
    assert SuffixDrafter(verify_cost=lambda n: 1.0 + n)._cut(chances) == 0  # a forward per draft: never worth it


def test_the_reason_reads_as_the_rounds_timeline_shows_it():
    from specviz.drafters.suffix import CORPUS, LOCAL, Cut

    cut = Cut(True, (0.9, 0.6, 0.4, 0.2, 0.1), 4, CORPUS, 3, 12, 1.13)
    assert cut.confidence == (0.9, 0.6, 0.4, 0.2)
    assert cut.text() == "earlier answers: last 3 tokens seen 12×; 4 drafted, 2.1 expected kept, v(4) = 1.13 steps"
    assert Cut(True, (0.3, 0.1), 0, LOCAL, 1, 2, 1.5).text() == \
        "prompt and answer: last 1 tokens seen 2×; best guess 30% likely kept, not worth v(1) = 1.50 steps"
    assert Cut(False).text() == "no earlier occurrence of the last token"
    assert Cut(True).text() == "nothing followed the match often enough"


def test_acceptance_rises_with_the_match_and_with_agreement():
    from specviz.drafters.suffix import CORPUS, LOCAL, acceptance

    for source in (LOCAL, CORPUS):
        assert acceptance(source, 1, 1, 4, None) < acceptance(source, 1, 4, 4, None)  # a larger share
        assert acceptance(source, 1, 4, 4, None) < acceptance(source, 6, 4, 4, None)  # a longer match
        assert acceptance(source, 2, 2, 4, 0.0) < acceptance(source, 2, 2, 4, 1.0)  # the other source agrees
        assert 0 < acceptance(source, 1, 1, 10, 0.0) < acceptance(source, 16, 10, 10, 1.0) < 1


def test_verification_cost_is_measured_during_the_run(target):
    drafter = SuffixDrafter(corpus=SuffixCorpus())
    generate(target, drafter, PROMPTS[0], Decoding(gamma=4, max_new_tokens=24))
    assert len(drafter.costs.forward) >= 2 and drafter.costs.step() > 0  # timed forwards of two sizes or more
    given = SuffixDrafter(corpus=SuffixCorpus(), verify_cost=lambda n: 1.0 + n)
    generate(target, given, PROMPTS[0], Decoding(gamma=4, max_new_tokens=24))
    assert not given.costs.forward and given.v(2) == 3.0  # a given v(n) is used as it is


def test_chat_template_markers_are_never_drafted(target):
    """A chat prompt repeats its role markers; what followed a marker there is never the answer's next token."""
    import torch

    from specviz.drafters.suffix import template_tokens

    marker = 9
    drafter = SuffixDrafter(corpus=SuffixCorpus(), never=frozenset({marker}))
    context = torch.tensor([[marker, 20, 21, 30, 31, 32, marker, 20, 21]])  # "<start> user ... <start> user": a match
    drafter.start(context[:, :1], Decoding(gamma=4))
    drafted = drafter.propose(context, 4, Decoding().sampling, None).ids.tolist()
    assert drafted == [30, 31, 32], "stops before the marker"
    unaware = SuffixDrafter(corpus=SuffixCorpus())
    unaware.start(context[:, :1], Decoding(gamma=4))
    assert unaware.propose(context, 4, Decoding().sampling, None).ids.tolist() == [30, 31, 32, marker]
    markers = template_tokens(target.tokenizer)
    assert target.tokenizer.eos_token_id not in markers  # the end of an answer can still be drafted
    assert set(markers) <= set(target.tokenizer.all_special_ids)


@pytest.mark.parametrize("tree", [TreeShape(), TreeShape(budget=6, branching=2)])
@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_greedy_output_is_the_targets_own(target, baseline, tree, gamma):
    corpus = SuffixCorpus()
    for prompt in PROMPTS * 2:  # the second time round the corpus holds the first runs' answers
        alone = baseline(prompt, 24)
        drafter = SuffixDrafter(corpus=corpus)
        run = generate(target, drafter, prompt, Decoding(gamma=gamma, max_new_tokens=24, tree=tree))
        assert run.output_ids == alone.output_ids


def test_finished_runs_teach_later_prompts_but_never_their_own_prompt(target, baseline):
    corpus = SuffixCorpus()
    first = generate(target, SuffixDrafter(corpus=corpus), PROMPTS[0], Decoding(gamma=4, max_new_tokens=24))
    assert corpus.documents and corpus.documents[-1][1] == first.output_ids
    again = generate(target, SuffixDrafter(corpus=corpus), PROMPTS[0], Decoding(gamma=4, max_new_tokens=24))
    assert again.output_ids == first.output_ids
    assert len(corpus.documents) == 1  # one document per prompt
    head = list(first.output_ids[:12])
    own = corpus.longest_match(head)
    assert own is not None and own.depth == 12  # it is there ...
    drafter = SuffixDrafter(corpus=corpus)
    drafter.start(torch_ids(target, PROMPTS[0]), Decoding())
    assert corpus.longest_match(head, exclude=drafter.key) is None  # ... but not for its own prompt


def torch_ids(target, prompt):
    import torch

    from specviz.decode import encode_prompt

    return torch.tensor([encode_prompt(target, prompt, Decoding())])


def test_the_process_keeps_one_corpus_per_tokenizer(target):
    assert corpus_for(target.tokenizer) is corpus_for(target.tokenizer)


def test_drafting_costs_well_under_a_millisecond_per_round():
    rng = random.Random(1)
    corpus = SuffixCorpus([[rng.randrange(3000) for _ in range(250)] for _ in range(400)])  # 100k tokens
    corpus.refresh()
    import torch

    drafter = SuffixDrafter(corpus=corpus)
    context = torch.tensor([[rng.randrange(3000) for _ in range(2000)]])
    drafter.start(context[:, :1], Decoding(gamma=4))
    drafter.propose(context, 4, Decoding().sampling, None)  # indexes the context once
    start = time.perf_counter()
    for _ in range(50):
        drafter.propose(context, 4, Decoding().sampling, None)
    per_round = (time.perf_counter() - start) / 50
    assert per_round < 0.005, f"{per_round * 1e3:.2f} ms per round"  # about 0.1 ms here; a margin for a busy machine


def test_a_corpus_file_round_trips_and_a_damaged_one_reads_as_empty(tmp_path):
    from specviz.drafters.suffix import read_corpus, save_corpus

    documents = [[5, 6, 7], [8], [9, 10]]
    save_corpus(tmp_path / "c.safetensors", documents, {"tokenizer": "abc", "tokens": 6})
    assert read_corpus(tmp_path / "c.safetensors") == ({"tokenizer": "abc", "tokens": 6}, documents)
    (tmp_path / "bad.safetensors").write_bytes(b"not a corpus")
    assert read_corpus(tmp_path / "bad.safetensors") == ({}, [])
    assert read_corpus(tmp_path / "missing.safetensors") == ({}, [])


def test_the_shipped_corpus_reads_for_the_tokenizer_it_was_made_with():
    from specviz.drafters.suffix import SHIPPED_CORPUS, read_corpus

    header, documents = read_corpus(SHIPPED_CORPUS)
    assert header["tokenizer"] and header["prompts"] and len(documents) == header["answers"]
    assert sum(map(len, documents)) == header["tokens"]


def test_the_rounds_timeline_says_why_the_suffix_drafter_drafted_what_it_did(target):
    from specviz.app.views.tokens import timeline_html

    corpus = SuffixCorpus()
    generate(target, SuffixDrafter(corpus=corpus), PROMPTS[1], Decoding(gamma=4, max_new_tokens=24))
    run = generate(target, SuffixDrafter(corpus=corpus), PROMPTS[2], Decoding(gamma=4, max_new_tokens=24))
    assert all(r.why for r in run.rounds)
    drafted = [r for r in run.rounds if r.drafted]
    assert drafted and all("expected kept" in r.why for r in drafted)
    assert drafted[0].why.split(";")[0] in timeline_html(run)
