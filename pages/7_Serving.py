"""Serving: speculative decoding measured on a vLLM server, beside SpecViz's own runs of the same draft."""

import streamlit as st

from specviz.app import controls, room
from specviz.app.views import serving_charts
from specviz.engine import results

st.set_page_config(page_title="Serving · SpecViz", page_icon="🔎", layout="wide")
controls.page_intro(
    "Serving — speculative decoding on a vLLM server",
    "A serving engine batches many requests into each forward. Alone, a request leaves the GPU mostly idle, so "
    "verifying γ extra tokens is nearly free; with many requests in flight every extra token costs compute, so the "
    "gain from speculation shrinks as load grows. Results of `python -m specviz engine-bench` appear here beside "
    "lab runs of the same draft and prompts, with the same definitions of α and tokens per round.",
)
room.room_bar(room.page_id(__file__))  # reads files only, reaches no server: open to learners too

left, right = st.columns(2)
engine_file = left.file_uploader("Engine run: an engine-bench JSONL (empty = the shipped example)", type=["jsonl"],
                                 key="serving-engine")
lab_file = right.file_uploader("Lab run: a `python -m specviz bench --out` JSONL (empty = the shipped example)",
                               type=["jsonl"], key="serving-lab")

engine_rows = lab_rows = None
with controls.error_box("load the engine run"):
    engine_rows = results.load_engine(engine_file.getvalue() if engine_file else results.EXAMPLE_ENGINE.read_bytes())
with controls.error_box("load the lab run"):
    lab_rows = results.load_lab(lab_file.getvalue() if lab_file else results.EXAMPLE_LAB.read_bytes())
if engine_rows is None:
    st.stop()

st.caption(("Shipped example: " if engine_file is None else "") + results.run_caption(engine_rows))
engine = lab = None
with controls.error_box("read the engine run's acceptance"):
    engine = results.engine_acceptance(engine_rows)
if lab_rows:
    drafts = results.lab_drafts(lab_rows)
    draft = st.selectbox("Lab draft to compare", drafts, key="serving-draft",
                         index=drafts.index(engine.draft) if engine and engine.draft in drafts else 0)
    with controls.error_box("read the lab run"):
        lab = results.lab_acceptance(lab_rows, draft, engine_rows[0].get("prompt_ids"))

if engine is not None:
    st.subheader("Acceptance: engine and lab")
    e1, e2, e3 = st.columns(3)
    e1.metric("Engine α", f"{engine.alpha:.3f}",
              help=f"accepted ÷ drafted, pooled over every level: {engine.accepted:.0f} of {engine.drafted:.0f}")
    e2.metric("Engine tokens / round", f"{engine.tokens_per_forward:.2f}",
              help="new tokens per target forward (SpecViz's mean accepted tokens per round)")
    e3.metric("Engine acceptance length", f"{engine.acceptance_length:.2f}",
              help="vLLM's convention: 1 + accepted ÷ steps that had a draft")
    if lab is not None:
        l1, l2, l3 = st.columns(3)
        l1.metric("Lab α", f"{lab.alpha:.3f}",
                  help=f"pooled over {lab.prompts} prompt(s): {lab.accepted:.0f} of {lab.drafted:.0f}")
        l2.metric("Lab tokens / round", f"{lab.tokens_per_forward:.2f}", help="new tokens ÷ rounds")
        l3.metric("Lab acceptance length", f"{lab.acceptance_length:.2f}" if lab.acceptance_length else "–",
                  help="1 + accepted ÷ rounds that drafted (older bench files lack the count)")
    st.plotly_chart(serving_charts.position_figure(engine, lab), key="serving-positions")
    if lab is not None and not lab.by_position:
        st.caption("This bench file has no per-position counts (made before SpecViz recorded them): run bench again.")
    if engine.draft.startswith("ngram"):
        st.caption("The two n-gram drafters differ a little: vLLM's always drafts γ tokens from a match, SpecViz's at "
                   "most 2 after a match of only 2 tokens. vLLM's acceptance length counts only the steps that found a "
                   "match; tokens per round counts every target forward, as speed does.")

st.subheader("Speedup against concurrency")
speedups = results.speedup_frame(engine_rows)
if speedups.empty:
    st.info("This engine run has no baseline server: run engine-bench with --baseline-url (the same model without "
            "speculation) to measure the speedup at each concurrency.")
else:
    first, last = speedups.iloc[0], speedups.iloc[-1]
    st.write(f"At {int(first['concurrency'])} request(s) in flight speculation gives **{first['speedup']:.2f}×** the "
             f"baseline's tokens/s; at {int(last['concurrency'])} it gives **{last['speedup']:.2f}×**.")
    a, b = st.columns(2)
    a.plotly_chart(serving_charts.speedup_figure(speedups), key="serving-speedup")
    b.plotly_chart(serving_charts.throughput_figure(speedups), key="serving-throughput")
st.dataframe(results.levels_frame(engine_rows), hide_index=True, key="serving-levels", column_config={
    "throughput": st.column_config.NumberColumn("tokens / s", format="%.1f"),
    "ttft_ms": st.column_config.NumberColumn("time to first token (ms)", format="%.1f"),
    "itl_ms": st.column_config.NumberColumn("inter-token latency (ms)", format="%.2f"),
    "e2e_s": st.column_config.NumberColumn("end-to-end (s)", format="%.2f"),
    "acceptance_rate": st.column_config.NumberColumn("α", format="%.3f"),
    "mean_accepted_tokens": st.column_config.NumberColumn("tokens / round", format="%.2f"),
    "speedup": st.column_config.NumberColumn("speedup (tokens/s)", format="%.2f×"),
    "latency_speedup": st.column_config.NumberColumn("speedup (latency)", format="%.2f×"),
})
if lab is not None:
    st.caption(f"The lab's single-stream speedup for {lab.draft} on this machine: "
               f"{results.lab_speedup(lab_rows, lab.draft):.2f}× (median over {lab.prompts} prompt(s)).")
