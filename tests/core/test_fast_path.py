"""The fast CPU path (specviz.fast_path) changes the speed of the target's forwards, never their tokens.

Grouped-query attention without copies and the growing KV cache must give bit-identical logits
to the stock path; oneDNN's packed products round like any other kernel (about 1e-6) and must keep
the speculative run identical to the target alone, which the loop's identity tests check on the
prepared tiny models (tests/tiny.py `wrap` prepares them like `load_model` does).
"""

from __future__ import annotations

import copy
import json
import logging

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers import DynamicCache

from specviz import attention, busy
from specviz.fast_path import FEW_ROW_SDPA, GROUPED_SDPA, GrowingCache, PackedLinear, onednn_available, prepare
from specviz.trees import keep_branch, target_attention

from tiny import VOCAB, tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")


def stock_and_fast(seed=0):
    """The same tiny grouped-query model twice: as transformers builds it, and prepared."""
    stock = tiny_llama(seed=seed, vocab_size=VOCAB, hidden=64, layers=3, heads=4, kv_heads=2)
    fast = prepare(copy.deepcopy(stock), torch.device("cpu"))
    return stock, fast


def test_prepare_puts_a_cpu_model_on_the_fast_path():
    _, fast = stock_and_fast()
    assert fast.config._attn_implementation == (FEW_ROW_SDPA if attention.available() else GROUPED_SDPA)
    linears = [m for m in fast.modules() if isinstance(m, nn.Linear)]
    assert linears and all(isinstance(m, PackedLinear) for m in linears) == onednn_available()
    assert fast.lm_head.weight is fast.model.embed_tokens.weight or not fast.config.tie_word_embeddings


def test_a_model_for_a_gpu_turns_cudnn_attention_off(monkeypatch):
    """On CUDA, SDPA's cuDNN backend plans for each new shape (a new context every round): prepare turns it off, and
    the switch that keeps the stock path keeps it on. (A flag of the process: it needs no GPU to be set.)"""
    model = tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=1, heads=4, kv_heads=2)
    was = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        monkeypatch.setenv("SPECVIZ_FAST_PATH", "0")
        prepare(model, torch.device("cuda"))
        assert torch.backends.cuda.cudnn_sdp_enabled()
        monkeypatch.delenv("SPECVIZ_FAST_PATH")
        prepare(model, torch.device("cuda"))
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert model.config._attn_implementation == "sdpa"  # nothing else changes off the CPU
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


def test_the_switch_keeps_the_stock_path(monkeypatch):
    monkeypatch.setenv("SPECVIZ_FAST_PATH", "0")
    model = prepare(tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=1, heads=4, kv_heads=2), torch.device("cpu"))
    assert model.config._attn_implementation == "sdpa"
    assert not any(isinstance(m, PackedLinear) for m in model.modules())


@pytest.mark.skipif(not onednn_available(), reason="torch has no oneDNN here")
def test_packed_products_match_linear_and_follow_a_changed_weight():
    torch.manual_seed(0)
    plain = nn.Linear(48, 80)
    packed = PackedLinear(plain)
    x = torch.randn(5, 48)
    with torch.inference_mode():
        assert torch.allclose(packed(x), plain(x), atol=1e-5)
        assert torch.allclose(packed(x[:1]), plain(x[:1]), atol=1e-5)
    with torch.no_grad():
        plain.weight.mul_(2)  # shared parameter: the packed copy must be made again
    with torch.inference_mode():
        assert torch.allclose(packed(x), plain(x), atol=1e-5)
    assert torch.allclose(copy.deepcopy(packed)(x), plain(x), atol=1e-5)


@pytest.mark.skipif(not onednn_available(), reason="torch has no oneDNN here")
def test_a_product_made_under_inference_mode_packs_and_runs():
    """A weight made inside torch.inference_mode keeps no version counter (a drafter built there once failed)."""
    with torch.inference_mode():
        plain = nn.Linear(48, 80)
        packed = PackedLinear(plain)
        x = torch.randn(3, 48)
        assert torch.allclose(packed(x), plain(x), atol=1e-5)


