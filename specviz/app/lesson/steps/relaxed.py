"""Step: relaxed verification and what it costs. The main drafter at growing tolerances τ: more drafts
kept and more speed, until a near-miss changes the context and the output stops being the target's."""

from __future__ import annotations

import streamlit as st

from ....lesson import recordings
from ....lesson.claim import Claim, label, times
from ....lesson.question import Question
from ....lesson.step import Data, Step
from ...views import lesson_charts, tokens
from .. import parts, session
from ..prediction import predict

TITLE = "Relaxed verification and what it costs"
TEACHES = "Accepting near-misses raises α and speed, and the output stops being the target's."


def tau_label(name: str) -> str:
    return f"τ = {label(name)}"


def question(data: Data) -> Question | None:
    runs = data.group(recordings.RELAXED)
    if len(runs) < 2:
        return None
    labels = [tau_label(n) for n in runs] + ["none of them"]
    changed = [i for i, c in enumerate(runs.values()) if not c.identical]
    answer = changed[0] if changed else len(labels) - 1
    return Question(f"relaxed:{data.source(recordings.RELAXED)}", "From which tolerance τ does the output stop being "
                    "the target's own text?", tuple(labels), answer,
                    f"{labels[answer]}: a near-miss accepted once changes the context, and every later token with it.")


def claim(data: Data) -> Claim:
    runs = data.group(recordings.RELAXED)
    exact, loosest = runs[min(runs, key=lambda n: float(label(n)))], runs[max(runs, key=lambda n: float(label(n)))]
    changed = [label(n) for n, c in runs.items() if not c.identical]
    problems = []
    if loosest.spec.acceptance_rate <= exact.spec.acceptance_rate:
        problems.append("the loosest tolerance did not raise α")
    if loosest.speedup <= exact.speedup:
        problems.append("the loosest tolerance was not faster than exact verification")
    if not changed:
        problems.append("no tolerance changed the output")
    if not exact.identical:
        problems.append("exact verification (τ = 0) did not give the target's own text")
    return Claim(f"From τ = 0 to τ = {max(float(label(n)) for n in runs):g}: α {exact.spec.acceptance_rate:.2f} → "
                 f"{loosest.spec.acceptance_rate:.2f}, speedup {times(exact.speedup)} → {times(loosest.speedup)}; the "
                 f"output differs from the target's from τ = {changed[0] if changed else 'never'}.", tuple(problems))


def view(data: Data) -> bool:
    runs = data.group(recordings.RELAXED)
    first = next(iter(runs.values()))
    st.markdown(f"Relaxed (greedy) verification keeps a draft that is in the target's top {recordings.RELAXED_TOP_K} "
                f"and within τ nats of its best token. Draft: **{first.spec.draft}**. τ = 0 is exact verification.")
    revealed = predict(question(data))
    if revealed:
        st.plotly_chart(lesson_charts.relaxed_figure(runs), key="lesson-relaxed")
        parts.runs_table(runs, tau_label)
        loosest_name, loosest = list(runs.items())[-1]
        left, right = st.columns(2)
        left.caption("The target alone")
        left.html(tokens.CSS + f'<div class="sv-text">{loosest.baseline.text}</div>')
        right.caption(f"Relaxed, {tau_label(loosest_name)} ({loosest.agreement:.0%} token agreement)")
        right.html(tokens.output_html(loosest.spec))
    session.provenance(data, recordings.RELAXED)
    session.live_button(recordings.RELAXED, "each τ, ~1 min")
    return revealed


STEP = Step("relaxed", TITLE, TEACHES, question, claim, view)
