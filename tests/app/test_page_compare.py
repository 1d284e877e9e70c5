"""The compare-drafts page and the drafter comparison behind it.

The comparison itself is checked on the tiny random models of conftest.py (milliseconds); the
page is driven with AppTest on the real embedded SmolLM2 target, kept small: one prompt, 8 new
tokens, γ = 3, the two cheapest drafters (n-gram lookup and the target's first 4 layers).
"""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.config import Decoding
from specviz.errors import ConfigError
from specviz.lab import sweeps
from specviz.prompts import load_prompt_set

from tiny import PROMPTS

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "3_Compare_drafts.py")
TIMEOUT = 300  # one script run: the first loads (and may convert) the embedded target


# --- the comparison, on tiny models -----------------------------------------------------------
def test_every_drafter_is_timed_in_pairs_with_its_own_runs_of_the_target_alone(target, load):
    drafts = ["tiny-draft", "ngram", "target"]
    points = sweeps.compare_drafts(target, drafts, list(PROMPTS[:2]), Decoding(gamma=3, max_new_tokens=10), load=load,
                                   pairs=2)
    assert [(p.prompt_index, p.draft) for p in points] == [(i, d) for i in (0, 1) for d in drafts]
    for index in (0, 1):
        mine = [p.comparison for p in points if p.prompt_index == index]
        assert len({id(c.baseline) for c in mine}) == len(drafts), "no baseline is reused: each pairs its own"
        assert len({tuple(c.baseline.output_ids) for c in mine}) == 1, "... of the same target-alone output"
    assert all(p.comparison.paired and p.comparison.pairs == 2 for p in points)
    assert all(p.gamma == 3 and p.comparison.spec.settings["gamma"] == 3 for p in points)
    assert all(p.comparison.identical for p in points), "greedy exact verification must keep the target's output"
    assert all(p.comparison.spec.acceptance_rate == 1.0 for p in points if p.draft == "target")


def test_a_stopped_comparison_returns_the_runs_done(target, load):
    sweep = sweeps.Sweep(planned=6, setup={})

    def on_point(point, done, total):
        sweep.add(point, done, total)
        if done == 4:
            sweep.stop()  # as the page does when Stop is pressed during the fourth run

    points = sweeps.compare_drafts(target, ["tiny-draft", "ngram", "target"], list(PROMPTS[:2]),
                                   Decoding(gamma=2, max_new_tokens=8), load=load, on_point=on_point,
                                   should_stop=sweep.should_stop)
    assert [(p.prompt_index, p.draft) for p in points] == [(0, "tiny-draft"), (0, "ngram"), (0, "target"),
                                                           (1, "tiny-draft")]
    assert sweep.points == points
    assert sweep.message("runs") == "Stopped after 4 of 6 runs; the runs done are shown below."


def test_draft_table_has_one_row_per_drafter_in_the_order_picked(target, load, tiny_models):
    drafts = ["target", "ngram", "tiny-draft"]
    points = sweeps.compare_drafts(target, drafts, list(PROMPTS[:2]), Decoding(gamma=2, max_new_tokens=8), load=load)
    sizes = {d: sweeps.draft_parameters(d, target, load) for d in drafts}
    assert sizes == {"target": target.n_params, "ngram": 0, "tiny-draft": tiny_models["tiny-draft"].n_params}
    table = sweeps.draft_table(points, sizes)
    assert table["draft"].tolist() == drafts
    assert table["parameters"].tolist() == [sizes[d] for d in drafts]
    for row in table.itertuples():
        mine = [p.comparison for p in points if p.draft == row.draft]
        assert row.speedup == pytest.approx(sum(c.baseline_seconds for c in mine) / sum(c.spec_seconds for c in mine))
        assert row.identical and row.prompts == 2
    assert table.loc[table["draft"] == "target", "alpha"].item() == 1.0


@pytest.mark.parametrize("drafts", [["ngram"], ["ngram", "target", "layerskip:1", "layerskip:2", "tiny-draft"],
                                    ["ngram", "ngram"]])