@pytest.mark.skipif(not onednn_available(), reason="torch has no oneDNN here")
def test_few_rows_take_the_blas_as_chosen_and_more_rows_take_onednn(monkeypatch):
    """Inputs of up to the chosen number of rows take the BLAS's F.linear; more rows take oneDNN; 0 is oneDNN
    throughout. The older switch SPECVIZ_ONE_ROW=blas / onednn means 1 / 0."""
    from specviz import products

    torch.manual_seed(0)
    linears = [PackedLinear(nn.Linear(48, 80)) for _ in range(3)]
    calls = []
    real = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(products.torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setenv(products.BLAS_ROWS_ENV, "3")
    assert products.choose_blas_rows(linears) == 3 and all(m.blas_rows == 3 for m in linears)
    x = torch.randn(4, 48)
    with torch.inference_mode():
        for few in (x[:1], x[0], x[:1][None], x[:3], x[:3][None]):  # 1 row (as a row, a vector, a batch), 3 rows
            assert torch.equal(linears[0](few), F.linear(few, linears[0].weight, linears[0].bias))
        assert calls == []
        assert torch.allclose(linears[0](x), F.linear(x, linears[0].weight, linears[0].bias), atol=1e-5)
        assert calls == [1]
    monkeypatch.setenv(products.BLAS_ROWS_ENV, "0")
    assert products.choose_blas_rows(linears) == 0 and not any(m.blas_rows for m in linears)
    with torch.inference_mode():
        linears[0](x[:1])
    assert calls == [1, 1]
    monkeypatch.delenv(products.BLAS_ROWS_ENV)
    for old, rows in (("blas", 1), ("onednn", 0)):
        monkeypatch.setenv(products.ONE_ROW_ENV, old)
        assert products.choose_blas_rows(linears) == rows
    assert products.products_text(0) == "products oneDNN"
    assert products.products_text(1) == "products BLAS for 1 row, oneDNN above"
    assert products.products_text(3) == "products BLAS for 1-3 rows, oneDNN above"


@pytest.mark.parametrize("name, value", [("SPECVIZ_BLAS_ROWS", "fastest please"), ("SPECVIZ_BLAS_ROWS", "99"),
                                         ("SPECVIZ_ONE_ROW", "fastest please")])
def test_a_tiny_model_keeps_onednn_without_measuring(monkeypatch, caplog, name, value):
    """Under SMALL_MODEL_BYTES of weights nothing is timed (the tests' models stay as they were); a bad value of a
    switch is said in the log and measuring decides."""
    from specviz import products

    monkeypatch.delenv(products.BLAS_ROWS_ENV, raising=False)
    monkeypatch.delenv(products.ONE_ROW_ENV, raising=False)
    monkeypatch.setenv(name, value)
    monkeypatch.setattr(products.time, "perf_counter", lambda: pytest.fail("a tiny model was timed"))
    linears = [PackedLinear(nn.Linear(64, 64)) for _ in range(4)]
    assert products.choose_blas_rows(linears) == 0
    assert not any(m.blas_rows for m in linears)
    assert f"{name}={value!r} is " in caplog.text


@pytest.mark.skipif(not onednn_available(), reason="torch has no oneDNN here")
def test_the_measured_choice_times_both_products_in_turn_row_count_by_row_count(monkeypatch):
    """Over SMALL_MODEL_BYTES, three passes of each product in turn, for 1 row, then 2, …: the BLAS keeps a row count
    only while it is clearly faster, and the first count where it is not ends the search."""
    from specviz import products

    monkeypatch.delenv(products.BLAS_ROWS_ENV, raising=False)
    monkeypatch.delenv(products.ONE_ROW_ENV, raising=False)
    monkeypatch.setattr(products, "SMALL_MODEL_BYTES", 0)
    linears = [PackedLinear(nn.Linear(64, 64)) for _ in range(2)]
    order, now = [], [0.0]
    blas_cost = {1: 0.5, 2: 0.8, 3: 1.0}  # a pass's seconds against oneDNN's 1.0: clearly faster at 1 and 2 rows

    def blas(x, w, b=None):
        order.append(("blas", x.shape[0]))
        now[0] += blas_cost[x.shape[0]] / len(linears)
        return x @ w.T

    def onednn(x, *rest):
        order.append(("onednn", x.shape[0]))
        now[0] += 1.0 / len(linears)
        return x @ linears[0].weight.T

    monkeypatch.setattr(products.F, "linear", blas)
    monkeypatch.setattr(products.torch.ops.mkldnn, "_linear_pointwise", onednn)
    monkeypatch.setattr(products.time, "perf_counter", lambda: now[0])
    assert products.choose_blas_rows(linears) == 2
    assert order == [(kind, rows) for rows in (1, 2, 3) for _ in range(3) for kind in ("blas", "onednn")
                     for _ in linears]


@pytest.mark.skipif(not onednn_available(), reason="torch has no oneDNN here")
def test_a_measured_choice_is_kept_for_later_loads_and_a_damaged_file_is_measured_again(monkeypatch, tmp_path):
    """The file given keeps each choice by machine, torch, threads and weights: a later load (another process: the
    in-process memory is cleared) reads it and times nothing; a file that cannot be read is measured and rewritten."""
    from specviz import products

    monkeypatch.delenv(products.BLAS_ROWS_ENV, raising=False)
    monkeypatch.delenv(products.ONE_ROW_ENV, raising=False)
    monkeypatch.setattr(products, "SMALL_MODEL_BYTES", 0)
    monkeypatch.setattr(products, "_CHOSEN", {})
    timed = []
    monkeypatch.setattr(products, "_blas_faster", lambda chosen, rows: timed.append(rows) or rows < 3)
    monkeypatch.setattr(products.busy, "between", lambda before, after: busy.OtherWork(share=0.001, niced=0.0))
    kept = tmp_path / "cache" / "fast-path.json"
    linears = [PackedLinear(nn.Linear(64, 32)) for _ in range(2)]
    assert products.choose_blas_rows(linears, kept) == 2 and timed == [1, 2, 3]
    (key, rows), = json.loads(kept.read_text()).items()
    assert rows == 2 and f"{torch.get_num_threads()} threads" in key and torch.__version__ in key
    assert products.choose_blas_rows(linears, kept) == 2 and timed == [1, 2, 3]  # remembered in this process

    products._CHOSEN.clear()  # a new process
    fresh = [PackedLinear(nn.Linear(64, 32)) for _ in range(2)]
    assert products.choose_blas_rows(fresh, kept) == 2 and timed == [1, 2, 3] and fresh[0].blas_rows == 2
    other = [PackedLinear(nn.Linear(64, 48)) for _ in range(2)]  # other weights: measured, kept beside the first
    assert products.choose_blas_rows(other, kept) == 2 and timed == [1, 2, 3] * 2
    assert len(json.loads(kept.read_text())) == 2

    for damage in ("{not json", "[1, 2]", json.dumps({key: "many"}), json.dumps({key: True})):
        products._CHOSEN.clear()
        kept.write_text(damage)
        timed.clear()
        assert products.choose_blas_rows(linears, kept) == 2 and timed == [1, 2, 3]
        assert json.loads(kept.read_text())[key] == 2


@pytest.mark.skipif(not onednn_available(), reason="torch has no oneDNN here")
def test_a_choice_timed_on_a_busy_machine_is_used_but_not_kept(monkeypatch, tmp_path, caplog):
    """Other programs took 20% of the machine while the products were timed: the choice holds for this process, the
    log says why it was not kept, and the next process measures again (and keeps a quiet choice)."""
    from specviz import products

    monkeypatch.delenv(products.BLAS_ROWS_ENV, raising=False)
    monkeypatch.delenv(products.ONE_ROW_ENV, raising=False)
    monkeypatch.setattr(products, "SMALL_MODEL_BYTES", 0)
    monkeypatch.setattr(products, "_CHOSEN", {})
    share = [0.2]
    monkeypatch.setattr(products.busy, "between", lambda before, after: busy.OtherWork(share=share[0], niced=0.0))
    monkeypatch.setattr(products, "_blas_faster", lambda chosen, rows: rows < 2)
    kept = tmp_path / "fast-path.json"
    linears = [PackedLinear(nn.Linear(64, 32)) for _ in range(2)]
    with caplog.at_level(logging.WARNING, logger="specviz"):
        assert products.choose_blas_rows(linears, kept) == 1 and linears[0].blas_rows == 1
    assert not kept.exists()
    assert "products BLAS for 1 row, oneDNN above" in caplog.text and "took 20% of the machine" in caplog.text
    assert "not kept" in caplog.text

    products._CHOSEN.clear()  # a new process, on a quiet machine: measured again, and kept
    share[0] = 0.002
    monkeypatch.setattr(products, "_blas_faster", lambda chosen, rows: rows < 4)
    assert products.choose_blas_rows(linears, kept) == 3
    assert list(json.loads(kept.read_text()).values()) == [3]


def test_training_takes_the_plain_product_with_gradients():
    packed = PackedLinear(nn.Linear(8, 4))
    packed(torch.randn(2, 8)).sum().backward()
    assert packed.weight.grad is not None


def forwards(model, cache_class, tree=False):
    """Logits of a prefill, a 4-token chain (or tree) verification, a crop and a one-token step."""
    ids = torch.randint(2, VOCAB, (1, 40), generator=torch.Generator().manual_seed(3))
    cache = cache_class(config=model.config)
    out = []
    with torch.inference_mode():
        out.append(model(ids[:, :29], past_key_values=cache).logits)  # the cache holds 29: token 29 comes again
        shape = {}
        if tree:
            mask, positions = target_attention([-1, -1, 0, 1], 29, torch.float32, torch.device("cpu"))
            shape = {"attention_mask": mask, "position_ids": positions}
        out.append(model(ids[:, 29:34], past_key_values=cache, **shape).logits)
        keep_branch(cache, 30, 4, [1, 3] if tree else [0, 1])
        out.append(model(ids[:, 34:35], past_key_values=cache).logits)
        out.append(model(ids[:, 35:39], past_key_values=cache).logits)
    return out


@pytest.mark.parametrize("tree", [False, True])
def test_grouped_attention_and_growing_cache_give_the_stock_logits_bit_for_bit(tree):
    stock = tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=3, heads=4, kv_heads=2)
    grouped = copy.deepcopy(stock)
    grouped.set_attn_implementation(GROUPED_SDPA)  # attention only: products as in the stock model
    for a, b in zip(forwards(stock, DynamicCache, tree), forwards(grouped, GrowingCache, tree)):
        assert torch.equal(a, b)


