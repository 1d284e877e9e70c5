"""Theory: the standard model of speculative decoding, and where measured runs fall on it."""

import streamlit as st

from specviz import theory
from specviz.app import links, page_list, room
from specviz.app.views import theory_charts
from specviz.config import APP_MAX_GAMMA
from specviz.lab import verify_cost

st.set_page_config(page_title="Theory · SpecViz", page_icon="🔎", layout="wide")
page_list.use_app_navigation()
st.title("Theory — what speedup to expect")
st.write("If each drafted token is accepted with probability α, a round of γ drafts yields (1−α^(γ+1))/(1−α) tokens "
         "for γ·c + v target steps, so speedup rises with α, falls with the cost ratio c, and peaks at one best γ.")

room.room_bar(room.page_id(__file__))
LINK = [
    links.Param("theory-alpha", "alpha", float, limits=(0, 0.99)),
    links.Param("theory-gamma", "gamma", int, limits=(1, APP_MAX_GAMMA)),
    links.Param("theory-c", "c", float, limits=(0, 1)),
    links.Param("theory-v", "v", float, limits=(0.5, 3)),
]
links.restore(LINK)
a, g, cc, vv = st.columns(4)
alpha = a.slider("Acceptance rate α", 0.0, 0.99, 0.7, 0.01, key="theory-alpha")
gamma = g.slider("Draft length γ", 1, APP_MAX_GAMMA, 4, key="theory-gamma")
c = cc.slider("Cost ratio c (one draft token in target steps)", 0.0, 1.0, 0.1, 0.01, key="theory-c")
v = vv.slider(
    "Verification cost v (target steps)",
    0.5,
    3.0,
    1.0,
    0.05,
    key="theory-v",
    help="One forward over γ+1 tokens; 1 in the paper's model, a little more on real hardware",
)

links.share(LINK)
links.link_box()
best = theory.optimal_gamma(alpha, c, v, theory_charts.MAX_GAMMA)
m1, m2, m3, m4 = st.columns(4)
m1.metric(
    "Expected tokens per round",
    f"{theory.expected_tokens(alpha, gamma):.2f}",
    help="accepted drafts plus the resampled or bonus token: (1−α^(γ+1))/(1−α)",
)
m2.metric(
    "Expected speedup",
    f"{theory.expected_speedup(alpha, gamma, c, v):.2f}×",
    help="tokens per round ÷ (γc + v) target steps per round",
)
m3.metric("Optimal γ", str(best), help=f"γ in 1..{theory_charts.MAX_GAMMA} with the highest expected speedup")
m4.metric("Speedup at the optimal γ", f"{theory.expected_speedup(alpha, best, c, v):.2f}×")

measured = theory_charts.measured_points(st.session_state)
left, right = st.columns(2)
left.plotly_chart(theory_charts.speedup_vs_gamma_figure(alpha, c, v, gamma, measured), key="theory-curve")
right.plotly_chart(theory_charts.speedup_heatmap(c, v, alpha, gamma), key="theory-heatmap")
if measured.empty:
    st.caption(
        "No measured runs in this session yet. Runs you make on the other pages (Rounds, Verification "
        "tolerance, …) appear here as ◆ points at their mean γ and measured speedup."
    )
else:
    st.caption(
        f"◆ {len(measured)} measured run(s) from this session at their mean γ and measured speedup. Each has its "
        "own α and c (hover), so compare it with the curve of those values, not only the one drawn."
    )

st.subheader("Timing noise: why two runs of the same thing differ")
st.write(
    "A measured speedup divides two timings. On a shared machine every run is slowed by whatever else runs at "
    "that moment: other visitors' pages, other programs, the processor's own clock. That is a few percent on a quiet "
    "machine and far more on a busy one. Timing the target alone once and speculative decoding later would divide "
    "two different moments, and a busy moment during the target's run would flatter every speedup after it."
)
st.write(
    "So SpecViz times the two **side by side, pair by pair**: a round of the target alone, then a round of "
    "speculative decoding, each on its own stopwatch (stopped while the other works), until both are done. A busy "
    "spell then slows both runs of a pair alike, and the pair's ratio still holds. The speedup shown is the "
    "**median** of the pairs' ratios, with their "
    "**range** as its spread, e.g. *1.17× (1.12–1.21 over 3 pairs; 95% interval 1.05–1.30)*. When the range is wider "
    "than 15% of the median the page says so, and shows the range instead of one confident figure. When other "
    "programs take more than 3% of the machine while the pairs run, two more pairs are timed: three pairs' range "
    "holds the middle of their ratios three times in four, five pairs' fifteen times in sixteen."
)
st.write(
    "One run's range is still only that run's. Its pairs are timed seconds apart, and the machine's own speed "
    "drifts over minutes: the same command a few minutes later may land a few percent away, outside the first "
    "range. The **95% interval** answers that: from how far the pairs' ratios scatter and how few they are "
    "(Student's t over their logarithms), it gives a range that holds the speedup of these settings 19 times in "
    "20. With 3 pairs it is two to three times as wide as their range, and more pairs narrow it. On a 2-core Xeon, "
    "sixteen runs of the command line each set against the median of seven others: their range held it 13 times, "
    "their interval 16 times."
)
if (pairs_chart := theory_charts.pairs_figure(st.session_state)) is not None:
    st.plotly_chart(pairs_chart, key="theory-pairs")
