"""Other work while a comparison is timed: the share of the machine's CPU other processes took, per pair."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from specviz import busy
from specviz.comparison import Comparison, dumps, loads
from specviz.config import Decoding
from specviz.drafters import build_drafter
from specviz.lab.measure import busy_warning, compare

LINUX = Path("/proc/stat").is_file()


def test_the_share_is_what_other_processes_took_of_all_cores(monkeypatch):
    monkeypatch.setattr(busy.os, "cpu_count", lambda: 2)
    before = busy.CpuTimes(busy=100.0, niced=10.0, own=50.0, at=0.0)
    after = busy.CpuTimes(busy=103.0, niced=10.5, own=51.0, at=2.0)  # 4 core-seconds: 3 busy, 1 of them ours
    work = busy.between(before, after)
    assert work.share == pytest.approx(0.5) and work.niced == pytest.approx(0.125)
    assert busy.between(None, after) is None and busy.between(after, before) is None


def test_a_large_share_is_told_and_a_small_one_is_not():
    assert busy.busy_text([]) is None and busy.busy_text([0.05, busy.BUSY_SHARE]) is None
    text = busy.busy_text([0.1, 0.62])
    assert "62%" in text and "quiet" in text


@pytest.mark.skipif(not LINUX, reason="reads Linux's /proc")
def test_a_busy_neighbour_shows_in_the_share():
    spin = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 3\nwhile time.time() < end: pass"])
    try:
        time.sleep(0.3)  # the neighbour is running
        before = busy.read()
        time.sleep(1.0)
        work = busy.between(before, busy.read())
    finally:
        spin.kill()
        spin.wait()
    # one spinning process holds a whole core: on n cores, about 1/n of the machine (more if anything else runs)
    assert work.share >= 0.6 / busy.os.cpu_count()


@pytest.mark.skipif(not LINUX, reason="reads Linux's /proc")
def test_each_timed_pair_records_other_work_and_exports_keep_it(target, load):
    settings = Decoding(gamma=2, max_new_tokens=8)
    c = compare(target, lambda: build_drafter("tiny-padded", target, load=load), "a b c", settings, pairs=2, warm=False)
    assert len(c.other_work) == 2 and all(0.0 <= x <= 1.0 for x in c.other_work)
    back = loads(dumps(c))
    assert back.other_work == c.other_work and c.summary()["other_work"] == max(c.other_work)


def test_an_older_export_without_the_share_claims_nothing(target, load):
    settings = Decoding(gamma=2, max_new_tokens=8)
    c = compare(target, lambda: build_drafter("tiny-padded", target, load=load), "a b c", settings, warm=False)
    data = c.to_dict()
    del data["other_work"]
    old = Comparison.from_dict(data)
    assert old.other_work == [] and old.summary()["other_work"] is None and busy_warning(old) is None


def _machine_where_others_take(monkeypatch, share: float) -> None:
    """busy.read/between as if other programs took `share` of the machine during every timed pair."""
    monkeypatch.setattr(busy, "read", lambda: busy.CpuTimes(busy=0.0, niced=0.0, own=0.0, at=time.monotonic()))
    monkeypatch.setattr(busy, "between", lambda before, after: busy.OtherWork(share=share, niced=0.0))


@pytest.mark.parametrize(("share", "pairs", "timed"), [(0.002, 3, 3), (0.08, 3, 5), (0.08, 1, 1), (0.08, 8, 9)])
def test_a_busy_machine_gets_two_more_pairs_and_a_quiet_one_keeps_the_shorter_wait(
    target, load, monkeypatch, share, pairs, timed
):
    _machine_where_others_take(monkeypatch, share)
    settings = Decoding(gamma=2, max_new_tokens=4)
    make = lambda: build_drafter("tiny-padded", target, load=load)  # noqa: E731
    c = compare(target, make, "a b c", settings, pairs=pairs, warm=False, busy_pairs=2)
    assert c.pairs == timed == len(c.other_work)  # 3 → 5 when busy; one pair stays one; never past MAX_PAIRS (9)
    assert compare(target, make, "a b c", settings, pairs=pairs, warm=False).pairs == pairs  # only when asked


def test_the_caption_says_why_a_busy_run_has_more_pairs_and_exports_keep_it(target, load, monkeypatch):
    from specviz.app.views.figures import spread_caption

    make = lambda: build_drafter("tiny-padded", target, load=load)  # noqa: E731
    settings = Decoding(gamma=2, max_new_tokens=4)
    _machine_where_others_take(monkeypatch, 0.08)
    c = compare(target, make, "a b c", settings, pairs=3, warm=False, busy_pairs=2)
    caption = spread_caption(c)
    assert c.busy_pairs == 2 and "over 5 pairs" in caption and "8%" in caption and "2 more pairs were timed" in caption
    back = loads(dumps(c))
    assert back.busy_pairs == 2 and back.summary()["busy_pairs"] == 2 and spread_caption(back) == caption
    quiet = compare(target, make, "a b c", settings, pairs=3, warm=False, busy_pairs=0)  # a server that adds none
    assert quiet.busy_pairs == 0 and "more pairs" not in spread_caption(quiet)
