"""The app's one way to a measurement: the line, shared identical runs, and the worker that times them.

A Run press flows one way: page → `measured_run` or `run_job` here → the run queue (one measured job at a
time, each session told its place) → `worker.process.Worker` (a separate process that owns the models) →
`worker.jobs` → the lab → the loop; a record comes back. The web server itself keeps no model, so nothing it
does for other visitors (page scripts, reruns, loading a model) runs inside a timed run's process.

Per server, in `st.cache_resource`: one `RunService` (the queue, the shared runs and the worker). Per
session: which runs it was served from another session's measurement (`shared_label`).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from ..comparison import Comparison
from ..config import Decoding
from ..drafters import learns_across_runs
from ..lab.measure import BUSY_PAIRS, MAX_PAIRS, PAIRS, check_pairs
from ..models import DEFAULT_TARGET
from ..prompts import check_prompt
from ..worker.process import Cancelled, Worker
from . import room
from .run_queue import RunQueue
from .shared_runs import Measured, SharedRuns, run_key


@dataclass
class RunService:
    """What every session of one server shares to measure: the line, the kept measurements, the worker."""

    worker: Worker
    queue: RunQueue = field(default_factory=RunQueue)
    shared: SharedRuns = field(default_factory=SharedRuns)

    def learned(self, draft: str, prompt: str, chat: bool) -> object:
        """What a drafter that learns across runs has learned in the worker for this prompt so far (part of a
        shared run's key): the runs of other prompts, since a prompt's own runs never feed its drafts."""
        if not learns_across_runs(draft):
            return None
        pid, learned = self.worker.learned
        total, by_prompt = learned if learned is not None else (0, {})  # None: no job has ended in this worker yet
        return pid, total - by_prompt.get((prompt, chat), 0)


SERVER_NICE = int(os.environ.get("SPECVIZ_SERVER_NICE", "10"))  # how far the worker sets the web server under itself
PAIRS_ENV = "SPECVIZ_PAIRS"


def app_pairs() -> int:
    """How many timed pairs a measured run gets on this server: SPECVIZ_PAIRS (1 to MAX_PAIRS), else PAIRS.

    A presenter on a slow machine may trade the spread's steadiness for shorter waits (2 pairs); the test servers
    use 1 where the pairing itself is not under test. A value out of range is refused with a clear message."""
    raw = os.environ.get(PAIRS_ENV, "").strip()
    return check_pairs(raw, PAIRS_ENV) if raw else PAIRS


BUSY_PAIRS_ENV = "SPECVIZ_BUSY_PAIRS"


def app_busy_pairs() -> int:
    """How many more pairs a measured run times when other programs took a noticeable share of the machine while
    its pairs ran: SPECVIZ_BUSY_PAIRS (0 to MAX_PAIRS - 1; 0 turns it off), else BUSY_PAIRS. A value out of range
    is refused with a clear message."""
    raw = os.environ.get(BUSY_PAIRS_ENV, "").strip()
    return check_pairs(raw, BUSY_PAIRS_ENV, low=0, high=MAX_PAIRS - 1) if raw else BUSY_PAIRS


def new_service() -> RunService:
    """The server's service: a worker that loads the default target as it starts and, in a real server (not under
    AppTest), lowers the server's priority so that page work does not slow a timed run (`worker.yield_to_the_worker`;
    SPECVIZ_SERVER_NICE=0 turns that off). Tests swap this for tiny models."""
    from streamlit import runtime

    return RunService(Worker(preload=(DEFAULT_TARGET,), server_nice=SERVER_NICE if runtime.exists() else 0))


@st.cache_resource(show_spinner=False)
def service() -> RunService:
    return new_service()


def start_worker() -> None:
    """Start the worker now (Home calls it last), so that the first Run does not wait for it to load."""
    service().worker.start()


# --- one job, in line -------------------------------------------------------------------------------------
def _session_id() -> str:
    return getattr(get_script_run_ctx(suppress_warning=True), "session_id", "?")


def visitor_left() -> bool:
    """True once this session's browser tab is gone (its job is then given up)."""
    from streamlit import runtime

    return runtime.exists() and not runtime.get_instance().is_active_session(_session_id())


def _about(seconds: float) -> int:
    """A wait as a learner reads it: whole seconds under 10 s, then steps of 5 s (so the note is not
    redrawn in every session every second while the figure hardly moves)."""
    return round(seconds) if seconds < 10 else 5 * round(seconds / 5)


def waiting_text(position: int, seconds: float | None, typical: float | None) -> str:
    ahead = "1 run is" if position == 1 else f"{position} runs are"
    wait = (f"about {_about(seconds)} s to wait (recent runs took {typical:.0f} s each)" if seconds is not None
            else "no run has finished yet to estimate the wait from")
    return (f"**You are number {position + 1} in the line** for a measured run: {ahead} ahead of yours; {wait}. "
            "Measured runs go one at a time so that every timing is honest; recorded runs replay at once.")