else:
    st.caption("Runs you make on Home, Rounds, Draft length or Compare drafts appear here, one dot per timed pair.")

st.subheader("High vs low acceptance")
st.write(f"The same γ={gamma}, c={c:.2f} and v={v:.2f}; only how often the target agrees with the draft changes.")
for column, example_alpha, title in zip(st.columns(2), (0.8, 0.3), ("High acceptance", "Low acceptance")):
    tokens, speedup, sentence = theory_charts.acceptance_example(example_alpha, gamma, c, v)
    column.markdown(f"**{title}: α = {example_alpha}**")
    t1, t2 = column.columns(2)
    t1.metric(f"Tokens per round (α={example_alpha})", f"{tokens:.2f}")
    t2.metric(f"Speedup (α={example_alpha})", f"{speedup:.2f}×")
    column.write(sentence)

st.subheader("Acceptance worksheet")
st.write(
    "Write down what happened in a few rounds (from the Rounds page, or by hand): how many tokens were drafted "
    "and how many of them the target accepted. α is the accepted share of everything drafted."
)
table = st.data_editor(
    theory_charts.worksheet_default(),
    num_rows="dynamic",
    key="theory-worksheet",
    column_config={
        "drafted": st.column_config.NumberColumn("drafted", min_value=0, max_value=64, step=1),
        "accepted": st.column_config.NumberColumn("accepted", min_value=0, max_value=64, step=1),
    },
)
sheet = theory_charts.worksheet(table)
if sheet.invalid:
    st.warning(
        f"Row(s) {', '.join(map(str, sheet.invalid))} left out: accepted must be a whole number between 0 and drafted.",
        icon="⚠️",
    )
if sheet.blank:
    st.caption(f"{sheet.blank} row(s) with an empty count are ignored.")
if sheet.drafted:
    w1, w2, w3, w4 = st.columns(4)
    w1.metric("Worksheet α", f"{sheet.alpha:.3f}", help=f"{sheet.accepted} accepted of {sheet.drafted} drafted")
    w2.metric("Mean accepted per round", f"{sheet.mean_accepted:.2f}", help=f"over {sheet.rounds} rounds")
    w3.metric(
        "Tokens per round", f"{sheet.tokens_per_round:.2f}", help="accepted drafts + the resampled or bonus token"
    )
    w4.metric(
        "Model's tokens per round",
        f"{theory.expected_tokens(sheet.alpha, sheet.mean_gamma):.2f}",
        help=f"(1−α^(γ+1))/(1−α) at this α and the mean γ = {sheet.mean_gamma:.1f}",
    )
    implied = theory.alpha_from_mean_tokens(sheet.tokens_per_round, sheet.mean_gamma)
    st.caption(
        f"Accepted ÷ drafted understates the model's α: in the model a rejection ends the round and the rest of "
        f"the draft is discarded unjudged. The per-token α that gives exactly {sheet.tokens_per_round:.2f} tokens "
        f"per round at γ={sheet.mean_gamma:.1f} is {implied:.3f}."
    )
else:
    st.info("Enter at least one round with drafted tokens to compute α.")

st.subheader("Token trees: several guesses per position, one forward")
st.write(
    "A tree drafts several candidates where the draft is unsure, and the target checks all N nodes in one "
    "forward. If the draft's rank-r choice matches the target with chance a_r, a node is kept with the product "
    "of a_rank along its path, and a round yields 1 + the sum of those products. A chain is the tree with "
    "rank 0 only (a_0 = α). What a tree gains must outgrow v(N), the cost of that wider forward, measured here."
)
cost = verify_cost.load_verify_cost()
if cost is None:
    st.info(
        "No v(N) measurement is shipped; make one with `python -m specviz verify-cost --out "
        "assets/trees/verify_cost.json`."
    )
else:
    r0, r1, r2, dd = st.columns(4)
    a0 = r0.slider("a₀: the draft's first choice is right", 0.0, 0.99, 0.3, 0.01, key="theory-a0")
    a1 = r1.slider("a₁: its second choice is", 0.0, 1.0 - a0, min(0.12, 1.0 - a0), 0.01, key="theory-a1")
    a2 = r2.slider(
        "a₂: its third choice is",
        0.0,
        max(0.0, 1.0 - a0 - a1),
        min(0.06, max(0.0, 1.0 - a0 - a1)),
        0.01,
        key="theory-a2",
    )
    depth = dd.slider("Tree depth at most", 1, 8, 4, key="theory-tree-depth")
    measured = verify_cost.contexts(cost)
    context = st.select_slider(
        "Context: tokens already committed when the tree is verified",
        measured,
        value=measured[0],
        key="theory-context",
        disabled=len(measured) == 1,
    )
    cost = verify_cost.at_context(cost, context)
    left, right = st.columns(2)
    left.plotly_chart(theory_charts.verify_cost_figure(cost, context), key="theory-verify-cost")
    right.plotly_chart(theory_charts.tree_vs_chain_figure([a0, a1, a2], c, cost, depth), key="theory-tree")
    st.caption(
        f"v(N) measured with `{cost['command']}` on {cost['machine']} ({cost['made']}); at a context of "
        f"{cost['context']} tokens one plain step took {1000 * cost['step_seconds']:.1f} ms, and the chain-or-tree "
        "curves use that context's v(N). The cost ratio c is the slider above. On a GPU v(N) stays near 1 for "
        "small N, which is where trees pay most."
    )
