"""Few-row attention (specviz/attention.c, built by specviz.attention): the target's attention for a step and a
verification, chosen per machine; the same attention as SDPA to about 1e-7, a row's bits independent of the other
rows, safe to call from two threads, and never a change of tokens (the loop's identity tests run it on the tiny
models, which take it where it builds).
"""

from __future__ import annotations

import copy
import json
import logging
import threading

import pytest
import torch
import torch.nn.functional as F
from transformers import DynamicCache

from specviz import attention, products
from specviz.attention import visible_rows
from specviz.fast_path import FEW_ROW_SDPA, GROUPED_SDPA, GrowingCache, prepare
from specviz.trees import target_attention

from tiny import VOCAB, tiny_llama

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(attention.available() is None, reason="the few-row kernel cannot be built here")]


@pytest.fixture()
def built():
    return attention.available()


def case(kv, groups, tokens, length, dim, seed=0, tree=True):
    """Query [1, H, tokens, D], keys and values [1, KV, L, D] in a cache's spare room (rows D apart, heads further),
    and which keys the last `tokens` positions read: the context, then a random tree among the new ones."""
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(1, kv * groups, tokens, dim, generator=generator)
    room = torch.randn(2, 1, kv, length + 37, dim, generator=generator)
    key, value = room[0][:, :, :length], room[1][:, :, :length]
    visible = torch.ones(tokens, length, dtype=torch.bool)
    if tree:
        among = torch.rand(tokens, tokens, generator=generator) > 0.5
        visible[:, length - tokens:] = among.fill_diagonal_(True)
    else:
        visible[:, length - tokens:] = torch.ones(tokens, tokens, dtype=torch.bool).tril()
    return query, key, value, visible


@pytest.mark.parametrize("dim", [16, 32, 64, 128])
@pytest.mark.parametrize("kv, groups, tokens, length", [(3, 3, 1, 520), (3, 3, 9, 520), (2, 2, 5, 40),
                                                        (1, 4, 16, 17), (3, 3, 9, 2100), (2, 1, 3, 3)])
def test_the_kernel_is_sdpa_and_a_row_alone_gets_the_same_bits(built, dim, kv, groups, tokens, length):
    """Steps and trees, contexts shorter than a vector of keys and longer than a work item's range (1,024 keys), and
    one query head per key/value head; then the last token's rows computed alone."""
    query, key, value, visible = case(kv, groups, tokens, length, dim)
    scale = dim ** -0.5
    rows = visible.repeat(groups, 1)
    reference = F.scaled_dot_product_attention(query, key, value, attn_mask=visible[None, None], scale=scale,
                                               enable_gqa=True)
    out = built.attend(query, key, value, rows, scale)
    assert (out - reference).abs().max() < 2e-6
    alone = built.attend(query[:, :, -1:], key, value, visible[-1:].repeat(groups, 1), scale)
    assert torch.equal(alone[:, :, 0], out[:, :, -1])
    if tokens == 1:  # a step: no mask at all
        assert torch.equal(built.attend(query, key, value, None, scale), out)


def test_hidden_keys_weigh_exactly_nothing(built):
    """A key a row may not read changes nothing, however large its score; a row that reads one key gets its value."""
    query, key, value, visible = case(2, 3, 4, 50, 64, tree=False)
    visible[:, 10] = False
    out = built.attend(query, key, value, visible.repeat(3, 1), 1.0)
    key2, value2 = key.clone(), value.clone()
    key2[:, :, 10] = 1e4 * query[:, :1, 0]
    value2[:, :, 10] = 1e6
    assert torch.equal(built.attend(query, key2, value2, visible.repeat(3, 1), 1.0), out)
    single = torch.zeros(4, 50, dtype=torch.bool)
    single[:, 7] = True
    lone = built.attend(query, key, value, single.repeat(3, 1), 1.0)
    assert torch.allclose(lone, value[:, :, 7:8].repeat_interleave(3, dim=1).expand_as(lone))


