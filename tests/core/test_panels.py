"""The panel product (specviz/panels.c, built by specviz.panels): exact fp32 products for a few rows, chosen per
machine by `products.choose_packs`; never a change of tokens.

Each output is the sum over k in order whatever the number of rows, so a row gets the same bits alone as among
others; where it cannot be built (no compiler, a failed build) the libraries remain and the log says why.
"""

from __future__ import annotations

import copy
import json
import logging
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from specviz import busy, panels, products
from specviz.config import Decoding, TreeShape
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.fast_path import PackedLinear, onednn_available

from tiny import VOCAB, WORDS, make_tokenizer, tiny_llama, wrap

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(panels.available() is None, reason="the panel product cannot be built here")]


@pytest.fixture()
def built():
    return panels.available()


@pytest.mark.parametrize("rows", [1, 2, 5, 6, 7, 9, 13, 17])
@pytest.mark.parametrize("out_features, in_features", [(64, 48), (200, 70), (7, 33)])
def test_the_product_is_linears_and_a_row_alone_gets_the_same_bits(built, rows, out_features, in_features):
    """Any number of rows (groups of up to six, taken evenly), outputs that fill no whole panel, a bias; a row's
    bits do not depend on the rows beside it."""
    torch.manual_seed(rows)
    weight, bias = torch.randn(out_features, in_features), torch.randn(out_features)
    x = torch.randn(rows, in_features)
    packed = built.pack(weight)
    assert packed.shape == (-(-out_features // built.width), in_features, built.width)
    y = built.product(x, packed, out_features, bias)
    assert torch.allclose(y, F.linear(x, weight, bias), atol=1e-5)
    for i in range(rows):
        assert torch.equal(built.product(x[i:i + 1], packed, out_features, bias)[0], y[i])
    assert built.product(x[:0], packed, out_features).shape == (0, out_features)
    batched = built.product(x[None], packed, out_features, bias)  # [1, rows, K], and a single vector
    assert batched.shape == (1, rows, out_features) and torch.equal(batched[0], y)
    assert torch.equal(built.product(x[0], packed, out_features, bias), y[0])


def test_a_packed_linear_on_panels_follows_a_changed_weight_and_survives_copies(built):
    torch.manual_seed(0)
    plain = nn.Linear(48, 80)
    packed = PackedLinear(plain)
    packed.use_panels(built)
    x = torch.randn(5, 48)
    with torch.inference_mode():
        assert torch.allclose(packed(x), plain(x), atol=1e-5)
    with torch.no_grad():
        plain.weight.mul_(2)  # shared parameter: the panels must be packed again
    with torch.inference_mode():
        assert torch.allclose(packed(x), plain(x), atol=1e-5)
        for copied in (copy.deepcopy(packed), pickle.loads(pickle.dumps(packed))):
            assert copied.panels is not None and torch.equal(copied(x), packed(x))
    packed.use_panels(None)  # back to oneDNN
    with torch.inference_mode():
        assert packed.panels is None and torch.allclose(packed(x), plain(x), atol=1e-5)


def test_a_copy_converted_to_bf16_takes_onednn_and_the_panels_refuse_other_dtypes(built):
    """Training answers with a bf16 twin of the target (a deep copy, then .to(bf16)), or converting a model in place:
    the panels were chosen for fp32 weights (a twin answers batches of many rows), so those linears go back to oneDNN;
    the product itself refuses rows of another dtype than the weight's."""
    torch.manual_seed(0)
    packed = PackedLinear(nn.Linear(48, 80))
    packed.use_panels(built)
    x = torch.randn(5, 48)
    with torch.inference_mode():
        packed(x)
    for model in (copy.deepcopy(packed).to(torch.bfloat16), packed.to(torch.bfloat16)):
        with torch.inference_mode():
            y = model(x.bfloat16())
        assert y.dtype == torch.bfloat16 and model.panels is None
        assert torch.allclose(y.float(), F.linear(x.bfloat16(), model.weight, model.bias).float(), atol=0.05, rtol=0.02)
    with pytest.raises(TypeError, match="fp32 rows, or bf16 rows by a bf16 weight"):
        built.product(x.bfloat16(), built.pack(torch.randn(80, 48)), 80)
    with pytest.raises(TypeError, match="fp32 rows, or bf16 rows by a bf16 weight"):
        built.product(x.half(), built.pack(torch.randn(80, 48).half()), 80)


@pytest.mark.parametrize("rows", [1, 3, 9, 12])
def test_a_bf16_weight_gives_the_fp32_product_over_its_values_and_a_row_alone_the_same_bits(built, rows):
    """A draft head's weights in bf16: each weight widened exactly, so the product is the fp32 panel product over the
    same values, to the bit (then rounded to bf16), whatever the rows; a partial last panel too."""
    torch.manual_seed(1)
    weight = torch.randn(100, 72).bfloat16()
    x = torch.randn(rows, 72).bfloat16()
    halves = built.pack(weight)
    assert halves.dtype == torch.bfloat16
    y = built.product(x, halves, 100)
    assert y.dtype == torch.bfloat16
    assert torch.equal(y, built.product(x.float(), built.pack(weight.float()), 100).bfloat16())
    assert torch.equal(built.product(x[-1:], halves, 100)[0], y[-1])
    assert torch.allclose(y.float(), x.float() @ weight.float().T, atol=0.1, rtol=0.02)


@pytest.mark.parametrize("rows", [1, 3, 12])
def test_fp32_rows_by_a_bf16_weight_give_the_fp32_product_over_its_values(built, rows):
    """A head with fp32 activations over bf16 weights: its fp32 rows are not rounded first, and the product is the
    fp32 panel product over the weight's values, to the bit, given back in fp32; a row alone gets the same bits."""
    torch.manual_seed(5)
    weight = torch.randn(100, 72).bfloat16()
    x = torch.randn(rows, 72)
    y = built.product(x, built.pack(weight), 100)
    assert y.dtype == torch.float32
    assert torch.equal(y, built.product(x, built.pack(weight.float()), 100))
    assert torch.equal(built.product(x[-1:], built.pack(weight), 100)[0], y[-1])


def test_a_head_on_bf16_panels_runs_its_activations_in_fp32(built):
    """`fast_path.activations`: fp32 where every product of a bf16 network is on the bf16 panels (a prepared head
    beside an fp32 target), its weights' dtype elsewhere. Its linears then take fp32 rows and give fp32: a few rows by
    the panels, a whole prompt by torch's bf16 product."""
    from specviz.fast_path import activations, prepare

    torch.manual_seed(6)
    head = prepare(nn.Sequential(nn.Linear(64, 96), nn.Linear(96, 64)).bfloat16(), torch.device("cpu"))
    assert activations(head) == torch.float32
    assert activations(nn.Sequential(nn.Linear(64, 96)).bfloat16()) == torch.bfloat16  # not prepared: oneDNN or BLAS
    assert activations(prepare(nn.Sequential(nn.Linear(64, 96)), torch.device("cpu"))) == torch.float32  # fp32 weights
    x = torch.randn(3, 64)
    with torch.inference_mode():
        few = head(x)
        many = head(torch.randn(products.BF16_PANEL_ROWS + 1, 64))
    assert few.dtype == many.dtype == torch.float32
    expected = F.linear(F.linear(x, head[0].weight.float(), head[0].bias.float()), head[1].weight.float(),
                        head[1].bias.float())
    assert torch.allclose(few, expected, atol=1e-4, rtol=1e-4)


def test_a_heads_bf16_linears_take_the_panels_and_a_whole_prompt_takes_torchs_product(built, monkeypatch):
    """`fast_path.product` (a head's output rows) and a head prepared in bf16 take the bf16 panels for the few rows a
    draft reads; a read of a whole prompt (more than BF16_PANEL_ROWS rows) takes torch's bf16 product."""
    from specviz.fast_path import prepare, product

    torch.manual_seed(2)
    rows = product(torch.randn(300, 64).bfloat16())
    assert isinstance(rows, PackedLinear) and rows.panels is not None and rows.packed.dtype == torch.bfloat16
    head = prepare(nn.Sequential(nn.Linear(64, 96), nn.Linear(96, 64)).bfloat16(), torch.device("cpu"))
    assert all(m.panels is not None for m in head if isinstance(m, PackedLinear))
    big = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(17)]).bfloat16()  # 34 MB: a model loaded in bf16
    assert all(m.panels is None for m in prepare(big, torch.device("cpu")) if isinstance(m, PackedLinear))
    calls = []
    real = panels.Panels.product
    monkeypatch.setattr(panels.Panels, "product",
                        lambda self, *a, **k: calls.append(a[0].shape[0]) or real(self, *a, **k))
    x = torch.randn(3, 64).bfloat16()
    with torch.inference_mode():
        few = rows(x)
        many = rows(torch.randn(products.BF16_PANEL_ROWS + 1, 64).bfloat16())
    assert calls == [3] and many.shape == (products.BF16_PANEL_ROWS + 1, 300)
    assert torch.allclose(few.float(), x.float() @ rows.weight.float().T, atol=0.1, rtol=0.02)


