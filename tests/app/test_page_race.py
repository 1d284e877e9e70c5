"""AppTest of the race on every page that shows it: Home and the lesson from the shipped recording (no model),
Rounds from the older demo record and from a measured run, Compare drafts with one lane per drafter."""

from __future__ import annotations

import dataclasses
import json

import pytest
from streamlit.testing.v1 import AppTest

from specviz import race
from specviz.app import controls
from specviz.config import Decoding
from specviz.lab import sweeps

from app_helpers import figure

pytestmark = pytest.mark.usefixtures("one_thread")

SETTINGS = Decoding(gamma=3, max_new_tokens=10, chat=False)
PROMPT = "w1 w2 w3 w4 w5"


@pytest.fixture(scope="module")
def points(target, load):
    return sweeps.compare_drafts(target, ["ngram", "tiny-padded"], [PROMPT], SETTINGS, load=load)


def race_doc(at: AppTest) -> str:
    """The race page (the iframe's HTML) the script drew."""
    docs = [e.proto.srcdoc for e in at.get("iframe") if "class=\"race\"" in e.proto.srcdoc]
    assert len(docs) == 1, f"{len(docs)} races on the page"
    return docs[0]


def lane_names(doc: str) -> list[str]:
    return [part.split('"', 1)[0] for part in doc.split('class="lane" data-lane="')[1:]]


def test_home_plays_the_shipped_race_without_a_model_at_any_speed(no_model):
    at = AppTest.from_file("../../app.py", default_timeout=60).run()
    assert not at.exception
    recording = race.load_recording()
    doc = race_doc(at)
    assert lane_names(doc) == [race.BASELINE, *recording.runs]
    assert doc.startswith("<!-- race 0 -->") and "replayed at real time" in doc
    assert doc.count('class="sv-tok sv-') == sum(c.spec.new_tokens for c in recording.runs.values()) + \
        next(iter(recording.runs.values())).baseline.new_tokens, "every token of every lane, each at its time"
    assert any(recording.info["made_on"] in c.value for c in at.caption), "the recording says where it was made"
    chart = figure(at, "Where the time goes")
    rows = {y for trace in chart["data"] if trace["type"] == "bar" for y in trace["y"]}
    assert rows == {f"{race.BASELINE} · target"} | {f"{d} · {k}" for d in recording.runs for k in ("target", "draft")}
    at.button_group(key="home-race-speed").set_value(0.25).run()
    assert "replayed at 0.25×" in race_doc(at) and "const SPEED = 0.25" in race_doc(at)
    at.button(key="home-race-again").click().run()
    assert race_doc(at).startswith("<!-- race 1 -->"), "run again: a new race page, so the browser starts over"


def test_the_lesson_opens_with_the_race(no_model):
    at = AppTest.from_file("../../pages/0_Lesson.py", default_timeout=60)
    at.query_params["step"] = "1"
    at.run()
    assert not at.exception
    assert lane_names(race_doc(at))[0] == race.BASELINE
    second = AppTest.from_file("../../pages/0_Lesson.py", default_timeout=60)
    second.query_params["step"] = "2"
    second.run()
    assert not second.exception and not [e for e in second.get("iframe") if "class=\"race\"" in e.proto.srcdoc]


def test_rounds_races_an_older_record_and_says_its_times_are_reconstructed(no_model):
    """A record made before arrival times were kept (an old export) still races, from its rounds' times."""
    demo = controls.load_demo()
    older = dataclasses.replace(demo, spec=dataclasses.replace(demo.spec, arrival_seconds=None),
                                baseline=dataclasses.replace(demo.baseline, arrival_seconds=None))
    at = AppTest.from_file("../../pages/1_Rounds.py", default_timeout=60)
    at.session_state["rounds-result"] = older
    at.run()
    assert not at.exception
    assert lane_names(race_doc(at)) == [race.BASELINE, demo.spec.draft]
    assert sum(race.RECONSTRUCTED in c.value for c in at.caption) == 2
    latency = at.dataframe[0].value
    assert latency["arrival times"].tolist() == [race.RECONSTRUCTED] * 2


def test_rounds_shows_a_measured_run_s_race_latency_and_time_lanes(no_model, points):
    comparison = points[1].comparison  # the shared-layer draft: some rounds keep drafts
    at = AppTest.from_file("../../pages/1_Rounds.py", default_timeout=60)
    at.session_state["rounds-result"] = comparison
    at.run()
    assert not at.exception
    assert lane_names(race_doc(at)) == [race.BASELINE, comparison.spec.draft]
    assert not any(race.RECONSTRUCTED in c.value for c in at.caption)
    latency = at.dataframe[0].value
    spec, alone = race.latency(comparison.spec), race.latency(comparison.baseline)
    assert latency["time to first token (ms)"].tolist() == pytest.approx([1000 * alone.ttft, 1000 * spec.ttft])
    assert latency["p90 gap (ms)"].tolist() == pytest.approx([1000 * alone.gap_p90, 1000 * spec.gap_p90])
    chart = figure(at, "Where the time goes")
    names = [trace.get("name") for trace in chart["data"] if trace["type"] == "bar"]
    assert names == [
        "prefill (reading the prompt)",
        "drafting",
        "target forward (verify; one step for the target alone)",
    ]
    target = next(t for t in chart["data"] if t.get("name", "").startswith("target forward"))
    assert len(target["x"]) == len(comparison.spec.rounds) + len(comparison.baseline.rounds), "one bar per round"
    assert json.dumps(chart).count("finish ") == 2, "a finish mark per lane"


def test_compare_drafts_races_every_drafter_on_the_prompt_shown(no_model, points):
    at = AppTest.from_file("../../pages/3_Compare_drafts.py", default_timeout=60)
    at.session_state["cmp-sweep"] = sweeps.Sweep(
        len(points),
        {
            "target": "tiny-target",
            "drafts": ["ngram", "tiny-padded"],
            "prompts": [PROMPT],
            "settings": SETTINGS,
            "parameters": {},
        },
        list(points),
        sweeps.DONE,
    )
    at.run()
    assert not at.exception
    assert lane_names(race_doc(at)) == [race.BASELINE, "ngram", "tiny-padded"]
