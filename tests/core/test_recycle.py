"""Token Recycling and the blended tree: the table's update, its warm start, a damaged table file, the budget
chosen under v(N), each source's chances calibrated against what was kept, each node's source on the record,
lossless output and the sampling distribution, and the model-free replay against a live run."""

from __future__ import annotations

import heapq
import json
import logging

import numpy as np
import pytest
import torch

from specviz.comparison import dumps, loads
from specviz.config import Decoding, Sampling, TreeShape
from specviz.decode import encode_prompt, generate
from specviz.drafters.base import Verified
from specviz.drafters.blend import BlendDrafter
from specviz.drafters.recycle import RECYCLED, RecycleDrafter, learn_from
from specviz.drafters.recycle_table import (
    RecycleStore,
    RecycleTable,
    TableError,
    read_table,
    save_table,
    store_from,
    warm_rows,
)
from specviz.drafters.scored import Calibration, Offer, ScoredTree, best_size, grow
from specviz.drafters.suffix import CORPUS, SuffixDrafter, tokenizer_fingerprint
from specviz.drafters.suffix_index import SuffixCorpus
from specviz.lab.replay import replay
from specviz.records import ACCEPTED
from specviz.verify import LazyLogits

from tiny import PROMPTS, VOCAB, first_two_tokens, pooled_fit

pytestmark = pytest.mark.usefixtures("one_thread")
GREEDY = Sampling()


@pytest.fixture(scope="module")
def baseline(target):
    """The target alone, greedy (computed once per prompt and length)."""
    runs = {}

    def get(prompt: str, max_new: int):
        if (prompt, max_new) not in runs:
            runs[prompt, max_new] = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        return runs[prompt, max_new]

    return get


def ids_of(target, prompt: str) -> torch.Tensor:
    return torch.tensor([encode_prompt(target, prompt, Decoding())])


