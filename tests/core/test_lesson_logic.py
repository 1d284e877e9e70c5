"""The lesson's logic and its shipped recordings: questions from real records, scoring, the distribution lab."""

import json
import runpy

import pytest

from specviz.app.lesson.steps import (
    STEPS,
    accept_reject,
    bonus,
    cost,
    draft_verify,
    gamma,
    heads,
    sampling,
    trees,
    worksheet,
)
from specviz.comparison import Comparison
from specviz.lab import same_distribution
from specviz.lab.same_distribution import ALONE, EXACT, RELAXED
from specviz.lesson import recordings
from specviz.lesson.claim import direction
from specviz.lesson.question import Question, Score
from specviz.lesson.step import Data, step_index

REC = recordings.load()
DATA = Data(REC.group, REC.lab)  # the recording, as the page shows it before any live run


def test_every_recipe_is_recorded_and_says_how_it_was_made():
    info = REC.manifest
    assert "scripts/record_lesson.py" in info["made_by"] and info["made_on"] and info["date"]
    assert set(info["runs"]) == set(REC.runs)
    for name, made in info["runs"].items():
        run = REC.runs[name].spec
        assert run.settings == made["settings"], name
        assert run.prompt == recordings.prompt_text(made["prompt_id"]), name
        assert isinstance(REC.runs[name], Comparison)
    assert REC.lab.setup == info["lab"]
    size = sum(p.stat().st_size for p in recordings.LESSON_DIR.iterdir())
    assert size < 600_000, f"the lesson's recordings take {size / 1000:.0f} KB; keep them to a few hundred"


def test_the_recorded_runs_are_what_each_step_needs():
    main = REC.runs["main"]
    assert main.identical and main.spec.drafted > 0
    kept = draft_verify.keep_round(main.spec)
    assert kept.n_accepted < len(kept.drafted)
    assert accept_reject.fail_round(main.spec).rejected_position is not None
    full = bonus.bonus_round(main.spec)
    assert full.n_accepted == len(full.drafted) and full.next_kind == "bonus"
    assert sampling.sampling_pick(REC.runs["sampled"].spec) is not None
    for group in (recordings.DRAFTS, recordings.GAMMA, recordings.RELAXED, recordings.FASTER):
        assert len(REC.group(group)) >= 2, group
    assert all(c.identical for c in REC.group(recordings.GAMMA).values())  # exact greedy: the target's own text


def test_questions_answer_with_what_the_record_says():
    run = REC.runs["main"].spec
    q = draft_verify.question(DATA)
    r = draft_verify.keep_round(run)
    assert q.options[q.answer] == str(r.n_accepted)
    q = accept_reject.question(DATA)
    assert q.answer == accept_reject.fail_round(run).rejected_position
    q = worksheet.question(DATA)
    assert float(q.options[q.answer]) == pytest.approx(run.accepted / run.drafted, abs=0.005)
    q = bonus.question(DATA)
    assert int(q.options[q.answer]) == len(bonus.bonus_round(run).drafted) + 1
    sampled = REC.runs["sampled"].spec
    q = sampling.question(DATA)
    r, i = sampling.sampling_pick(sampled)
    assert float(q.options[q.answer]) == pytest.approx(min(1, r.p[i] / r.q[i]), abs=0.005)
    assert len(set(q.options)) == len(q.options)
    drafts = REC.group(recordings.DRAFTS)
    q = cost.question(DATA)
    assert q.answer == direction(drafts["drafts:target"].speedup)
    q = gamma.question(DATA)
    assert q.options[q.answer] == "γ = " + max(REC.group(recordings.GAMMA).items(), key=lambda kv: kv[1].speedup)[0][6:]


def test_score_counts_each_question_once():
    score = Score({})
    q = Question("x", "?", ("a", "b"), 1, "")
    assert score.text() == "Score: no predictions yet"
    assert score.submit(q, 1) and score.submit(q, 0)  # a second answer does not change the first
    assert not score.submit(Question("y", "?", ("a", "b"), 1, ""), 0)
    assert (score.right, score.asked, score.text()) == (1, 2, "Score: 1 / 2")


@pytest.mark.parametrize("value, expected", [("5", 5), (" 3 ", 3), ("0", 1), ("99", len(STEPS)), ("x", 1), (None, 1)])
def test_step_links_are_clamped(value, expected):
    assert step_index(value, len(STEPS)) == expected


def test_tv_and_its_noise_band():
    assert same_distribution.tv([1, 2, 3], [3, 2, 1]) == 0
    assert same_distribution.tv([1, 1], [2, 2]) == 1
    assert same_distribution.tv([1, 1, 2, 2], [1, 1, 1, 2]) == pytest.approx(0.25)
    ref = [0] * 50 + [1] * 30 + [2] * 20
    small, large = same_distribution.noise_band(ref, 100), same_distribution.noise_band(ref * 16, 1600)
    assert 0 < large < small < 0.5  # more samples, less noise


def test_recorded_lab_exact_within_the_noise_relaxed_above():
    verdict = same_distribution.closeness(REC.lab)
    n = REC.lab.setup["samples"]
    assert all(len(REC.lab.first_tokens[s]) == n for s in (ALONE, EXACT, RELAXED))
    assert verdict.within(EXACT), verdict
    assert not verdict.within(RELAXED), verdict
    assert json.loads(json.dumps(REC.lab.to_dict())) == REC.lab.to_dict()


def test_missing_recordings_say_how_to_make_them(tmp_path):
    with pytest.raises(Exception, match="record_lesson.py"):
        recordings.load(tmp_path)


def test_record_script_refuses_bad_arguments_with_one_line(capsys):
    """The script's own main, in this process: a subprocess paid 14 s of the suite for Python, torch and transformers
    to start before argparse ran (the script's file and its `sys.exit(main())` are all a process adds)."""
    script = runpy.run_path(str(recordings.LESSON_DIR.parents[1] / "scripts" / "record_lesson.py"))
    assert script["main"](["--lab-samples", "5"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "record_lesson: --lab-samples must be at least 20 and --repeats at least 1"]


def test_tree_and_head_questions_answer_with_what_the_record_says():
    tree = REC.runs["trees:tree"].spec
    r = trees.tree_round(tree)
    assert r.tree is not None and len(set(r.tree.parents)) < len(r.tree.parents)  # a round that branched
    q = trees.question(DATA)
    assert q.options[q.answer] == str(r.n_accepted)
    assert tree.settings["tree"]["budget"] == REC.runs["trees:chain"].spec.settings["gamma"]  # as many verified
    head = REC.group(recordings.HEADS)[f"heads:{recordings.HEAD}"]
    q = heads.question(DATA)
    assert q.answer == direction(head.speedup) and head.spec.draft == recordings.HEAD
    assert "drafts:suffix" in REC.runs  # the draft-choice step includes the suffix drafter
