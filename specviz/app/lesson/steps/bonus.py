"""Step: the bonus token. A round where every draft was kept: the target's one pass already scored the
position after the last draft, so the round adds one token more than was drafted."""

from __future__ import annotations

import streamlit as st

from ....lesson import recordings
from ....lesson.claim import Claim
from ....lesson.question import Question, pick_round, tok
from ....lesson.step import Data, Step
from ....records import Round, Run
from ... import controls
from .. import parts, session
from ..prediction import predict

TITLE = "The bonus token"
TEACHES = "When every draft is kept, the target's last position gives one more token for free."


def bonus_round(run: Run) -> Round | None:
    """A round of several drafts, all kept, that added the bonus token."""
    return pick_round(run.rounds, lambda r: len(r.drafted) >= 2 and r.n_accepted == len(r.drafted),
                      lambda r: r.emitted == len(r.drafted) + 1)


def question(data: Data) -> Question | None:
    r = bonus_round(data.group(recordings.MAIN)["main"].spec)
    if r is None or not r.drafted or r.n_accepted < len(r.drafted):
        return None
    k = len(r.drafted)
    return Question(f"bonus:{data.source(recordings.MAIN)}:{r.index}",
                    f"Round {r.index + 1}: the target keeps all {k} drafts. How many tokens does this round add?",
                    tuple(str(v) for v in (k - 1, k, k + 1)), 2,
                    f"{k} drafts plus the bonus token «{tok(r.next_text)}»: the target's forward pass already scored "
                    f"the position after the last draft, so one more token costs nothing.")


def claim(data: Data) -> Claim:
    run = data.group(recordings.MAIN)["main"].spec
    r = bonus_round(run)
    count = sum(x.next_kind == "bonus" for x in run.rounds)
    if r is None or r.n_accepted < len(r.drafted) or r.next_kind != "bonus" or r.emitted != len(r.drafted) + 1:
        return Claim(f"{count} of {len(run.rounds)} rounds ended with a bonus token.",
                     ("no round kept every draft and added a bonus token",))
    return Claim(f"{count} of {len(run.rounds)} rounds kept every draft and added a bonus token.")


def view(data: Data) -> bool:
    run = data.group(recordings.MAIN)["main"].spec
    r = bonus_round(run)
    st.markdown("The target's forward pass over [last token, d₁ … d_γ] gives γ + 1 distributions: one to check each "
                "draft and **one more after the last draft**.")
    parts.context(run, r)
    revealed = predict(question(data))
    if revealed:
        parts.verified(r)
        bonus = sum(x.next_kind == "bonus" for x in run.rounds)
        st.markdown(f"In this run **{bonus} of {len(run.rounds)} rounds** ended with a bonus token.")
        controls.legend()
    session.provenance(data, recordings.MAIN)
    session.live_button(recordings.MAIN, f"{run.draft} and the target alone")
    return revealed


STEP = Step("bonus", TITLE, TEACHES, question, claim, view)
