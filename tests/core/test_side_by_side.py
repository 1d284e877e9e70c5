"""Pairs timed side by side (`lab.measure.side_by_side`): a round of the target alone, then a round of the speculative
run, each on its own paused clock. The tokens are those of runs made alone, and each run's seconds are its own work:
time spent in the other run's rounds is never charged to it."""

from __future__ import annotations

import time

import pytest
import torch

from specviz.clock import Clock
from specviz.config import ConfigError, Decoding
from specviz.decode import generate, to_the_end
from specviz.lab.measure import compare, side_by_side

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPT = "w3 w14 w15 w9 w26"
SETTINGS = Decoding(gamma=3, max_new_tokens=24, chat=False)
NAP = 0.15  # seconds the slow drafter sleeps before each proposal


def slow(drafter):
    """The drafter, made to take NAP seconds longer to propose each round (only its own run should pay for it)."""
    propose = drafter.propose

    def napping(*args, **kwargs):
        time.sleep(NAP)
        return propose(*args, **kwargs)

    drafter.propose = napping
    return drafter


def test_side_by_side_runs_give_the_tokens_and_rounds_of_runs_made_alone(target, make_drafter):
    alone_base = generate(target, None, PROMPT, SETTINGS)
    alone_spec = generate(target, make_drafter("tiny-draft"), PROMPT, SETTINGS)
    for spec_first in (False, True):
        base, spec = side_by_side(target, lambda: make_drafter("tiny-draft"), PROMPT, SETTINGS, spec_first=spec_first)
        assert base.draft is None and spec.draft == "tiny-draft"
        assert base.output_ids == alone_base.output_ids == spec.output_ids == alone_spec.output_ids
        assert [(r.drafted, r.n_accepted, r.next_token) for r in spec.rounds] == [
            (r.drafted, r.n_accepted, r.next_token) for r in alone_spec.rounds]


def test_a_runs_seconds_leave_out_the_other_runs_rounds(target, make_drafter):
    alone = generate(target, None, PROMPT, SETTINGS)
    base, spec = side_by_side(target, lambda: slow(make_drafter("tiny-draft")), PROMPT, SETTINGS)
    naps = NAP * len(spec.rounds)
    assert spec.seconds >= naps  # the slow drafter's run pays for its naps ...
    assert base.seconds < alone.seconds + naps / 2, "... and the target alone, stepped between them, does not"
    # every token arrives on its own run's clock: never after its run's end, in order
    for run in (base, spec):
        assert run.arrival_seconds == sorted(run.arrival_seconds) and run.arrival_seconds[-1] <= run.seconds


def test_a_clock_paused_counts_nothing_until_it_resumes():
    clock = Clock()
    start = clock()
    clock.pause()
    time.sleep(0.05)
    clock.resume()
    assert clock() - start < 0.04
    assert to_the_end(iter_with(3)) == "done"


def iter_with(n: int):
    for i in range(n):
        yield i
    return "done"


def test_compare_times_every_pair_side_by_side(target, make_drafter):
    c = compare(target, lambda: slow(make_drafter("tiny-draft")), PROMPT, SETTINGS, pairs=2, warm=False)
    assert c.pairs == 2 and c.identical
    assert all(b < s / 2 for b, s in zip(c.baseline_times, c.spec_times)), "no pair charged the naps to the target"
    assert torch.is_grad_enabled()  # the loop's inference mode does not leak out of a paused run


@pytest.mark.parametrize("pairs", [0, 10])
def test_a_pair_count_out_of_range_is_refused_before_anything_runs(target, make_drafter, pairs):
    with pytest.raises(ConfigError, match=rf"pairs must be a whole number from 1 to 9, got '{pairs}'"):
        compare(target, lambda: make_drafter("tiny-draft"), PROMPT, SETTINGS, pairs=pairs)


def test_the_range_shown_holds_every_pair_rounded_outward(target, make_drafter):
    from dataclasses import replace

    from specviz.lab.measure import noise_warning, speedup_text

    c = compare(target, lambda: make_drafter("tiny-draft"), PROMPT, SETTINGS, pairs=3, warm=False)
    c = replace(c, baseline_times=[1.1561, 1.1655, 1.1788], spec_times=[1.0, 1.0, 1.0])
    # to the nearest: 1.16–1.18, without the lowest pair; the interval 1.1388–1.1954 reads 1.13–1.20
    assert speedup_text(c) == "1.17× (1.15–1.18 over 3 pairs; 95% interval 1.13–1.20)"
    c = replace(c, baseline_times=[1.15, 1.4, 1.2], spec_times=[1.0, 1.0, 1.0])  # exact ends stay as they are
    assert speedup_text(c) == "1.20× (1.15–1.40 over 3 pairs; 95% interval 0.96–1.62)"
    assert "from 1.15× to 1.40×" in noise_warning(c)


def test_the_interval_is_students_t_over_the_logs_of_the_pairs_ratios(target, make_drafter):
    import math
    import statistics
    from dataclasses import replace

    from specviz.comparison import t95
    from specviz.lab.measure import speedup_text

    # Student's t at 97.5% (scipy.stats.t.ppf, written out: the tests do not depend on scipy)
    reference = {1: 12.7062, 2: 4.3027, 4: 2.7764, 8: 2.3060, 10: 2.2281, 11: 2.2010, 15: 2.1314, 30: 2.0423,
                 31: 2.0395, 45: 2.0141, 100: 1.9840}
    for df, t in reference.items():  # the table, then the series
        assert t95(df) == pytest.approx(t, abs=0.0005)
    c = compare(target, lambda: make_drafter("tiny-draft"), PROMPT, SETTINGS, pairs=3, warm=False)
    for ratios in ([1.1561, 1.1655, 1.1788], [2.45, 2.61, 2.80, 2.52, 2.70], [0.9, 1.1]):
        c = replace(c, baseline_times=ratios, spec_times=[1.0] * len(ratios))
        logs = [math.log(r) for r in ratios]
        half = reference[len(logs) - 1] * statistics.stdev(logs) / math.sqrt(len(logs))
        low, high = c.speedup_interval
        assert low == pytest.approx(math.exp(statistics.mean(logs) - half), rel=1e-3)
        assert high == pytest.approx(math.exp(statistics.mean(logs) + half), rel=1e-3)
        if len(ratios) <= 3:  # at 3 pairs or fewer, t is so large that the interval holds every pair
            assert low <= min(ratios) and max(ratios) <= high
        summary = c.summary()
        assert (summary["speedup_interval_low"], summary["speedup_interval_high"]) == (low, high)
    one = replace(c, baseline_times=[1.2], spec_times=[1.0])  # no interval from one pair, and none is shown
    assert one.speedup_interval is None and one.summary()["speedup_interval_low"] is None
    assert speedup_text(one) == "1.20× (1 pair: no spread)"
