"""Step: feature heads, a draft that reads the target. A head over the target's last hidden state, alone
and beside n-gram lookup: almost free to run, and as good as one small layer can read from those features."""

from __future__ import annotations

import streamlit as st

from ....comparison import Comparison
from ....lesson import recordings
from ....lesson.claim import ALMOST_FREE, Claim, cost_text, direction, label, times
from ....lesson.question import Question
from ....lesson.step import Data, Step
from ... import controls
from ...views import charts
from .. import parts, session
from ..prediction import predict
from . import draft_choice
from .draft_verify import keep_round

TITLE = "Feature heads: a draft that reads the target"
TEACHES = ("A draft head predicts the next tokens from the target's own hidden state: almost free to run, and as "
           "good as what one small layer can read from those features.")
DRAFT_MODEL = "drafts:smol-draft-2l256"  # a separate 2-layer draft model, from the draft-choice step


def head_alone(runs: dict[str, Comparison]) -> Comparison | None:
    """The head drafting alone (a paired drafter is named "ngram+…")."""
    return next((c for n, c in runs.items() if "+" not in n), None)


def question(data: Data) -> Question | None:
    head = head_alone(data.group(recordings.HEADS))
    if head is None:
        return None
    return Question(f"heads:{data.source(recordings.HEADS)}", f"The head {head.spec.draft} drafts "
                    f"γ = {head.spec.settings['gamma']} tokens a round from the target's hidden state. Compared with "
                    "the target alone, is it…", ("faster", "about the same", "slower"), direction(head.speedup),
                    f"Measured: {head.speedup:.2f}× (α = {head.spec.acceptance_rate:.2f}, c = {head.cost_ratio:.3f}).")


def claim(data: Data) -> Claim:
    runs = data.group(recordings.HEADS)
    head = head_alone(runs)
    paired = next((c for n, c in runs.items() if "+" in n), None)
    model = data.group(recordings.DRAFTS).get(DRAFT_MODEL)
    by_pos = ", ".join(f"{a:.2f}" for a in head.spec.acceptance_by_position())
    text = (f"{head.spec.draft}: {cost_text(head.cost_ratio)} per drafted token, α = {head.spec.acceptance_rate:.2f} "
            f"(by position: {by_pos}), {head.spec.mean_accepted_tokens:.2f} tokens per round, {times(head.speedup)}.")
    if model is not None:
        text += (f" A separate 2-layer draft model ({label(DRAFT_MODEL)}, step {data.number(draft_choice.STEP.key)}) "
                 f"costs {cost_text(model.cost_ratio)}.")
    if paired is not None:
        text += (f" Beside n-gram lookup ({paired.spec.draft}): α = {paired.spec.acceptance_rate:.2f}, "
                 f"{paired.spec.mean_accepted_tokens:.2f} tokens per round, {times(paired.speedup)}.")
    problems = []
    if not all(c.identical for c in runs.values()):
        problems.append("a head run's output differs from the target's")
    if head.cost_ratio >= ALMOST_FREE:
        problems.append(f"the head is not almost free: {cost_text(head.cost_ratio)}")
    if model is not None and head.cost_ratio >= model.cost_ratio:
        problems.append("the head costs no less than a separate draft model")
    return Claim(text, tuple(problems))


def view(data: Data) -> bool:
    runs = data.group(recordings.HEADS)
    head = head_alone(runs)
    st.markdown(f"**{head.spec.draft}** is not a separate model: it is one small layer that reads the target's last "
                "hidden state (what the target computed for the token it just wrote) and guesses the next tokens "
                "from it. Every verification forward hands it fresh features, so it costs almost nothing to run.")
    revealed = predict(question(data))
    if revealed:
        parts.runs_table(runs, label)
        st.plotly_chart(charts.acceptance_by_position_figure({c.spec.draft: c.spec for c in runs.values()}),
                        key="lesson-head-bypos")
        r = keep_round(head.spec)
        if r is not None:
            parts.verified(r)
            controls.legend()
    session.provenance(data, recordings.HEADS, "the head alone and beside n-gram lookup")
    session.live_button(recordings.HEADS, "the head runs, ~1 min")
    return revealed


STEP = Step("heads", TITLE, TEACHES, question, claim, view)
