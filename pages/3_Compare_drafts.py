"""Compare drafts: several drafters on the same prompts, seed and γ, each timed in pairs with the target alone."""

import streamlit as st

from specviz.app import controls, links, race_controls, room, sweep_controls
from specviz.app.views import figures, sweep_charts, tokens
from specviz.lab import sweeps
from specviz.lab.measure import speedup_text

st.set_page_config(page_title="Compare drafts · SpecViz", page_icon="🔎", layout="wide")
controls.page_intro(
    "Compare drafts — accuracy against cost",
    "The best draft is not the most accurate one: speedup needs a high acceptance α *and* a low cost c per "
    "drafted token, so a fast, weaker draft can beat a strong, slow one. Each drafter here runs on the same "
    "prompts with the same γ and seed, timed side by side with the target alone, pair by pair. With a token "
    "tree (sidebar) each drafter also runs as a chain that verifies as many tokens, so you see what branching buys.",
)

room.room_bar(room.page_id(__file__))
options = controls.draft_options()
LINK = [
    links.Param("cmp-target", "target", choices=controls.offered(controls.target_options)),
    links.Param("cmp-drafts", "drafts", list, item=str, choices=controls.offered(controls.draft_options)),
    links.Param("cmp-pairs", "pairs", int, limits=(1, 5)),
    *controls.decoding_params("cmp"),
]
links.restore(LINK)
named = [o for o in options if o not in ("suffix", "auto", "ngram", "target") and not o.startswith("layerskip")]
default = ["suffix", "auto", "ngram", *named[:1]][:4]  # suffix, auto (blended tree and head), ngram, a head
with st.sidebar:
    st.header("Comparison settings")
    target = controls.target_picker("cmp-target")
    drafts = st.multiselect(
        f"Drafters ({sweeps.MIN_DRAFTS} to {sweeps.MAX_DRAFTS})",
        options,
        default=default,
        key="cmp-drafts",
        max_selections=sweeps.MAX_DRAFTS,
        accept_new_options=not room.locked(),
        help=controls.ROOM_HELP if room.locked() else controls.MODEL_HELP,
    )
    pairs = sweep_controls.pairs_slider("cmp")
    settings = None
    with controls.error_box("use these settings"):
        settings = controls.decoding_controls("cmp")
    links.share(LINK)
    links.link_box()

prompts = controls.prompts_picker("cmp", "every drafter runs on each")

valid = sweeps.MIN_DRAFTS <= len(drafts) <= sweeps.MAX_DRAFTS
if not valid:
    st.warning(
        f"Pick {sweeps.MIN_DRAFTS} to {sweeps.MAX_DRAFTS} drafters to compare in the sidebar ({len(drafts)} picked).",
        icon="⚠️",
    )
run_clicked = sweep_controls.buttons(
    "cmp",
    "Run comparison",
    disabled=not valid or settings is None,
    stop_help="Ends the comparison after the run being measured; the runs done are kept",
)
if run_clicked and valid and settings is not None:
    setup = {"target": target, "drafts": list(drafts), "prompts": prompts, "settings": settings, "parameters": {}}
    runs = sweeps.variants(list(drafts), settings)
    sweep_controls.run(
        "cmp",
        sweeps.Sweep(len(prompts) * len(runs), setup),
        "compare_drafts",
        lambda p: f"{p.draft} on prompt {p.prompt_index + 1}",
        "run the comparison",
        target=target,
        drafts=list(drafts),
        prompts=prompts,
        settings=settings,
        pairs=pairs,
    )

sweep = sweep_controls.result("cmp", "runs")
if sweep is None:
    st.info("Pick 2 to 4 drafters and one or more prompts, then press **Run comparison**.")
    st.stop()

points, result = sweep.points, sweep.setup
table = sweeps.draft_table(points, result["parameters"])
s = result["settings"]
tree = (
    f" · tree of {s.tree.budget} nodes ({s.tree.mode}, {s.tree.branching} per node) against a chain of "
    f"γ={s.tree.budget}"
    if s.tree.on
    else ""
)
st.caption(
    f"{', '.join(result['drafts'])} → {result['target']} · {len(result['prompts'])} prompt(s) · γ={s.gamma}{tree}"
    f"{' (adaptive)' if s.adaptive else ''} · {s.max_new_tokens} new tokens · temperature "
    f"{s.sampling.temperature:g} · seed {s.seed} · {s.verification.mode} verification · "
    f"{points[0].comparison.spec.device}"
)
winner = table.sort_values("speedup", ascending=False).iloc[0]
strongest = table.sort_values("alpha", ascending=False).iloc[0]
if winner["draft"] != strongest["draft"]:
    st.success(
        f"**{winner['draft']}** is fastest ({winner['speedup']:.2f}×) though **{strongest['draft']}** is "
        f"accepted more often (α {strongest['alpha']:.2f} vs {winner['alpha']:.2f}): its drafted tokens cost "
        f"c = {winner['c']:.3f} target steps against {strongest['c']:.3f}."
    )
else:
    st.info(
        f"**{winner['draft']}** is both the most accepted (α {winner['alpha']:.2f}) and the fastest "
        f"({winner['speedup']:.2f}×) here."
    )
st.dataframe(
    table,
    hide_index=True,
    key="cmp-table",
    column_config={
        **controls.sweep_columns(table),
        "parameters": st.column_config.NumberColumn("draft parameters", format="compact"),
    },
)


@st.fragment
def outputs():
    """The race and the outputs side by side, coloured by token status; switching prompt redraws only this part."""
    shown = 0
    if len(result["prompts"]) > 1:
        shown = st.selectbox(
            "Outputs for prompt",
            range(len(result["prompts"])),
            key="cmp-shown",
            format_func=lambda i: f"{i + 1} · {result['prompts'][i][:90]}",
        )
    controls.legend()
    mine = [p for p in points if p.prompt_index == shown]
    st.markdown("**The race**: the target alone and every drafter on this prompt, at the pace they were measured")
    race_controls.show({p.draft: p.comparison for p in mine}, "cmp")
    for column, point in zip(st.columns(len(mine) or 1), mine):
        c = point.comparison
        column.markdown(f"**{point.draft}**")
        column.caption(
            f"α {c.spec.acceptance_rate:.2f} · {c.spec.mean_accepted_tokens:.2f} tokens / round · "
            f"{speedup_text(c)} · {figures.fidelity(c)[1]}"
        )
        column.html(tokens.output_html(c.spec))


outputs()
st.plotly_chart(sweep_charts.draft_bars_figure(table), key="cmp-bars")
left, right = st.columns(2)
left.plotly_chart(sweep_charts.latency_scatter_figure(table), key="cmp-scatter")
right.plotly_chart(sweep_charts.position_figure(points, by="draft"), key="cmp-bypos")
controls.export_buttons(sweeps.comparisons(points), "compare-drafts")
