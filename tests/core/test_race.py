"""Arrival times in the records, the latency figures and the race's frames, on the tiny models."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from specviz import race
from specviz.comparison import Comparison, dumps, loads
from specviz.config import Decoding
from specviz.decode import generate
from specviz.errors import SpecVizError
from specviz.lab.bench import BENCH_FIELDS, bench_rows
from specviz.lab.measure import compare
from specviz.records import ACCEPTED, BONUS, RESAMPLED, TARGET

pytestmark = pytest.mark.usefixtures("one_thread")

SETTINGS = Decoding(gamma=3, max_new_tokens=12, chat=False)
PROMPT = "w1 w2 w3 w4 w5"


@pytest.fixture(scope="module")
def comparison(target, load):
    from specviz.drafters import build_drafter

    return compare(target, lambda: build_drafter("tiny-padded", target, load=load), PROMPT, SETTINGS, warm=False)


def _round_ends(run):
    """The arrival time of each round's tokens, read from the record."""
    ends, first = [], 0
    for r in run.rounds:
        ends.append(run.arrival_seconds[first : first + r.emitted])
        first += r.emitted
    return ends


def test_every_new_token_has_its_arrival_time_and_a_round_s_tokens_arrive_together(comparison):
    for run in (comparison.spec, comparison.baseline):
        times = run.arrival_seconds
        assert len(times) == run.new_tokens
        assert times == sorted(times), "tokens arrive in order"
        assert run.prefill_seconds < times[0] and times[-1] <= run.seconds
        for tokens in _round_ends(run):
            assert len(set(tokens)) == 1, "a round's tokens arrive together, at the end of its verification"
        ends = [tokens[0] for tokens in _round_ends(run)]
        assert all(a < b for a, b in zip(ends, ends[1:])), "each round ends after the one before"
    assert all(r.emitted == 1 for r in comparison.baseline.rounds)  # the target alone: one token per step
    assert any(r.emitted > 1 for r in comparison.spec.rounds), "the shared-layer draft is accepted in some round"


def test_a_round_s_tokens_arrive_after_its_own_verification(comparison):
    run = comparison.spec
    for r, tokens in zip(run.rounds, _round_ends(run)):
        assert tokens[0] >= run.prefill_seconds + r.verify_seconds


def test_exports_carry_arrival_times_and_older_exports_still_load(comparison):
    again = loads(dumps(comparison))
    assert again.spec.arrival_seconds == comparison.spec.arrival_seconds
    assert again.baseline.arrival_seconds == comparison.baseline.arrival_seconds

    old = json.loads(dumps(comparison))
    for side in ("spec", "baseline"):
        del old[side]["arrival_seconds"]  # a record made before SpecViz kept them
    older = Comparison.from_dict(old)
    assert older.spec.arrival_seconds is None
    times, source = race.arrivals(older.spec)
    assert source == race.RECONSTRUCTED and len(times) == older.spec.new_tokens
    lanes, notes = race.race_lanes({"tiny-padded": older})
    assert [lane.source for lane in lanes] == [race.RECONSTRUCTED] * 2
    assert len(notes) == 2 and all(race.RECONSTRUCTED in note for note in notes), "the race says it reconstructed"
    # Reconstructed from the round times: the last token arrives after every round's draft and verify time.
    run = older.spec
    assert times[-1] == pytest.approx(run.prefill_seconds + run.draft_seconds + run.verify_seconds)


def test_a_record_without_any_times_cannot_race_and_says_so(comparison):
    old = json.loads(dumps(comparison))
    del old["spec"]["arrival_seconds"]
    old["spec"]["rounds"] = old["spec"]["rounds"][:-1]  # the rounds no longer add up to the output
    broken = Comparison.from_dict(old)
    assert race.arrivals(broken.spec) is None and race.latency(broken.spec) is None
    lanes, notes = race.race_lanes({"tiny-padded": broken})
    assert [lane.name for lane in lanes] == [race.BASELINE]
    assert any("cannot race" in note for note in notes)


def test_damaged_arrival_times_are_refused_with_a_message(comparison):
    data = json.loads(dumps(comparison))
    data["spec"]["arrival_seconds"] = data["spec"]["arrival_seconds"][:-1]
    with pytest.raises(SpecVizError, match="arrival_seconds"):
        Comparison.from_dict(data)
    data["spec"]["arrival_seconds"] = ["soon"] * len(data["spec"]["output_ids"])
    with pytest.raises(SpecVizError, match="arrival_seconds"):
        Comparison.from_dict(data)


def _with_times(run, times):
    return replace(run, arrival_seconds=times, output_ids=list(range(len(times))))


def test_latency_by_hand(comparison):
    run = _with_times(comparison.spec, [0.5, 0.5, 0.5, 0.9, 1.0])
    figures = race.latency(run)
    assert figures.ttft == 0.5
    assert figures.gap_median == pytest.approx(0.05)  # gaps 0, 0, 0.4, 0.1
    assert figures.gap_p90 == pytest.approx(0.31)  # between the 3rd (0.1) and the 4th (0.4) smallest gap: 0.1 + 0.7
                                                   # × 0.3
    one = race.latency(_with_times(comparison.spec, [0.2]))
    assert (one.ttft, one.gap_median, one.gap_p90) == (0.2, 0.0, 0.0)


