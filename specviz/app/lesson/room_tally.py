"""A lesson question asked of the whole room: every learner's answer counted, the presenter reveals.

In room mode with a presenter, a question is the room's: each learner (one per browser, no names) answers once
and may change the answer until the presenter reveals it; after answering a learner sees the room's tally grow.
The presenter sees the tally as bars, live, and reveals the answer (or resets the question to ask it afresh);
after the reveal the tally sits beside the measured answer and every learner's page shows its verdict within
a few seconds. Answers live in the class store, so a reload finds them.
"""

from __future__ import annotations

import streamlit as st

from ...classroom.tally import Tally
from ...lesson.question import Question, Score
from .. import class_state, room
from ..views.class_views import tally_figure

_LATE = "_class-late"  # a learner's answer arrived after the reveal


@st.cache_data(show_spinner=False, max_entries=256)
def _chart(options: tuple[str, ...], counts: tuple[int, ...], answer: int | None) -> dict:
    """The tally's chart, built once per state of the counts: every open page redraws it every few seconds, and a
    Plotly figure costs far more to build than to send."""
    return tally_figure(Tally(options, counts), answer).to_dict()


def _figure(tally: Tally, answer: int | None) -> dict:
    return _chart(tally.options, tally.counts, answer)


def predict_in_room(question: Question, n: int, score: Score) -> bool:
    """Ask the room; True once the presenter has revealed the answer (the step's view may then be shown). A
    learner's revealed answer joins this session's `score`."""
    with st.container(border=True, key=f"lesson-predict-{n}"):
        st.markdown(f"**Predict first — the whole room.** {question.text}")
        if room.is_presenter():
            return _presenter(question)
        return _learner(question, n, score)


def _presenter(question: Question) -> bool:
    store, qid = class_state.store(), question.qid
    revealed = store.revealed(qid)
    if revealed:
        tally = store.tally(qid, question.options)
        st.plotly_chart(_figure(tally, question.answer), key=f"class-tally-{qid}")
        st.success(tally.text(question.answer) + f" {question.explain}", icon="📊")
    else:
        _live_tally(question, revealed=False, answered=True)
        st.button("Reveal the answer to the room", key=f"class-reveal-{qid}", type="primary", on_click=store.reveal,
                  args=(qid,), help="Answers are final from then on; every learner sees the verdict")
    st.button("Reset this question", key=f"class-reset-{qid}", on_click=store.reset, args=(qid,),
              help="Forget the room's answers and the reveal, and ask it afresh")
    return revealed


def _answer(qid: str, me: str, key: str) -> None:
    choice = st.session_state.get(key)
    if choice is not None and not class_state.store().answer(qid, me, choice):
        st.session_state[_LATE] = qid


def _learner(question: Question, n: int, score: Score) -> bool:
    store, qid, me = class_state.store(), question.qid, class_state.learner()
    mine, revealed = store.answer_of(qid, me), store.revealed(qid)
    if revealed:
        right = question.options[question.answer]
        if mine is None:
            st.info(f"The presenter revealed the answer: {right}. {question.explain}")
        elif mine == right:
            st.success(f"✔ Right: {mine}. {question.explain}")
        else:
            st.error(f"✘ Not quite: you said {mine}; the answer is {right}. {question.explain}")
        if mine in question.options:
            score.submit(question, question.options.index(mine))
        if st.session_state.pop(_LATE, None) == qid:
            st.warning("Your answer came after the reveal, so it was not counted.", icon="⏱️")
        _live_tally(question, revealed=True, answered=mine is not None)
        return True
    key = f"lesson-q-{qid}"
    if key not in st.session_state and mine in question.options:  # a reload shows the answer the room counted
        st.session_state[key] = mine
    st.radio("Your prediction", question.options, index=None, key=key, horizontal=True)
    picked = st.session_state.get(key)
    st.button("Submit prediction" if mine is None else "Change my answer", key=f"lesson-submit-{n}", type="primary",
              disabled=picked is None or picked == mine, on_click=_answer, args=(qid, me, key))
    if mine is not None:
        st.caption(f"Counted: **{mine}**. You may change it until the presenter reveals the answer.")
    _live_tally(question, revealed=False, answered=mine is not None)
    return False


def _live_tally(question: Question, revealed: bool, answered: bool) -> None:
    """The room's tally, read again every few seconds; the whole page is redrawn when the presenter reveals or
    resets."""
    class_state.live(_tally)(question, revealed, answered)


def _tally(question: Question, revealed: bool, answered: bool) -> None:
    store, qid = class_state.store(), question.qid
    if store.revealed(qid) != revealed:
        st.rerun()
    if not room.is_presenter() and answered and store.answer_of(qid, class_state.learner()) is None:
        st.rerun()  # the presenter reset the question
    if not answered:
        st.caption("The room's tally shows once you have answered; the verdict once the presenter reveals it.")
        return
    tally = store.tally(qid, question.options)
    st.plotly_chart(_figure(tally, question.answer if revealed else None), key=f"class-tally-{qid}")
    if revealed and not room.is_presenter():
        st.caption(tally.text(question.answer))
    elif not revealed:
        st.caption(f"{tally.total} answer{'s' if tally.total != 1 else ''} so far · live, no names")