def test_two_threads_at_once_get_what_each_gets_alone(built):
    """Every partial result lives in the caller's buffers: two sessions verifying at once do not mix."""
    cases = [case(3, 3, 9, 700, 64, seed=s) for s in (1, 2)]
    alone = [built.attend(q, k, v, vis.repeat(3, 1), 0.125) for q, k, v, vis in cases]
    results, errors = [[], []], []

    def run(i):
        try:
            q, k, v, vis = cases[i]
            for _ in range(40):
                results[i].append(built.attend(q, k, v, vis.repeat(3, 1), 0.125))
        except Exception as exc:  # noqa: BLE001 — reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in (0, 1):
        assert all(torch.equal(r, alone[i]) for r in results[i])


def test_what_the_kernel_does_not_take_is_said_or_left_to_sdpa(built):
    query, key, value, visible = case(2, 2, 3, 30, 64)
    with pytest.raises(ValueError, match="visibility"):
        built.attend(query, key, value, visible, 0.125)  # not repeated for the 2 query heads of a key/value head
    assert built.takes(query, key, value)
    assert not built.takes(query.bfloat16(), key.bfloat16(), value.bfloat16())
    assert not built.takes(torch.randn(1, 4, 3, 48), torch.randn(1, 2, 30, 48), torch.randn(1, 2, 30, 48))
    assert not built.takes(torch.randn(1, 4, 40, 64), key, value)  # 80 rows per key/value head
    assert not built.takes(query, key.transpose(2, 3).contiguous().transpose(2, 3), value)


def test_masks_are_read_once_a_forward_and_odd_ones_are_left_to_sdpa():
    additive = target_attention([-1, -1, 0, 1], 29, torch.float32, torch.device("cpu"))[0]  # [1, 1, 5, 34]
    first = visible_rows(additive, 5, 34, 3)
    assert first.shape == (15, 34) and torch.equal(first[:5].bool(), additive[0, 0] == 0)
    assert torch.equal(first[5:10], first[:5]) and visible_rows(additive, 5, 34, 3) is first
    boolean = additive[0, 0][None, None] == 0
    assert torch.equal(visible_rows(boolean, 5, 34, 3), first)
    assert visible_rows(None, 1, 34, 3) is None  # a step reads every key
    causal = visible_rows(None, 3, 10, 1)
    assert causal.tolist()[0] == [True] * 8 + [False] * 2 and causal.tolist()[2] == [True] * 10
    assert visible_rows(additive * 0.5, 5, 34, 3) is False  # not 0 and the minimum: some other bias
    assert visible_rows(additive, 4, 34, 3) is False


def forwards(model, tree=True):
    """Logits of a prefill, a 4-node tree verification, the kept branch and a one-token step."""
    ids = torch.randint(2, VOCAB, (1, 40), generator=torch.Generator().manual_seed(3))
    cache = GrowingCache(config=model.config)
    out = []
    with torch.inference_mode():
        out.append(model(ids[:, :29], past_key_values=cache).logits)
        mask, positions = target_attention([-1, -1, 0, 1], 29, torch.float32, torch.device("cpu"))
        out.append(model(ids[:, 29:34], past_key_values=cache, attention_mask=mask, position_ids=positions).logits)
        from specviz.trees import keep_branch
        keep_branch(cache, 30, 4, [1, 3])
        out.append(model(ids[:, 34:35], past_key_values=cache).logits)
        out.append(model(ids[:, 35:39], past_key_values=cache).logits)
    return out


def test_a_prepared_tiny_model_takes_the_kernel_and_keeps_sdpas_logits_and_choices():
    stock = tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=3, heads=4, kv_heads=2)
    grouped = copy.deepcopy(stock)
    grouped.set_attn_implementation(GROUPED_SDPA)
    fast = prepare(copy.deepcopy(stock), torch.device("cpu"))
    assert fast.config._attn_implementation == FEW_ROW_SDPA
    calls = []
    kernel = attention.FewRows.attend
    try:
        attention.FewRows.attend = lambda self, *a: calls.append(a[0].shape) or kernel(self, *a)
        fast_logits = forwards(fast)
    finally:
        attention.FewRows.attend = kernel
    assert {shape[2] for shape in calls} == {29, 5, 1, 4}  # a short prefill (58 rows a key/value head), the tree
    # of 4, the step, the chain of 4
    for a, b in zip(forwards(grouped), fast_logits):
        assert (a - b).abs().max() < 1e-4
        assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_the_switch_turns_the_kernel_off(monkeypatch):
    monkeypatch.setenv(attention.SWITCH_ENV, "0")
    assert attention.available() is None
    fast = prepare(tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=1, heads=4, kv_heads=2), torch.device("cpu"))
    assert fast.config._attn_implementation == GROUPED_SDPA


