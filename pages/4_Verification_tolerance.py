"""Verification tolerance: what relaxed verification buys in speed and costs in quality."""

import numpy as np
import streamlit as st

from specviz.app import controls, links, room, service
from specviz.app.views import tokens, tolerance_charts
from specviz.lab import quality
from specviz.records import token_agreement

st.set_page_config(page_title="Verification tolerance · SpecViz", page_icon="🔎", layout="wide")
controls.page_intro(
    "Verification tolerance — speed vs quality",
    "Exact verification keeps only the drafts the target would have produced itself; relaxed verification also "
    "keeps near-misses, so α and the speed rise while the output drifts from the exact one — measured here, one "
    "tolerance at a time, each run timed in a pair with the target alone.",
)

room.room_bar(room.page_id(__file__))
LINK = [*controls.pair_params("tol"), *controls.decoding_params("tol"), *controls.prompt_params("tol"),
        links.Param("tol-tau", "tau", tuple, limits=(0, 3)),
        links.Param("tol-lenience", "lenience_range", tuple, limits=(0.05, 1)),
        links.Param("tol-steps", "steps", int, limits=(2, 8)), links.Param("tol-extra", "extra", int, limits=(0, 99))]
links.restore(LINK)
with st.sidebar:
    target, draft = controls.pair_pickers("tol", "Sweep settings")
    settings = None
    with controls.error_box("use these settings"):
        settings = controls.decoding_controls("tol", with_verification=False)
    greedy = settings is None or settings.sampling.greedy
    if greedy:
        low, high = st.slider("τ range (nats below the target's best token)", 0.0, 3.0, (0.0, 3.0), 0.1, key="tol-tau")
        top_k = st.slider("Accept drafts within the target's top-k", 1, 20, 3, key="tol-topk")
    else:
        low, high = st.slider("Lenience range (1 = exact, lower accepts more)", 0.05, 1.0, (0.2, 1.0), 0.05,
                              key="tol-lenience")
        top_k = 1  # a lenience sweep has no top-k
    steps = st.slider("Tolerance values in the range", 2, 8, 4, key="tol-steps")
values = sorted({round(float(x), 3) for x in np.linspace(low, high, steps)}, reverse=not greedy)  # tight → loose

prompt = controls.prompt_picker("tol")
category = st.session_state.get("tol-cat", "chat")
others = [row["prompt"] for row in controls.presets()[category] if row["prompt"] != prompt]
st.session_state["tol-extra"] = min(st.session_state.get("tol-extra", 0), len(others))  # a link, or a smaller workload
extra = st.number_input(f"Also average over this many other {category} presets", 0, len(others), 0, key="tol-extra")
links.share(LINK)
links.link_box(st.sidebar)
prompts = [prompt] + others[: int(extra)]

state = st.session_state
st.caption(
    f"{len(values) + 1} runs of {len(prompts)} prompt(s), each timed in a pair with the target alone: exact, then "
    + ", ".join(f"{'τ' if greedy else 'l'}={v:g}" for v in values)
    + ". Leaving the page or changing a control stops the sweep; the points done are kept."
)
if st.button("Run sweep", type="primary", key="tol-run", disabled=settings is None):
    state.pop("tol-sweep", None)
    state["tol-sweep-cat"] = category  # the workload the sweep ran on (math answers can be checked)
    progress = st.progress(0.0, text="Exact verification first, each run timed in a pair with the target alone…")

    def on_event(event) -> None:
        _, sweep, done, total = event
        state["tol-sweep"] = sweep  # kept as it grows, so a stopped sweep still shows its points
        progress.progress(done / total, text=f"{done} of {total} verification rules measured…")

    with controls.error_box("run the sweep"):
        state["tol-sweep"] = service.run_job(
            "tolerance_sweep",
            on_event,
            target=target,
            draft=draft,
            prompts=prompts,
            settings=settings,
            values=values,
            top_k=top_k,
            pairs=1,
        )
    progress.empty()

sweep = state.get("tol-sweep")
if sweep is None:
    st.info(
        "Pick a draft and a tolerance range, then press **Run sweep**. Small settings (16–32 new tokens, 3 values) "
        "take well under a minute on a CPU."
    )
    st.stop()

