"""Step: why a bad draft is slower (c). The target drafting for itself is always right (α = 1) and still
loses to the target alone, because every drafted token costs a full target step."""

from __future__ import annotations

import streamlit as st

from ....lesson import recordings
from ....lesson.claim import NOISE, Claim, direction, label, times
from ....lesson.question import Question
from ....lesson.step import Data, Step
from .. import parts, session
from ..prediction import predict

TITLE = "Why a bad draft is slower (c)"
TEACHES = "Every drafted token costs c target steps: a perfect but expensive draft is slower than no draft."
SELF_DRAFT = "drafts:target"  # the target drafting for itself: α = 1, c ≈ 1


def question(data: Data) -> Question | None:
    self_draft = data.group(recordings.DRAFTS).get(SELF_DRAFT)
    if self_draft is None:
        return None
    return Question(f"cost:{data.source(recordings.DRAFTS)}", "The target drafts for itself: every draft is accepted "
                    "(α = 1). Compared with the target alone, is that…", ("faster", "about the same", "slower"),
                    direction(self_draft.speedup),
                    f"Measured: {self_draft.speedup:.2f}× (α = {self_draft.spec.acceptance_rate:.2f}, "
                    f"c = {self_draft.cost_ratio:.2f}). Each round pays γ full target steps to draft, plus the check.")


def claim(data: Data) -> Claim:
    self_draft = data.group(recordings.DRAFTS).get(SELF_DRAFT)
    if self_draft is None:
        return Claim("No run of the target drafting for itself.", ("the step's self-draft run is missing",))
    a, s = self_draft.spec.acceptance_rate, self_draft.speedup
    problems = []
    if a < 0.99:
        problems.append(f"the target drafting for itself kept only {a:.2f} of its drafts, not every one")
    if s >= 1 - NOISE:
        problems.append(f"the perfect but expensive self-draft was not slower than the target alone ({times(s)})")
    return Claim(f"The target drafting for itself: α = {a:.2f}, c = {self_draft.cost_ratio:.2f}, {times(s)}: "
                 f"{'slower' if s < 1 else 'not slower'} than the target alone.", tuple(problems))


def view(data: Data) -> bool:
    runs = data.group(recordings.DRAFTS)
    st.markdown("Speedup = tokens per round ÷ cost per round, with the cost in target steps: **γ·c + v** "
                "(c: one draft token's time ÷ one target step; v: one verification pass, about 1).")
    revealed = predict(question(data))
    if revealed:
        parts.runs_table(runs, label)
        st.markdown("The target drafting for itself keeps everything (α = 1) and still loses: each round pays γ full "
                    "target steps to draft. A draft must be **cheap** (small c) as well as right.")
    session.provenance(data, recordings.DRAFTS, "each drafter against the target alone, same prompt, γ and length")
    session.live_button(recordings.DRAFTS, "every drafter, ~1 min")
    return revealed


STEP = Step("cost", TITLE, TEACHES, question, claim, view)
