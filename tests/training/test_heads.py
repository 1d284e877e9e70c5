"""Feature-level draft heads on the tiny target: training-time test = drafting, lossless loop, cache rollback.

p = the target's distribution, q = the head's; gamma = drafted tokens per round.
"""

from __future__ import annotations

import pytest
import torch

from specviz import attention, head_step, panels
from specviz.config import Decoding, Sampling, TreeShape
from specviz.decode import generate
from specviz.drafters import HeadDrafter, HybridDrafter, build_drafter
from specviz.drafters.head_net import DraftHead, HeadShape, KVCache, read_info
from specviz.errors import ConfigError
from specviz.fast_path import grouped_attention
from specviz.training.head_loss import unrolled_features
from specviz.training.train_head import coverage
from specviz.trees import TreeFeed

from tiny import VOCAB, first_two_tokens, pooled_fit

pytestmark = pytest.mark.usefixtures("one_thread")

CASES = [("w1 w2 w3 w4 w5", 13), ("w40 w41 w7", 11), ("w90", 7)]


def random_head(seed: int = 0) -> DraftHead:
    torch.manual_seed(seed)
    head = DraftHead(HeadShape(hidden=32, heads=4, kv_heads=2, intermediate=64, rope_theta=10000.0, eps=1e-6)).eval()
    return head


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_training_time_test_attends_as_drafting_does(steps):
    """Step s at pair j in training equals the s-th draft of a chain that starts after pair j-s+1 true pairs."""
    head = random_head()
    P, H = 9, 32
    feats, emb = torch.randn(1, P, H), torch.randn(1, P, H)
    with torch.no_grad():
        trained = unrolled_features(head, emb, feats, steps)
        for j in range(steps - 1, P):
            start = j - steps + 1  # the chain reads true pairs 0..start, then drafts
            cache = KVCache()
            predicted = head.step(emb[0, : start + 1], feats[0, : start + 1], cache)[-1]
            for i in range(start + 1, j + 1):  # each later step reads (its predicted feature, the next token)
                predicted = head.step(emb[0, i : i + 1], predicted.view(1, -1), cache)[0]
            torch.testing.assert_close(trained[steps - 1][0, j], predicted, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("n", [1, 4])
def test_the_draft_step_attends_and_rotates_as_the_plain_formulas(n):
    """A draft step looks RoPE's angles up in a table and attends per key/value group: the same numbers as the
    angles computed afresh and SDPA's own grouped-query attention, with and without a mask."""
    torch.manual_seed(0)
    shape = HeadShape(hidden=64, heads=4, kv_heads=2, intermediate=96, rope_theta=10000.0, eps=1e-5)
    head = DraftHead(shape)
    positions = torch.tensor([3, 700, 5, 9][:n])  # beyond the table's first size: it grows
    cos, sin = head.rotary.at(positions, torch.float32)
    inv = 1.0 / 10000.0 ** (torch.arange(0, 16, 2, dtype=torch.float32) / 16)
    angles = positions.float()[:, None] * inv[None, :]
    assert torch.allclose(cos, angles.cos().repeat(1, 2), atol=1e-5)
    assert torch.allclose(sin, angles.sin().repeat(1, 2), atol=1e-5)
    q, keys, values = torch.randn(4, n, 16), torch.randn(2, 12, 16), torch.randn(2, 12, 16)
    mask = None if n == 1 else torch.rand(n, 12) > 0.3
    if mask is not None:
        mask[:, 0] = True  # every row reads something
    expected = torch.nn.functional.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
    grouped = grouped_attention(q[None], keys[None], values[None], None if mask is None else mask[None, None])
    assert torch.allclose(grouped[0], expected, atol=1e-6)


@pytest.mark.skipif(attention.available() is None, reason="the few-row kernel cannot be built here")
@pytest.mark.parametrize("n", [1, 4])
def test_a_head_given_the_few_row_kernel_attends_as_sdpa(n):
    """A head whose target took the few-row kernel attends by it (fp32 activations): the same numbers as SDPA's
    grouped-query attention over the cache's views, masked or not; bf16 rows still take SDPA."""
    torch.manual_seed(3)
    head = DraftHead(HeadShape(hidden=128, heads=4, kv_heads=2, intermediate=96, rope_theta=10000.0, eps=1e-5))
    head.few_rows = attention.available()
    cache = KVCache()
    keys, values = cache.append(torch.randn(2, 40, 32), torch.randn(2, 40, 32))
    q = torch.randn(1, 4, n, 32)
    mask = None if n == 1 else (torch.rand(n, 40) > 0.3)[None, None]
    if mask is not None:
        mask[..., 0] = True
    calls = []
    real = head.few_rows.attend
    head.few_rows.attend = lambda *a: calls.append(1) or real(*a)
    try:
        out = head.attend(q, keys[None], values[None], mask)
        head.attend(q.bfloat16(), keys[None].bfloat16(), values[None].bfloat16(), mask)
    finally:
        del head.few_rows.attend
    assert calls == [1]
    torch.testing.assert_close(out, grouped_attention(q, keys[None], values[None], mask), atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("gamma", [1, 2, 4, 8])
@pytest.mark.parametrize("spec", ["tiny-head", "ngram+tiny-head"])
def test_greedy_output_with_a_head_is_the_targets_own(target, make_drafter, spec, gamma):
    for prompt, max_new in CASES:
        alone = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        run = generate(target, make_drafter(spec), prompt, Decoding(gamma=gamma, max_new_tokens=max_new))
        assert run.output_ids == alone.output_ids, f"{spec}, γ={gamma}, {prompt!r}: output differs from the target's"
        assert all(t < VOCAB for r in run.rounds for t in r.drafted)


def test_the_trained_tiny_head_is_partly_accepted(target, make_drafter):
    """Guards the tests above: rounds with some and with no accepted drafts both occur, so rollback is exercised."""
    outcomes = set()
    for prompt, max_new in CASES:
        run = generate(target, make_drafter("tiny-head"), prompt, Decoding(gamma=4, max_new_tokens=max_new))
        outcomes |= {"none" if r.n_accepted == 0 else "some" for r in run.rounds if r.drafted}
    assert outcomes == {"none", "some"}


def test_head_cache_after_a_run_equals_reading_the_true_pairs_afresh(target, make_drafter, fp32_heads):
    """Rollback: after every round the head's cache holds exactly the true pairs, as if read from scratch."""
    drafter = make_drafter("tiny-head")
    run = generate(target, drafter, "w1 w2 w3 w4 w5", Decoding(gamma=4, max_new_tokens=13))
    ids = torch.tensor([run.prompt_ids + run.output_ids[:-1]])
    hidden = target.model.base_model(ids).last_hidden_state[0]
    fresh = KVCache()
    with torch.no_grad():
        drafter.head.step(drafter.embedding[ids[0, 1 : drafter.read + 1]], hidden[: drafter.read], fresh)
    assert drafter.cache.length == fresh.length == drafter.read
    torch.testing.assert_close(drafter.cache.k[:, : fresh.length], fresh.k[:, : fresh.length], atol=1e-5, rtol=1e-4)


def test_sampled_q_lives_on_the_draft_vocabulary(target, make_drafter):
    drafter = make_drafter("tiny-head")
    run = generate(target, drafter, "w1 w2 w3", Decoding(gamma=3, max_new_tokens=8, sampling=Sampling(temperature=1.0)))
    outside = sorted(set(range(VOCAB)) - set(drafter.vocab_ids.tolist()))
    assert outside, "the tiny head should have a reduced vocabulary"
    assert all(t not in outside for r in run.rounds for t in r.drafted)
    assert len(run.output_ids) == 8


def test_hybrid_uses_ngram_when_the_context_repeats(target, make_drafter):
    drafter = make_drafter("ngram+tiny-head")
    assert isinstance(drafter, HybridDrafter) and isinstance(drafter.head, HeadDrafter)
    run = generate(target, drafter, "w1 w2 w3 w1 w2 w3 w1 w2", Decoding(gamma=3, max_new_tokens=6))
    assert run.rounds[0].drafted[:1] == [target.tokenizer.convert_tokens_to_ids("w3")]  # copied from the context


def test_head_for_another_target_is_refused(tiny_head_dir, tokenizer):
    from tiny import tiny_llama, wrap

    other = wrap("other", tiny_llama(seed=7, vocab_size=VOCAB, hidden=64, layers=4, heads=4, kv_heads=2), tokenizer)
    with pytest.raises(ConfigError, match="trained on"):
        build_drafter(f"head:{tiny_head_dir}", other)


def test_damaged_head_folder_is_one_message(tmp_path, target):
    (tmp_path / "head.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="damaged"):
        build_drafter(f"head:{tmp_path}", target)
    with pytest.raises(ConfigError, match="no draft head named"):
        build_drafter("head:no-such-head", target)


def test_head_card_facts(tiny_head_dir):
    info = read_info(tiny_head_dir)
    assert len(info.vocab) == 64 and len(set(info.vocab)) == 64
    assert info.trained["steps"] > 0 and info.trained["data"]["trained_positions"] > 0
    assert coverage(info.vocab[:10], info.vocab) == 1.0 and coverage([], info.vocab) == 0.0


def test_agreement_counts_the_first_guesses_that_equal_the_targets_tokens(target, tiny_head_dir):
    """Offline agreement at draft position 1, against a plain loop: the head reads the true pairs up to
    each answer position and its top guess is compared with the token the target wrote there."""
    from specviz.drafters.head_net import load_head
    from specviz.training.agreement import HeldOut, agreement
    from specviz.training.features import Features, hidden_states
    from specviz.training.texts import Text

    head, info = load_head(tiny_head_dir, target.model, target.name)
    texts = []
    for prompt, max_new in CASES:
        run = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        texts.append(Text("eval", run.prompt_ids + run.output_ids, len(run.prompt_ids)))
    feats = hidden_states(target, texts)
    held = HeldOut(Features([torch.tensor(t.ids) for t in texts], feats, [t.answer_from for t in texts],
                            ["eval"] * len(texts)), "tiny", ["x"] * len(texts))
    embedding = target.model.get_input_embeddings().weight.float()
    vocab = torch.tensor(info.vocab)
    rows = target.model.get_output_embeddings().weight.float()[vocab]
    hits = count = 0
    with torch.no_grad():
        for text, f in zip(texts, feats):
            ids = torch.tensor(text.ids)
            for j in range(max(0, text.answer_from - 2), len(ids) - 2):
                predicted = head.step(embedding[ids[1 : j + 2]], f[: j + 1].float(), KVCache())[-1]
                hits += int(vocab[(predicted @ rows.T).argmax()] == ids[j + 2])
                count += 1
    alphas = agreement(head, held, embedding, rows, vocab, steps=2)
    assert count > 20 and 0 < hits < count  # both outcomes occur
    assert alphas[0] == pytest.approx(hits / count)
    assert 0 <= alphas[1] <= 1


def test_a_resumed_head_training_counts_its_positions_on(target, tmp_path):
    """The checks' data curve reads positions trained on: a resumed run continues the count, as one run would."""
    from collections import Counter

    from specviz.training.features import Features, hidden_states
    from specviz.training.loop import read_log
    from specviz.training.texts import Text
    from specviz.training.train_head import HeadConfig, HeadData, draft_vocabulary, train

    texts = [Text("tiny", [3 + i % 5, 4, 5, 6, 7, 8, 9 + i % 3, 10, 11, 12], 3) for i in range(12)]
    data = HeadData(Features([torch.tensor(t.ids) for t in texts], hidden_states(target, texts),
                             [t.answer_from for t in texts], ["tiny"] * len(texts)), Counter(), {})
    vocab = draft_vocabulary(target, data, 16)

    def positions(work, steps, resume):
        cfg = HeadConfig(name="h", steps=steps, batch_size=4, seq_len=16, warmup=1, checkpoint_every=3,
                         work=str(work), resume=resume)
        train(cfg, target, data, vocab, progress=False)
        return [row["positions"] for row in read_log(cfg.run_dir / "loss.jsonl")]

    straight = positions(tmp_path / "a", 6, False)
    positions(tmp_path / "b", 3, False)
    resumed = positions(tmp_path / "b", 6, True)
    assert resumed == straight and straight == sorted(straight) and straight[0] > 0


# --- a bf16 head beside an fp32 target -------------------------------------------------------
@pytest.mark.parametrize("tree", [TreeShape(), TreeShape(budget=6, branching=2)])
@pytest.mark.parametrize("spec", ["tiny-head", "ngram+tiny-head"])
def test_a_bf16_head_keeps_greedy_output_the_targets_own(target, make_drafter, bf16_heads, spec, tree):
    drafter = make_drafter(spec)
    head = drafter.head if isinstance(drafter, HybridDrafter) else drafter
    # bf16 weights; fp32 activations where the head's products are on the bf16 panels (fast_path.activations)
    assert next(head.head.parameters()).dtype == torch.bfloat16 and target.model.dtype == torch.float32
    assert head.dtype == (torch.float32 if panels.available() is not None else torch.bfloat16)
    # where the C kernels build, its steps are one C call each (specviz.head_step): these runs check them too
    kernels = all(lib is not None for lib in (panels.available(), attention.available(), head_step.available()))
    assert (head.head.kernel is not None) == kernels
    assert isinstance(head.rows, panels.Int8Rows) == (head.dtype == torch.float32)  # its output rows in int8 there
    for prompt, max_new in CASES:
        alone = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        run = generate(target, make_drafter(spec), prompt, Decoding(gamma=4, max_new_tokens=max_new, tree=tree))
        assert run.output_ids == alone.output_ids, f"{spec}, {tree}, {prompt!r}: output differs from the target's"


def test_a_bf16_head_samples_from_the_targets_distribution(target, make_drafter, bf16_heads):
    """q comes from bf16 logits but is computed in fp32, and the draft is sampled from that same q: the first
    two tokens of a sampled run (the second one drafted, then kept or replaced) follow p."""
    prompt, sampling, trials = "w1 w2 w3", Sampling(temperature=1.0, top_k=3), 300
    cells, expected = first_two_tokens(target, target.tokenizer(prompt)["input_ids"], sampling, VOCAB)
    counts, kept = dict.fromkeys(cells, 0), 0
    drafter = make_drafter("tiny-head")  # one drafter for every run, as the app keeps one: each run starts afresh
    for seed in range(trials):
        run = generate(target, drafter, prompt,
                       Decoding(gamma=1, max_new_tokens=2, seed=seed, sampling=sampling))
        assert run.rounds[0].drafted and tuple(run.output_ids) in counts
        counts[tuple(run.output_ids)] += 1
        kept += run.rounds[0].n_accepted
    assert 0.05 * trials < kept < 0.95 * trials, "precondition: the head's draft is neither always kept nor never"
    fit, observed, probs = pooled_fit(counts, cells, expected, trials)
    assert fit.p_value > 1e-3, f"first two tokens {observed} vs p {probs}: chi2 {fit.statistic:.1f}, df {fit.df}"


def test_a_head_runs_in_bf16_only_where_that_is_measured_faster(monkeypatch):
    from specviz import fast_path

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(fast_path, "_cpu_has_bf16", lambda: True)
    monkeypatch.setattr(fast_path, "_cpu_bf16_rows_faster", lambda: True)
    assert fast_path.draft_dtype(cpu, torch.float32) == torch.bfloat16
    assert fast_path.draft_dtype(cuda, torch.float32) == torch.float32  # a GPU keeps the target's dtype
    assert fast_path.draft_dtype(cpu, torch.float16) == torch.float16
    monkeypatch.setenv("SPECVIZ_FAST_PATH", "0")
    assert fast_path.draft_dtype(cpu, torch.float32) == torch.float32
    monkeypatch.delenv("SPECVIZ_FAST_PATH")
    monkeypatch.setattr(fast_path, "_cpu_bf16_rows_faster", lambda: False)
    assert fast_path.draft_dtype(cpu, torch.float32) == torch.float32
    monkeypatch.setattr(fast_path, "_cpu_has_bf16", lambda: False)
    assert fast_path.draft_dtype(cpu, torch.float32) == torch.float32


# --- the head as a source of the blended tree (blend:HEAD) -------------------------------------
@pytest.mark.parametrize("tree", [TreeShape(), TreeShape(budget=8, branching=2)])
def test_blend_with_a_head_keeps_greedy_output_the_targets_own(target, make_drafter, tree):
    sources = set()
    for prompt, max_new in CASES:
        alone = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        run = generate(target, make_drafter("blend:tiny-head"), prompt,
                       Decoding(gamma=4, max_new_tokens=max_new, tree=tree))
        assert run.output_ids == alone.output_ids, f"{tree}, {prompt!r}: output differs from the target's"
        sources |= {s for r in run.rounds if r.tree is not None for s in r.tree.source}
    if tree.on:
        assert "head" in sources, "the head's guesses should reach some tree"


def test_blend_with_a_head_samples_from_the_targets_distribution(target, make_drafter):
    """Candidates fixed before verification (one-hot q): the first two tokens of a sampled run follow p."""
    prompt, sampling, trials = "w1 w2 w3", Sampling(temperature=1.0, top_k=3), 300
    cells, expected = first_two_tokens(target, target.tokenizer(prompt)["input_ids"], sampling, VOCAB)
    counts, drafted = dict.fromkeys(cells, 0), 0
    drafter = make_drafter("blend:tiny-head")  # the runs also share its recycle table, which learns as they go
    for seed in range(trials):
        run = generate(target, drafter, prompt,
                       Decoding(gamma=2, max_new_tokens=2, seed=seed, sampling=sampling,
                                tree=TreeShape(budget=4, branching=2)))
        assert tuple(run.output_ids) in counts
        counts[tuple(run.output_ids)] += 1
        drafted += bool(run.rounds[0].drafted)
    assert drafted > 0.5 * trials, "precondition: most first rounds draft something"
    fit, observed, probs = pooled_fit(counts, cells, expected, trials)
    assert fit.p_value > 1e-3, f"first two tokens {observed} vs p {probs}: chi2 {fit.statistic:.1f}, df {fit.df}"


def test_the_head_reads_a_node_only_where_that_can_pay(target, make_drafter):
    """A node is read (a head forward) only if its score times the chance of the head's best guess times the chance
    that every other source's offer there is wrong beats the head's cost at the run's tokens per step; a round's
    reads are capped; an unread node's children get no head guesses."""
    from specviz.drafters.blend_head import MAX_READS, HeadBlendDrafter, HeadNode
    from specviz.drafters.scored import Offer

    drafter = make_drafter("blend:tiny-head")
    assert isinstance(drafter, HeadBlendDrafter)
    run = generate(target, drafter, "w1 w2 w3 w4 w5", Decoding(gamma=4, max_new_tokens=9,
                                                                tree=TreeShape(budget=8, branching=2)))
    assert 0 <= drafter.reads <= MAX_READS and run.output_ids
    assert drafter.rate() > 0 and drafter.c() > 0  # measured in the run; fixed below, so the bar is known
    drafter.c, drafter.rate = (lambda: 0.02), (lambda: 2.0)
    bar = drafter.c() * drafter.rate() / drafter.top()  # the score a node needs where no other source offers
    root = HeadNode(drafter.head.feature)  # (as after a round that read the root, whether or not the last one did)
    drafter.feed, drafter.read_parents = TreeFeed(drafter.head.true_length), []
    assert root.feature is not None and bar < 0.5
    before = drafter.reads
    with torch.inference_mode():  # as the loop reads
        low = drafter.read(5, root, 0.5 * bar, [])
        assert low.feature is None and drafter.reads == before
        assert drafter.guesses((None, None), low, 4) == []
        sure = [Offer(6, 0.7, "recycle"), Offer(7, 0.3, "copy")]  # the other sources cover the node: nothing to add
        assert drafter.read(5, root, 1.0, sure).feature is None and drafter.reads == before
        assert drafter.read(5, root, 2 * bar, [Offer(6, 0.6, "recycle")]).feature is None  # 2·bar·0.4 < the cost
        high = drafter.read(5, root, 1.0, [Offer(6, 0.2, "recycle")])
        assert high.feature is not None and drafter.reads == before + 1
        assert all(o.source == "head" and 0 < o.chance < 1 for o in drafter.guesses((None, None), high, 4))
        drafter.reads = MAX_READS
        assert drafter.read(5, root, 1.0, []).feature is None


@pytest.mark.parametrize("tree", [TreeShape(), TreeShape(budget=8, branching=2)])
def test_rounds_that_skip_the_head_leave_its_reading_for_later(target, make_drafter, monkeypatch, tree):
    """Where the other sources are sure at the root, the head reads nothing that round; the next round it reads
    every pair kept since in one forward, so its cache stays the true pairs', and the output the target's."""
    from specviz.drafters.blend_head import HeadBlendDrafter

    drafter = make_drafter("blend:tiny-head")
    calls = iter(range(10**6))
    monkeypatch.setattr(HeadBlendDrafter, "pays", lambda self, score, others: next(calls) % 3 == 0)
    for prompt, max_new in CASES:
        alone = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        run = generate(target, drafter, prompt, Decoding(gamma=3, max_new_tokens=max_new, tree=tree))
        assert run.output_ids == alone.output_ids, f"{prompt!r}: output differs from the target's"
        if not run.stopped_at_eos:  # (a round cut at EOS hands over features of drafts past the end)
            context = torch.tensor([run.prompt_ids + run.output_ids])
            with torch.inference_mode():  # (as the loop runs it) whatever it left for later, read now: the pairs
                drafter.head.catch_up(context)  # line up with the text
            assert drafter.head.read == context.shape[1] - 1


def test_the_head_calibration_follows_what_the_target_kept(target, make_drafter):
    """The head's chances are calibrated as every source's are (`scored.Calibration`): kept head guesses raise its
    factor, refused ones lower it, and its offers carry its own probabilities for `grow` to scale."""
    from specviz.drafters.blend_head import HEAD
    from specviz.drafters.scored import ScoredTree

    drafter = make_drafter("blend:tiny-head")
    drafted = ScoredTree([5, 6], [-1, 0], [0.5, 0.2], [HEAD, HEAD], [0.5, 0.4])
    drafter.calibration.judge(drafted, [0, 1])  # both kept: 2 kept for 0.5 + 0.4 promised
    raised = drafter.calibration.factor(HEAD)
    assert raised == pytest.approx((0.95 + 2) / (0.95 + 0.9))
    drafter.calibration.judge(drafted, [])  # the first refused; the second was never judged
    assert drafter.calibration.factor(HEAD) < raised
    assert drafter.calibration.sums[HEAD][1] == pytest.approx(0.95 * (0.95 * 1.0 + 0.9) + 0.5)


def test_auto_adds_the_shipped_head_only_where_it_reads_the_target(target, make_drafter, tiny_head_dir, monkeypatch):
    """`auto` is the blended tree with the shipped head (registry.AUTO_HEAD) where that head was trained on the target,
    and the plain blended tree for any other target (the real head does not read the tiny one)."""
    from specviz.drafters import registry
    from specviz.drafters.blend import BlendDrafter
    from specviz.drafters.blend_head import HeadBlendDrafter

    plain = make_drafter("auto")  # smol-head-v5 belongs to SmolLM2: refused quietly, no head
    assert type(plain) is BlendDrafter and plain.name == "auto"
    monkeypatch.setattr(registry, "AUTO_HEAD", str(tiny_head_dir))  # as if the tiny target's head were shipped
    with_head = make_drafter("auto")
    assert isinstance(with_head, HeadBlendDrafter) and with_head.name == "auto"
    alone = generate(target, None, "w1 w2 w3", Decoding(max_new_tokens=9))
    run = generate(target, with_head, "w1 w2 w3", Decoding(gamma=4, max_new_tokens=9, tree=TreeShape(budget=8)))
    assert run.output_ids == alone.output_ids


def test_rounds_marks_the_heads_nodes_with_their_own_shape(target, make_drafter):
    """The tree figure marks a head's guesses beside copied and recycled nodes: a shape of their own, named."""
    from specviz.app.views.tree_charts import SOURCE_MARKS, tree_figure
    from specviz.drafters.blend_head import HEAD

    drafter = make_drafter("blend:tiny-head")
    rounds = []
    for prompt, max_new in CASES:
        run = generate(target, drafter, prompt, Decoding(gamma=4, max_new_tokens=max_new,
                                                          tree=TreeShape(budget=8, branching=2)))
        rounds += [r for r in run.rounds if r.tree is not None and HEAD in r.tree.source]
    assert rounds, "precondition: the head's guesses reach some tree"
    marks = {t.name: t.marker.symbol for t in tree_figure(rounds[0]).data if (t.name or "").startswith("source: ")}
    assert marks[f"source: {HEAD}"] == SOURCE_MARKS[HEAD][0]
    assert len(set(marks.values())) == len(marks)  # one shape per source


def test_auto_with_a_damaged_shipped_head_says_so(target, make_drafter, tmp_path, monkeypatch):
    """A shipped head whose head.json cannot be read is an error with its message, not a quiet fall back."""
    from specviz.drafters import registry

    folder = tmp_path / "broken-head"
    folder.mkdir()
    (folder / "head.json").write_text("{not json", encoding="utf-8")
    monkeypatch.setattr(registry, "AUTO_HEAD", str(folder))
    with pytest.raises(ConfigError, match="damaged head.json"):
        make_drafter("auto")
