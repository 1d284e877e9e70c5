"""Step: is it really faster? The main drafter against the target alone on several evaluation prompts,
each timed by the same loop with the same length and settings: the gain depends on the prompt."""

from __future__ import annotations

import streamlit as st

from ....comparison import Comparison
from ....lesson import recordings
from ....lesson.claim import NOISE, Claim, direction, label, times
from ....lesson.question import Question
from ....lesson.step import Data, Step
from ...views import lesson_charts
from .. import parts, session
from ..prediction import predict

TITLE = "Is it really faster?"
TEACHES = "Measured against the target alone on the same prompts and lengths: the gain depends on the prompt."


def prompts(data: Data) -> dict[str, Comparison]:
    """The main run (a retrieval prompt) and the other prompts, each against the target alone."""
    return {"faster:retrieval": data.group(recordings.MAIN)["main"], **data.group(recordings.FASTER)}


def question(data: Data) -> Question | None:
    runs = prompts(data)
    wins = sum(c.speedup > 1 for c in runs.values())
    return Question(f"faster:{data.source(recordings.FASTER)}", f"On how many of these {len(runs)} prompts is the "
                    "speculative run faster than the target alone?", tuple(str(i) for i in range(len(runs) + 1)), wins,
                    f"{wins} of {len(runs)}: each was timed against the target alone on the same prompt and length.")


def claim(data: Data) -> Claim:
    runs = prompts(data)
    ranked = sorted(runs.items(), key=lambda kv: -kv[1].speedup)
    faster_ = [n for n, c in runs.items() if direction(c.speedup) == 0]
    same = [n for n, c in runs.items() if direction(c.speedup) == 1]
    slower = [n for n, c in runs.items() if direction(c.speedup) == 2]
    parts_ = [f"faster on {len(faster_)} of {len(runs)} prompts"]
    if same:
        parts_.append(f"within {NOISE:.0%} of the target alone on {len(same)} ({', '.join(label(n) for n in same)})")
    if slower:
        parts_.append(f"slower on {len(slower)} ({', '.join(label(n) for n in slower)})")
    text = ("Measured: " + "; ".join(parts_) + ". Ranked: " +
            ", ".join(f"{label(n)} {times(c.speedup)}" for n, c in ranked) + ".")
    problems = []
    if len(faster_) + len(same) + len(slower) != len(runs):
        problems.append("a prompt is counted twice or not at all")
    if not all(c.identical for c in runs.values()):
        problems.append("an exact run's output differs from the target's")
    return Claim(text, tuple(problems))


def view(data: Data) -> bool:
    runs = prompts(data)
    main = runs["faster:retrieval"]
    same = sum(c.identical for c in runs.values())
    st.markdown(f"**{main.spec.draft}** against the target alone on {len(runs)} evaluation prompts, each timed by the "
                f"same loop after a warm-up, with the same length and settings; the output was identical to the "
                f"target's on {same} of {len(runs)}.")
    revealed = predict(question(data))
    if revealed:
        st.plotly_chart(lesson_charts.faster_figure(runs), key="lesson-faster")
        parts.runs_table(runs, label)
        mean = sum(c.speedup for c in runs.values()) / len(runs)
        st.markdown(f"Mean speedup **{mean:.2f}×**. The more of its answer a prompt lets the draft copy, the more it "
                    "gains; the ranking below says which prompts did here.")
    session.provenance(data, recordings.FASTER)
    session.live_button(recordings.FASTER, "every prompt, ~1 min")
    return revealed


STEP = Step("faster", TITLE, TEACHES, question, claim, view)
