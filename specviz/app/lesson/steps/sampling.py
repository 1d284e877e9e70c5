"""Step: sampling, accept with probability min(1, p/q). A drafted token whose acceptance was a coin toss
(p < q), from a sampled run with a distilled draft whose q is a real distribution."""

from __future__ import annotations

import streamlit as st

from ....lesson import recordings
from ....lesson.claim import Claim
from ....lesson.question import Question, distinct, tok
from ....lesson.step import Data, Step
from ....records import Round, Run
from ... import controls
from ...views import charts
from .. import parts, session
from ..prediction import predict

TITLE = "Sampling: accept with probability min(1, p/q)"
TEACHES = ("When sampling, a draft is kept with probability min(1, p/q) and a rejection is redrawn from "
           "norm(max(0, p − q)).")


def sampling_pick(run: Run) -> tuple[Round, int] | None:
    """A drafted token with p < q (acceptance not certain), preferring p/q well inside (0, 1)."""
    best = None
    for r in run.rounds:
        for i, (p, q) in enumerate(zip(r.p, r.q)):
            if p is None or q <= 0 or p >= q:
                continue
            score = abs(p / q - 0.5)
            if best is None or score < best[0]:
                best = (score, r, i)
    return (best[1], best[2]) if best else None


def accept_probability(p: float, q: float) -> float:
    return min(1.0, p / q) if q > 0 else 1.0


def question(data: Data) -> Question | None:
    pick = sampling_pick(data.group(recordings.SAMPLED)["sampled"].spec)
    if pick is None:
        return None
    r, i = pick
    p, q = r.p[i], r.q[i]
    right = accept_probability(p, q)
    token = tok(r.drafted_text[i] if i < len(r.drafted_text) else "")
    fate = "kept" if i < r.n_accepted else "refused"
    return Question(f"sampling:{data.source(recordings.SAMPLED)}:{r.index}:{i}",
                    f"Round {r.index + 1}, draft {i + 1} «{token}»: the draft gave it q = {q:.3f}, the target "
                    f"p = {p:.3f}. With what probability is it kept?",
                    distinct([right, p, q, 1.0, 1 - q + p if 1 - q + p < 1 else max(0.0, q - p)]), 0,
                    f"min(1, p/q) = min(1, {p:.3f}/{q:.3f}) = {right:.2f}. In this run it was {fate}.")


def claim(data: Data) -> Claim:
    run = data.group(recordings.SAMPLED)["sampled"].spec
    problems = []
    if not run.settings["sampling"]["temperature"]:
        problems.append("the sampling step's run is greedy")
    if sampling_pick(run) is None:
        problems.append("no drafted token had p < q, so no acceptance was uncertain")
    uncertain = sum(p is not None and p < q for r in run.rounds for p, q in zip(r.p, r.q))
    return Claim(f"{run.accepted} of {run.drafted} drafts kept (α = {run.acceptance_rate:.2f}); {uncertain} drafted "
                 "tokens had p < q and were kept only by chance.", tuple(problems))


def view(data: Data) -> bool:
    run = data.group(recordings.SAMPLED)["sampled"].spec
    pick = sampling_pick(run)
    st.markdown(f"With sampling (temperature {run.settings['sampling']['temperature']:g}) the draft **{run.draft}** "
                "draws each token from its q, and the target keeps it with probability **min(1, p/q)**: always when "
                "p ≥ q. After a rejection the replacement is drawn from **norm(max(0, p − q))**, the mass the draft "
                "under-proposed. Together they give exactly the target's distribution.")
    revealed = True
    if pick is None:
        st.info("No drafted token in this run had p < q; run it live for another draw.")
    else:
        r, _ = pick
        parts.context(run, r)
        revealed = predict(question(data))
        if revealed:
            parts.verified(r)
            if r.rejected_position is not None and r.alternatives:
                st.plotly_chart(charts.residual_figure(r), key="lesson-sampling-residual")
            controls.legend()
    session.provenance(data, recordings.SAMPLED, f"{run.draft}, sampling")
    session.live_button(recordings.SAMPLED, f"{run.draft}, sampling")
    return revealed


STEP = Step("sampling", TITLE, TEACHES, question, claim, view)