def test_without_a_working_compiler_attention_stays_torchs_and_the_log_says_why(monkeypatch, tmp_path, caplog):
    monkeypatch.delenv(attention.SWITCH_ENV, raising=False)
    monkeypatch.setenv("CC", "false")
    with caplog.at_level(logging.WARNING, logger="specviz"):
        assert attention.available(tmp_path) is None
    assert "could not be built" in caplog.text and "attention stays torch's" in caplog.text


def test_the_choice_is_measured_once_and_kept(monkeypatch, tmp_path):
    """A model large enough to time: the kernel where it was clearly faster, else SDPA; kept in the file for the next
    process, which measures nothing."""
    monkeypatch.delenv(attention.SWITCH_ENV, raising=False)
    config = tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=1, heads=4, kv_heads=2).config
    remember = tmp_path / "fast-path.json"
    monkeypatch.setattr(products, "_CHOSEN", {})
    measured = []
    monkeypatch.setattr(attention, "_faster", lambda *a: measured.append(a) or attention.SDPA)
    assert attention.choose(config, timed=True, remember=remember) is None
    kept = json.loads(remember.read_text())
    assert [v for k, v in kept.items() if k.startswith("attention |")] == [attention.SDPA]
    monkeypatch.setattr(products, "_CHOSEN", {})  # a new process
    assert attention.choose(config, timed=True, remember=remember) is None and len(measured) == 1
    assert attention.choose(config, timed=False, remember=remember) is not None  # too small to time: the kernel
    monkeypatch.setenv(attention.SWITCH_ENV, "1")
    assert attention.choose(config, timed=True, remember=remember) is not None


def test_the_timing_itself_runs_and_names_a_choice(built):
    assert attention._faster(built, 9, 3, 64, passes=1, calls=2) in (attention.SDPA, attention.FEW_ROWS)


def test_the_stock_cache_still_works_with_the_kernel():
    """A DynamicCache (what a caller outside the loop may pass) holds keys the kernel takes too."""
    model = prepare(tiny_llama(seed=1, vocab_size=VOCAB, hidden=64, layers=2, heads=4, kv_heads=2),
                    torch.device("cpu"))
    ids = torch.randint(2, VOCAB, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        model(ids[:, :10], past_key_values=cache)
        step = model(ids[:, 10:11], past_key_values=cache).logits
        whole = model(ids[:, :11]).logits[:, -1:]
    assert (step - whole).abs().max() < 1e-4


def test_a_timing_names_the_kernel_beside_the_machine():
    from specviz.lab.measure import machine

    fast = prepare(tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=1, heads=4, kv_heads=2), torch.device("cpu"))
    assert "few-row attention" in machine("cpu", fast)
    stock = tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=1, heads=4, kv_heads=2)
    assert "few-row attention" not in machine("cpu", stock)


@pytest.mark.parametrize(("rows", "entries", "k"), [(9, 49152 + 5, 8), (3, 70, 8), (2, 10, 3), (1, 300, 1)])
def test_the_top_rows_are_torchs_topk_with_the_softmax_probabilities(rows, entries, k):
    """`attention.top_rows` (what the recycle table learns each round): the k largest of each row, largest first, the
    lower id first among equals, with softmax's probabilities for them, whatever the row length (a partial last block,
    rows shorter than a block) and with entries at -inf."""
    generator = torch.Generator().manual_seed(7)
    logits = torch.randn(rows, entries, generator=generator) * 4
    logits[0, 1] = logits[0, entries - 1] = logits[0].max() + 1  # a tie at the top
    logits[-1, : entries // 2] = float("-inf")
    ids, probs = attention.top_rows(logits, k)
    values, _ = logits.topk(k, dim=-1)
    assert ids.shape == probs.shape == (rows, k) and ids.dtype == torch.long
    assert torch.equal(logits.gather(1, ids), values)
    if k > 1:
        assert ids[0, :2].tolist() == [1, entries - 1]
    torch.testing.assert_close(probs, logits.softmax(-1).gather(1, ids), rtol=2e-6, atol=1e-9)
    assert attention.top_rows(logits, entries + 1) is None and attention.top_rows(logits[0], k) is None