def test_compare_refuses_a_bad_selection_before_running_anything(target, load, drafts):
    calls = []
    with pytest.raises(ConfigError):
        sweeps.compare_drafts(target, drafts, [PROMPTS[0]], Decoding(max_new_tokens=8), load=load,
                              on_point=lambda *a: calls.append(a))
    assert calls == []


def test_one_drafter_shows_a_warning_and_cannot_run():
    """No model is loaded for this: the page checks the selection before anything runs."""
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.run()
    assert not at.exception and not at.warning
    at.multiselect(key="cmp-drafts").set_value(["ngram"]).run()
    assert not at.exception
    assert len(at.warning) == 1 and "Pick 2 to 4 drafters" in at.warning[0].value and "1 picked" in at.warning[0].value
    assert at.button(key="cmp-run").disabled
    at.multiselect(key="cmp-drafts").set_value(["ngram", "target"]).run()
    assert not at.warning and not at.button(key="cmp-run").disabled


# --- the page, on the embedded target -------------------------------------------------------------
def chart(at: AppTest, title: str) -> dict:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    found = [s for s in specs if s["layout"]["title"]["text"].startswith(title)]
    assert found, f"no chart titled {title!r} among {[s['layout']['title']['text'] for s in specs]}"
    return found[0]


@pytest.mark.slow
def test_compare_page_shows_outputs_table_and_charts_per_drafter():
    drafts = ["ngram", "layerskip:4"]
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.run()
    at.multiselect(key="cmp-drafts").set_value(drafts)
    at.multiselect(key="cmp-prompts").set_value([load_prompt_set("chat", "eval")[0]["id"]])
    at.slider(key="cmp-gamma").set_value(3)
    at.slider(key="cmp-maxnew").set_value(8)
    at.run()
    at.button(key="cmp-run").click().run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]

    table = at.dataframe[0].value
    assert table["draft"].tolist() == drafts, "one row per drafter, in the order picked"
    ngram, layerskip = table["parameters"].tolist()
    assert ngram == 0 and 0 < layerskip < 135_000_000, "layerskip:4 runs a slice of the 135M target"
    assert table["identical"].all() and (table["prompts"] == 1).all()
    assert table.loc[table["draft"] == "layerskip:4", "draft_ms_per_token"].item() > 0 and (table["speedup"] > 0).all()

    outputs = [h.proto.body for h in at.get("html") if '<div class="sv-text">' in h.proto.body]
    assert len(outputs) == 2, "one coloured output per drafter, side by side"
    assert all('data-status="' in body for body in outputs)
    captions = [c.value for c in at.caption]
    for row in table.itertuples():
        assert any(c.startswith(f"α {row.alpha:.2f}") and f"{row.speedup:.2f}×" in c for c in captions), row.draft

    bars = chart(at, "Drafters side by side")
    assert [d["name"] for d in bars["data"]] == ["α", "speedup", "c"]
    assert all(d["x"] == drafts for d in bars["data"])
    assert bars["data"][0]["y"] == pytest.approx(table["alpha"].tolist())
    assert bars["data"][1]["y"] == pytest.approx(table["speedup"].tolist())
    assert bars["data"][2]["y"] == pytest.approx(table["c"].tolist())

    scatter = chart(at, "Draft latency vs acceptance")["data"][0]
    assert scatter["x"] == pytest.approx(table["draft_ms_per_token"].tolist())
    assert scatter["y"] == pytest.approx(table["alpha"].tolist())
    assert [t.split(" · ")[0] for t in scatter["text"]] == drafts, "each point is labelled with its drafter"
    sizes = scatter["marker"]["size"]
    assert sizes.index(max(sizes)) == table["speedup"].tolist().index(table["speedup"].max()), "bigger = faster"
    assert [d["name"] for d in chart(at, "Acceptance by draft position")["data"]] == drafts

    winner = table.loc[table["speedup"].idxmax(), "draft"]
    verdict = [m.value for m in list(at.success) + list(at.info)]
    assert any(v.startswith(f"**{winner}**") for v in verdict), verdict
    assert len(at.get("download_button")) == 3