def test_the_switch_turns_the_panels_off(monkeypatch):
    monkeypatch.setenv(panels.SWITCH_ENV, "0")
    assert panels.available() is None


@pytest.mark.parametrize("compiler", ["/nonexistent/cc", "false"])
def test_without_a_working_compiler_the_libraries_remain_and_the_log_says_why(monkeypatch, tmp_path, caplog,
                                                                               compiler):
    monkeypatch.delenv(panels.SWITCH_ENV, raising=False)
    monkeypatch.setenv("CC", compiler)
    with caplog.at_level(logging.WARNING, logger="specviz"):
        assert panels.available(tmp_path) is None
    assert "could not be built" in caplog.text and "torch's libraries only" in caplog.text
    assert not list((tmp_path / "kernels").glob("*.so")) if (tmp_path / "kernels").exists() else True


def test_a_build_is_kept_and_a_later_process_loads_it_without_compiling(monkeypatch, tmp_path):
    monkeypatch.delenv(panels.SWITCH_ENV, raising=False)
    first = panels.available(tmp_path)
    assert first is not None and first.path.parent == tmp_path / "kernels" and first.path.is_file()
    panels._built.cache_clear()  # a new process
    builds = []
    real = panels.subprocess.run
    monkeypatch.setattr(panels.subprocess, "run", lambda args, **kw: builds.append(args) or real(args, **kw))
    again = panels.available(tmp_path)
    assert again.path == first.path
    assert not [args for args in builds if "-shared" in args]  # asked the compiler who it is, built nothing


