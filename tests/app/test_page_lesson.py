"""AppTest of the Lesson page: every step from the recordings with no model, predictions, links; Rounds auto-replay."""

from importlib import import_module
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.app import autoplay, controls, service
from specviz.app.lesson import steps as lesson_steps
from specviz.app.lesson.steps import KEYS, ORDER, STEPS, accept_reject, draft_verify
from specviz.config import Decoding
from specviz.lesson import recordings
from specviz.lesson.claim import Claim
from specviz.lesson.question import Question
from specviz.lesson.step import Data, Step


def lesson_page(step: int | None = None) -> AppTest:
    at = AppTest.from_file("../../pages/0_Lesson.py", default_timeout=60)
    if step is not None:
        at.query_params["step"] = str(step)
    return at.run()


def progress_text(at) -> str:
    return at.get("progress")[0].proto.text


def test_every_step_renders_from_the_recordings_without_a_model(no_model):
    at = lesson_page()
    for n, step in enumerate(STEPS, start=1):
        assert not at.exception, f"step {n}: {at.exception}"
        assert not at.error, f"step {n}: {[e.value for e in at.error]}"
        assert at.header[0].value == f"{n}. {step.title}"
        assert progress_text(at).startswith(f"Step {n} of {len(STEPS)}")
        assert at.query_params["step"] == str(n)
        if n < len(STEPS):
            at.button(key="lesson-next").click().run()
    assert at.button(key="lesson-next").disabled
    at.button(key="lesson-back").click().run()
    assert at.header[0].value.startswith(f"{len(STEPS) - 1}.")


def verdicts(at) -> list[str]:
    shown = [s.value for s in at.success] + [e.value for e in at.error]  # a leading ✔ / ✘ may become the box's icon
    return [v.lstrip("✔✘ ") for v in shown if v.lstrip("✔✘ ").startswith(("Right:", "Not quite:"))]


def verified_round_shown(at) -> bool:
    return any("after the target's one forward pass" in c.value for c in at.caption)


def test_a_prediction_hides_the_verdict_until_submitted_then_scores_it(no_model):
    at = lesson_page(step=2)  # Draft, then verify: how many drafts will the target keep?
    assert at.header[0].value.startswith("2.")
    radio = at.radio[0]
    assert radio.value is None and verdicts(at) == []
    assert at.button(key="lesson-submit-2").disabled
    assert not verified_round_shown(at)

    run = recordings.load().runs["main"].spec  # the recording the page shows
    right = str(draft_verify.keep_round(run).n_accepted)
    radio.set_value(right).run()
    assert verdicts(at) == []  # picking is not submitting
    at.button(key="lesson-submit-2").click().run()
    assert any(v.startswith("Right: ") for v in verdicts(at))
    assert verified_round_shown(at)
    assert "Score: 1 / 1" in progress_text(at)

    at.button(key="lesson-next").click().run()  # step 3: which draft fails first? Answer wrongly.
    question = accept_reject.question(Data(recordings.load().group))
    wrong = next(o for i, o in enumerate(question.options) if i != question.answer)
    assert verdicts(at) == []
    at.radio[0].set_value(wrong).run()
    at.button(key="lesson-submit-3").click().run()
    assert any(v.startswith("Not quite: ") for v in verdicts(at))
    assert "Score: 1 / 2" in progress_text(at)


SAME = next(i for i, s in enumerate(STEPS, start=1) if s.key == "same")  # the distribution lab's step


def test_a_link_opens_its_step_and_bad_links_fall_back(no_model):
    at = lesson_page(step=SAME)
    assert at.header[0].value == f"{SAME}. {STEPS[SAME - 1].title}"
    assert not at.exception and not at.error
    at = lesson_page(step="banana")
    assert at.header[0].value.startswith("1.")


def test_the_distribution_lab_reveals_tv_beside_its_noise_band(no_model):
    at = lesson_page(step=SAME)
    assert not any(m.label.startswith("TV") for m in at.metric)  # hidden until the prediction
    at.button(key=f"lesson-skip-{SAME}").click().run()
    shown = {m.label: m.value for m in at.metric}
    band = float(shown["noise band (95%)"].lstrip("≤ "))
    assert float(shown["TV(exact, target)"]) <= band < float(shown["TV(relaxed, target)"])


