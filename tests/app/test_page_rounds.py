"""AppTest of Home and Rounds on the real engine (embedded SmolLM2, short runs)."""

import statistics

import pytest
from streamlit.testing.v1 import AppTest

from specviz.app.views import figures
from specviz.busy import NOTICEABLE_SHARE
from specviz.lab.measure import BUSY_PAIRS

from app_helpers import chart_titles

pytestmark = pytest.mark.slow


def _html(at) -> str:
    return "".join(h.proto.body for h in at.get("html"))


def test_home_shows_the_recorded_run_and_runs_live(one_pair):
    at = AppTest.from_file("../../app.py", default_timeout=300).run()
    assert not at.exception
    assert "sv-accepted" in _html(at) and "sv-resampled" in _html(at)  # the recorded run, before any model call
    at.select_slider(key="home-tokens").set_value(16).run()  # the shortest live run: the flow is under test
    at.button(key="home-run").click().run()
    assert not at.exception and not at.error
    result = at.session_state["home-result"]
    assert result.identical and result.spec.settings["max_new_tokens"] == 16
    assert any("Identical to the target alone" in s.value for s in at.success)


def test_rounds_run_replay_and_bad_input_keeps_results(monkeypatch):
    at = AppTest.from_file("../../pages/1_Rounds.py", default_timeout=300).run()
    assert not at.exception
    assert any("recorded by the project" in i.value for i in at.info)
    at.selectbox(key="rounds-draft").set_value("ngram")
    at.slider(key="rounds-maxnew").set_value(16)
    at.button(key="rounds-run").click().run()
    assert not at.exception and not at.error
    result = at.session_state["rounds-result"]
    run = result.spec
    assert run.new_tokens == 16 and result.identical and run.draft == "ngram"
    shown = {m.label: m.value for m in at.metric}
    assert shown["α"] == f"{run.acceptance_rate:.2f}"
    assert shown["speedup"] == figures.speedup_value(result)  # the median, or the range when the pairs disagree
    pairs = 3 + BUSY_PAIRS * (statistics.median(result.other_work[:3]) > NOTICEABLE_SHARE)  # 5: the suite's other
    assert result.pairs == pairs and any(f"over {pairs} pairs" in c.value for c in at.caption)  # worker was busy
    body = _html(at)
    assert "p (target)" in body and "sv-timeline" in body

    # Live: changing γ re-runs the whole comparison (a baseline timed earlier is never reused: each run pairs its own),
    # here in one pair: the default's pairs were checked above.
    monkeypatch.setenv("SPECVIZ_PAIRS", "1")
    at.slider(key="rounds-gamma").set_value(2).run()
    again = at.session_state["rounds-result"]
    assert again.spec.settings["gamma"] == 2 and again.baseline is not result.baseline and again.identical
    assert again.pairs == 1  # busy pairs are added only to a spread (2 pairs or more)
    assert again.baseline.output_ids == result.baseline.output_ids

    # Replay: stepping back shows fewer rounds.
    at.button(key="rounds-back").click().run()
    assert at.session_state["rounds-step"] == len(again.spec.rounds) - 1

    # An empty prompt gets one clear error box; the last good run stays on the page.
    text_key = next(t.key for t in at.text_area)
    at.text_area(key=text_key).set_value("   ").run()
    assert not at.exception
    assert any("prompt is empty" in e.value for e in at.error)
    assert at.session_state["rounds-result"] is again


def test_rounds_draws_a_token_tree_and_its_mask(one_pair):
    at = AppTest.from_file("../../pages/1_Rounds.py", default_timeout=300).run()
    at.selectbox(key="rounds-draft").set_value("smol-head-8k")
    at.slider(key="rounds-maxnew").set_value(16)
    at.slider(key="rounds-tree").set_value(6)
    at.button(key="rounds-run").click().run()
    assert not at.exception and not at.error
    result = at.session_state["rounds-result"]
    assert result.identical and result.spec.is_tree
    at.button(key="rounds-first").click().run()  # round 1 (the last round may draft nothing: the budget is spent)
    assert any("a tree of" in t and "verified in one target forward" in t for t in chart_titles(at))
    at.toggle(key="rounds-mask").set_value(True).run()
    assert any("Tree attention mask" in t for t in chart_titles(at))