@pytest.mark.skipif(not onednn_available(), reason="torch has no oneDNN here")
def test_the_choice_is_measured_kept_and_packs_every_linear(monkeypatch, tmp_path):
    """Over SMALL_MODEL_BYTES: panels where they were clearly faster, packed for them; the choice is kept by
    machine and build, and a later load reads it; SPECVIZ_PANELS=1 takes them without measuring, =0 never."""
    monkeypatch.delenv(panels.SWITCH_ENV, raising=False)
    monkeypatch.setattr(products, "SMALL_MODEL_BYTES", 0)
    monkeypatch.setattr(products, "_CHOSEN", {})
    monkeypatch.setattr(products.busy, "between", lambda before, after: busy.OtherWork(share=0.001, niced=0.0))
    timed = []
    monkeypatch.setattr(products, "_panels_faster", lambda chosen, built, packed: timed.append(1) or products.PANELS)
    kept = tmp_path / "fast-path.json"
    linears = [PackedLinear(nn.Linear(64, 32), pack=False) for _ in range(2)]
    assert products.choose_packs(linears, kept) == products.PANELS and timed == [1]
    assert all(linear.panels is not None and linear.packed.dim() == 3 for linear in linears)
    (key, choice), = json.loads(kept.read_text()).items()
    assert choice == "panels" and key.startswith("packs | ") and "panels-" in key
    products._CHOSEN.clear()  # a new process reads the file
    fresh = [PackedLinear(nn.Linear(64, 32), pack=False) for _ in range(2)]
    assert products.choose_packs(fresh, kept) == products.PANELS and timed == [1]
    assert products.products_text(0, products.PANELS) == "products panels"
    assert products.products_text(2, products.PANELS) == "products BLAS for 1-2 rows, panels above"

    monkeypatch.setattr(products, "SMALL_MODEL_BYTES", 10**12)  # a tiny model: oneDNN, nothing built or timed
    monkeypatch.setattr(panels, "available", lambda directory=None: pytest.fail("built for a tiny model"))
    tiny = [PackedLinear(nn.Linear(64, 32), pack=False)]
    assert products.choose_packs(tiny, kept) == products.ONEDNN and tiny[0].panels is None
    assert tiny[0].packed is not None