@torch.no_grad()
def top_after(target, tokens: list[int], k: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """The tiny target's own top-k after a token sequence (a plain forward, no cache)."""
    logits = target.model(torch.tensor([tokens])).logits[0, -1, :VOCAB].float()
    values, ids = logits.topk(k)
    return ids, (values - logits.logsumexp(-1)).exp()


# --- the table --------------------------------------------------------------------------------------------
def test_a_row_is_overwritten_by_what_the_target_expected_last():
    table = RecycleTable(10, k=3)
    assert table.row(4) == ([], [])
    table.learn([4, 5], torch.tensor([[1, 2, 3], [6, 7, 8]]), torch.tensor([[0.5, 0.2, 0.1], [0.9, 0.05, 0.01]]))
    assert table.row(4)[0] == [1, 2, 3]  # a row read (and kept as lists) is read again after it is learned anew
    table.learn([4, 4], torch.tensor([[9, 0, 1], [2, 3, -1]]), torch.tensor([[0.3, 0.3, 0.3], [0.7, 0.2, 0.0]]))
    assert table.row(4) == ([2, 3], pytest.approx([0.7, 0.2]))  # the later of two rows for one token wins
    assert table.row(5)[0] == [6, 7, 8] and table.changed == {4, 5}
    assert table.row(99) == ([], [])  # outside the vocabulary


def test_every_verified_row_is_learned_and_the_kept_branch_wins():
    """A round's forward read [root 3, node 0: 5, node 1: 4, node 2: 5] (a tree: nodes 0 and 1 follow the root,
    node 2 follows node 1); the branch kept is node 1 then node 2. Token 5 is read twice: the kept node's row wins."""
    logits = torch.full((4, 10), -10.0)
    for row, best in enumerate([4, 8, 5, 6]):
        logits[row, best] = 5.0
    verified = Verified(torch.tensor([3, 5, 4, 5]), [-1, -1, 1], LazyLogits.ready(logits))
    table = RecycleTable(10, k=2)
    learn_from(table, verified, kept=[1, 2], k=2)
    assert table.row(3)[0][0] == 4 and table.row(4)[0][0] == 5 and table.row(5)[0][0] == 6
    assert sum(table.row(5)[1]) == pytest.approx(1.0, abs=1e-3)
    assert verified.previous(3) == 4 and verified.previous(2) == 3 and verified.previous(0, before_root=7) == 7


def test_only_rows_the_head_computed_are_read():
    """A forward too large to run the head over every row at once computes the rows verification asked for only:
    the drafter learns from those and never makes the head run over another."""
    asked = []
    full = torch.randn(40, 12)

    def rows(a, b):
        asked.append((a, b))
        return full[a:b]

    logits = LazyLogits(40, rows)
    logits.rows([0, 7])
    verified = Verified(torch.arange(40) % 12, None, logits)
    rows_read, ids, _ = verified.top(3)
    assert rows_read == [0, 7] and asked == [(0, 1), (7, 8)]
    assert ids[1].tolist() == full[7].topk(3).indices.tolist()


def test_the_drafter_learns_the_targets_top_k_every_round(target):
    """After a run, the table's row for each committed token holds the target's top-k after it, as a plain forward
    over the text computes it."""
    drafter = RecycleDrafter(store=RecycleStore(VOCAB))
    run = generate(target, drafter, PROMPTS[0], Decoding(gamma=3, max_new_tokens=20))
    text = run.prompt_ids + run.output_ids
    last = {}
    for i in range(len(run.prompt_ids) - 1, len(text) - 1):
        last[text[i]] = i  # the latest time the run read each token as a root or a kept draft
    checked = 0
    for token, i in last.items():
        ids, probs = drafter.table.row(token)
        want_ids, want_probs = top_after(target, text[: i + 1])
        if ids == want_ids.tolist():  # a refused node read later may hold the row instead: compare the rest
            assert probs == pytest.approx(want_probs.tolist(), abs=1e-4)
            checked += 1
    assert checked >= len(last) // 2


# --- the warm start and a damaged file -------------------------------------------------------------------------
def test_warm_rows_average_the_targets_expectations_over_every_occurrence():
    documents = [[1, 2, 1], [2, 1]]
    ids = [np.array([[5, 6], [7, 5], [6, 9]]), np.array([[5, 7], [6, 5]])]
    probs = [np.array([[0.5, 0.3], [0.6, 0.2], [0.9, 0.1]]), np.array([[0.4, 0.4], [0.8, 0.1]])]
    tokens, rows, p = warm_rows(documents, ids, probs, k=3)
    assert tokens.tolist() == [1, 2]
    assert rows.tolist() == [[6, 5, 9], [7, 5, -1]]  # token 1: 6 after it 2.0 / 3 times on average, 5 0.6 / 3, ...
    assert p.reshape(-1).tolist() == pytest.approx([2.0 / 3, 0.2, 0.1 / 3, 0.5, 0.3, 0.0])


def warm_file(tmp_path, target, rows: dict[int, list[int]]):
    tokens = np.array(list(rows))
    ids = np.array([r + [-1] * (4 - len(r)) for r in rows.values()])
    probs = np.where(ids >= 0, 0.6, 0.0)
    path = tmp_path / "recycle.safetensors"
    save_table(path, tokens, ids, probs, {"tokenizer": tokenizer_fingerprint(target.tokenizer), "k": 4})
    return path


def test_a_warm_started_drafter_drafts_the_shipped_rows_from_its_first_round(target, tmp_path):
    last = ids_of(target, PROMPTS[1])[0, -1].item()
    path = warm_file(tmp_path, target, {last: [30, 31], 30: [32]})
    header, tokens, ids, probs = read_table(path)
    assert header["k"] == 4 and tokens.tolist() == [last, 30] and ids[1].tolist() == [32, -1, -1, -1]
    assert probs.dtype == np.float32 and probs[0, 0] == pytest.approx(0.6, abs=1e-3)
    store = store_from(path, VOCAB, tokenizer_fingerprint(target.tokenizer))
    assert store.warm == 2 and not store.problem
    drafter = RecycleDrafter(store=store, verify_cost=lambda n: 1.0 + 0.01 * n)
    drafter.start(ids_of(target, PROMPTS[1]), Decoding(gamma=3))
    proposal = drafter.propose(ids_of(target, PROMPTS[1]), 3, GREEDY, None)
    assert proposal.ids.tolist() == [30, 32] and proposal.sources == [RECYCLED, RECYCLED]
    assert "2 drafted (2 recycled)" in proposal.reason.text()
    assert store_from(path, VOCAB, "another tokenizer").warm == 0  # rows of another vocabulary are never read


def test_a_damaged_table_file_says_so_and_the_drafter_works_without_it(target, tmp_path, baseline, caplog):
    bad = tmp_path / "recycle.safetensors"
    bad.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not json")
    with pytest.raises(TableError, match="cannot be read.*make_recycle_table.py"):
        read_table(bad)
    with caplog.at_level(logging.WARNING, logger="specviz"):
        store = store_from(bad, VOCAB, tokenizer_fingerprint(target.tokenizer))
    assert store.warm == 0 and "cannot be read" in store.problem
    assert "starts with an empty table" in caplog.text
    run = generate(target, RecycleDrafter(store=store), PROMPTS[0], Decoding(gamma=3, max_new_tokens=20))
    assert run.output_ids == baseline(PROMPTS[0], 20).output_ids

    save_table(bad, np.array([1, 2]), np.array([[3, 4]]), np.array([[0.5, 0.5]]), {})  # rows and ids disagree
    with pytest.raises(TableError, match="damaged"):
        read_table(bad)


def test_the_shipped_table_is_small_and_made_for_the_shipped_corpus():
    from specviz.drafters.recycle_table import SHIPPED_TABLE
    from specviz.drafters.suffix import SHIPPED_CORPUS, read_corpus

    header, tokens, ids, probs = read_table(SHIPPED_TABLE)
    assert SHIPPED_TABLE.stat().st_size < 4 * 2**20
    assert header["tokenizer"] == read_corpus(SHIPPED_CORPUS)[0]["tokenizer"] and header["rows"] == len(tokens)
    assert ids.shape == probs.shape == (len(tokens), header["k"]) and (probs <= 1.0001).all()


# --- what runs teach later runs ----------------------------------------------------------------------------------
def test_finished_runs_teach_later_prompts_but_never_their_own(target):
    store = RecycleStore(VOCAB)
    first = RecycleDrafter(store=store)
    generate(target, first, PROMPTS[0], Decoding(gamma=3, max_new_tokens=16))
    changed = sorted(first.table.changed)
    assert changed and (store.keys[0, changed] == first.key).all()
    other = store.table_for(key=12345)
    assert all(other.row(t) == first.table.row(t) for t in changed)  # another prompt starts from what it learned
    again = store.table_for(key=first.key)
    assert all(again.row(t) == ([], []) for t in changed)  # the same prompt does not: its rows were empty before
    second = RecycleDrafter(store=store)
    generate(target, second, PROMPTS[1], Decoding(gamma=3, max_new_tokens=16))
    shared = [t for t in changed if t in second.table.changed]
    assert all(store.table_for(key=first.key).row(t) == second.table.row(t) for t in shared)


# --- the budget under v(N) ------------------------------------------------------------------------------------
def test_the_budget_maximises_expected_tokens_per_target_step():
    scores = [0.9, 0.8, 0.3, 0.1, 0.05]
    assert best_size(scores, lambda n: 1.0) == 5  # free verification: draft everything that might be kept
    assert best_size(scores, lambda n: 1.0 + 0.1 * n) == 3  # (1 + 2.0) / 1.3 beats (1 + 1.7) / 1.2 and 3.1 / 1.4
    assert best_size(scores, lambda n: 1.0 + 0.5 * n) == 2
    assert best_size(scores, lambda n: 1.0 + 2.0 * n) == 0  # dearer than anything it could gain
    assert best_size([], lambda n: 1.0) == 0


def test_a_dearer_verification_drafts_a_smaller_tree(target):
    store = RecycleStore(VOCAB)
    prompt = ids_of(target, PROMPTS[0])
    rows = {int(prompt[0, -1]): [10, 11, 12], 10: [13, 14], 11: [15], 13: [16]}
    for token, nexts in rows.items():
        store.ids[0, token, : len(nexts)] = nexts
        store.probs[0, token, : len(nexts)] = [0.7, 0.2, 0.1][: len(nexts)]
    sizes = {}
    for slope in (0.0, 0.05, 0.3, 3.0):
        drafter = RecycleDrafter(store=store, verify_cost=lambda n, s=slope: 1.0 + s * n)
        drafter.start(prompt, Decoding(gamma=4, tree=TreeShape(budget=8, branching=3)))
        sizes[slope] = drafter.propose(prompt, 4, GREEDY, None).ids.shape[0]
    assert sizes[0.0] == 7 and sizes[0.0] > sizes[0.05] > sizes[0.3] > sizes[3.0] == 0


# --- each source's chances against what was kept ------------------------------------------------------------------
def test_a_sources_chances_are_scaled_by_what_its_judged_nodes_kept():
    calibration = Calibration()
    offers = [Offer(1, 0.6, RECYCLED), Offer(2, 0.3, CORPUS)]
    assert calibration.chances(offers) == pytest.approx([0.6, 0.3])  # never judged: taken as given
    # root -> node 0 (recycled, 0.6) -> node 2 (recycled, 0.5); root -> node 1 (copied, 0.3) -> node 3 (copied, 0.8)
    drafted = ScoredTree([1, 2, 3, 4], [-1, -1, 0, 1], [0.6, 0.3, 0.3, 0.24], [RECYCLED, CORPUS, RECYCLED, CORPUS],
                         [0.6, 0.3, 0.5, 0.8])
    calibration.judge(drafted, [1, 3])  # the copied branch kept; node 2 was never judged (its parent was refused)
    assert calibration.sums[RECYCLED] == pytest.approx((0.95, 0.95 + 0.6))
    assert calibration.sums[CORPUS] == pytest.approx((0.95 + 2, 0.95 + 1.1))
    assert calibration.factor(RECYCLED) < 1 < calibration.factor(CORPUS)
    assert calibration.chances([Offer(1, 0.6, RECYCLED)]) == pytest.approx([0.6 * 0.95 / 1.55])


def test_offers_after_one_node_never_promise_more_than_certainty():
    calibration = Calibration(sums={CORPUS: (3.0, 1.0)})  # copies were kept three times as often as they promised
    chances = calibration.chances([Offer(1, 0.5, CORPUS), Offer(2, 0.4, RECYCLED)])
    assert sum(chances) == pytest.approx(1.0)  # 0.99 (capped) + 0.4, scaled down: they exclude each other
    assert chances[0] / chances[1] == pytest.approx(0.99 / 0.4)


def test_the_tree_ranks_by_calibrated_chances_and_keeps_what_each_source_promised():
    calibration = Calibration(sums={RECYCLED: (1.0, 4.0)})  # recycled guesses kept a quarter of what they promised
    root = [Offer(1, 0.8, RECYCLED), Offer(2, 0.3, CORPUS)]
    tree = grow(root, lambda offer, score: [], 2, 3, calibration=calibration)
    assert tree.tokens == [2, 1]  # the copy's 0.3 beats the recycled 0.8 x 0.25
    assert tree.scores == pytest.approx([0.3, 0.2]) and tree.promised == pytest.approx([0.3, 0.8])
    assert grow(root, lambda offer, score: [], 2, 3).tokens == [1, 2]  # uncalibrated: as the sources said


def _eager_tree(root, expand, budget, max_depth):
    """What `grow` grew before it expanded lazily: every taken node's offers asked for at once (no calibration)."""
    tree, depth, frontier, serial = ScoredTree(), [], [], 0
    for offer in root:
        frontier.append((-offer.chance, serial, -1, offer))
        serial += 1
    heapq.heapify(frontier)
    while frontier and len(tree.tokens) < budget:
        score, _, parent, offer = heapq.heappop(frontier)
        tree.tokens.append(offer.token)
        tree.parents.append(parent)
        tree.scores.append(-score)
        depth.append(depth[parent] + 1 if parent >= 0 else 1)
        if depth[-1] < max_depth:
            for child in expand(offer, -score):
                heapq.heappush(frontier, (score * child.chance, serial, len(tree.tokens) - 1, child))
                serial += 1
    return tree


@pytest.mark.parametrize("seed", range(20))
def test_the_tree_asks_only_for_offers_that_could_still_fit_and_grows_the_same_tree(seed):
    rng = np.random.default_rng(seed)

    def offers(token):  # three distinct random chances summing below 1, fixed per token
        local = np.random.default_rng(token)
        chances = local.dirichlet(np.ones(4))[:3] * 0.99
        return [Offer(int(t), float(c), RECYCLED) for t, c in zip(local.choice(10_000, 3, replace=False), chances)]

    asked = []

    def expand(offer, score):
        asked.append(offer.token)
        return offers(offer.token)

    budget, depth = int(rng.integers(1, 20)), int(rng.integers(1, 7))
    root = offers(int(rng.integers(10_000)))
    lazy = grow(root, expand, budget, depth)
    eager_asks = []
    eager = _eager_tree(root, lambda offer, score: eager_asks.append(0) or offers(offer.token), budget, depth)
    assert (lazy.tokens, lazy.parents) == (eager.tokens, eager.parents)
    assert lazy.scores == pytest.approx(eager.scores)
    assert len(asked) <= len(eager_asks)  # the eager tree asked at every taken node short of the depth
    taken_with_room = [i for i in range(len(lazy.tokens)) if lazy.parents.count(i) > 0]
    assert len(asked) >= len(taken_with_room)  # every node with a child in the tree was asked


def test_the_last_nodes_taken_are_never_expanded():
    asked = []
    root = [Offer(1, 0.9, RECYCLED), Offer(2, 0.05, RECYCLED)]

    def expand(offer, score):
        asked.append(offer.token)
        return [Offer(offer.token * 10, 0.9, RECYCLED)]

    tree = grow(root, expand, 3, 6)
    assert tree.tokens == [1, 10, 100]  # 0.9, 0.81, 0.73: the chain beats the root's 0.05
    assert asked == [1, 10]  # the third node's children could not fit: not asked for


def test_a_source_that_goes_unjudged_drifts_back_to_its_own_chances():
    calibration = Calibration(sums={RECYCLED: (1.0, 4.0)})  # priced out of the tree: a quarter of its chances
    nothing = ScoredTree([1], [-1], [0.5], [CORPUS], [0.5])
    for _ in range(60):
        calibration.judge(nothing, [0])  # rounds that judge only copies
    assert 0.85 < calibration.factor(RECYCLED) < 1.0  # from 0.25: tried again, near the chance it gives itself


def test_the_drafter_calibrates_every_round_of_a_run(target):
    store = RecycleStore(VOCAB)
    generate(target, RecycleDrafter(store=store), PROMPTS[2], Decoding(gamma=3, max_new_tokens=24))  # teaches it
    drafter = RecycleDrafter(store=store)
    tree = TreeShape(budget=8, branching=3)
    drafter.start(ids_of(target, PROMPTS[0]), Decoding(gamma=4, tree=tree))
    assert drafter.calibration.sums == {}  # a run starts from the sources' own chances
    run = generate(target, drafter, PROMPTS[0], Decoding(gamma=4, max_new_tokens=24, tree=tree))
    assert RECYCLED in drafter.calibration.sums and drafter.calibration.sums[RECYCLED] != (1.0, 1.0)
    assert sum(1 for r in run.rounds if r.drafted) > 0


# --- the blended tree ---------------------------------------------------------------------------------------------
def blend_with(corpus_documents, store=None) -> BlendDrafter:
    corpus = SuffixCorpus(corpus_documents)
    return BlendDrafter(suffix=SuffixDrafter(corpus=corpus), store=store or RecycleStore(VOCAB),
                        verify_cost=lambda n: 1.0 + 0.02 * n)


def test_one_tree_holds_copied_and_recycled_nodes_each_with_its_source(target):
    prompt = ids_of(target, PROMPTS[1])
    last = int(prompt[0, -1])
    store = RecycleStore(VOCAB)
    store.ids[0, last, :2], store.probs[0, last, :2] = [50, 51], [0.6, 0.3]
    drafter = blend_with([[last, 60, 61, 62]] * 3, store)
    drafter.start(prompt, Decoding(gamma=4, tree=TreeShape(budget=8, branching=3)))
    proposal = drafter.propose(prompt, 4, GREEDY, None)
    by_token = dict(zip(proposal.ids.tolist(), proposal.sources))
    assert by_token[60] == CORPUS and by_token[50] == RECYCLED
    assert proposal.parents[proposal.ids.tolist().index(61)] == proposal.ids.tolist().index(60)
    assert "recycled" in proposal.reason.text() and "earlier answers" in proposal.reason.text()


def test_rounds_record_each_nodes_source_and_the_kept_branchs(target, baseline):
    store = RecycleStore(VOCAB)
    generate(target, RecycleDrafter(store=store), PROMPTS[2], Decoding(gamma=3, max_new_tokens=24))  # teaches it
    run = generate(target, blend_with([baseline(PROMPTS[0], 24).output_ids], store), PROMPTS[0],
                   Decoding(gamma=4, max_new_tokens=24, tree=TreeShape(budget=8, branching=3)))
    assert run.output_ids == baseline(PROMPTS[0], 24).output_ids
    trees = [r for r in run.rounds if r.tree and r.tree.size]
    assert trees and all(len(r.tree.source) == r.tree.size for r in trees)
    assert {s for r in trees for s in r.tree.source} <= {RECYCLED, CORPUS, "prompt and answer"}
    for r in trees:
        kept = [r.tree.source[i] for i, s in enumerate(r.tree.status) if s == ACCEPTED]
        assert r.source == " + ".join(dict.fromkeys(kept))
    assert any(r.source for r in trees) and loads(dumps(run)) == run


def test_a_tree_record_made_before_sources_loads_with_none_known(target, make_drafter):
    run = generate(target, make_drafter("ngram"), "w1 w2 w3 w1 w2 w3 w1 w2", Decoding(
        gamma=3, max_new_tokens=12, tree=TreeShape(budget=4, branching=2)))
    data = json.loads(dumps(run))
    for r in data["rounds"]:
        if r["tree"]:
            del r["tree"]["source"]
    back = loads(json.dumps(data))
    assert all(r.tree.source == [] for r in back.rounds if r.tree) and any(r.tree for r in back.rounds)


def test_the_tree_figure_marks_each_nodes_source_beside_its_status(target, baseline):
    from specviz.app.views.tree_charts import tree_figure

    run = generate(target, blend_with([baseline(PROMPTS[0], 24).output_ids]), PROMPTS[0],
                   Decoding(gamma=4, max_new_tokens=24, tree=TreeShape(budget=8, branching=3)))
    r = next(r for r in run.rounds if r.tree and CORPUS in r.tree.source)
    figure = tree_figure(r)
    marks = [t for t in figure.data if (t.name or "").startswith("source: ")]
    assert {t.name for t in marks} == {f"source: {s}" for s in r.tree.source}
    assert len({t.marker.symbol for t in marks}) == len(marks)  # a shape per source, not a colour only


# --- lossless -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tree", [TreeShape(), TreeShape(budget=8, branching=3)], ids=["chain", "tree"])
@pytest.mark.parametrize("kind", ["recycle", "blend"])
def test_greedy_output_is_the_targets_own_as_the_table_learns(target, baseline, kind, tree):
    store, corpus = RecycleStore(VOCAB), SuffixCorpus()
    for prompt in PROMPTS * 2:  # the second time round the table and the corpus hold the first runs
        drafter = RecycleDrafter(store=store) if kind == "recycle" else BlendDrafter(
            suffix=SuffixDrafter(corpus=corpus), store=store)
        run = generate(target, drafter, prompt, Decoding(gamma=4, max_new_tokens=24, tree=tree))
        assert run.output_ids == baseline(prompt, 24).output_ids


def taught_store(target, prompt: str) -> RecycleStore:
    """A table whose row for the prompt's last token holds the target's own top-3 there, and after each of those
    its top-3 again: drafts the target keeps often, but not always."""
    store = RecycleStore(VOCAB)
    text = ids_of(target, prompt)[0].tolist()
    ids, probs = top_after(target, text, 3)
    store.ids[0, text[-1], :3], store.probs[0, text[-1], :3] = ids.numpy(), probs.numpy()
    for token in ids.tolist():
        more, p = top_after(target, text + [token], 3)
        store.ids[0, token, :3], store.probs[0, token, :3] = more.numpy(), p.numpy()
    return store


def copy_of(store: RecycleStore) -> RecycleStore:
    """A store of its own with the same rows (a run writes back into the store it drafted from)."""
    fresh = RecycleStore(store.vocab, store.k)
    fresh.ids[:], fresh.probs[:], fresh.keys[:] = store.ids, store.probs, store.keys
    return fresh


@pytest.mark.parametrize("tree", [TreeShape(), TreeShape(budget=3, branching=2)], ids=["chain", "tree"])
@pytest.mark.parametrize("kind", ["recycle", "blend"])
def test_sampled_output_follows_the_targets_distribution(target, kind, tree):
    """The first two tokens of sampled runs follow p whatever the table drafts (γ = 1: the first round keeps or
    replaces its draft; a tree offers up to two candidates, tried in turn)."""
    prompt, sampling, trials = "w55 w56 w57", Sampling(temperature=1.0, top_k=3), 300
    cells, expected = first_two_tokens(target, ids_of(target, prompt)[0].tolist(), sampling, VOCAB)
    counts, accepted = dict.fromkeys(cells, 0), 0
    taught = taught_store(target, prompt)
    for seed in range(trials):
        store = copy_of(taught)  # a fresh copy each trial: every trial drafts the same candidates
        drafter = RecycleDrafter(store=store, verify_cost=lambda n: 1.0) if kind == "recycle" else BlendDrafter(
            suffix=SuffixDrafter(corpus=SuffixCorpus()), store=store, verify_cost=lambda n: 1.0)
        run = generate(target, drafter, prompt, Decoding(gamma=1, max_new_tokens=2, seed=seed, sampling=sampling,
                                                         tree=tree))
        assert tuple(run.output_ids) in counts, f"seed {seed}: {run.output_ids} has probability 0 under the target"
        counts[tuple(run.output_ids)] += 1
        accepted += run.rounds[0].n_accepted
    assert 0.2 * trials < accepted < 0.95 * trials, "precondition: the drafts are neither always kept nor never"
    fit, observed, probs = pooled_fit(counts, cells, expected, trials)
    assert fit.p_value > 1e-3, f"first two tokens {observed} vs p {probs}: chi2 {fit.statistic:.1f}, df {fit.df}"


# --- the model-free replay ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tree", [TreeShape(), TreeShape(budget=6, branching=2)], ids=["chain", "tree"])
def test_replay_with_the_targets_guesses_makes_the_rounds_of_a_live_run(target, tree):
    """Given what the target expects after any sequence (here from the tiny target itself), a replay learns the
    table as a live run does and makes the same rounds."""
    v = lambda n: 1.0 + 0.05 * n  # noqa: E731  the same verification cost on both sides (a run would time its own)
    live_store, replay_store = RecycleStore(VOCAB), RecycleStore(VOCAB)
    teacher = lambda tokens: top_after(target, tokens)  # noqa: E731
    kept = 0
    for prompt in PROMPTS * 2:
        settings = Decoding(gamma=4, max_new_tokens=24, tree=tree)
        run = generate(target, RecycleDrafter(store=live_store, verify_cost=v), prompt, settings)
        replayed = replay(RecycleDrafter(store=replay_store, verify_cost=v), run.prompt_ids, run.output_ids,
                          settings, teacher=teacher)
        assert replayed.rounds == len(run.rounds)
        assert replayed.accepted == sum(r.n_accepted for r in run.rounds)
        assert replayed.drafted == sum(r.tree.size if r.tree else len(r.drafted) for r in run.rounds)
        kept += replayed.accepted
    assert kept > 0
