"""The race on a page: speed and replay controls, the animated lanes, the latency table and the time chart.

The race animates in the browser (one self-contained component fed with the recorded times), so no model
and no rerun is needed while it plays. Speed and replay are Streamlit controls so that a presenter's choice
travels to the followers: a page publishes `published(key)` with its slide, and a follower draws the race
from that value instead of its own controls.
"""

from __future__ import annotations

import streamlit as st

from .. import race
from ..comparison import Comparison
from . import room
from .views import race_view


def published(key: str) -> str:
    """What a presenter publishes for the race of `key` (speed and replay count, as one plain string)."""
    return st.session_state.get(f"{key}-race", "1.0|0")


def _bump(key: str) -> None:
    st.session_state[f"{key}-race-count"] = st.session_state.get(f"{key}-race-count", 0) + 1


def _controls(key: str) -> tuple[float, int]:
    """Speed and replay count: this session's controls, or the presenter's when following."""
    if room.following():
        speed, count = published(key).split("|")
        st.caption(f"Following the presenter's race: {race_view.speed_label(float(speed))}.")
        return float(speed), int(count)
    left, right = st.columns([4, 1], vertical_alignment="bottom")
    speed = left.segmented_control("Race speed", race.SPEEDS, default=1.0, format_func=race_view.speed_label,
                                   key=f"{key}-race-speed", help="Real time is the pace the runs were measured at")
    right.button("↺ Replay the race", key=f"{key}-race-again", on_click=_bump, args=(key,))
    speed = speed or 1.0  # a deselected control means real time
    count = st.session_state.get(f"{key}-race-count", 0)
    st.session_state[f"{key}-race"] = f"{speed}|{count}"
    return speed, count


def show(comparisons: dict[str, Comparison], key: str, time_chart: bool = True) -> None:
    """The target alone and each speculative run of `comparisons` (one prompt) racing side by side; beneath it
    (unless the page draws it elsewhere) where each lane's time went."""
    lanes, notes = race.race_lanes(comparisons)
    speed, count = _controls(key)
    if len(lanes) < 2:
        st.info("The race needs the target alone and a speculative run with times: "
                + ("; ".join(notes) if notes else "there is nothing to race") + ".")
        return
    st.iframe(race_view.race_html(lanes, speed, count), height="content")
    for note in notes:
        st.caption(f"Note: {note}.")
    if time_chart:
        with st.expander("Where the time goes: drafting and the target's forwards, round by round"):
            st.plotly_chart(race_view.time_lanes_figure(lane_spans(comparisons)), key=f"{key}-time-lanes")


def lane_spans(comparisons: dict[str, Comparison]) -> dict[str, list[race.Span]]:
    """Each lane's rounds on the wall clock: the target alone (the first baseline), then every run that has times."""
    first = next(iter(comparisons.values()))
    out = {race.BASELINE: race.spans(race.BASELINE, first.baseline)}
    out.update({name: race.spans(name, c.spec) for name, c in comparisons.items()})
    return {name: spans for name, spans in out.items() if spans}


def latency_and_time(comparison: Comparison, key: str) -> None:
    """The latency figures (TTFT, gaps) and the two-lane time chart of one comparison."""
    st.dataframe(race_view.latency_frame(comparison), hide_index=True, key=f"{key}-latency", column_config={
        c: st.column_config.NumberColumn(c, format="%.1f") for c in
        ("time to first token (ms)", "median gap (ms)", "p90 gap (ms)")})
    st.caption("Time to first token counts the prefill. A gap is the time between two consecutive tokens: inside a "
               "speculative burst it is 0, so the median can be 0 while the p90 shows the wait between rounds.")
    spans = lane_spans({comparison.spec.draft or "speculative": comparison})
    if len(spans) == 2:
        st.plotly_chart(race_view.time_lanes_figure(spans), key=f"{key}-time-lanes")


@st.cache_resource(show_spinner=False)
def shipped() -> race.Recording | None:
    """The race recorded by the project (assets/race), shared read-only by every session; None if missing."""
    return race.load_recording() if race.RACE_FILE.is_file() else None


def show_shipped(key: str) -> None:
    """The shipped race with what it is and how it was made."""
    recording = shipped()
    if recording is None:
        st.info("The shipped race (assets/race/race.json) is missing: make it with scripts/record_race.py.")
        return
    first = next(iter(recording.runs.values()))
    st.caption(
        f"{', '.join(recording.runs)} against {first.spec.target} alone on one prompt, "
        f"γ={first.spec.settings['gamma']}, "
        f"{first.spec.new_tokens} new tokens, greedy (every output identical to the target's), recorded on "
        f"{recording.info.get('made_on', 'an unnamed machine')} ({recording.info.get('date', 'no date')}). "
        f"Prompt: {first.spec.prompt[:100]}…"
    )
    show(recording.runs, key)
