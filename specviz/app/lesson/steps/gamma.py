"""Step: draft length, how long a guess pays. The main drafter swept over γ on one prompt, measured beside
the theory fed each run's own α, c and verification cost."""

from __future__ import annotations

import streamlit as st

from ....lesson import recordings
from ....lesson.claim import ALMOST_FREE, NOISE, Claim, cost_text, label, near, times
from ....lesson.question import Question, best_by_speedup
from ....lesson.step import Data, Step
from ...views import lesson_charts
from .. import parts, session
from ..prediction import predict

TITLE = "Draft length: how long a guess pays?"
TEACHES = "Longer drafts gain more when accepted but cost more when rejected: the best γ balances α against c."


def gamma_label(name: str) -> str:
    return f"γ = {label(name)}"


def question(data: Data) -> Question | None:
    runs = data.group(recordings.GAMMA)
    if not runs:
        return None
    labels, best = best_by_speedup(runs, gamma_label)
    fastest = list(runs.values())[best]
    return Question(f"gamma:{data.source(recordings.GAMMA)}", "Which draft length was fastest on this prompt?",
                    tuple(labels), best, f"{labels[best]}: {fastest.speedup:.2f}× measured.")


def claim(data: Data) -> Claim:
    """Where the sweep is fastest, said in the shape its numbers have: still rising at the longest γ, highest at
    the shortest, or a peak between (never "a moderate γ" when the numbers climb)."""
    runs = data.group(recordings.GAMMA)
    gammas = {n: int(label(n)) for n in runs}
    best = max(runs, key=lambda n: runs[n].speedup)
    top, lowest = max(gammas.values()), min(gammas.values())
    b = runs[best]
    close = near(runs, best)
    tie = f" (γ = {', '.join(close)} within {NOISE:.0%}, the timing noise)" if close else ""
    if gammas[best] == top:
        shorter = runs[max((n for n in runs if n != best), key=lambda n: gammas[n])] if len(runs) > 1 else b
        grow = "still grow" if b.spec.mean_accepted_tokens > shorter.spec.mean_accepted_tokens else "no longer grow"
        cost = (f"the draft is almost free here ({cost_text(b.cost_ratio)}), so a rejected long draft wastes little"
                if b.cost_ratio < ALMOST_FREE else f"the draft costs {cost_text(b.cost_ratio)} a token")
        why = f"{cost}, and tokens per round {grow} ({b.spec.mean_accepted_tokens:.2f} at γ = {top})"
        text = f"Speedup is still rising at γ = {top}, the longest tried ({times(b.speedup)}){tie}: {why}."
    elif gammas[best] == lowest:
        text = (f"Speedup is highest at the shortest draft, γ = {lowest} ({times(b.speedup)}){tie}: longer drafts are "
                f"rejected too often to pay for their cost ({cost_text(b.cost_ratio)}).")
    else:
        text = (f"Speedup peaks at γ = {gammas[best]} ({times(b.speedup)}){tie}; shorter drafts leave tokens on the "
                "table, longer ones are refused more often than they pay for.")
    return Claim(text)


def view(data: Data) -> bool:
    runs = data.group(recordings.GAMMA)
    first = next(iter(runs.values()))
    st.markdown(f"The same prompt with **{first.spec.draft}** at each draft length γ. Longer drafts gain more tokens "
                "per round when they are accepted, and cost more when they are not.")
    revealed = predict(question(data))
    if revealed:
        st.plotly_chart(lesson_charts.gamma_figure(runs), key="lesson-gamma")
        parts.runs_table(runs, gamma_label)
        st.caption("Differences of a few percent are within the timing noise of a shared CPU; the theory line uses "
                   "each run's own α, c and verification cost.")
    session.provenance(data, recordings.GAMMA)
    session.live_button(recordings.GAMMA, "each γ, ~1 min")
    return revealed


STEP = Step("gamma", TITLE, TEACHES, question, claim, view)
