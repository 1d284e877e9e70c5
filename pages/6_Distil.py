"""Distil: train a tiny draft or a draft head from the target itself, then race it against the shipped drafts."""

import pandas as pd
import streamlit as st

from specviz.app import controls, links, room, service
from specviz.app.views import training_charts
from specviz.models import user_drafts_dir
from specviz.training import quick

READS = ("the last hidden state", "three, fused (EAGLE-3)")  # what a head reads of the target

st.set_page_config(page_title="Distil · SpecViz", page_icon="🔎", layout="wide")
controls.page_intro(
    "Distil a draft — make the target's own small sibling",
    "A draft pays off only if it is far cheaper than the target and still guesses its next tokens. Here the "
    "target answers the training prompts; either a tiny model with its tokenizer learns to imitate those answers "
    "(its embeddings start from the target's), or a **draft head** learns to predict the target's next hidden state "
    "from its current one (EAGLE-style: it reads what the target already computed). The result is raced against the "
    "shipped drafts you pick.",
)
room.room_bar(room.page_id(__file__))
if room.locked():
    st.error("In this room distillation is the presenter's: training a draft takes the server's CPU for minutes, "
             "and every measured run in the room would wait behind it. The drafts it makes appear in your pickers.",
             icon="🔒")
    st.stop()
LINK = [
    links.Param("ds-kind", "kind", choices=lambda: ("tiny draft model", "draft head")),
    links.Param("ds-docs", "documents", int, choices=lambda: range(0, 100_001, 10_000)),
    links.Param("ds-reads", "reads", choices=lambda: READS),
    links.Param("ds-layers", "layers", int, limits=(1, 4)),
    links.Param("ds-hidden", "hidden", int, choices=lambda: (64, 96, 128, 192, 256)),
    links.Param("ds-prompts", "prompts", int, limits=(2, 28)),
    links.Param("ds-samples", "samples", int, limits=(0, 3)),
    links.Param("ds-answer", "answer", int, choices=lambda: range(16, 129, 16)),
    links.Param("ds-steps", "steps", int, choices=lambda: range(10, 601, 10)),
    links.Param("ds-eval", "eval", int, limits=(0, 12)),
    links.Param("ds-race-tokens", "race", int, choices=lambda: quick.RACE_TOKENS),
]
links.restore(LINK)

with st.sidebar:
    st.header("Draft to distil")
    kind = st.radio(
        "Kind",
        ["tiny draft model", "draft head"],
        key="ds-kind",
        horizontal=True,
        help="A draft head reads the target's own hidden state; a tiny draft sees only the tokens",
    )
    if kind == "draft head":
        documents = st.slider(
            "Document tokens the target reads",
            0,
            100_000,
            20_000,
            10_000,
            key="ds-docs",
            help="Python's reference and code, read in one forward: many positions, cheaply",
        )
        reads = st.radio("The head reads", READS, key="ds-reads", horizontal=True,
                         help="EAGLE-3 fuses a low, a middle and the last of the target's hidden states; the last "
                              "alone is EAGLE-1's input")
    else:
        layers = st.slider("Decoder layers", 1, 4, 1, key="ds-layers")
        hidden = st.select_slider(
            "Hidden size",
            [64, 96, 128, 192, 256],
            128,
            key="ds-hidden",
            help="The tied vocabulary head (hidden × 49,152) dominates the draft's cost",
        )
    per_category = st.slider(
        "Training prompts per workload",
        2,
        28,
        4,
        key="ds-prompts",
        help="The target answers each once greedily plus the sampled answers below",
    )
    samples = st.slider("Sampled answers per prompt", 0, 3, 0, key="ds-samples")
    answer_tokens = st.slider("Answer length (tokens)", 16, 128, 48, 16, key="ds-answer")
    steps = st.slider("Training steps", 10, 600, 60, 10, key="ds-steps")
    eval_prompts = st.slider("Evaluation prompts per workload", 0, 12, 1, key="ds-eval",
                             help="0: no race; the new draft still appears in every picker (race it on Compare drafts)")
    race_tokens = st.select_slider("Race length (new tokens per prompt)", quick.RACE_TOKENS, quick.RACE_DEFAULT,
                                   key="ds-race-tokens",
                                   help="Longer races give steadier speedups and take longer")
    head = kind == "draft head"
    rivals = st.multiselect(
        "Race against",
        quick.rival_choices(),
        quick.default_rivals(head),
        key=f"ds-rivals-{'head' if head else 'draft'}",
        help="Each rival is timed against the target alone on every evaluation prompt: each one adds to the wait",
    )
    links.share(LINK)
    links.link_box()

fused = kind == "draft head" and reads == READS[1]
name = (f"my-head{'-fused' if fused else ''}-{documents // 1000}k-s{steps}" if kind == "draft head"
        else f"my-draft-{layers}l{hidden}-s{steps}")
state = st.session_state


def distil(job: str, cfg, what: str, **options) -> None:
    """Train in the measurement worker (it owns the target), drawing the loss curve as the steps come."""
    losses: list[dict] = []
    state["ds-result"] = {"name": name, "losses": losses, "evaluation": None, "gamma": 3 if head else 4,
                          "race_tokens": race_tokens, "trained": False}
    status = st.status("Waiting for the measurement worker…")
    bar, curve = st.progress(0.0, text="Training…"), st.empty()

    def on_event(event) -> None:
        kind, value = event
        if kind == "say":
            status.update(label=value)
            return
        losses.append(value)  # kept in session state as it grows: a stop keeps the curve
        bar.progress((value["step"] + 1) / steps, text=f"step {value['step'] + 1}/{steps} · loss {value['loss']:.3f}")
        if value["step"] % 5 == 0 or value["step"] + 1 == steps:
            curve.line_chart(pd.DataFrame(losses).set_index("step")[["loss"]], height=220)

    with controls.error_box(what):
        state["ds-result"]["evaluation"] = service.run_job(job, on_event, cfg=cfg, per_category=eval_prompts,
                                                           rivals=rivals, race_tokens=race_tokens, **options)
        state["ds-result"]["trained"] = True
        status.update(label=f"Trained {name}", state="complete")


if st.button(f"Distil {name}", type="primary", key="ds-run"):
    if kind == "draft head":
        distil(
            "distil_head",
            quick.small_head_config(name, steps, samples, per_category, answer_tokens, documents),
            "train the head",
            fused=fused,
        )
    else:
        distil(
            "distil_draft",
            quick.small_draft_config(name, layers, hidden, steps, samples, per_category, answer_tokens),
            "distil the draft",
        )

result = state.get("ds-result")
if not result:
    st.info(
        "Pick a size and a little data, then press **Distil**. "
        + ("A head (one decoder layer over the target's own hidden states) "
           if kind == "draft head" else "A 1-layer, 128-wide draft ")
        + "on 4 prompts per workload trains in a few minutes on a CPU; the shipped drafts saw far more data."
    )
    st.stop()
if result["losses"]:
    st.plotly_chart(training_charts.training_figure(result["losses"], result["name"]), key="ds-loss")
if result["evaluation"]:
    st.subheader(f"Against its rivals (greedy, γ={result['gamma']}, {result['race_tokens']} tokens, "
                 "evaluation prompts)")
    st.dataframe(training_charts.race_table(result["evaluation"]), hide_index=True)
elif result.get("trained"):
    st.info("Not raced (0 evaluation prompts per workload). Race it against other drafts on **Compare drafts**.")
if result.get("trained"):
    st.success(f"**{result['name']}** is saved in {user_drafts_dir()} and now appears in every draft picker.")