def test_greedy_output_on_panels_is_the_targets_own(monkeypatch):
    """The tiny target and draft with every product on the panels (SPECVIZ_PANELS=1): every drafter kind, as a chain
    and as a tree, writes what the target alone writes (also on the panels)."""
    monkeypatch.setenv(panels.SWITCH_ENV, "1")
    tokenizer = make_tokenizer(WORDS)
    target = wrap("tiny-target", tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=4, heads=4, kv_heads=2),
                  tokenizer)
    draft = wrap("tiny-draft", tiny_llama(seed=1, vocab_size=VOCAB, hidden=32, layers=2, heads=2, kv_heads=1),
                 tokenizer)
    assert target.model.specviz_packs == products.PANELS
    assert all(m.panels is not None for m in target.model.modules() if isinstance(m, PackedLinear))
    for prompt, max_new in (("w1 w2 w3 w4 w5", 13), ("w40 w41 w7", 11)):
        alone = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        for spec in ("ngram", "suffix", "auto", "tiny-draft"):
            for settings in (Decoding(gamma=4, max_new_tokens=max_new),
                             Decoding(gamma=4, max_new_tokens=max_new, tree=TreeShape(budget=8, branching=3))):
                drafter = build_drafter(spec, target, load=lambda name: draft)
                run = generate(target, drafter, prompt, settings)
                assert run.output_ids == alone.output_ids, f"{spec}, {settings.tree}: output differs on the panels"


@pytest.mark.skipif(not onednn_available(), reason="torch has no oneDNN here")
def test_the_timing_packs_each_weight_once_for_each_kind_and_the_chosen_copies_are_kept(monkeypatch, built):
    """The choice times both packed products on copies it packs itself; the linears then take the chosen kind's
    copies instead of packing again (a load packs the target's 513 MB once less)."""
    monkeypatch.delenv(panels.SWITCH_ENV, raising=False)
    monkeypatch.setattr(products, "SMALL_MODEL_BYTES", 0)
    monkeypatch.setattr(products, "_CHOSEN", {})
    counts = {"panels": 0, "onednn": 0}
    pack, reorder = panels.Panels.pack, torch.ops.mkldnn._reorder_linear_weight
    monkeypatch.setattr(panels.Panels, "pack", lambda self, w: counts.__setitem__("panels", counts["panels"] + 1)
                        or pack(self, w))
    monkeypatch.setattr(products.torch.ops.mkldnn, "_reorder_linear_weight",
                        lambda w, rows: counts.__setitem__("onednn", counts["onednn"] + 1) or reorder(w, rows))
    torch.manual_seed(0)
    linears = [PackedLinear(nn.Linear(64, 32), pack=False) for _ in range(3)]
    choice = products.choose_packs(linears)
    assert counts == {"panels": 3, "onednn": 3}
    x = torch.randn(4, 64)
    with torch.inference_mode():
        for linear in linears:
            assert (linear.panels is not None) == (choice == products.PANELS)
            assert torch.allclose(linear(x), F.linear(x, linear.weight, linear.bias), atol=1e-5)


