"""The Lesson page's frame: which step is shown, Back / Next and the step list, and one step drawn.

The step lives in one place, `current_step()` / `go_to()`, mirrored in the `?step=N` query parameter so every
step has a link (and a presenter's room can move it). What a step shows is its own file in `steps/`.
"""

from __future__ import annotations

import streamlit as st

from ...lesson.step import step_index
from .. import links, service
from .prediction import score
from .session import STEP, data
from .steps import KEYS, STEPS


# --- the current step (one small interface, for links and a presenter to drive) -----------------------
def current_step() -> int:
    """The 1-based step shown: this session's, else the link's ?step=N, else 1."""
    if STEP not in st.session_state:
        st.session_state[STEP] = step_index(st.query_params.get("step", 1), len(STEPS))
    return st.session_state[STEP]


def go_to(step) -> None:
    """Show step `step` (clamped to the lesson) and put it in the address bar."""
    st.session_state[STEP] = step_index(step, len(STEPS), default=current_step())
    st.query_params["step"] = str(st.session_state[STEP])


def navigation() -> int:
    """Back / Next (keyboard: ← →), progress and score; the step list in the sidebar. Returns the step."""
    n = current_step()
    st.query_params["step"] = str(n)
    back, middle, forward = st.columns([1, 6, 1], vertical_alignment="center")
    back.button("◀ Back", key="lesson-back", shortcut="Left", disabled=n == 1, on_click=go_to, args=(n - 1,),
                help="Previous step (← key)")
    forward.button("Next ▶", key="lesson-next", shortcut="Right", disabled=n == len(STEPS), on_click=go_to,
                   args=(n + 1,), type="primary", help="Next step (→ key)")
    middle.progress(n / len(STEPS), text=f"Step {n} of {len(STEPS)} · {STEPS[n - 1].title} · {score().text()}")
    with st.sidebar:
        st.markdown("**Lesson steps**")
        for i, step in enumerate(STEPS, start=1):
            st.button(f"{i}. {step.title}", key=f"lesson-goto-{i}", type="primary" if i == n else "tertiary",
                      on_click=go_to, args=(i,))
        links.link_box(restores="this step of the lesson")
        st.caption(f"Link to this step: `?step={n}` (the address bar always holds it)")
        worker = service.service().worker
        st.caption(f"Measurement worker: **{'running' if worker.alive else 'not started'}**",
                   help="Every step reads recordings; models load in the measurement worker, a separate process, only "
                        "for a live run (Run it live, or another page's Run)")
    return n


def render(n: int) -> None:
    """Step n: its title and sentence, its view, and once revealed what its runs show (warned if they contradict
    the step)."""
    step = STEPS[n - 1]
    shown = data(KEYS)
    st.header(f"{n}. {step.title}")
    st.markdown(f"*{step.teaches}*")
    if step.view(shown):
        claim = step.claim(shown)
        st.markdown(f"**What these runs show:** {claim.text}")
        if claim.problems:
            st.warning("These runs do not bear out the step's text: " + "; ".join(claim.problems) + ".", icon="⚖️")
    if n < len(STEPS):
        st.button(f"Next: {STEPS[n].title} ▶", key="lesson-next-bottom", on_click=go_to, args=(n + 1,))
