"""Token trees: one target forward over a tree, a kept branch, lossless outputs and compacted caches.

p = the target's distribution, q = the draft's; a tree's nodes follow their parents (-1 = the root).
"""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from specviz.comparison import dumps, loads
from specviz.config import Decoding, Sampling, TreeShape, Verification
from specviz.decode import generate, target_forward
from specviz.errors import ConfigError
from specviz.records import ACCEPTED, DRAFTED, REJECTED, Run
from specviz.trees import ancestors, grow, keep_branch, target_attention, trie, verify_tree
from specviz.verify import LazyLogits

from tiny import goodness_of_fit

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPTS = [("w1 w2 w3 w4 w5", 17), ("w40 w41 w7 w40 w41 w7 w40 w41", 15), ("w90", 9)]
SHAPES = [TreeShape(budget=4, branching=2), TreeShape(budget=10, branching=3),
          TreeShape(budget=8, branching=2, mode="static")]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.mode}-{s.budget}x{s.branching}")
@pytest.mark.parametrize("spec", ["ngram", "tiny-draft", "tiny-padded", "layerskip:2", "target", "tiny-head",
                                  "ngram+tiny-head"])
def test_greedy_tree_output_is_the_targets_own(target, make_drafter, spec, shape):
    for prompt, max_new in PROMPTS:
        alone = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        run = generate(target, make_drafter(spec), prompt, Decoding(gamma=4, max_new_tokens=max_new, tree=shape))
        assert run.output_ids == alone.output_ids, f"{spec} {shape}: {prompt!r} differs from the target alone"


def test_trees_branch_and_keep_a_branch_off_the_first_child(target, make_drafter):
    """Guards the test above: real trees are drafted, and some rounds keep a node that is not a first child."""
    shape = TreeShape(budget=10, branching=3)
    sizes, off_first = [], 0
    for spec in ("tiny-padded", "tiny-head"):
        for prompt, max_new in PROMPTS:
            run = generate(target, make_drafter(spec), prompt, Decoding(gamma=4, max_new_tokens=max_new, tree=shape))
            for r in (r for r in run.rounds if r.tree):
                sizes.append(r.tree.size)
                kept = [i for i, s in enumerate(r.tree.status) if s == ACCEPTED]
                off_first += any(r.tree.parents.index(r.tree.parents[i]) != i for i in kept)
    assert max(sizes) == 10 and off_first > 0


def test_a_tree_gains_tokens_per_round_over_its_chain_at_the_same_verified_count(target, make_drafter):
    chain = tree = 0.0
    for prompt, max_new in PROMPTS:
        chain += generate(
            target, make_drafter("tiny-padded"), prompt, Decoding(gamma=8, max_new_tokens=max_new)
        ).mean_accepted_tokens
        tree += generate(
            target,
            make_drafter("tiny-padded"),
            prompt,
            Decoding(gamma=4, max_new_tokens=max_new, tree=TreeShape(budget=8, branching=2)),
        ).mean_accepted_tokens
    assert tree > chain


def test_eos_inside_a_tree_round_stops_the_run(eos_case):
    run = generate(
        eos_case.target,
        eos_case.drafter("tiny-draft-eos"),
        eos_case.prompt,
        Decoding(gamma=4, max_new_tokens=30, tree=TreeShape(budget=8)),
    )
    assert run.output_ids[-1] == eos_case.eos_id and len(run.output_ids) == eos_case.eos_index + 1


# --- the tree forward and the caches ----------------------------------------------------------
def _chain_logits(model, ids: list[int]) -> torch.Tensor:
    return model(torch.tensor([ids])).logits[0]