@pytest.mark.parametrize("isa", ["-mno-avx512f", None])
def test_the_avx2_build_computes_the_same_products(tmp_path, isa):
    """A CPU without AVX-512 (an older AMD EPYC) builds the file with 8-float vectors, 16-column panels and 6 rows a
    pass: built here with AVX-512 turned off, it must give linear's products and a row's own bits too."""
    compiler = panels.find_compiler()
    if compiler is None:
        pytest.skip("no C compiler")
    path = panels.compile_library(compiler, tmp_path / "panels-test.so", (isa,) if isa else ())
    built = panels._load(str(path))
    assert built.width == 16 if isa else built.width in (16, 48)  # 48 with AVX-512, 16 without
    torch.manual_seed(1)
    weight = torch.randn(100, 40)
    packed = built.pack(weight)
    for rows in (1, 6, 7, 13):
        x = torch.randn(rows, 40)
        y = built.product(x, packed, 100)
        assert torch.allclose(y, F.linear(x, weight), atol=1e-5)
        assert torch.equal(built.product(x[-1:], packed, 100)[0], y[-1])
        halves = built.product(x.bfloat16(), built.pack(weight.bfloat16()), 100)  # a head's bf16 weights
        assert torch.equal(halves, built.product(x.bfloat16().float(), built.pack(weight.bfloat16().float()), 100)
                           .bfloat16())
        bytes_, scales = built.pack_int8(weight)  # a head's output rows
        assert torch.equal(built.product_int8(x, bytes_, scales), int8_reference(built, x, weight))


@pytest.mark.parametrize("isa", ["-march=x86-64"])
def test_a_build_without_avx2_still_multiplies_int8_rows(tmp_path, isa):
    """Without AVX2 the int8 weights are widened one by one (GCC's generic vectors): the same products."""
    compiler = panels.find_compiler()
    if compiler is None:
        pytest.skip("no C compiler")
    built = panels._load(str(panels.compile_library(compiler, tmp_path / "panels-plain.so", (isa, "-Wno-psabi"))))
    torch.manual_seed(2)
    weight, x = torch.randn(70, 40), torch.randn(3, 40)
    bytes_, scales = built.pack_int8(weight)
    assert torch.equal(built.product_int8(x, bytes_, scales), int8_reference(built, x, weight))


def int8_reference(built, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """What `product_int8` must give: the fp32 panel product over the int8 values, each output times its row's scale."""
    scales = weight.abs().amax(1) / 127
    return built.product(x, built.pack((weight / scales[:, None]).round()), weight.shape[0]) * scales


@pytest.mark.parametrize("rows", [1, 4, 12])
def test_int8_rows_are_the_product_over_the_rounded_weights_and_close_to_fp32(built, rows):
    """A draft head's output rows in int8 (`panels.Int8Rows`): each row scaled to 127 at its largest, each weight
    widened exactly, so the product is the fp32 one over the rounded weights times the scales, to the bit; a row
    alone gets the same bits; within about 1% of the fp32 logits' size, and the likeliest row stays the likeliest
    here."""
    torch.manual_seed(3)
    weight = torch.randn(300, 64) * 0.05
    x = torch.randn(rows, 64)
    module = panels.Int8Rows(weight, built)
    y = module(x)
    assert y.dtype == torch.float32 and y.shape == (rows, 300) and module.packed.dtype == torch.int8
    assert torch.equal(y, int8_reference(built, x, weight))
    assert torch.equal(module(x[-1:])[0], y[-1])
    exact = x @ weight.T
    assert float((y - exact).abs().max()) < 0.01 * float(exact.abs().max())
    assert torch.equal(y.argmax(-1), exact.argmax(-1))


def test_how_far_ahead_it_fetches_changes_no_bit(built, tmp_path):
    """AHEAD (lines fetched ahead; benchmarks/panel_prefetch.py times several) only moves loads earlier: builds with
    other distances give the default build's bits for every row count, a partial last panel included."""
    compiler = panels.find_compiler()
    if compiler is None:
        pytest.skip("no C compiler")
    torch.manual_seed(2)
    weight = torch.randn(2 * built.width + 5, 70)
    packed = built.pack(weight)
    for ahead in (1, 64):
        path = panels.compile_library(compiler, tmp_path / f"ahead{ahead}.so", (f"-DAHEAD={ahead}",))
        other = panels._load(str(path))
        assert other.width == built.width
        for rows in (1, 9, 13):
            x = torch.randn(rows, 70)
            assert torch.equal(other.product(x, packed, weight.shape[0]), built.product(x, packed, weight.shape[0]))
