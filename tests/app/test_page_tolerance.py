"""The verification-tolerance page (AppTest, no browser).

The controls are checked without a model; the sweep runs once end to end on the embedded SmolLM2
target, kept small: the target's first 4 layers as the draft, one prompt, 8 new tokens, τ = 0 and
τ = 3 with top-20 after the exact reference.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "4_Verification_tolerance.py")
TIMEOUT = 300  # one script run; the first load of the default target converts a GGUF (~25 s, once)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """SmolLM2 decodes one token at a time: on a shared 2-core machine extra threads only spin-wait."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def open_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT).run()
    assert not at.exception
    return at


def chart_titles(at: AppTest) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def test_page_opens_without_a_model_and_asks_for_a_sweep():
    at = open_page()
    assert any("Run sweep" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) == 0
    # Greedy by default: τ from 0 to 3 in 4 values, with a top-k.
    assert at.slider(key="tol-tau").value == (0.0, 3.0)
    assert at.slider(key="tol-topk").value == 3
    assert any("exact, then τ=0, τ=1, τ=2, τ=3." in c.value for c in at.caption)


def test_the_prompt_box_is_sent_its_text_on_every_run():
    """A browser that draws the box afresh must get the text again, never fall back to the widget's empty default."""
    at = open_page()
    box = at.text_area(key="tol-text")
    preset = box.value
    assert preset and box.proto.set_value and box.proto.value == preset
    at.slider(key="tol-steps").set_value(2).run()  # a rerun caused by another control
    box = at.text_area(key="tol-text")
    assert box.value == preset and box.proto.set_value and box.proto.value == preset
    box.input("My own question about tides?").run()
    at.slider(key="tol-steps").set_value(3).run()
    box = at.text_area(key="tol-text")
    assert box.value == "My own question about tides?" and box.proto.value == box.value and box.proto.set_value


def test_sampling_sweeps_the_lenience_from_exact_to_loose():
    at = open_page()
    at.slider(key="tol-temp").set_value(0.8)
    at.slider(key="tol-steps").set_value(3)
    at.run()
    assert not at.exception
    assert "tol-tau" not in [s.key for s in at.slider] and "tol-topk" not in [s.key for s in at.slider]
    assert at.slider(key="tol-lenience").value == (0.2, 1.0)
    assert any("exact, then l=1, l=0.6, l=0.2." in c.value for c in at.caption)


@pytest.mark.slow
def test_sweep_on_the_embedded_target():
    at = open_page()
    at.selectbox(key="tol-draft").set_value("layerskip:4")
    at.slider(key="tol-maxnew").set_value(8)
    at.slider(key="tol-tau").set_value((0.0, 3.0))
    at.slider(key="tol-steps").set_value(2)
    at.slider(key="tol-topk").set_value(20)
    at.run()
    at.button(key="tol-run").click().run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]

    sweep = at.session_state["tol-sweep"]
    assert sweep.complete and [p.value for p in sweep.points] == [0.0, 3.0] and sweep.top_k == 20
    # Exact greedy verification is lossless: the reference is the target alone's output.
    reference = sweep.reference.comparisons[0]
    assert reference.identical and reference.spec.output_ids == reference.baseline.output_ids
    assert reference.spec.new_tokens == 8
    assert any("exact reference is identical to the target alone" in s.value for s in at.success)

    table = at.dataframe[0].value
    assert list(table["rule"]) == ["exact", "τ=0", "τ=3"]  # the reference, then a row per tolerance
    assert list(table["τ"].iloc[1:]) == [0.0, 3.0]
    exact, tight = table.iloc[0], table.iloc[1]
    assert (exact["agreement"], exact["BLEU"], exact["ROUGE-L"]) == (1.0, pytest.approx(100.0), pytest.approx(1.0))
    # τ = 0 accepts only the target's own best token: the output is the exact one again.
    assert (tight["agreement"], tight["BLEU"]) == (1.0, pytest.approx(100.0))
    assert tight["log-likelihood"] == pytest.approx(exact["log-likelihood"], abs=1e-4)
    assert table["speedup (×)"].gt(0).all() and table["α"].between(0, 1).all()

    titles = chart_titles(at)
    assert len(titles) == 3
    assert titles[0].startswith("Speed: relaxing verification") and titles[1].startswith("Quality: drift")
    tradeoff = json.loads(at.get("plotly_chart")[2].proto.spec)
    assert [t["name"] for t in tradeoff["data"]] == ["relaxed", "exact (reference)"]

    outputs = [h.proto.body for h in at.get("html") if 'class="sv-text"' in h.proto.body]
    assert len(outputs) == 2  # exact beside the loosest rule, tokens coloured by status
    assert all('data-status="' in body for body in outputs)
    assert len(at.get("download_button")) == 3


@pytest.mark.slow
def test_a_math_sweep_reports_the_final_answers_exact_match_against_the_target_alone():
    at = open_page()
    at.selectbox(key="tol-cat").set_value("math").run()
    at.selectbox(key="tol-draft").set_value("ngram")
    at.slider(key="tol-maxnew").set_value(48)
    at.slider(key="tol-tau").set_value((0.0, 3.0))
    at.slider(key="tol-steps").set_value(2)
    at.run()
    at.button(key="tol-run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(h.value == "Task quality: the final answer" for h in at.subheader)
    assert any("target alone's final number" in c.value for c in at.caption)
    table = at.dataframe[1].value
    assert list(table["rule"]) == ["exact", "τ=0", "τ=3"]
    sweep = at.session_state["tol-sweep"]
    baseline = sweep.reference.comparisons[0].baseline.text
    from specviz.lab import quality
    expected = quality.final_number(baseline)
    assert expected is not None, f"the target alone wrote no number: {baseline!r}"
    exact = table.iloc[0]
    # exact greedy verification is the target's own text, so its final answer is the target's
    assert (exact["checked"], exact["final answers matching the target alone"]) == (1, 1)
    loose = sweep.points[-1].comparisons[0].spec.text
    assert table.iloc[2]["final answers matching the target alone"] == int(quality.final_number(loose) == expected)
