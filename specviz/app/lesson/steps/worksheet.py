"""Step: the acceptance-rate worksheet. α counted by hand on the main run, beside the numbers a learner
is likely to confuse with it (per round, per token written)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ....lesson import recordings
from ....lesson.claim import Claim
from ....lesson.question import Question, distinct
from ....lesson.step import Data, Step
from ... import controls
from ...views import charts, tokens
from .. import session
from ..prediction import predict

TITLE = "The acceptance-rate worksheet"
TEACHES = "α = accepted ÷ drafted, counted on a real run."


def question(data: Data) -> Question | None:
    run = data.group(recordings.MAIN)["main"].spec
    if not run.drafted:
        return None
    right = run.accepted / run.drafted
    wrong = [run.accepted / max(1, len(run.rounds)), run.new_tokens / run.drafted,
             run.accepted / max(1, run.new_tokens)]
    return Question(f"worksheet:{data.source(recordings.MAIN)}", f"This run drafted {run.drafted} tokens over "
                    f"{len(run.rounds)} rounds, kept {run.accepted} of them and wrote {run.new_tokens} tokens. "
                    "What is α?", distinct([right, *wrong]), 0,
                    f"α = accepted ÷ drafted = {run.accepted} ÷ {run.drafted} = {right:.2f}.")


def claim(data: Data) -> Claim:
    run = data.group(recordings.MAIN)["main"].spec
    problems = []
    if sum(r.emitted for r in run.rounds) != run.new_tokens:
        problems.append("the rounds' tokens do not add up to the run's output")
    if not 0 < run.acceptance_rate <= 1:
        problems.append(f"α = {run.acceptance_rate:.2f} is not a rate of kept drafts")
    return Claim(f"α = {run.accepted} ÷ {run.drafted} = {run.acceptance_rate:.2f}; {run.new_tokens} tokens in "
                 f"{len(run.rounds)} rounds ({run.mean_accepted_tokens:.2f} a round).", tuple(problems))


def view(data: Data) -> bool:
    main = data.group(recordings.MAIN)["main"]
    run = main.spec
    st.html(tokens.output_html(run))
    controls.legend()
    revealed = predict(question(data))
    if revealed:
        st.markdown("**Worksheet**, filled in from this run:")
        st.dataframe(pd.DataFrame([
            ("rounds (target forward passes)", f"{len(run.rounds)}"),
            ("tokens drafted", f"{run.drafted}"),
            ("drafts accepted", f"{run.accepted}"),
            ("α = accepted ÷ drafted", f"{run.accepted} ÷ {run.drafted} = {run.acceptance_rate:.2f}"),
            ("tokens written", f"{run.new_tokens}"),
            ("tokens per round = written ÷ rounds",
             f"{run.new_tokens} ÷ {len(run.rounds)} = {run.mean_accepted_tokens:.2f}"),
            ("target alone: passes for the same text", f"{main.baseline.new_tokens}"),
        ], columns=["quantity", "value"]), hide_index=True)
        st.caption("Per-position acceptance: α falls along the draft, because a draft is only tested if all before "
                   "it were kept.")
        st.plotly_chart(charts.acceptance_by_position_figure({run.draft: run}), key="lesson-bypos")
    session.provenance(data, recordings.MAIN)
    session.live_button(recordings.MAIN, f"{run.draft} and the target alone")
    return revealed


STEP = Step("worksheet", TITLE, TEACHES, question, claim, view)
