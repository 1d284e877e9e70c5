"""Auto-replay of a run's rounds: Play / Pause, a speed control, and the tick that moves one round on.

The page wraps its replay view in `st.fragment(run_every=interval if playing else None)`: while
playing, only that fragment redraws, once per interval, and no model is called. Play and Pause rerun
the whole page (so the fragment picks up its new timer), and so does the last round (to drop it).
State, per key: {key}-playing, {key}-step (the round shown, 1-based), {key}-played-at.
"""

from __future__ import annotations

import time

import streamlit as st

_now = time.monotonic  # the replay's clock (a test moves it by hand)
SPEEDS = {"0.5×": 2.0, "1×": 1.0, "2×": 0.5, "4×": 0.25}  # seconds per round


def _toggle(key: str, n: int) -> None:
    state = st.session_state
    state[f"{key}-playing"] = not state.get(f"{key}-playing", False)
    if state[f"{key}-playing"] and state.get(f"{key}-step", n) >= n:
        state[f"{key}-step"] = 1  # from the start when the last round is shown
    state[f"{key}-played-at"] = _now()


def play_pause(container, key: str, n: int) -> bool:
    """The Play / Pause button for rounds 1..n; True while playing."""
    playing = st.session_state.get(f"{key}-playing", False)
    container.button("Pause" if playing else "Play", icon=":material/pause:" if playing else ":material/play_arrow:",
                     key=f"{key}-play", on_click=_toggle, args=(key, n),
                     help="Replay the rounds one by one, at the speed chosen beside")
    return st.session_state.get(f"{key}-playing", False)


def interval(container, key: str) -> float:
    """Seconds per round, from the speed control."""
    return SPEEDS[container.select_slider("Replay speed", list(SPEEDS), value="1×", key=f"{key}-speed")]


def tick(key: str, n: int, seconds: float) -> int:
    """The round to show: one further while playing once `seconds` have passed since the last move (other
    reruns do not move it); at the last round the replay stops."""
    state = st.session_state
    step = min(max(state.get(f"{key}-step", n), 1), n)
    if state.get(f"{key}-playing"):
        now = _now()
        if now - state.get(f"{key}-played-at", 0.0) >= 0.9 * seconds:
            step, state[f"{key}-played-at"] = min(n, step + 1), now
        state[f"{key}-step"] = step
        if step >= n:
            state[f"{key}-playing"] = False
            st.rerun()  # the whole page, so the fragment loses its timer
    return step
