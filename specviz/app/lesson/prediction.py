"""Predict first: a step's question, its verdict hidden until submitted, and the session's running score."""

from __future__ import annotations

import streamlit as st

from ...lesson.question import Question, Score
from .. import room
from .room_tally import predict_in_room
from .session import step_shown

SCORE, SKIPPED = "lesson-score", "lesson-skipped"


def score() -> Score:
    return st.session_state.setdefault(SCORE, Score({}))


def _submit(question: Question) -> None:
    choice = st.session_state.get(f"lesson-q-{question.qid}")
    if choice is not None:
        score().submit(question, question.options.index(choice))


def _skip(question: Question) -> None:
    st.session_state.setdefault(SKIPPED, set()).add(question.qid)


def predict(question: Question | None) -> bool:
    """Ask, and show the verdict once answered. True when the reveal may be shown (answered or skipped; in a room
    with a presenter, once the presenter has revealed it)."""
    if question is None:
        return True
    n = step_shown()
    if room.room_mode() and room.presenter_key():  # a room with a presenter: the question is the room's
        return predict_in_room(question, n, score())
    answers = score().answers
    with st.container(border=True, key=f"lesson-predict-{n}"):
        st.markdown(f"**Predict first.** {question.text}")
        if question.qid in answers:
            choice, ok = answers[question.qid]
            yours = question.options[choice]
            if ok:
                st.success(f"✔ Right: {yours}. {question.explain}")
            else:
                st.error(f"✘ Not quite: you said {yours}; the answer is {question.options[question.answer]}. "
                         f"{question.explain}")
            return True
        st.radio("Your prediction", question.options, index=None, key=f"lesson-q-{question.qid}", horizontal=True)
        picked = st.session_state.get(f"lesson-q-{question.qid}") is not None
        c1, c2 = st.columns([1, 4])
        c1.button("Submit prediction", key=f"lesson-submit-{n}", type="primary", disabled=not picked,
                  on_click=_submit, args=(question,))
        c2.button("Skip: just show me", key=f"lesson-skip-{n}", on_click=_skip, args=(question,))
        if question.qid in st.session_state.get(SKIPPED, set()):
            st.info(f"The answer: {question.options[question.answer]}. {question.explain}")
            return True
        st.caption("The verdict stays hidden until you submit.")
        return False
