"""The Run / Stop / progress block shared by the sweep pages (Draft length, Compare drafts).

How Stop works: Streamlit runs a page script from the top on every button press. Pressing Stop (or
any other control) while a sweep measures starts a new script run; Streamlit asks the measuring
run to end at its next Streamlit call, which is the progress update after each point. The measuring
run then gives its job up (the worker stops it before the next timed pair), and the new run marks the
sweep in session state as stopped, so no point after the one the new run shows is added. Points are
kept as they are measured, so a stopped or failed sweep still shows every point done.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ..lab.measure import speedup_text
from ..lab.sweeps import INTERRUPTED, STOPPED, Point, Sweep
from . import controls, service


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


def run(key: str, sweep: Sweep, job: str, describe: Callable[[Point], str], what: str, **kwargs) -> None:
    """Measure a sweep in the worker (`job` of specviz.worker.jobs with `kwargs`) with a progress bar, keeping each
    point in session state as it comes. `describe` names a point in the progress text (e.g. "γ=3 on prompt 1")."""
    st.session_state[f"{key}-sweep"] = sweep
    progress = st.progress(0.0, text="Waiting for the measurement worker…")

    def on_event(event) -> None:
        kind, *rest = event
        if kind == "parameters":
            sweep.setup["parameters"] = rest[0]
            return
        point, done, total = rest
        sweep.add(point)  # kept before the progress update, where a Stop press ends this run
        c = point.comparison
        progress.progress(done / total, text=f"{done} of {total}: {describe(point)} — "
                                             f"α={c.spec.acceptance_rate:.2f}, {speedup_text(c)}")

    with controls.error_box(what):
        service.run_job(job, on_event, **kwargs)
    sweep.finish()


def pairs_slider(key: str) -> int:
    """How many timed pairs each point gets: its speedup is their median, their range its spread."""
    return st.slider("Timed pairs per point", 1, 5, 2, key=f"{key}-pairs",
                     help="Each point times the target alone and the drafter side by side this many times; "
                          "its speedup is the median of the pairs' ratios and their range is shown as its spread. "
                          "More pairs: a steadier figure, a longer sweep.")


def result(key: str, noun: str) -> Sweep | None:
    """The last sweep with at least one point, with a warning when it did not measure every point."""
    sweep = st.session_state.get(f"{key}-sweep")
    if sweep is None or not sweep.points:
        return None
    message = sweep.message(noun)
    if message:
        st.warning(message, icon="⏹️" if sweep.status in (STOPPED, INTERRUPTED) else "⚠️")
    return sweep
