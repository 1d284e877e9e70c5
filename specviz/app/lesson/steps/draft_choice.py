"""Step: draft choice, accurate against cheap. Every drafter on the same prompt, γ and length: the fastest
is the one with the most tokens per unit of time, which is not always the most accurate."""

from __future__ import annotations

import streamlit as st

from ....comparison import Comparison
from ....lesson import recordings
from ....lesson.claim import Claim, cost_text, label, times
from ....lesson.question import Question, best_by_speedup
from ....lesson.step import Data, Step
from ...views import lesson_charts
from .. import parts, session
from ..prediction import predict
from .cost import SELF_DRAFT

TITLE = "Draft choice: accurate against cheap"
TEACHES = "What matters is tokens gained per unit of time: a draft must be right often (α) and cheap (small c)."


def drafts(data: Data) -> dict[str, Comparison]:
    """The drafters compared (the target drafting for itself belongs to the cost step)."""
    return {n: c for n, c in data.group(recordings.DRAFTS).items() if n != SELF_DRAFT}


def question(data: Data) -> Question | None:
    runs = drafts(data)
    if len(runs) < 2:
        return None
    labels, best = best_by_speedup(runs, label)
    fastest = list(runs.values())[best]
    return Question(f"draft-choice:{data.source(recordings.DRAFTS)}", "Which drafter was fastest here?", tuple(labels),
                    best, f"{labels[best]}: {fastest.speedup:.2f}× (α = {fastest.spec.acceptance_rate:.2f}, "
                    f"c = {fastest.cost_ratio:.3f}).")


def claim(data: Data) -> Claim:
    """The fastest drafter, beside the most accurate one that it beat (or said to be the most accurate itself),
    and the ranking; the step is contradicted when no costlier drafter lost to it."""
    runs = drafts(data)
    best = max(runs, key=lambda n: runs[n].speedup)
    b = runs[best]
    rivals = [n for n, c in runs.items() if c.spec.acceptance_rate > b.spec.acceptance_rate]
    ranked = ", ".join(f"{label(n)} {times(c.speedup)}" for n, c in sorted(runs.items(), key=lambda kv: -kv[1].speedup))
    if rivals:
        m = max(rivals, key=lambda n: runs[n].spec.acceptance_rate)
        place = "ahead of" if runs[m].speedup < b.speedup else "level with"
        text = (f"Fastest: {label(best)} ({times(b.speedup)}, α = {b.spec.acceptance_rate:.2f}, "
                f"{cost_text(b.cost_ratio)}), {place} the more accurate {label(m)} "
                f"(α = {runs[m].spec.acceptance_rate:.2f}, {cost_text(runs[m].cost_ratio)}). Ranked: {ranked}.")
    else:
        text = (f"Fastest: {label(best)} ({times(b.speedup)}), which is also the most accurate here "
                f"(α = {b.spec.acceptance_rate:.2f}, {cost_text(b.cost_ratio)}). Ranked: {ranked}.")
    problems = []
    costly = [n for n, c in runs.items() if c.cost_ratio > 10 * max(b.cost_ratio, 1e-3) and c.speedup < b.speedup]
    if not costly:
        problems.append("no costlier drafter lost to the fastest: nothing shows that cost matters")
    return Claim(text, tuple(problems))


def view(data: Data) -> bool:
    runs = drafts(data)
    st.markdown("An accurate draft (high α) that is expensive (high c), or a weak one that is almost free?")
    revealed = predict(question(data))
    if revealed:
        st.plotly_chart(lesson_charts.drafts_figure(runs), key="lesson-drafts")
        parts.runs_table(runs, label)
    session.provenance(data, recordings.DRAFTS)
    session.live_button(recordings.DRAFTS, "every drafter, ~1 min")
    return revealed


STEP = Step("draft-choice", TITLE, TEACHES, question, claim, view)
