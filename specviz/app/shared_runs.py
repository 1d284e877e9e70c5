"""Measured runs shared by the sessions of one server: a class pressing Run on the same settings waits for one run.

Thirty learners pressing Run on the same target, drafter, prompt, settings and seed ask for the same
measurement: the output is the same (the loop is seeded) and a second timing on the same machine says
nothing new, yet measured one after another they kept the last learner waiting for minutes. Here a run
whose key (`run_key`: everything that changes its result) was measured on this server is served from
that measurement, with when and for whom it was measured; an identical run already being measured, or
waiting in the line to be, is joined instead of queued again. A learner may still ask for a fresh
measurement, which queues like any other run and replaces the kept one.

No Streamlit here: `specviz.app.controls` keeps one `SharedRuns` in `st.cache_resource`; the tests drive it
with threads.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from ..comparison import Comparison
from ..config import Decoding

KEPT = 64  # measurements kept per server (a few hundred kB each at most); the least recently used goes first


def run_key(target: str, draft: str, prompt: str, settings: Decoding, repeats: int = 1, device: str = "auto",
            dtype: str = "auto", drafter_state: object = None) -> str:
    """Everything that changes a measured run's result: the models and where they run, the prompt, every
    decoding setting (γ, adaptive γ, tree, sampling, verification rule, length, seed, chat template), the
    repeats timed, and the state of a drafter that learns across runs (the suffix drafter's corpus)."""
    return json.dumps([target, draft, device, dtype, prompt, settings.to_dict(), repeats, drafter_state],
                      sort_keys=True, default=str)


@dataclass(frozen=True)
class Measured:
    """One measurement and where it came from."""

    comparison: Comparison
    measured_at: float  # time.time() when it finished
    measured_by: str  # the session that measured it
    served: int = 0  # how many other sessions it was served to (when this copy was handed out)

    def shared_with(self, who: str) -> bool:
        """True when `who` got this run from another session's measurement."""
        return who != self.measured_by

    def label(self, now: float | None = None) -> str:
        when = time.strftime("%H:%M:%S UTC", time.gmtime(self.measured_at))
        ago = max(0.0, (time.time() if now is None else now) - self.measured_at)
        return (f"Shared measurement: this exact run (same target, drafter, prompt, settings and seed) was measured on "
                f"this server at {when} ({ago:.0f} s ago) for another session, and is shown to you as measured. "
                "Tick “Measure afresh” to time it again yourself.")


class SharedRuns:
    """Finished measurements by key, and the keys being measured now, behind one lock."""

    def __init__(self, kept: int = KEPT, clock: Callable[[], float] = time.time):
        self._cond = threading.Condition()
        self._done: OrderedDict[str, Measured] = OrderedDict()
        self._measuring: Counter[str] = Counter()
        self._kept, self._clock = kept, clock

    def get(self, key: str) -> Measured | None:
        with self._cond:
            return self._done.get(key)

    def about(self, comparison: Comparison) -> Measured | None:
        """The kept measurement that is this very record (a page asks where the run it shows came from)."""
        with self._cond:
            return next((m for m in self._done.values() if m.comparison is comparison), None)

    def measuring(self, key: str) -> bool:
        with self._cond:
            return self._measuring[key] > 0

    def serve(self, key: str, who: str, measure: Callable[[], Comparison], fresh: bool = False,
              on_join: Callable[[], None] | None = None, poll: float = 1.0) -> Measured:
        """The measurement for `key`: kept, joined while another session measures it, or measured now by
        `measure()` (which waits its turn in the run queue). `fresh` always measures. `on_join()` is called
        at once and every `poll` seconds while this session waits for another's identical run. If the run
        being joined fails or is abandoned, a waiting session measures it itself."""
        while True:
            with self._cond:
                kept = None if fresh else self._done.get(key)
                if kept is not None:
                    self._done.move_to_end(key)
                    served = Measured(kept.comparison, kept.measured_at, kept.measured_by, kept.served + 1)
                    self._done[key] = served
                    return served
                if fresh or not self._measuring[key]:
                    self._measuring[key] += 1
                    break
            if on_join is not None:
                on_join()
            with self._cond:
                self._cond.wait_for(lambda: not self._measuring[key] or key in self._done, poll)
        try:
            comparison = measure()
        except BaseException:
            self._finish(key, None)
            raise
        return self._finish(key, Measured(comparison, self._clock(), who))

    def _finish(self, key: str, measured: Measured | None) -> Measured | None:
        with self._cond:
            self._measuring[key] -= 1
            if not self._measuring[key]:
                del self._measuring[key]
            if measured is not None:
                self._done[key] = measured
                self._done.move_to_end(key)
                while len(self._done) > self._kept:
                    self._done.popitem(last=False)
            self._cond.notify_all()
        return measured
