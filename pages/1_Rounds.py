"""Rounds: every round of a real run, token by token."""

import streamlit as st

from specviz.app import autoplay, controls, links, race_controls, room, service
from specviz.app.views import charts, figures, tables, tokens, tree_charts

st.set_page_config(page_title="Rounds · SpecViz", page_icon="🔎", layout="wide")
controls.page_intro(
    "Rounds — token by token",
    "Each round the draft proposes γ tokens, the target scores them all in one forward pass, a prefix is "
    "kept, and the first rejected token is replaced (or a bonus token is added when all are kept). With a token "
    "tree the draft proposes several continuations and the target keeps one branch.",
)
PAGE = room.page_id(__file__)
room.room_bar(PAGE)
LINK = [*controls.pair_params("rounds"), *controls.decoding_params("rounds"), *controls.prompt_params("rounds"),
        links.Param("rounds-step", "round", int)]
if "round" in (opened := links.restore(LINK)):  # the linked round is shown again once the run is re-measured
    st.session_state["rounds-linked-step"] = opened["round"]

with st.sidebar:
    target, draft = controls.pair_pickers("rounds", "Run settings")
    settings = None
    with controls.error_box("use these settings"):
        settings = controls.decoding_controls("rounds")
    fresh = service.fresh_checkbox("rounds-fresh")
prompt = controls.prompt_picker("rounds")

left, right = st.columns([1, 3])
run_clicked = left.button("Run", type="primary", key="rounds-run")
live = right.toggle("Re-run when a control changes", value=True, key="rounds-live")
request = repr((target, draft, prompt, settings))
state = st.session_state
if settings is not None and (
    run_clicked or (live and "rounds-request" in state and state["rounds-request"] != request)
):
    with controls.error_box("run"):
        state["rounds-result"] = service.measured_run(target, draft, prompt, settings, fresh=fresh)
        state["rounds-step"] = state.pop("rounds-linked-step", len(state["rounds-result"].spec.rounds))
    state["rounds-request"] = request  # also after a failure, so a bad setting is not retried in a loop

uploaded = st.file_uploader("…or replay an exported run (JSON, no models needed)", type="json", key="rounds-upload")
if uploaded is not None and state.get("rounds-upload-id") != uploaded.file_id:  # once per file, not per rerun
    state["rounds-upload-id"] = uploaded.file_id
    with controls.error_box("load that file"):
        state["rounds-result"] = next(iter(controls.load_export(uploaded).values()))
        state["rounds-step"] = len(state["rounds-result"].spec.rounds)

comparison = state.get("rounds-result")
if comparison is None:
    comparison = controls.load_demo()
    st.info("Showing a run recorded by the project. Press **Run** for a live one on this machine.")
if comparison is None:
    st.stop()
run = comparison.spec

ok, message = figures.fidelity(comparison)
(st.success if ok else st.warning)(message)
service.shared_note(comparison)
controls.headline(comparison)
tree = run.settings.get("tree", {})
shape = (
    f" · tree of {tree['budget']} nodes ({tree['mode']}, {tree['branching']} children per node)"
    if tree.get("budget")
    else ""
)
st.caption(
    f"{run.draft} → {run.target} · "
    f"γ={run.settings['gamma']}{' (adaptive)' if run.settings['adaptive'] else ''}{shape} · "
    f"{run.settings['verification']['mode']} verification · {run.device} {run.dtype} · {run.new_tokens} tokens in "
    f"{len(run.rounds)} rounds"
)
controls.legend()
st.subheader("The race: this run against the target alone, at the measured pace")
race_controls.show({run.draft or "speculative": comparison}, "rounds", time_chart=False)  # drawn below

st.subheader("Round by round")
if st.session_state.get("rounds-step-of") != id(comparison):  # a new run does not start playing
    st.session_state["rounds-step-of"] = id(comparison)
    st.session_state["rounds-playing"] = False
p1, p2 = st.columns([1, 4], vertical_alignment="bottom")
playing = autoplay.play_pause(p1, "rounds", len(run.rounds))
interval = autoplay.interval(p2, "rounds")


@st.fragment(run_every=interval if playing else None)
def replay():
    """Step through the run; only this part redraws, no model is called. While playing, one round per tick;
    a presenter steps with the keys."""
    n = len(run.rounds)
    step = autoplay.tick("rounds", n, interval)
    keys = room.is_presenter()
    b1, b2, b3, b4, b5 = st.columns([1, 1, 1, 3, 2])
    if b1.button("« First", key="rounds-first", shortcut="Home" if keys else None):
        step = 1
    if b2.button("◀ Back", key="rounds-back", shortcut="Left" if keys else None):
        step = max(1, step - 1)
    if b3.button("Next ▶", key="rounds-next", shortcut="Right" if keys else None):
        step = min(n, step + 1)
    step = b4.slider("Replay up to round", 1, n, step, key=f"rounds-slider-{step}")
    st.session_state["rounds-step"] = step
    room.publish(
        PAGE,
        {
            "rounds-step": step,
            "rounds-result": st.session_state.get("rounds-result"),
            "rounds-race": race_controls.published("rounds"),
        },
    )
    links.share(LINK)
    links.link_box(b5)
    st.html(tokens.output_html(run, upto_round=step - 1))
    current = run.rounds[step - 1]
    st.markdown(
        f"**Round {step}**: drafted {len(current.drafted)} · kept {current.n_accepted} · "
        f"{current.next_kind} token {current.next_text!r}"
    )
    d1, d2 = st.columns(2)
    d1.caption("1 · the draft proposes" + (" a tree; the branch the target walked:" if current.tree else ""))
    d1.html(tokens.pending_round_html(current))
    d2.caption("2 · the target verifies in one pass")
    d2.html(tokens.CSS + '<div class="sv-text">' + "".join(tokens.round_spans(current, upto_emitted=False)) + "</div>")
    if current.tree:
        st.plotly_chart(tree_charts.tree_figure(current), key="rounds-tree-figure")
    elif run.is_tree:
        st.caption("This round drafted no tree: the run had room for one more token only.")
    if current.tree:
        if st.toggle("Show the tree's attention mask", key="rounds-mask"):
            st.plotly_chart(tree_charts.mask_figure(current), key="rounds-mask-figure")
    if current.rejected_position is not None:
        st.plotly_chart(charts.residual_figure(current), key="rounds-residual")


replay()
with st.expander("Timeline: one row per round", expanded=True):
    st.html(tokens.timeline_html(run))
st.subheader("Latency and where the time goes")
race_controls.latency_and_time(comparison, "rounds")
c1, c2 = st.columns(2)
c1.plotly_chart(charts.round_times_figure(run), key="rounds-times")
c2.plotly_chart(charts.acceptance_by_position_figure({run.draft or "target": run}), key="rounds-bypos")
with st.expander("Rounds table"):
    st.dataframe(tables.rounds_frame(run), hide_index=True)
controls.export_buttons({f"{run.draft}-g{run.settings['gamma']}": comparison}, "rounds")
