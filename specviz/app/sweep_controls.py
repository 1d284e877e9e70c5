"""The Run / Stop / progress block shared by the sweep pages (Draft length, Compare drafts).

How Stop works: Streamlit runs a page script from the top on every button press. Pressing Stop (or
any other control) while a sweep measures starts a new script run; Streamlit asks the measuring
run to end at its next Streamlit call, which is the progress update after each point. The new run
marks the sweep in session state as stopped, so the measuring run also leaves the sweep between
points if it gets there first, and adds no point after the one the new run shows. Points are
kept as they are measured, so a stopped or failed sweep still shows every point done.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ..lab.sweeps import INTERRUPTED, STOPPED, OnPoint, Point, ShouldStop, Sweep
from . import controls


def buttons(key: str, label: str, disabled: bool, stop_help: str) -> bool:
    """The Run and Stop buttons; True when Run was pressed. Ends a sweep an earlier run was measuring."""
    run_col, stop_col = st.columns([1, 5])
    run_clicked = run_col.button(label, type="primary", key=f"{key}-run", disabled=disabled)
    stop_clicked = stop_col.button("Stop", key=f"{key}-stop", help=stop_help)
    earlier = st.session_state.get(f"{key}-sweep")
    if earlier is not None:
        # Still "running" here means the run measuring it was interrupted by this one (a new run
        # starts only when a control is used): by Stop, or by a change of another control.
        earlier.stop(STOPPED if stop_clicked else INTERRUPTED)
    return run_clicked


def run(key: str, sweep: Sweep, measure: Callable[[OnPoint, ShouldStop], object], describe: Callable[[Point], str],
        what: str) -> None:
    """Measure a sweep with a progress bar, keeping each point in session state as it comes.

    `measure(on_point, should_stop)` loads the models and calls the sweep function; `describe`
    names a point in the progress text (e.g. "γ=3 on prompt 1").
    """
    st.session_state[f"{key}-sweep"] = sweep
    progress = st.progress(0.0, text="Loading models and measuring the target alone…")

    def on_point(point: Point, done: int, total: int) -> None:
        sweep.add(point)  # kept before the progress update, where a Stop press ends this run
        c = point.comparison
        progress.progress(done / total, text=f"{done} of {total}: {describe(point)} — "
                                             f"α={c.spec.acceptance_rate:.2f}, {c.speedup:.2f}×")

    with controls.error_box(what), controls.exclusive():
        measure(on_point, sweep.should_stop)
    sweep.finish()


def result(key: str, noun: str) -> Sweep | None:
    """The last sweep with at least one point, with a warning when it did not measure every point."""
    sweep = st.session_state.get(f"{key}-sweep")
    if sweep is None or not sweep.points:
        return None
    message = sweep.message(noun)
    if message:
        st.warning(message, icon="⏹️" if sweep.status in (STOPPED, INTERRUPTED) else "⚠️")
    return sweep