def test_tree_forward_gives_every_node_the_p_of_its_own_chain(target):
    """Each node attends to its ancestors only: its logits equal those of a plain forward along its path."""
    model = target.model
    context = [5, 9, 14, 3]
    tokens, parents = [7, 8, 20, 21, 22, 30], [-1, -1, 0, 0, 2, 1]
    cache = DynamicCache(config=model.config)
    hidden, logits = target_forward(target, torch.tensor([context[:-1]]), cache)
    tree = target_attention(parents, len(context) - 1, target.dtype, target.device)
    _, logits = target_forward(target, torch.tensor([[context[-1]] + tokens]), cache, tree=tree)
    rows = logits.upto(len(tokens) + 1)
    torch.testing.assert_close(rows[0], _chain_logits(model, context)[-1], atol=1e-4, rtol=1e-4)
    for node in range(len(tokens)):
        path = [tokens[a] for a in ancestors(parents, node)]
        torch.testing.assert_close(rows[node + 1], _chain_logits(model, context + path)[-1], atol=1e-4, rtol=1e-4)


def test_compacted_cache_equals_the_cache_of_the_kept_branch_read_afresh(target):
    model = target.model
    context = [5, 9, 14, 3]
    tokens, parents = [7, 8, 20, 21, 22, 30], [-1, -1, 0, 0, 2, 1]
    kept = [0, 3]  # root -> node 0 -> node 3: scattered among siblings in the cache
    cache = DynamicCache(config=model.config)
    target_forward(target, torch.tensor([context[:-1]]), cache)
    tree = target_attention(parents, len(context) - 1, target.dtype, target.device)
    target_forward(target, torch.tensor([[context[-1]] + tokens]), cache, tree=tree)
    keep_branch(cache, len(context), len(tokens), kept)

    fresh = DynamicCache(config=model.config)
    model(torch.tensor([context + [tokens[i] for i in kept]]), past_key_values=fresh, use_cache=True)
    assert cache.get_seq_length() == fresh.get_seq_length() == len(context) + len(kept)
    for mine, theirs in zip(cache.layers, fresh.layers):
        torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(mine.values, theirs.values, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("spec", ["tiny-padded", "layerskip:2"])
def test_model_draft_cache_after_tree_rounds_equals_the_committed_text_read_afresh(target, make_drafter, spec):
    drafter = make_drafter(spec)
    run = generate(target, drafter, "w1 w2 w3 w4 w5", Decoding(gamma=4, max_new_tokens=16, tree=TreeShape(budget=8)))
    committed = run.prompt_ids + run.output_ids
    held = drafter.seen
    assert held == drafter.cache.get_seq_length() and held <= len(committed)
    fresh = DynamicCache(config=drafter.model.config)
    drafter.model(torch.tensor([committed[:held]]), past_key_values=fresh, use_cache=True)
    for mine, theirs in zip(drafter.cache.layers, fresh.layers):
        torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-4, rtol=1e-4)


# --- growing trees ------------------------------------------------------------------------------
def _expander(vocab: int, seed: int):
    """A fake drafter: a fixed random q at every node (what `grow` asks for, with no model)."""
    generator = torch.Generator().manual_seed(seed)

    def expand(nodes, tokens, parents):
        return torch.softmax(3 * torch.randn(len(nodes), vocab, generator=generator), -1)

    return expand


@pytest.mark.parametrize("shape", [TreeShape(budget=7, branching=2), TreeShape(budget=12, branching=3, mode="static")])
def test_grown_trees_keep_the_budget_and_list_parents_first(shape):
    root = torch.softmax(torch.randn(50, generator=torch.Generator().manual_seed(1)), -1)
    grown = grow(root, _expander(50, 2), shape, 5, Sampling(), None)
    assert len(grown.tokens) == shape.budget
    assert all(-1 <= parent < i for i, parent in enumerate(grown.parents))
    for i, parent in enumerate(grown.parents):  # siblings are distinct tokens
        assert grown.tokens[i] not in [grown.tokens[j] for j in range(i) if grown.parents[j] == parent]