def test_rounds_auto_replay_plays_and_pauses(monkeypatch):
    clock = [1000.0]  # the replay's clock, moved by hand: a busy CPU must not decide the outcome
    monkeypatch.setattr(autoplay, "_now", lambda: clock[0])
    at = AppTest.from_file("../../pages/1_Rounds.py", default_timeout=60).run()  # the recorded demo: no model
    n = len(controls.load_demo().spec.rounds)
    assert at.session_state["rounds-step"] == n and at.button(key="rounds-play").label == "Play"
    at.select_slider(key="rounds-speed").set_value("4×").run()  # 0.25 s a round
    at.button(key="rounds-play").click().run()
    assert at.session_state["rounds-playing"] and at.button(key="rounds-play").label == "Pause"
    assert at.session_state["rounds-step"] == 1  # from the start
    clock[0] += 0.1
    at.run()  # a rerun before the interval does not move it
    assert at.session_state["rounds-step"] == 1
    clock[0] += 0.25
    at.run()
    assert at.session_state["rounds-step"] == 2
    assert "**Round 2**" in "".join(m.value for m in at.markdown)
    at.button(key="rounds-play").click().run()  # pause
    clock[0] += 5
    at.run()
    assert not at.session_state["rounds-playing"] and at.session_state["rounds-step"] == 2
    assert at.button(key="rounds-play").label == "Play"


@pytest.mark.slow
def test_run_it_live_replaces_the_recording_for_this_session(one_pair):
    at = lesson_page(step=2)
    recorded = recordings.load().runs["main"]
    question_before = at.radio[0].key
    at.button(key="lesson-live-main-2").click().run(timeout=600)
    assert not at.exception and not at.error
    live = at.session_state["lesson-live"]["runs"]["main"]
    # the same settings (recordings made before token trees carry no tree entry: a chain, the default)
    assert Decoding.from_dict(live.spec.settings) == Decoding.from_dict(recorded.spec.settings)
    assert live.spec.draft == recorded.spec.draft
    assert live.identical and live.spec.output_ids == recorded.spec.output_ids  # greedy, exact: the same text
    assert any("Run live on this machine" in c.value for c in at.caption)
    assert at.radio[0].key != question_before  # a fresh prediction on the live run
    assert service.service().worker.alive, "the live run went through the measurement worker"


def test_each_step_reveals_what_its_runs_show_without_contradiction(no_model):
    """After the reveal every step states its runs' claim in words computed from them, and no warning says
    that the runs contradict the step's text (the γ step says where its sweep is fastest)."""
    for n, step in enumerate(STEPS, start=1):
        at = lesson_page(step=n)
        if any(b.key == f"lesson-skip-{n}" for b in at.button):
            at.button(key=f"lesson-skip-{n}").click().run()
        shown = [m.value for m in at.markdown if m.value.startswith("**What these runs show:**")]
        assert len(shown) == 1, f"step {n} ({step.key}) states no claim"
        assert not at.warning, f"step {n}: {[w.value for w in at.warning]}"
        if step.key == "gamma":
            speed = {int(k.split(":")[1]): c.speedup for k, c in recordings.load().group("gamma").items()}
            assert f"γ = {max(speed, key=speed.get)} " in shown[0] or f"γ = {max(speed, key=speed.get)}," in shown[0]


def test_a_step_is_one_file_and_one_line_in_order(no_model):
    """Every file in the steps folder is a step listed once in ORDER, and says everything the lesson needs of it
    (title, what it teaches, question, claim, view); the page builds its steps from that list and nothing else."""
    folder = Path(lesson_steps.__file__).parent
    assert sorted(ORDER) == sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
    assert len(set(ORDER)) == len(ORDER)
    data = Data(recordings.load().group, recordings.load().lab, keys=KEYS)
    for name, step in zip(ORDER, STEPS):
        module = import_module(f"{lesson_steps.__name__}.{name}")
        assert module.STEP is step and isinstance(step, Step), name
        assert step.title.strip() and step.teaches.strip(), name
        assert step.question(data) is None or isinstance(step.question(data), Question), name
        assert isinstance(step.claim(data), Claim) and step.claim(data).text.strip(), name
        assert callable(step.view), name
    assert len(set(KEYS)) == len(KEYS) == len(ORDER)
    at = lesson_page()
    assert progress_text(at).startswith(f"Step 1 of {len(ORDER)} · {STEPS[0].title}")
    listed = [b.label for b in at.button if b.key and b.key.startswith("lesson-goto-")]
    assert listed == [f"{n}. {step.title}" for n, step in enumerate(STEPS, start=1)]