def test_growing_cache_grows_past_its_room_and_crops_in_place():
    cache = GrowingCache()
    k = torch.arange(2 * 300 * 4, dtype=torch.float32).view(1, 2, 300, 4)
    for start in range(0, 300, 50):
        keys, _ = cache.update(k[:, :, start : start + 50], k[:, :, start : start + 50], 0)
    assert torch.equal(keys, k)
    cache.crop(-20)
    assert cache.get_seq_length() == 280
    keys, _ = cache.update(k[:, :, :1], k[:, :, :1], 0)
    assert torch.equal(keys[:, :, :280], k[:, :, :280]) and torch.equal(keys[:, :, 280], k[:, :, 0])


def test_prepared_model_keeps_the_stock_models_greedy_choices():
    stock, fast = stock_and_fast()
    for a, b in zip(forwards(stock, DynamicCache), forwards(fast, GrowingCache)):
        assert torch.allclose(a, b, atol=1e-4)
        assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_a_heads_output_rows_product_takes_vectors_and_rows():
    from specviz.fast_path import product

    torch.manual_seed(0)
    rows = torch.randn(40, 16)
    out = product(rows)
    x = torch.randn(3, 16)
    with torch.inference_mode():
        assert torch.allclose(out(x), x @ rows.T, atol=1e-5)
        assert torch.allclose(out(x[0]), rows @ x[0], atol=1e-5)


def test_a_masks_group_copy_is_made_once_and_matches_repeat():
    from specviz.fast_path import repeated_mask

    mask = torch.randn(1, 1, 3, 7)
    first = repeated_mask(mask, 1, 3)
    assert torch.equal(first, mask.repeat(1, 1, 3, 1))
    assert repeated_mask(mask, 1, 3) is first  # the next layer of the same forward
    other = torch.randn(1, 1, 3, 7)  # the next forward's mask: its own copy
    assert torch.equal(repeated_mask(other, 1, 3), other.repeat(1, 1, 3, 1))
    assert torch.equal(repeated_mask(mask, 1, 2), mask.repeat(1, 1, 2, 1))  # another grouping is not served stale