def test_dynamic_tree_keeps_the_nodes_of_highest_cumulative_q():
    root = torch.tensor([0.5, 0.3, 0.2, 0.0])
    q_after = {0: torch.tensor([0.0, 0.9, 0.1, 0.0]), 1: torch.tensor([0.0, 0.0, 0.6, 0.4])}

    def expand(nodes, tokens, parents):
        return torch.stack([q_after[tokens[n]] for n in nodes])

    grown = grow(root, expand, TreeShape(budget=3, branching=2), 2, Sampling(), None)
    # candidates: 0 (0.5), 1 (0.3), 0->1 (0.45), 0->2 (0.05), 1->2 (0.18), 1->3 (0.12): the best three
    paths = sorted(tuple(grown.tokens[a] for a in ancestors(grown.parents, i)) for i in range(3))
    assert paths == [(0,), (0, 1), (1,)]


def test_static_tree_has_the_same_shape_whatever_q_says():
    shapes = set()
    for seed in range(4):
        root = torch.softmax(4 * torch.randn(30, generator=torch.Generator().manual_seed(seed)), -1)
        grown = grow(root, _expander(30, seed), TreeShape(budget=9, branching=3, mode="static"), 4, Sampling(), None)
        shapes.add(tuple(grown.parents))
    assert len(shapes) == 1


def test_ngram_tree_holds_several_earlier_matches(target, make_drafter):
    drafter = make_drafter("ngram")
    drafter.start(torch.tensor([[1]]), Decoding(gamma=3, tree=TreeShape(budget=8)))
    context = torch.tensor([[10, 11, 12, 13, 5, 10, 11, 20, 21, 6, 10, 11]])
    proposal = drafter.propose(context, 3, Sampling(), None)
    # "10 11" was followed by "12 13 5" and by "20 21 6"; the latest match comes first
    branches = {
        tuple(proposal.ids[a].item() for a in ancestors(proposal.parents, i))
        for i in range(len(proposal.parents))
        if i not in proposal.parents
    }
    assert branches == {(20, 21), (12, 13)}  # a 2-token match drafts at most 2 tokens


def test_trie_merges_shared_prefixes_and_stops_at_the_budget():
    tokens, parents = trie([[1, 2, 3], [1, 2, 4], [5, 6]], budget=5)
    assert tokens == [1, 2, 3, 4, 5] and parents == [-1, 0, 1, 1, -1]


# --- verification ---------------------------------------------------------------------------------
def _logits(rows: list[list[float]]) -> LazyLogits:
    return LazyLogits.ready(torch.tensor(rows).log())


def test_greedy_walk_keeps_the_branch_that_matches_the_targets_choices():
    tokens = torch.tensor([1, 2, 3, 0])
    parents = [-1, -1, 1, 2]  # root -> {1, 2}; 2 -> 3 -> 0
    p = [[0.1, 0.2, 0.6, 0.1], [1, 1, 1, 1], [0.1, 0.1, 0.1, 0.7], [0.5, 0.2, 0.2, 0.1], [0.1, 0.1, 0.7, 0.1]]
    verdict = verify_tree(_logits(p), tokens, parents, None, Sampling(), Verification())
    assert verdict.path == [1, 2, 3] and verdict.next_token == 2 and not verdict.resampled
    assert verdict.checked == [0]


def test_greedy_walk_stops_where_no_child_matches():
    tokens = torch.tensor([1, 0])
    parents = [-1, -1]
    p = [[0.1, 0.2, 0.6, 0.1], [1, 1, 1, 1], [1, 1, 1, 1]]
    verdict = verify_tree(_logits(p), tokens, parents, None, Sampling(), Verification())
    assert verdict.path == [] and verdict.next_token == 2 and verdict.resampled and sorted(verdict.checked) == [0, 1]


P = torch.tensor([0.35, 0.25, 0.2, 0.12, 0.08])
Q = torch.tensor([0.1, 0.2, 0.3, 0.0, 0.4])


