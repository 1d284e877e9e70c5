"""Draft length: sweep γ and see where speculation pays most, measured beside the theory."""

import streamlit as st

from specviz import theory
from specviz.app import controls, links, room, sweep_controls
from specviz.app.views import sweep_charts
from specviz.lab import measure, sweeps

st.set_page_config(page_title="Draft length · SpecViz", page_icon="🔎", layout="wide")
controls.page_intro(
    "Draft length γ — how far ahead should the draft guess?",
    "A longer draft gains more tokens per target pass when it is accepted, but every drafted token costs time "
    "and acceptance decays along the draft: the speedup rises, peaks and falls. Here it is measured at each γ "
    "against the target alone, beside the standard model's prediction (1−α^(γ+1))/((1−α)(γc+1)).",
)

room.room_bar(room.page_id(__file__))
LINK = [*controls.pair_params("dl"), links.Param("dl-gammas", "gammas", tuple, item=int, limits=(1, 12)),
        links.Param("dl-pairs", "pairs", int, limits=(1, 5)), *controls.decoding_params("dl", with_gamma=False)]
links.restore(LINK)
with st.sidebar:
    target, draft = controls.pair_pickers("dl", "Sweep settings")
    low, high = st.slider("Draft lengths γ", 1, 12, (1, 8), key="dl-gammas")
    pairs = sweep_controls.pairs_slider("dl")
    tree_depth = st.slider("Also a token tree of N = γ nodes at each point, this deep (0 = chains only)", 0, 8, 0,
                           key="dl-tree-depth", help="The tree verifies as many drafted tokens per round as the chain "
                                                     "of γ; 2 children per expanded node, EAGLE-2's dynamic shape")
    settings = None
    with controls.error_box("use these settings"):
        settings = controls.decoding_controls("dl", with_gamma=False)
    links.share(LINK)
    links.link_box()

prompts = controls.prompts_picker("dl", "every γ runs on each")

gammas = list(range(low, high + 1))
run_clicked = sweep_controls.buttons("dl", "Run sweep", disabled=settings is None,
                                stop_help="Ends the sweep after the point being measured; the points done are kept")
if run_clicked and settings is not None:
    setup = {"target": target, "draft": draft, "prompts": prompts, "settings": settings, "gammas": gammas}
    sweep_controls.run("dl", sweeps.Sweep(len(prompts) * len(gammas) * (2 if tree_depth else 1), setup), "gamma_sweep",
                       lambda p: f"{'tree of ' + str(p.gamma) + ' nodes' if p.draft != draft else 'γ=' + str(p.gamma)} "
                                 f"on prompt {p.prompt_index + 1}", "run the sweep",
                       target=target, draft=draft, prompts=prompts, gammas=gammas, settings=settings, pairs=pairs,
                       tree_depth=tree_depth)

sweep = sweep_controls.result("dl", "points")
if sweep is None:
    st.info("Pick a draft, one or more prompts and a range of γ, then press **Run sweep**. Every γ is timed in pairs "
            "with the target alone on the same prompt.")
    st.stop()

points, setup = sweep.points, sweep.setup
tree_points = [p for p in points if p.draft == sweeps.tree_label(setup["draft"])]
points = [p for p in points if p.draft == setup["draft"]]
trees = sweeps.gamma_table(tree_points) if tree_points else None
if not points:
    st.info("No chain point measured yet.")
    st.stop()
table = sweeps.gamma_table(points)
best = sweeps.best_gamma(table)
alpha, c = sweeps.overall_alpha_c(points)
best_row = table[table["best"]].iloc[0]
s = setup["settings"]
st.caption(f"{setup['draft']} → {setup['target']} · {len(setup['prompts'])} prompt(s) · γ {setup['gammas'][0]}–"
           f"{setup['gammas'][-1]} · {s.max_new_tokens} new tokens · temperature {s.sampling.temperature:g} · "
           f"{s.verification.mode} verification · {points[0].comparison.spec.device}")
m1, m2, m3, m4 = st.columns(4)
m1.metric("best γ (measured)", best, help="the γ with the highest measured speedup over all prompts")
m2.metric(
    "speedup at best γ",
    f"{best_row['speedup']:.2f}×",
    help=f"the median of its timed pairs ({measure.row_spread_text(best_row)}), each pair the target alone's "
    "seconds ÷ the drafter's, summed over the prompts",
)
m3.metric(
    "α per tested token",
    f"{alpha:.2f}",
    help=f"the theory's α over the whole sweep: the acceptance probability of a tested draft, implied by the "
    f"tokens per round (accepted ÷ drafted is lower: drafts after a rejection are never tested); "
    f"mean c = {c:.3f}",
)
m4.metric(
    "best γ in theory",
    theory.optimal_gamma(alpha, c, max_gamma=int(table["gamma"].max())),
    help="argmax over the swept range of (1−α^(γ+1))/((1−α)(γc+1)) with the sweep's α and c, the "
    "verification pass costed as one target step",
)
if not table["identical"].all() and s.verification.mode == "exact" and s.sampling.temperature == 0:
    st.warning("Some outputs differ from the target alone: low precision can flip near ties.")

st.plotly_chart(sweep_charts.speedup_figure(table, alpha, c, best, trees), key="dl-speedup")
if trees is not None:
    st.caption(
        "◆ a token tree of N = γ nodes verifies as many drafted tokens per round as the chain of γ. Trees gain "
        "tokens per round where the draft is unsure of its first choice; whether that pays depends on v(N), "
        "what the wider forward costs here (Theory page)."
    )
left, right = st.columns(2)
left.plotly_chart(sweep_charts.alpha_figure(table, trees), key="dl-alpha")
right.plotly_chart(sweep_charts.position_figure(points), key="dl-bypos")
left.plotly_chart(sweep_charts.throughput_figure(table), key="dl-throughput")
st.dataframe(
    table,
    hide_index=True,
    key="dl-table",
    column_config={
        **controls.sweep_columns(table),
        "gamma": "γ",
        "best": "best γ",
        "verify_cost": st.column_config.NumberColumn("verify cost (steps)", format="%.2f"),
        "baseline_tokens_per_s": st.column_config.NumberColumn("target alone tokens / s", format="%.1f"),
    },
)
controls.export_buttons(sweeps.comparisons(points + tree_points), "draft-length")
