"""Step: one expensive step at a time. The target alone writes one token per forward pass; reading a whole
prompt also takes one pass, which is what speculative decoding turns into a way of writing."""

from __future__ import annotations

import streamlit as st

from ....lesson import recordings
from ....lesson.claim import Claim
from ....lesson.question import Question
from ....lesson.step import Data, Step
from ...views import lesson_charts
from .. import session

TITLE = "One expensive step at a time"
TEACHES = ("A language model writes one token per forward pass, and each pass reads every weight: the target is "
           "the bottleneck.")


def question(data: Data) -> Question | None:
    """Nothing to predict yet: the step opens the lesson by showing the target at work."""
    return None


def claim(data: Data) -> Claim:
    base = data.group(recordings.MAIN)["main"].baseline
    step, prompt = base.step_seconds, len(base.prompt_ids)
    problems = []
    if len(base.rounds) != base.new_tokens:
        problems.append(f"the target alone made {len(base.rounds)} forward passes for {base.new_tokens} tokens, "
                        "not one each")
    if base.prefill_seconds >= prompt * step:
        problems.append(f"reading the {prompt}-token prompt ({1000 * base.prefill_seconds:.0f} ms) was not cheaper "
                        f"than {prompt} single steps ({1000 * prompt * step:.0f} ms)")
    return Claim(f"{base.new_tokens} tokens took {len(base.rounds)} passes of {1000 * step:.1f} ms each; the "
                 f"{prompt}-token prompt took one pass of {1000 * base.prefill_seconds:.0f} ms, "
                 f"{base.prefill_seconds / step:.1f} steps' time for {prompt} tokens.", tuple(problems))


def view(data: Data) -> bool:
    main = data.group(recordings.MAIN)["main"]
    base = main.baseline
    st.markdown(f"The target alone wrote these {base.new_tokens} tokens in **{base.new_tokens} forward passes, one "
                "after another**: each needs the token before it. A pass reads all 135M weights to produce one token.")
    cols = st.columns(4)
    cols[0].metric("tokens", base.new_tokens)
    cols[1].metric("ms per token", f"{1000 * base.step_seconds:.1f}", help="mean time of one target forward, measured")
    cols[2].metric("tokens / s", f"{base.tokens_per_second:.1f}")
    cols[3].metric("total", f"{main.baseline_seconds:.2f} s")
    st.plotly_chart(lesson_charts.step_times_figure(base), key="lesson-steptimes")
    st.caption(f"Prompt ({len(base.prompt_ids)} tokens, read in one pass of {1000 * base.prefill_seconds:.0f} ms): "
               f"{base.prompt[:160]}…")
    st.markdown("Reading the prompt took **one** pass for all its tokens; writing takes one pass **per** token. "
                "Speculative decoding makes the target check several tokens in one pass, the way it reads a prompt.")
    session.provenance(data, recordings.MAIN, f"target alone, {base.new_tokens} tokens")
    session.live_button(recordings.MAIN, "the target alone and the n-gram draft")
    return True


STEP = Step("bottleneck", TITLE, TEACHES, question, claim, view)
