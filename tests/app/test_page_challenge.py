"""AppTest of the Challenge page (no model: a measured run is one of the lesson's recorded runs): a challenge is
opened, refused with a message when its prompt is empty or too long, entered, ranked, and a choice already
measured in the challenge is not run again; a hand-made link with an unknown drafter gets a message."""

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from specviz.app import class_state, service
from specviz.lesson import recordings

PAGE = "../../pages/8_Challenge.py"


@pytest.fixture
def class_store(tmp_path, monkeypatch, no_model):
    monkeypatch.setenv(class_state.STORE_ENV, str(tmp_path / "class.sqlite3"))
    class_state.store.clear()
    yield
    class_state.store().close()
    class_state.store.clear()


@pytest.fixture
def measured(monkeypatch):
    """Each entry's run: the recorded run of its drafter (every call counted)."""
    runs, calls = {c.spec.draft: c for c in recordings.load().group(recordings.DRAFTS).values()}, []

    def measured_run(target, draft, prompt, settings, **kwargs):
        calls.append((draft, settings.gamma, prompt, settings.max_new_tokens))
        return runs[draft]

    monkeypatch.setattr(service, "measured_run", measured_run)
    return calls


def challenge_page(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    for name, value in query.items():
        at.query_params[name] = value
    return at.run()


def open_challenge(at: AppTest, prompt: str, tokens: int = 16) -> AppTest:
    at.text_area(key="challenge-new-prompt").set_value(prompt)
    at.select_slider(key="challenge-new-tokens").set_value(tokens)
    return at.button(key="challenge-open").click().run()


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def test_a_challenge_refuses_an_empty_or_oversized_prompt_and_keeps_what_was_typed(class_store):
    at = challenge_page()
    assert any(i.value.startswith("No challenge yet") for i in at.info)
    open_challenge(at, "   ")
    assert errors(at) == ["Could not open the challenge: the challenge needs a prompt: type the text that every "
                          "entry will continue"]
    long = "Tell me a story. " * 200
    open_challenge(at, long)
    assert "3,400 characters and a challenge takes at most 2,000" in errors(at)[0]
    assert at.text_area(key="challenge-new-prompt").value == long  # nothing typed is lost
    assert not at.exception and class_state.store().challenge() is None


def test_entries_are_ranked_and_an_identical_choice_is_not_measured_again(class_store, measured):
    presenter = open_challenge(challenge_page(), "Name three rivers.")
    assert presenter.subheader[0].value == "Challenge 1: continue this prompt for 16 new tokens"
    drafts = {c.spec.draft: c for c in recordings.load().group(recordings.DRAFTS).values()}
    for drafter in ("ngram", "suffix", "ngram"):  # the third is the first's choice again, in another session
        learner = challenge_page(drafter=drafter, gamma="4")
        learner.button(key="challenge-run").click().run()
        assert not learner.exception and not errors(learner)
    assert measured == [("ngram", 4, "Name three rivers.", 16), ("suffix", 4, "Name three rivers.", 16)]
    assert any("already measured in this challenge" in i.value for i in learner.info)
    rows = class_state.store().leaderboard(1)
    fast, slow = sorted(("ngram", "suffix"), key=lambda d: -drafts[d].speedup)
    assert [(r.rank, r.result.choice.drafter, r.entries, r.measurements) for r in rows] == [
        (1, fast, 2 if fast == "ngram" else 1, 1), (2, slow, 2 if slow == "ngram" else 1, 1)]
    board = learner.table[0].value  # the last learner entered ngram
    assert list(board.index) == ["1", "2"] and board["yours"].tolist() == ["★" if d == "ngram" else "" for d in
                                                                           (fast, slow)]


def test_a_closed_challenge_takes_no_entry_and_a_bad_link_is_named(class_store, measured):
    presenter = open_challenge(challenge_page(), "Name three rivers.")
    learner = challenge_page(drafter="gpt-9", gamma="4", rule="loose")
    warning = learner.warning[0].value
    assert "drafter: 'gpt-9' is not offered here" in warning and "rule: 'loose' is not offered here" in warning
    assert learner.selectbox(key="challenge-drafter").value == "ngram"  # the default kept
    presenter.button(key="challenge-close").click().run()
    learner.run()
    assert any(i.value.startswith("This challenge is closed") for i in learner.info)
    assert "challenge-run" not in [b.key for b in learner.button]
    assert not learner.exception and measured == []


@pytest.mark.parametrize("room_mode, query, every", [
    ("", {}, class_state.LIVE_S),  # outside room mode: anyone's screen may be the projected one
    ("1", {"presenter": "teacher"}, class_state.LIVE_S),  # the presenter's screen, which the room watches
    ("1", {}, class_state.LEARNER_LIVE_S),  # a learner's own screen: read half as often
])
def test_the_board_is_read_again_most_often_on_the_screen_the_room_watches(class_store, monkeypatch, room_mode,
                                                                           query, every):
    monkeypatch.setenv("SPECVIZ_ROOM", room_mode)
    if query:  # (AppTest has no cookies to read a presenter's from: no key, no presenter)
        monkeypatch.setenv("SPECVIZ_PRESENTER_KEY", "teacher")
    class_state.store().open_challenge("Name three rivers.", 16)
    intervals = []
    fragment = st.fragment

    def recorded(func=None, *, run_every=None):
        intervals.append(run_every)
        return fragment(func, run_every=run_every)

    monkeypatch.setattr(st, "fragment", recorded)
    at = challenge_page(**query)
    assert not at.exception
    assert at.get("table") == [] and "Leaderboard" in [s.value for s in at.subheader]  # the board was drawn, empty
    assert intervals == [every]
