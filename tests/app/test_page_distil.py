"""The Distil page with AppTest: a very short distillation on the embedded target, end to end.

The page always distils for the embedded SmolLM2 target, so this is slow: the target answers 14
training prompts (2 per workload, 16 tokens), a 1-layer, 64-wide draft trains for 10 steps, and the
race measures it alone on 7 evaluation prompts, 16 tokens each (each rival would add 7 more comparisons). The head
is trained the same way and not raced (0 evaluation prompts): its race is the draft's with two drafters, and took 47 of
the test's 92 s. Everything
the page writes (data, checkpoints, the new draft) goes to a temporary SPECVIZ_CACHE, never to ~/.cache/specviz;
only the converted target is reused from the real cache, through a symlink.
"""

import base64
import json
import math
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from specviz import models

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "6_Distil.py")
NAME = "my-draft-1l64-s10"

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]  # one thread: faster on a busy CPU


def values(trace: dict, axis: str) -> list:
    """A trace's x or y as a list: plotly writes numpy columns as base64 typed arrays."""
    data = trace[axis]
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).tolist()
    return list(data)


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh SpecViz cache folder holding only a link to the converted target."""
    real_models = models.cache_dir() / "models"
    folder = tmp_path / "specviz-cache"
    folder.mkdir()
    if real_models.is_dir():
        (folder / "models").symlink_to(real_models, target_is_directory=True)
    monkeypatch.setenv("SPECVIZ_CACHE", str(folder))
    return folder


def test_rivals_are_raced_by_name_or_shipped_folder():
    """A rival picked on the page reaches the race as ngram by name and a shipped draft by its folder; none picked
    (None) is the default race of the new draft's own kind."""
    from specviz.training import quick

    shipped = {f.name: f for kind, f in models.draft_folders() if kind == "shipped draft"}
    assert quick._rivals(["ngram", "smol-draft-1l128"], head=False) == ["ngram", shipped["smol-draft-1l128"]]
    assert quick._rivals([], head=True) == []
    assert quick._rivals(None, head=False) == [shipped[n] for n in quick.default_rivals(head=False)]
    assert quick.default_rivals(head=True)[0] == "ngram"


def test_distil_page_trains_races_and_adds_the_draft_to_every_picker(cache):
    at = AppTest.from_file(PAGE, default_timeout=900).run()
    assert not at.exception
    assert "press **Distil**" in at.info[0].value
    at.slider(key="ds-layers").set_value(1)
    at.select_slider(key="ds-hidden").set_value(64)
    at.slider(key="ds-prompts").set_value(2)
    at.slider(key="ds-samples").set_value(0)
    at.slider(key="ds-answer").set_value(16)
    at.slider(key="ds-steps").set_value(10)
    at.slider(key="ds-eval").set_value(1)
    at.select_slider(key="ds-race-tokens").set_value(16)  # a short race: the page's flow, not the figure, is under test
    assert at.multiselect(key="ds-rivals-draft").value == ["smol-draft-1l128", "smol-draft-2l256"]  # its own kind
    # No rival: the race is the new draft alone (had the page ignored the pick, the two defaults would race too).
    # What a picked rival races as: test_rivals_are_raced_by_name_or_shipped_folder.
    at.multiselect(key="ds-rivals-draft").set_value([])
    at.run()
    assert at.button(key="ds-run").label == f"Distil {NAME}"
    at.button(key="ds-run").click().run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]

    # Progress and the loss curve: one point per training step.
    assert at.get("progress")[0].proto.value == 100
    assert "step 10/10" in at.get("progress")[0].proto.text
    curve = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert curve["layout"]["title"]["text"] == f"Training {NAME}"
    loss = next(d for d in curve["data"] if d["name"] == "loss")
    agreement = next(d for d in curve["data"] if d["name"].startswith("agreement"))
    assert values(loss, "x") == list(range(10)) and all(math.isfinite(y) and y > 0 for y in values(loss, "y"))
    assert all(0 <= y <= 1 for y in values(agreement, "y"))

    # The race against the rival picked, and the draft saved in the (temporary) user drafts folder.
    assert any("16 tokens" in h.value for h in at.subheader)
    table = at.dataframe[0].value
    assert table["draft"].tolist() == [NAME]
    assert (table["measured speedup"] > 0).all() and table["α"].between(0, 1).all()
    assert all(v.endswith("/7") for v in table["identical"]), "7 evaluation prompts, one per workload"
    assert (cache / "drafts" / NAME / "config.json").is_file()
    assert any(NAME in s.value and str(cache / "drafts") in s.value for s in at.success)

    # Every draft picker offers it now.
    rounds = AppTest.from_file(str(ROOT / "pages" / "1_Rounds.py"), default_timeout=60).run()
    assert NAME in rounds.selectbox(key="rounds-draft").options
    compare = AppTest.from_file(str(ROOT / "pages" / "3_Compare_drafts.py"), default_timeout=60).run()
    assert NAME in compare.multiselect(key="cmp-drafts").options


def test_distil_page_trains_a_draft_head_with_a_live_curve_and_no_race_when_asked(cache):
    """Head mode: the target answers 7 prompts (16 tokens), reads no documents, 10 steps. The head reads three of the
    target's hidden states, fused (EAGLE-3). 0 evaluation prompts: no race, and the head is still offered
    everywhere."""
    name = "my-head-fused-0k-s10"
    at = AppTest.from_file(PAGE, default_timeout=900).run()
    at.radio(key="ds-kind").set_value("draft head").run()
    at.radio(key="ds-reads").set_value("three, fused (EAGLE-3)")
    at.slider(key="ds-docs").set_value(0)
    at.slider(key="ds-prompts").set_value(2)
    at.slider(key="ds-samples").set_value(0)
    at.slider(key="ds-answer").set_value(16)
    at.slider(key="ds-steps").set_value(10)
    at.slider(key="ds-eval").set_value(0)
    assert "ngram" in at.multiselect(key="ds-rivals-head").value
    at.run()
    assert at.button(key="ds-run").label == f"Distil {name}"
    at.button(key="ds-run").click().run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    assert "step 10/10" in at.get("progress")[0].proto.text
    curve = json.loads(at.get("plotly_chart")[0].proto.spec)
    loss = next(d for d in curve["data"] if d["name"] == "loss")
    assert values(loss, "x") == list(range(10)) and all(math.isfinite(y) and y > 0 for y in values(loss, "y"))
    assert not at.dataframe and any("Not raced" in i.value for i in at.info)
    assert any(name in s.value for s in at.success)
    assert json.loads((cache / "drafts" / name / "head.json").read_text())["shape"]["layers"] == [3, 15, 30]
    rounds = AppTest.from_file(str(ROOT / "pages" / "1_Rounds.py"), default_timeout=60).run()
    assert {name, f"ngram+{name}"} <= set(rounds.selectbox(key="rounds-draft").options)
