"""The shared-measurement cache of a room: identical runs are measured once, joined while in flight, and
served with when they were measured; anything that changes a run's result changes its key."""

import threading
import time
from dataclasses import replace

import pytest

from specviz.app.shared_runs import SharedRuns, run_key
from specviz.config import Decoding, Sampling, TreeShape, Verification

BASE = dict(target="t", draft="ngram", prompt="Hello", settings=Decoding())


def key(**change):
    return run_key(**{**BASE, **change})


@pytest.mark.parametrize("change", [
    dict(target="other"), dict(draft="suffix"), dict(prompt="Hello!"), dict(settings=Decoding(gamma=2)),
    dict(settings=Decoding(seed=1)), dict(settings=Decoding(max_new_tokens=16)), dict(settings=Decoding(adaptive=True)),
    dict(settings=Decoding(chat=False)), dict(settings=Decoding(sampling=Sampling(temperature=0.7))),
    dict(settings=Decoding(sampling=Sampling(temperature=0.7, top_p=0.9))),
    dict(settings=Decoding(verification=Verification("relaxed", tolerance=1.0, top_k=3))),
    dict(settings=Decoding(tree=TreeShape(budget=8))), dict(repeats=3), dict(device="cpu"), dict(dtype="bfloat16"),
    dict(drafter_state=1234),
], ids=lambda c: next(iter(c)) + ":" + str(next(iter(c.values())))[:30])
def test_the_key_changes_with_everything_that_changes_the_result(change):
    assert key(**change) != key()


def test_the_key_is_the_same_for_the_same_run():
    assert key() == run_key("t", "ngram", "Hello", Decoding()) == key(settings=replace(Decoding()))


class Fake:
    """A measurement that takes `seconds` and counts how often it ran."""

    def __init__(self, seconds=0.0, fail=False):
        self.calls, self.seconds, self.fail, self.lock = 0, seconds, fail, threading.Lock()

    def __call__(self):
        with self.lock:
            self.calls += 1
        time.sleep(self.seconds)
        if self.fail:
            raise RuntimeError("the measuring session went away")
        return object()


def test_a_run_measured_once_is_served_to_the_next_session_labelled_shared():
    runs, measure = SharedRuns(clock=lambda: 1_000_000.0), Fake()
    first = runs.serve("k", "alice", measure)
    second = runs.serve("k", "bob", measure)
    assert measure.calls == 1 and second.comparison is first.comparison
    assert not first.shared_with("alice") and second.shared_with("bob")
    label = second.label(now=1_000_030.0)
    assert "Shared measurement" in label and "30 s ago" in label and "13:46:40 UTC" in label  # 1e6 s after the epoch
    assert runs.about(first.comparison).measured_by == "alice"


def test_a_fresh_measurement_runs_again_and_replaces_the_kept_one():
    runs, measure = SharedRuns(), Fake()
    first = runs.serve("k", "alice", measure)
    again = runs.serve("k", "bob", measure, fresh=True)
    assert measure.calls == 2 and again.comparison is not first.comparison and not again.shared_with("bob")
    assert runs.serve("k", "carol", measure).comparison is again.comparison


def test_identical_runs_in_flight_are_joined_not_measured_again():
    runs, measure = SharedRuns(), Fake(seconds=0.3)
    joined, results = [], {}

    def press(who):
        results[who] = runs.serve("k", who, measure, on_join=lambda: joined.append(who), poll=0.05)

    threads = [threading.Thread(target=press, args=(f"s{i}",)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert measure.calls == 1
    assert len({id(m.comparison) for m in results.values()}) == 1
    assert len(set(joined)) >= 8  # the other sessions were told they joined an identical run in flight
    assert sum(not m.shared_with(who) for who, m in results.items()) == 1


def test_different_keys_are_measured_separately():
    runs, measure = SharedRuns(), Fake()
    a, b = runs.serve("a", "x", measure), runs.serve("b", "x", measure)
    assert measure.calls == 2 and a.comparison is not b.comparison


def test_when_the_joined_run_fails_a_waiting_session_measures_it_itself():
    runs, failing = SharedRuns(), Fake(seconds=0.2, fail=True)
    errors = []

    def first():
        try:
            runs.serve("k", "alice", failing)
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=first)
    t.start()
    time.sleep(0.05)
    second = runs.serve("k", "bob", Fake(), poll=0.05)
    t.join(5)
    assert errors and not second.shared_with("bob") and not runs.measuring("k")


def test_only_the_most_recently_used_measurements_are_kept():
    runs, measure = SharedRuns(kept=2), Fake()
    for k in ("a", "b", "c"):
        runs.serve(k, "x", measure)
    assert runs.get("a") is None and runs.get("b") and runs.get("c")
