"""The line for measured runs: FIFO order, positions, wait estimates, and a failing run frees it."""

import threading
import time

import pytest

from specviz.app.run_queue import RunQueue


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_positions_are_first_in_first_out_and_move_up_as_runs_leave():
    q = RunQueue()
    a, b, c = q.join("a"), q.join("b"), q.join("c")
    assert [q.position(t) for t in (a, b, c)] == [0, 1, 2]
    assert q.waiting() == ["a", "b", "c"]
    q.start(a)
    q.leave(a, finished=True)
    assert [q.position(t) for t in (a, b, c)] == [-1, 0, 1]
    q.leave(c)  # a waiter who gives up leaves from the middle
    assert q.waiting() == ["b"]


def test_only_the_head_may_start():
    q = RunQueue()
    q.join("a")
    b = q.join("b")
    with pytest.raises(RuntimeError):
        q.start(b)


def test_the_presenter_goes_before_waiting_learners_but_not_before_the_running_one():
    q = RunQueue()
    a, b = q.join("a"), q.join("b")
    q.start(a)
    p = q.join("presenter", priority=True)
    assert q.waiting() == ["a", "presenter", "b"]
    assert q.position(p) == 1 and q.position(b) == 2


def test_estimates_come_from_recent_durations_and_the_head_s_elapsed_time():
    clock = Clock()
    q = RunQueue(history=3, clock=clock)
    a, b, c = q.join("a"), q.join("b"), q.join("c")
    assert q.estimate(b) is None  # nothing measured yet: no guess
    q.start(a)
    clock.now += 10
    q.leave(a, finished=True)
    q.start(b)
    clock.now += 4  # b has run 4 s of a typical 10 s
    assert q.typical_run() == 10
    assert q.estimate(b) == 0.0
    assert q.estimate(c) == pytest.approx(6.0)
    d = q.join("d")
    assert q.estimate(d) == pytest.approx(16.0)  # 6 s left of b, then c's 10 s
    clock.now += 20  # b overruns: its remaining time is never negative
    assert q.estimate(c) == 0.0 and q.estimate(d) == pytest.approx(10.0)


def test_a_run_that_fails_frees_the_line_and_does_not_count_as_a_duration():
    q = RunQueue()
    with pytest.raises(ValueError):
        with q.turn("a", on_wait=lambda *_: None):
            raise ValueError("the model failed")
    assert q.waiting() == [] and q.typical_run() is None
    with q.turn("b", on_wait=lambda *_: None) as ticket:
        assert q.position(ticket) == 0  # the next run goes at once


def test_turns_run_one_at_a_time_in_the_order_people_arrived_and_waiters_hear_their_place():
    q = RunQueue()
    order, running, overlap, heard = [], [], [], {}
    first_in = threading.Event()

    def visit(name, hold):
        def on_wait(position, seconds):
            heard.setdefault(name, []).append(position)

        with q.turn(name, on_wait, poll=0.01):
            if running:
                overlap.append(name)
            running.append(name)
            order.append(name)
            first_in.set()
            time.sleep(hold)
            running.remove(name)

    threads = [threading.Thread(target=visit, args=("r0", 0.3))]
    threads[0].start()
    first_in.wait(5)
    for i in range(1, 5):  # each joins after the one before it
        threads.append(threading.Thread(target=visit, args=(f"r{i}", 0.02)))
        threads[-1].start()
        while len(q.waiting()) < i + 1:
            time.sleep(0.001)
    for t in threads:
        t.join(10)
    assert order == ["r0", "r1", "r2", "r3", "r4"]
    assert not overlap
    assert heard["r1"][0] == 1 and heard["r4"][0] == 4  # told their place as they joined
    assert all(p == sorted(p, reverse=True) for p in heard.values())  # a place in line only moves up
    assert q.waiting() == [] and q.typical_run() is not None