@pytest.mark.parametrize("children", [1, 2, 3])
@pytest.mark.parametrize("certain", [False, True], ids=["drawn-from-q", "one-hot"])
def test_multi_candidate_sampling_reproduces_p(children, certain):
    """Recursive rejection sampling over k children gives a first token distributed as p, whatever q."""
    sampling = Sampling(temperature=1.0)
    generator = torch.Generator().manual_seed(7)
    logits = LazyLogits.ready(torch.cat([P.log().view(1, -1), torch.zeros(children, 5)]))
    counts = [0] * 5
    trials = 6000
    for _ in range(trials):
        if certain:  # an n-gram drafter's fixed candidates
            drawn = torch.tensor([4, 2, 1][:children])
        else:
            drawn = torch.multinomial(Q, children, replacement=False, generator=generator)
        rows = None if certain else Q.expand(children, 5)
        verdict = verify_tree(logits, drawn, [-1] * children, rows, sampling, Verification(), generator)
        first = int(drawn[verdict.path[0]]) if verdict.path else verdict.next_token
        counts[first] += 1
    fit = goodness_of_fit([(counts, P.tolist())])
    assert fit.p_value > 1e-3, f"counts {counts} against p {P.tolist()}: chi2 {fit.statistic:.1f}"


def test_sampling_accepts_more_with_more_children():
    sampling = Sampling(temperature=1.0)
    generator = torch.Generator().manual_seed(3)
    logits = LazyLogits.ready(torch.cat([P.log().view(1, -1), torch.zeros(3, 5)]))
    accepted = {1: 0, 3: 0}
    for k in accepted:
        for _ in range(2000):
            drawn = torch.multinomial(Q, k, replacement=False, generator=generator)
            accepted[k] += bool(
                verify_tree(logits, drawn, [-1] * k, Q.expand(k, 5), sampling, Verification(), generator).path
            )
    assert accepted[3] > accepted[1] * 1.2


# --- records and settings -----------------------------------------------------------------------
def test_a_tree_round_is_recorded_whole_and_survives_export(target, make_drafter):
    run = generate(
        target,
        make_drafter("tiny-padded"),
        "w1 w2 w3 w4 w5",
        Decoding(gamma=4, max_new_tokens=12, tree=TreeShape(budget=8)),
    )
    again = loads(dumps(run))
    assert isinstance(again, Run) and again.rounds[0].tree == run.rounds[0].tree
    assert all(r.tree for r in run.rounds[:-1])
    for r in (r for r in run.rounds if r.tree):
        t = r.tree
        kept = [t.tokens[i] for i, s in enumerate(t.status) if s == ACCEPTED]
        assert kept == r.drafted[: r.n_accepted] and len(kept) == r.n_accepted
        assert all(s in (ACCEPTED, REJECTED, DRAFTED) for s in t.status)
        assert all((p is None) == (s == DRAFTED) for p, s in zip(t.p, t.status))
        assert len(t.text) == t.size and r.verified == t.size


def test_tree_settings_are_checked():
    with pytest.raises(ConfigError, match="tree budget"):
        TreeShape(budget=999)
    with pytest.raises(ConfigError, match="branching"):
        TreeShape(budget=4, branching=0)
    with pytest.raises(ConfigError, match="exactly"):
        Decoding(
            tree=TreeShape(budget=4),
            sampling=Sampling(temperature=1.0),
            verification=Verification(mode="relaxed", lenience=0.5),
        )
    assert Decoding.from_dict(Decoding(tree=TreeShape(budget=6)).to_dict()).tree.budget == 6


# --- the theory of trees --------------------------------------------------------------------------
def test_a_chain_is_the_tree_with_rank_zero_only():
    from specviz import theory

    for alpha, gamma in ((0.3, 2), (0.7, 5), (0.9, 8)):
        chain = list(range(-1, gamma - 1))
        assert theory.tree_expected_tokens(chain, [alpha]) == pytest.approx(theory.expected_tokens(alpha, gamma))


