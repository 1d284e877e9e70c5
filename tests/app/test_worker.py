"""The measurement worker on tiny models: paired records come back, and every way a job can go wrong leaves the
worker (or its successor) ready for the next job: a refused draft, a worker killed mid-run, a page that gives
its job up, a worker slow to start."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time

import pytest

from specviz.busy import NOTICEABLE_SHARE
from specviz.config import Decoding
from specviz.errors import ModelLoadError
from specviz.lab.measure import BUSY_PAIRS
from specviz.worker.process import Cancelled, Worker, WorkerDied, yield_to_parent, yield_to_the_worker

SETTINGS = Decoding(gamma=3, max_new_tokens=12, chat=False)
PROMPT = "w1 w2 w3 w4 w5"
COMPARE = dict(target="tiny-target", draft="ngram", prompt=PROMPT, settings=SETTINGS, pairs=3)
SWEEP = dict(target="tiny-target", draft="tiny-padded", prompts=[PROMPT, "w40 w41 w7"], gammas=[1, 2, 3, 4, 5, 6],
             settings=SETTINGS, pairs=1)


@pytest.fixture(scope="module")
def worker():
    """One worker for the module, slow to start (its preload waits), on the tiny models of worker_models.py."""
    w = Worker(loader="worker_models:load", preload=("slow-tiny-target",), cancel_grace=20)
    yield w
    w.stop()


def test_a_worker_slow_to_start_says_so_then_returns_a_paired_comparison(worker):
    waited: list[float] = []
    comparison = worker.run("compare", {**COMPARE, "busy_pairs": 2}, on_wait=waited.append)  # as the app asks
    assert waited and waited[-1] > 1.0, "the page heard that the worker was still starting"
    assert worker.ready and worker.machine
    # 3 pairs, 5 where other programs (the suite's other worker) took a noticeable share while the first 3 ran
    busy = statistics.median(comparison.other_work[:3]) > NOTICEABLE_SHARE
    pairs = 3 + BUSY_PAIRS * busy
    assert comparison.paired and comparison.pairs == pairs and comparison.identical
    assert len(comparison.spec_times) == len(comparison.baseline_times) == pairs
    assert comparison.speedup == sorted(comparison.pair_ratios)[(pairs - 1) // 2]
    low, high = comparison.speedup_range
    assert low <= comparison.speedup <= high


def test_a_refused_draft_is_one_clear_error_and_the_worker_goes_on(worker):
    worker.start()  # this test may be a pytest worker's first to use the module's worker
    pid = worker.pid
    with pytest.raises(ModelLoadError, match="no tiny model called 'no-such-draft'"):
        worker.run("compare", {**COMPARE, "draft": "no-such-draft"})
    assert worker.pid == pid
    assert worker.run("compare", {**COMPARE, "pairs": 1}).identical


def test_a_sweep_sends_its_points_as_they_come(worker):
    events = []
    measured = worker.run("gamma_sweep", SWEEP, on_event=events.append)
    assert measured == len(events) == 12
    assert [e[0] for e in events] == ["point"] * 12
    assert [e[2] for e in events] == list(range(1, 13)) and {e[3] for e in events} == {12}
    assert all(e[1].comparison.identical for e in events)


def test_a_page_that_gives_up_stops_the_job_and_the_next_job_gets_only_its_own_answer(worker):
    events = []
    with pytest.raises(Cancelled):
        worker.run("gamma_sweep", SWEEP, on_event=events.append, cancelled=lambda: bool(events))
    assert 1 <= len(events) < 12, "the sweep stopped early"

    def leave(event):  # a page whose script ends (a Stop press) while the job's first event arrives
        raise RuntimeError("the page went away")

    with pytest.raises(RuntimeError, match="went away"):
        worker.run("gamma_sweep", SWEEP, on_event=leave)
    again = worker.run("compare", {**COMPARE, "pairs": 1})
    assert again.identical and again.spec.draft == "ngram", "no late event or result of the given-up jobs"


def test_a_worker_killed_mid_run_is_reported_and_the_next_run_starts_a_new_one(worker):
    worker.run("compare", {**COMPARE, "pairs": 1})
    old = worker.pid
    timer = threading.Timer(1.0, os.kill, (old, signal.SIGKILL))
    timer.start()
    started = time.monotonic()
    with pytest.raises(WorkerDied, match="stopped during this run .exit code -9.*press Run again"):
        worker.run("compare", {**COMPARE, "target": "slow-slow-tiny-target", "pairs": 1})  # not loaded yet: slow
    assert time.monotonic() - started < 10
    assert not worker.alive
    result = worker.run("compare", {**COMPARE, "pairs": 1})
    assert worker.pid != old and worker.starts == 2 and result.identical


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads are listed from Linux's /proc")
def test_the_worker_lowers_every_thread_of_the_server():
    """On Linux a niceness is a thread's: the server's threads started before the worker must be lowered too (its
    pid alone is its main thread), and so must a thread started after, once the next job comes."""
    code = ("import threading, time\n"
            "for _ in range(3): threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
            "print('ready', flush=True)\n"
            "input()\n"  # a line from the test starts one more thread
            "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
            "print('more', flush=True)\n"
            "time.sleep(30)\n")
    server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def niceness() -> dict[int, int]:
        return {int(t): os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir(f"/proc/{server.pid}/task")}

    try:
        assert server.stdout.readline().strip() == "ready"
        base = os.getpriority(os.PRIO_PROCESS, 0)  # this process's own, which plays the worker (the server's the same)
        assert len(niceness()) == 4 and set(niceness().values()) == {base}
        yield_to_the_worker(server.pid, 4)
        assert set(niceness().values()) == {min(19, base + 4)}
        if os.geteuid() != 0:  # only root may raise a niceness back to make a thread the first call missed
            return
        # a thread started by the (lowered) main thread starts lowered; one started by a thread still at the old
        # niceness would not, and the next job's call lowers it
        os.setpriority(os.PRIO_PROCESS, server.pid, base)
        server.stdin.write("\n")
        server.stdin.flush()
        assert server.stdout.readline().strip() == "more"
        assert len(niceness()) == 5 and base in niceness().values()
        yield_to_the_worker(server.pid, 4)
        assert set(niceness().values()) == {min(19, base + 4)}
    finally:
        server.kill()
        server.wait()


def test_a_worker_lowers_only_the_server_that_is_still_its_parent():
    """A worker whose server exited is adopted by another process (the system's first, or a subreaper): the pid it was
    given is no longer its parent, and nothing is lowered."""
    other = subprocess.Popen(["sleep", "30"])  # not this process's parent: stands in for a server that is gone
    base = os.getpriority(os.PRIO_PROCESS, other.pid)
    try:
        yield_to_parent(other.pid, 3)
        assert os.getpriority(os.PRIO_PROCESS, other.pid) == base
    finally:
        other.kill()
        other.wait()


def test_the_worker_lowers_the_servers_priority_and_never_raises_it():
    server = subprocess.Popen(["sleep", "30"])  # stands in for the web server that started the worker
    base = os.getpriority(os.PRIO_PROCESS, 0)  # this process's own: it plays the worker
    try:
        yield_to_the_worker(server.pid, 3)
        assert os.getpriority(os.PRIO_PROCESS, server.pid) == min(19, base + 3)
        os.setpriority(os.PRIO_PROCESS, server.pid, min(19, base + 6))
        yield_to_the_worker(server.pid, 3)  # already lower: left as it is
        assert os.getpriority(os.PRIO_PROCESS, server.pid) == min(19, base + 6)
    finally:
        server.kill()
        server.wait()


def test_a_worker_started_again_at_the_servers_niceness_still_sets_the_server_below_itself():
    """A worker started after one died is started by a lowered server thread, so it runs at the server's niceness
    and cannot go back: it then lowers the server further under itself (at most to 19)."""
    server = subprocess.Popen(["sleep", "30"])
    base = os.getpriority(os.PRIO_PROCESS, 0)
    code = ("import sys; from specviz.worker.process import yield_to_the_worker; "
            "yield_to_the_worker(int(sys.argv[1]), 4)")
    try:
        os.setpriority(os.PRIO_PROCESS, server.pid, min(19, base + 4))  # the server, lowered by the first worker
        subprocess.run(["nice", "-n", "4", sys.executable, "-c", code, str(server.pid)], check=True)  # a worker at +4
        assert os.getpriority(os.PRIO_PROCESS, server.pid) == min(19, base + 8)
    finally:
        server.kill()
        server.wait()
