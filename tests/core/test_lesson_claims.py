"""Every lesson step's words against the runs it shows: the claim test of issue 20.

Each step's claim is written from its recording by the step's own file (`specviz/app/lesson/steps/`): its words
are computed from the runs (never checked afterwards against prose), and it lists what of the step the runs
contradict. The shipped recording must leave nothing listed; a recording that disagrees must be caught, and a
recording of another shape must be described in other words.
"""

from dataclasses import replace

import pytest

from specviz.app.lesson.steps import KEYS, STEPS, cost, draft_choice, gamma, relaxed
from specviz.lesson import recordings
from specviz.lesson.step import Data

REC = recordings.load()
DATA = Data(REC.group, REC.lab, keys=KEYS)


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.key)
def test_each_steps_words_agree_with_its_recording(step):
    claim = step.claim(DATA)
    assert claim.text.strip()
    assert claim.problems == (), f"step {step.key!r}: {claim.problems}"


def _with(group_name: str, edit) -> Data:
    """The recording with one group's runs changed by `edit(name, comparison)`."""
    def group(name):
        runs = REC.group(name)
        return {n: edit(n, c) for n, c in runs.items()} if name == group_name else runs
    return Data(group, REC.lab, keys=KEYS)


def _time(comparison, factor):
    """The same run timed `factor` times as long (speedup divided by it)."""
    return replace(comparison, spec_times=[t * factor for t in comparison.spec_times],
                   spec=replace(comparison.spec, seconds=comparison.spec.seconds * factor))


@pytest.mark.parametrize("fastest, words", [
    (None, "Speedup is still rising at γ = 8, the longest tried"),  # the shipped sweep climbs to its longest γ
    ("gamma:3", "Speedup peaks at γ = 3"),
    ("gamma:1", "Speedup is highest at the shortest draft, γ = 1"),
])
def test_the_gamma_step_says_the_shape_its_sweep_has(fastest, words):
    """The words are computed from the sweep: a climbing sweep is never said to peak (the old sentence said
    "peaks at a moderate γ" whatever the numbers), and a sweep with a peak is said to peak where it does."""
    sweep = DATA if fastest is None else _with("gamma", lambda n, c: _time(c, 1.0 if n == fastest else 1.5))
    speed = {int(n.split(":")[1]): c.speedup for n, c in sweep.group("gamma").items()}
    if fastest is None:
        assert max(speed, key=speed.get) == max(speed) == 8  # the shipped sweep climbs to its longest γ
    claim = gamma.claim(sweep)
    assert claim.text.startswith(words) and claim.problems == ()
    assert ("peak" in claim.text) == (fastest == "gamma:3") and "moderate" not in claim.text


def test_the_draft_choice_step_names_the_fastest_and_the_more_accurate_one_it_beat():
    runs = {n: c for n, c in REC.group("drafts").items() if n != "drafts:target"}
    best = max(runs, key=lambda n: runs[n].speedup)
    rival = max((n for n in runs if runs[n].spec.acceptance_rate > runs[best].spec.acceptance_rate),
                key=lambda n: runs[n].spec.acceptance_rate)
    assert (best, rival) == ("drafts:suffix", "drafts:ngram")  # the shipped recording: the cheaper drafter wins
    assert draft_choice.claim(DATA).text.startswith("Fastest: suffix (2.10×, α = 0.69, c = 0.004), ahead of the more "
                                                    "accurate ngram (α = 0.71, c < 0.001).")
    accurate_wins = _with("drafts", lambda n, c: c if n == "drafts:ngram" else _time(c, 3.0))
    assert draft_choice.claim(accurate_wins).text.startswith("Fastest: ngram (1.92×), which is also the most "
                                                             "accurate here (α = 0.71, c < 0.001).")


def test_a_self_draft_that_was_faster_contradicts_the_cost_step():
    fast_self = _with("drafts", lambda n, c: _time(c, 0.3) if n == "drafts:target" else c)
    assert cost.claim(fast_self).problems


def test_relaxed_that_gains_nothing_contradicts_the_relaxed_step():
    flat = _with("relaxed", lambda n, c: _time(c, 2.0) if n != "relaxed:0" else c)
    assert any("faster" in p for p in relaxed.claim(flat).problems)