ref, loosest = sweep.reference, sweep.loosest()
first = ref.comparisons[0].spec
st.caption(
    f"{first.draft} → {first.target} · γ={sweep.settings['gamma']} · "
    + (
        f"greedy, τ with top-{sweep.top_k}"
        if sweep.greedy
        else f"sampling at T={sweep.settings['sampling']['temperature']:g}"
    )
    + f" · {len(ref.comparisons)} prompt(s) · {sweep.settings['max_new_tokens']} new tokens · seed "
      f"{sweep.settings['seed']}"
)
if sweep.greedy and ref.identical_to_baseline:
    st.success("✔ The exact reference is identical to the target alone: every quality score is measured against it.")
elif sweep.greedy:
    st.warning(
        "✘ The exact reference differs from the target alone (low precision can flip near ties); quality is "
        "measured against the exact reference."
    )
else:
    st.info(
        "Sampling: the exact reference is distributed as the target but is its own draw; quality is measured "
        "against it with the same seed, so any changed decision also changes the random draws after it."
    )
if not sweep.complete:
    st.warning(f"The sweep stopped after {len(sweep.points)} of {sweep.planned} tolerance values; those are shown.")
if loosest is None:
    st.stop()

for column, (label, value, help_text) in zip(
    st.columns(5),
    [
        ("exact speedup", f"{ref.speedup:.2f}×", f"α = {ref.alpha:.2f}, {ref.mean_accepted:.2f} tokens per round"),
        (
            f"speedup at {loosest.label}",
            f"{loosest.speedup:.2f}×",
            f"α = {loosest.alpha:.2f}, {loosest.mean_accepted:.2f} tokens per round",
        ),
        (
            f"agreement at {loosest.label}",
            f"{loosest.quality.agreement:.0%}",
            "tokens equal to the exact output, position by position",
        ),
        (
            f"BLEU at {loosest.label}",
            f"{loosest.quality.bleu:.1f}",
            "sacrebleu sentence BLEU against the exact output (100 = same)",
        ),
        (
            f"log-likelihood at {loosest.label}",
            f"{loosest.quality.log_likelihood:.2f}",
            f"the target's mean log p per token; exact: {ref.quality.log_likelihood:.2f}",
        ),
    ],
):
    column.metric(label, value, help=help_text)

left, right = st.columns(2)
left.plotly_chart(tolerance_charts.speedup_vs_tolerance_figure(sweep), key="tol-speed")
right.plotly_chart(tolerance_charts.quality_vs_tolerance_figure(sweep), key="tol-quality")


@st.fragment
def tradeoff():
    """Speed against one quality measure; switching the measure redraws this chart only."""
    metric = st.radio(
        "Quality measure",
        list(tolerance_charts.QUALITY_METRICS),
        horizontal=True,
        key="tol-metric",
        index=0 if sweep.greedy else 3,
        format_func=tolerance_charts.QUALITY_METRICS.get,
    )
    st.plotly_chart(tolerance_charts.speedup_quality_figure(sweep, metric), key="tol-tradeoff")


tradeoff()
st.dataframe(tolerance_charts.sweep_table(sweep), hide_index=True)

if state.get("tol-sweep-cat") in quality.CHECKABLE:
    st.subheader("Task quality: the final answer")
    st.caption(
        f"Exact match of each answer's final number against {quality.ANSWER_REFERENCE}. BLEU and agreement "
        "count changed words; this asks whether the answer still comes out the same."
    )
    st.dataframe(
        quality.answer_rows(sweep),
        hide_index=True,
        column_config={
            "exact match": st.column_config.NumberColumn(format="percent"),
            "speedup (×)": st.column_config.NumberColumn(format="%.2f×"),
        },
    )

st.subheader(f"Exact vs the loosest rule ({loosest.label}), first prompt")
controls.legend()
exact_col, loose_col = st.columns(2)
exact_col.caption(f"exact · α = {first.acceptance_rate:.2f}")
exact_col.html(tokens.output_html(first))
loose_run = loosest.comparisons[0].spec
loose_col.caption(
    f"{loosest.label} · α = {loose_run.acceptance_rate:.2f} · "
    f"{token_agreement(loose_run.output_ids, first.output_ids):.0%} token agreement with exact"
)
loose_col.html(tokens.output_html(loose_run))
controls.export_buttons(sweep.comparisons(), "tolerance")