def test_latency_of_a_real_run_matches_its_arrivals(comparison):
    base = race.latency(comparison.baseline)
    times = comparison.baseline.arrival_seconds
    assert base.ttft == times[0] and base.source == race.MEASURED
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    assert gaps[0] <= base.gap_median <= base.gap_p90 <= gaps[-1]
    assert base.gap_median > 0, "the target alone waits a whole step for every token"
    spec_gaps = [b - a for a, b in zip(comparison.spec.arrival_seconds, comparison.spec.arrival_seconds[1:])]
    assert 0.0 in spec_gaps, "inside a burst the gap is 0"


def test_race_frames_show_each_token_at_its_time_and_bursts_at_once(comparison):
    lanes, notes = race.race_lanes({"tiny-padded": comparison})
    assert notes == [] and [lane.name for lane in lanes] == [race.BASELINE, "tiny-padded"]
    baseline, spec = lanes
    assert [t.status for t in baseline.tokens] == [TARGET] * comparison.baseline.new_tokens
    assert {t.status for t in spec.tokens} <= {ACCEPTED, RESAMPLED, BONUS, TARGET}
    assert "".join(t.text for t in spec.tokens) == "".join(t.text for t in baseline.tokens), "greedy: the same answer"
    assert race.frames(lanes, 0.0) == [race.LaneFrame(0, 0.0, False)] * 2
    end = max(lane.finish for lane in lanes)
    assert [f.shown for f in race.frames(lanes, end)] == [len(baseline.tokens), len(spec.tokens)]
    assert all(f.finished for f in race.frames(lanes, end))
    assert race.frame(spec, end + 5).clock == spec.finish, "a lane's clock stops at its finish line"
    assert race.bursts(baseline) == [1] * len(baseline.tokens)
    sizes = race.bursts(spec)
    assert sum(sizes) == len(spec.tokens) and max(sizes) > 1
    burst_at = next(t.at for t in spec.tokens if sum(u.at == t.at for u in spec.tokens) > 1)
    before, after = race.frame(spec, burst_at - 1e-9).shown, race.frame(spec, burst_at).shown
    assert after - before == sum(t.at == burst_at for t in spec.tokens) > 1, "a burst appears all at once"


def test_spans_put_each_round_s_forward_just_before_its_tokens(comparison):
    run = comparison.spec
    spans = race.spans("d", run)
    assert spans[0].kind == "prefill" and spans[0].end == run.prefill_seconds
    targets = [s for s in spans if s.kind == "target"]
    assert [s.end for s in targets] == [tokens[0] for tokens in _round_ends(run)]
    assert [s.end - s.start for s in targets] == pytest.approx([r.verify_seconds for r in run.rounds])
    drafts = [s for s in spans if s.kind == "draft"]
    assert drafts and all(s.end <= next(t.start for t in targets if t.round == s.round) for s in drafts)
    assert not [s for s in race.spans(race.BASELINE, comparison.baseline) if s.kind == "draft"]


def test_bench_rows_add_latency_fields_and_keep_the_old_ones(target, make_drafter):
    rows = list(
        bench_rows(target, {"ngram": lambda: make_drafter("ngram")}, [{"id": "a", "prompt": PROMPT}], [SETTINGS])
    )
    row = rows[0]
    assert list(row)[: len(BENCH_FIELDS)] == list(BENCH_FIELDS)
    for prefix, seconds in (("", "spec_seconds"), ("baseline_", "baseline_seconds")):
        assert 0 < row[f"{prefix}ttft_seconds"] < row[seconds]
        assert 0 <= row[f"{prefix}gap_median_seconds"] <= row[f"{prefix}gap_p90_seconds"]
        assert row[f"{prefix}arrival_times"] == race.MEASURED


def test_a_shipped_recording_round_trips(comparison, tmp_path):
    path = tmp_path / "race.json"
    race.save_recording(path, race.Recording({"tiny-padded": comparison}, {"made_by": "a test"}))
    again = race.load_recording(path)
    assert again.info == {"made_by": "a test"}
    assert again.runs["tiny-padded"].spec.arrival_seconds == comparison.spec.arrival_seconds
    path.write_text("{ not json")
    with pytest.raises(SpecVizError, match="record_race.py"):
        race.load_recording(path)


def test_the_shipped_race_is_a_measured_record_of_one_prompt():
    recording = race.load_recording()
    assert recording.info["made_by"].startswith("python scripts/record_race.py") and recording.info["made_on"]
    lanes, notes = race.race_lanes(recording.runs)
    assert notes == [] and len(lanes) == len(recording.runs) + 1
    assert all(lane.source == race.MEASURED for lane in lanes)
    assert all(c.identical for c in recording.runs.values()), "greedy: every lane writes the target's answer"


def test_generate_without_detail_keeps_arrival_times(target):
    run = generate(target, None, PROMPT, SETTINGS, detail=False)
    assert len(run.arrival_seconds) == run.new_tokens
