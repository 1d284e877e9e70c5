"""Every lesson step's words against the runs it shows: the claim test of issue 20.

Each step's claim is written from its recording by the step's own file (`specviz/app/lesson/steps/`) and lists
what the runs contradict. The shipped recording must leave nothing listed; a recording (or a sentence) that
disagrees must be caught.
"""

from dataclasses import replace

import pytest

from specviz.app.lesson.steps import KEYS, STEPS, cost, gamma, relaxed
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


def test_the_old_peak_sentence_is_caught_on_a_sweep_that_climbs(monkeypatch):
    old = replace(gamma.STEP, teaches="Longer drafts cost more when rejected: speedup peaks at a moderate γ.")
    monkeypatch.setattr(gamma, "STEP", old)
    speed = {int(n.split(":")[1]): c.speedup for n, c in REC.group("gamma").items()}
    assert max(speed, key=speed.get) == max(speed)  # the shipped sweep climbs to its longest γ ...
    assert any("moderate" in p for p in gamma.claim(DATA).problems)  # ... so the old sentence is refused


def test_a_sweep_with_a_peak_is_said_to_peak_where_it_does():
    slow_ends = _with("gamma", lambda n, c: _time(c, 1.0 if n == "gamma:3" else 1.5))
    claim = gamma.claim(slow_ends)
    assert "peaks at γ = 3" in claim.text and claim.problems == ()


def test_a_self_draft_that_was_faster_contradicts_the_cost_step():
    fast_self = _with("drafts", lambda n, c: _time(c, 0.3) if n == "drafts:target" else c)
    assert cost.claim(fast_self).problems


def test_relaxed_that_gains_nothing_contradicts_the_relaxed_step():
    flat = _with("relaxed", lambda n, c: _time(c, 2.0) if n != "relaxed:0" else c)
    assert any("faster" in p for p in relaxed.claim(flat).problems)
