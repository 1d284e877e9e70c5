"""Step: draft, then verify. One round of the main run, before and after the target's single forward pass
over the draft's guesses: the learner predicts how many it keeps."""

from __future__ import annotations

import streamlit as st

from ....lesson import recordings
from ....lesson.claim import Claim
from ....lesson.question import Question, pick_round
from ....lesson.step import Data, Step
from ....records import Round, Run
from ... import controls
from .. import parts, session
from ..prediction import predict

TITLE = "Draft, then verify"
TEACHES = "A cheap draft guesses γ tokens; the target checks all of them in one forward pass."


def keep_round(run: Run) -> Round | None:
    """A round worth predicting: several drafts, some kept, not all, not the first round."""
    return pick_round(run.rounds, lambda r: len(r.drafted) >= 3, lambda r: 0 < r.n_accepted < len(r.drafted),
                      lambda r: r.index > 0)


def question(data: Data) -> Question | None:
    run = data.group(recordings.MAIN)["main"].spec
    r = keep_round(run)
    if r is None or not r.drafted:
        return None
    k = len(r.drafted)
    return Question(f"draft-verify:{data.source(recordings.MAIN)}:{r.index}",
                    f"Round {r.index + 1}: the draft proposed {k} tokens. How many will the target keep?",
                    tuple(str(i) for i in range(k + 1)), r.n_accepted,
                    f"The target kept {r.n_accepted} of {k}: drafts are kept up to the first one the target's own "
                    f"choice disagrees with, then the target's token replaces it.")


def claim(data: Data) -> Claim:
    main = data.group(recordings.MAIN)["main"]
    r = keep_round(main.spec)
    step = main.baseline.step_seconds
    problems = []
    if r is None or r.emitted < 2:
        return Claim("No round of this run gave more than one token.", ("no round shows a pass giving several tokens",))
    if r.verify_seconds >= (len(r.drafted) + 1) * step:
        problems.append(f"checking {len(r.drafted)} drafts took {1000 * r.verify_seconds:.1f} ms, no less than "
                        f"{len(r.drafted) + 1} single steps")
    return Claim(f"Round {r.index + 1}: one pass checked {len(r.drafted)} drafts in {1000 * r.verify_seconds:.1f} ms "
                 f"({r.verify_seconds / step:.1f} steps' time) and gave {r.emitted} tokens.", tuple(problems))


def view(data: Data) -> bool:
    main = data.group(recordings.MAIN)["main"]
    run = main.spec
    r = keep_round(run)
    st.markdown(f"Here the draft is **{run.draft}** (γ = {run.settings['gamma']}), the target SmolLM2-135M.")
    parts.context(run, r)
    revealed = predict(question(data))
    if revealed:
        parts.verified(r)
        step_ms = 1000 * main.baseline.step_seconds
        st.markdown(f"Checking {len(r.drafted)} drafts (+1 position) took **{1000 * r.verify_seconds:.1f} ms**, "
                    f"one plain target step {step_ms:.1f} ms: this round gave **{r.emitted} tokens** for one pass.")
        controls.legend()
    session.provenance(data, recordings.MAIN, f"{run.draft} drafting, {run.new_tokens} tokens")
    session.live_button(recordings.MAIN, f"{run.draft} and the target alone")
    return revealed


STEP = Step("draft-verify", TITLE, TEACHES, question, claim, view)
