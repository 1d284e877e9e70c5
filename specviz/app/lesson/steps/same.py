"""Step: is it really the same? The distribution lab: seeded draws of the first token from the target
alone, from exact speculative sampling and from relaxed verification, each set's distance from the
target-alone set held against the distance chance alone gives."""

from __future__ import annotations

import streamlit as st

from ....lab import same_distribution
from ....lab.same_distribution import EXACT, RELAXED, LabSetup
from ....lesson.claim import Claim
from ....lesson.question import Question
from ....lesson.step import Data, Step
from ...views import lesson_charts
from .. import session
from ..prediction import predict

TITLE = "Is it really the same?"
TEACHES = "Exact speculative sampling draws from the target's own distribution; relaxed verification does not."


def question(data: Data) -> Question | None:
    within_exact = same_distribution.closeness(data.lab).within(EXACT)
    return Question(f"same:{data.source(session.LAB)}", "Exact speculative sampling against the target alone: is their "
                    "difference bigger than two samples of the target alone would show by chance?",
                    ("yes, it drifts", "no, it is within the noise"), 1 if within_exact else 0,
                    "Exact speculative sampling is lossless: its first tokens follow the target's distribution, and "
                    "the gap to the target-alone sample is what chance alone gives.")


def claim(data: Data) -> Claim:
    c = same_distribution.closeness(data.lab)
    problems = []
    if not c.within(EXACT):
        problems.append(f"exact speculative sampling's TV {c.tv[EXACT]:.3f} is above the noise band {c.band:.3f}")
    if c.within(RELAXED):
        problems.append(f"relaxed verification's TV {c.tv[RELAXED]:.3f} is within the noise band {c.band:.3f}")
    return Claim(f"TV(exact, target) {c.tv[EXACT]:.3f} is {'within' if c.within(EXACT) else 'above'} the noise band "
                 f"{c.band:.3f}; TV(relaxed, target) {c.tv[RELAXED]:.3f} is "
                 f"{'within' if c.within(RELAXED) else 'above'} it.", tuple(problems))


def view(data: Data) -> bool:
    record = data.lab
    setup = LabSetup(**record.setup)
    closeness = same_distribution.closeness(record)
    st.markdown(
        f"**{closeness.samples} seeded runs per set** of the prompt “{setup.prompt}” (raw text, temperature "
        f"{setup.temperature:g}, the {setup.top_k} likeliest tokens), each through the real loop; the first generated "
        f"token of each run is counted. Sets: the **target alone**, **exact** speculative sampling with "
        f"{setup.draft} drafting, and **relaxed** verification (lenience l = {setup.lenience:g}: keep with "
        f"min(1, p/(l·q))). Each set has its own seeds. Why sampling and not the formula: the formula is what is being "
        "tested; these are draws from the code that runs.")
    revealed = predict(question(data))
    if revealed:
        st.plotly_chart(lesson_charts.lab_figure(record), key="lesson-lab")
        cols = st.columns(3)
        cols[0].metric("TV(exact, target)", f"{closeness.tv[EXACT]:.3f}",
                       help="total-variation distance between the exact set's and the target-alone set's histograms")
        cols[1].metric("noise band (95%)", f"≤ {closeness.band:.3f}",
                       help="95% of TVs between two equally large samples of the target alone fall below this "
                            "(bootstrap from the target-alone counts, 1000 draws)")
        cols[2].metric("TV(relaxed, target)", f"{closeness.tv[RELAXED]:.3f}")
        for name in (EXACT, RELAXED):
            inside = closeness.within(name)
            verdict = "indistinguishable from the target" if inside else "a different distribution"
            (st.success if inside == (name == EXACT) else st.warning)(
                f"{name}: TV {closeness.tv[name]:.3f} is {'within' if inside else 'above'} the noise band "
                f"({closeness.band:.3f}) → {verdict}.")
    recorded = data.source(session.LAB) == "rec"
    st.caption(f"{'Recorded by the project' if recorded else 'Run live in this session'}: "
               f"{sum(len(v) for v in record.first_tokens.values())} runs in {record.seconds:.0f} s on {record.device}"
               + (f", with `{session.recording().manifest['made_by']}`." if recorded else "."))
    session.live_button(session.LAB, f"{session.LIVE_LAB_SAMPLES} runs per set, ~1–2 min; fewer runs, so a wider band")
    return revealed


STEP = Step("same", TITLE, TEACHES, question, claim, view)