def test_the_best_tree_beats_the_chain_of_as_many_nodes_and_keeps_the_budget():
    from specviz import theory

    a = [0.3, 0.12, 0.06]
    for n in range(1, 9):
        parents = theory.best_tree(a, n, max_depth=n)
        assert len(parents) == n and all(-1 <= p < i for i, p in enumerate(parents))
        assert theory.tree_expected_tokens(parents, a) >= theory.expected_tokens(a[0], n) - 1e-12
    assert theory.best_tree(a, 3, max_depth=8) == [-1, -1, 0]  # second guess at the root beats a third level


def test_tree_theory_from_a_runs_own_rank_acceptance_matches_its_tokens_per_round(target, make_drafter):
    run = generate(
        target,
        make_drafter("tiny-padded"),
        "w1 w2 w3 w4 w5",
        Decoding(gamma=4, max_new_tokens=60, tree=TreeShape(budget=6, branching=2)),
    )
    assert run.is_tree and run.accept_by_rank()[0] > 0
    assert run.tree_expected_tokens() == pytest.approx(run.mean_accepted_tokens, rel=0.25)


# --- the lab pages compare a chain with a tree at the same tokens verified ------------------------
def test_compare_drafts_with_a_tree_runs_each_draft_as_tree_and_as_chain_of_as_many_tokens(target, load):
    from specviz.lab import sweeps

    from tiny import PROMPTS as TINY_PROMPTS

    settings = Decoding(gamma=3, max_new_tokens=10, tree=TreeShape(budget=5))
    points = sweeps.compare_drafts(target, ["tiny-padded", "ngram"], list(TINY_PROMPTS[:2]), settings, load=load)
    table = sweeps.draft_table(points)
    assert table["draft"].tolist() == [
        "tiny-padded · tree 5",
        "tiny-padded · chain γ=5",
        "ngram · tree 5",
        "ngram · chain γ=5",
    ]
    for p in points:
        run = p.comparison.spec
        assert p.comparison.identical
        assert run.settings["gamma"] == (5 if "chain" in p.draft else 3)
        assert run.settings["tree"]["budget"] == (0 if "chain" in p.draft else 5)


def test_draft_length_sweep_with_trees_measures_a_tree_at_each_gamma(target, load):
    from specviz.lab import sweeps

    from tiny import PROMPTS as TINY_PROMPTS

    points = sweeps.gamma_sweep(
        target, "tiny-padded", [TINY_PROMPTS[0]], [2, 4], Decoding(max_new_tokens=12), load=load, tree_depth=3
    )
    trees = [p for p in points if p.draft == sweeps.tree_label("tiny-padded")]
    assert [p.gamma for p in trees] == [2, 4]
    for p in trees:
        assert p.comparison.spec.is_tree and p.comparison.identical
        assert max(r.tree.size for r in p.comparison.spec.rounds if r.tree) <= p.gamma


def test_hybrid_tree_puts_the_heads_guesses_beside_the_copied_text(target, make_drafter):
    drafter = make_drafter("ngram+tiny-head")
    copied = []  # per round: nodes the n-gram lookup proposed, and whether the head drafted beside them
    ngram_propose, head_guesses = drafter.ngram.propose, drafter.head.guesses

    def spy_ngram(*args):
        proposal = ngram_propose(*args)
        copied.append([proposal.ids.shape[0], False])
        return proposal

    def spy_head(*args, **kwargs):
        copied[-1][1] = copied[-1][0] > 0
        return head_guesses(*args, **kwargs)

    drafter.ngram.propose, drafter.head.guesses = spy_ngram, spy_head
    prompt = "w40 w41 w7 w40 w41 w7 w40 w41"
    run = generate(target, drafter, prompt, Decoding(gamma=4, max_new_tokens=15, tree=TreeShape(budget=8)))
    assert run.output_ids == generate(target, None, prompt, Decoding(max_new_tokens=15)).output_ids
    merged = [(n, r.tree) for (n, both), r in zip(copied, run.rounds) if both]
    assert merged and all(t.size > n for n, t in merged)  # the head's guesses sit beside the copied branch
    assert all(q == 1.0 for _, t in merged for q in t.q)  # fixed candidates: one-hot q, so sampling stays exact