class _Notes:
    """One placeholder for what a waiting session is told; only a change goes to the browser."""

    def __init__(self):
        self.box, self.shown = st.empty(), ""

    def say(self, text: str, icon: str = "⏳") -> None:
        if text != self.shown:
            self.box.info(text, icon=icon)
            self.shown = text

    def clear(self) -> None:
        self.box.empty()


@contextlib.contextmanager
def in_line() -> Iterator[None]:
    """This session's turn in the line for the worker: the place and the wait are shown, updated every second;
    leaving the page (or closing the tab) leaves the line."""
    svc, notes = service(), _Notes()

    def on_wait(position: int, seconds: float | None) -> None:
        if visitor_left():
            raise Cancelled("left the line")
        notes.say(waiting_text(position, seconds, svc.queue.typical_run()))

    with svc.queue.turn(_session_id()[:8], on_wait, poll=1.0, priority=room.is_presenter()):
        notes.clear()
        yield


def run_job(job: str, on_event: Callable[[Any], None] | None = None, **kwargs) -> Any:
    """Run a job of `worker.jobs` in the worker, in this session's turn; its events go to `on_event` as they come.

    While the worker starts (imports, loading the default target) the session is told so. A tab closed
    meanwhile gives the job up. Raises the job's SpecVizError, `WorkerDied` or `Cancelled`.
    """
    svc = service()
    with in_line():
        notes = _Notes()

        def starting(seconds: float) -> None:
            notes.say(
                f"Starting the measurement worker, the separate process that loads the models and times runs "
                f"away from the web server ({_about(seconds)} s so far; its first start on a machine converts the "
                "default model, about 20 s).",
                icon="🚀",
            )

        try:
            return svc.worker.run(job, kwargs, on_event=on_event, cancelled=visitor_left, on_wait=starting)
        finally:
            notes.clear()


# --- measured runs, shared between sessions -------------------------------------------------------------
def measured_run(
    target: str, draft: str, prompt: str, settings: Decoding, fresh: bool = False, pairs: int | None = None
) -> Comparison:
    """A speculative run timed in `pairs` pairs with the target alone (by default `app_pairs()`), in the worker.

    An identical run (same target, drafter, prompt, settings, seed, pairs and what the drafter has learned) measured
    on this server before is served from that measurement; one being measured is joined. `fresh` measures it again.
    """
    check_prompt(prompt)  # before waiting in line for nothing
    pairs, busy_pairs = pairs or app_pairs(), app_busy_pairs()
    svc = service()
    key = run_key(target, draft, prompt, settings, pairs, drafter_state=svc.learned(draft, prompt, settings.chat))
    note = _Notes()  # drawn once: thirty joined sessions redrawing it every second kept a class's worker waiting

    def on_join() -> None:
        note.say(
            "**An identical run is being measured for another session** (same target, drafter, prompt, settings "
            "and seed): yours will be served from that measurement as soon as it is done.",
            icon="🤝",
        )

    def measure() -> Comparison:
        with st.spinner(f"Timing {draft} (γ={settings.gamma}) and the target alone side by side, {pairs} pairs…"):
            return run_job("compare", target=target, draft=draft, prompt=prompt, settings=settings, pairs=pairs,
                           busy_pairs=busy_pairs)

    try:
        measured = svc.shared.serve(key, _session(), measure, fresh=fresh, on_join=on_join)
    finally:
        note.clear()
    mine = st.session_state.setdefault(_SERVED, {})
    mine[id(measured.comparison)] = measured
    while len(mine) > 16:
        del mine[next(iter(mine))]
    return measured.comparison


_SERVED = "_shared-runs-served"


def _session() -> str:
    """This browser session's own id for shared measurements (kept in its state, so every session has its own)."""
    return st.session_state.setdefault("_shared-runs-who", uuid.uuid4().hex)


def shared_label(comparison: Comparison) -> str | None:
    """The label of a run this session was served from another session's measurement (None if it measured it)."""
    measured: Measured | None = st.session_state.get(_SERVED, {}).get(id(comparison))
    if measured is None or measured.comparison is not comparison or not measured.shared_with(_session()):
        return None
    return measured.label()


def shared_note(comparison: Comparison) -> None:
    """Say so when the run shown was measured for another session (and when)."""
    label = shared_label(comparison)
    if label:
        st.info(label, icon="🤝")


def fresh_checkbox(key: str, where=st) -> bool:
    """The learner's way past a shared measurement: time this run again, in the line like any other."""
    return where.checkbox(
        "Measure afresh",
        key=key,
        help="An identical run measured on this server before is shown as "
        "measured (labelled shared); tick to time it again yourself. It then waits its turn in the line.",
    )
