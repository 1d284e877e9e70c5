"""Step: accept, reject, resample. A round with a refusal: the learner predicts which draft the target
refuses first, then sees the target's own token take its place and every later draft dropped with it."""

from __future__ import annotations

import streamlit as st

from ....lesson import recordings
from ....lesson.claim import Claim
from ....lesson.question import Question, pick_round, tok
from ....lesson.step import Data, Step
from ....records import Round, Run
from ... import controls
from ...views import charts, tokens
from .. import parts, session
from ..prediction import predict

TITLE = "Accept, reject, resample"
TEACHES = ("The longest prefix the target agrees with is kept; the first disagreement is replaced by the target's "
           "own token.")


def fail_round(run: Run) -> Round | None:
    """A round with a refusal, of several drafts, after the first draft was kept."""
    return pick_round(run.rounds, lambda r: r.rejected_position is not None, lambda r: len(r.drafted) >= 3,
                      lambda r: (r.rejected_position or 0) >= 1)


def question(data: Data) -> Question | None:
    r = fail_round(data.group(recordings.MAIN)["main"].spec)
    if r is None or not r.drafted:
        return None
    texts = [tok(r.drafted_text[i] if i < len(r.drafted_text) else "") for i in range(len(r.drafted))]
    options = tuple(f"draft {i + 1}: «{t}»" for i, t in enumerate(texts)) + ("none: all kept",)
    if r.rejected_position is None:
        answer = len(r.drafted)
        explain = f"The target agreed with every draft and added the bonus «{tok(r.next_text)}»."
    else:
        answer = r.rejected_position
        explain = (f"The target's own choice at that position was «{tok(r.next_text)}», so «{texts[answer]}» was "
                   "refused and every draft after it discarded with it.")
    return Question(f"accept-reject:{data.source(recordings.MAIN)}:{r.index}",
                    f"Round {r.index + 1}: which draft does the target refuse first?", options, answer, explain)


def claim(data: Data) -> Claim:
    r = fail_round(data.group(recordings.MAIN)["main"].spec)
    if r is None or r.rejected_position is None:
        return Claim("No draft was refused in this run.", ("the run shows no rejection to replace",))
    problems = []
    if r.n_accepted != r.rejected_position:
        problems.append(f"round {r.index + 1} kept {r.n_accepted} drafts though the first refusal was at "
                        f"{r.rejected_position}")
    if r.next_token == r.drafted[r.rejected_position]:
        problems.append(f"round {r.index + 1} replaced the refused draft by the same token")
    later = len(r.drafted) - r.rejected_position - 1
    return Claim(f"Round {r.index + 1}: {r.n_accepted} kept, draft {r.rejected_position + 1} refused and replaced by "
                 f"the target's «{tok(r.next_text)}», {later} later draft(s) discarded unchecked.", tuple(problems))


def view(data: Data) -> bool:
    run = data.group(recordings.MAIN)["main"].spec
    r = fail_round(run)
    st.markdown("Greedy decoding: the target keeps a draft when it is the target's own first choice at that position.")
    parts.context(run, r)
    revealed = predict(question(data))
    if revealed:
        parts.verified(r)
        if r.rejected_position is not None and r.alternatives:
            st.plotly_chart(charts.residual_figure(r), key="lesson-residual")
        st.caption("Timeline of the first rounds: every drafted token and its fate")
        st.html(tokens.timeline_html(run, upto_round=min(len(run.rounds) - 1, 7)))
        controls.legend()
    session.provenance(data, recordings.MAIN)
    session.live_button(recordings.MAIN, f"{run.draft} and the target alone")
    return revealed


STEP = Step("accept-reject", TITLE, TEACHES, question, claim, view)
