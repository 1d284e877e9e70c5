"""Step: token trees, several guesses and one check. One drafter as a tree and as the chain that verifies
as many drafted tokens, and what a tree buys at this machine's measured v(N) against a flat v(N) = 1, the
theoretical memory-bound forward of a GPU (drawn dashed and named as theory: no GPU was measured)."""

from __future__ import annotations

import streamlit as st

from ....lab.verify_cost import load_verify_cost
from ....lesson import recordings
from ....lesson.claim import Claim, label, times
from ....lesson.question import Question, pick_round
from ....lesson.step import Data, Step
from ....lesson.tree_costs import TreeCosts, tree_costs
from ....records import Round, Run
from ... import controls
from ...views import lesson_charts, tree_charts
from .. import parts, session
from ..prediction import predict

TITLE = "Token trees: several guesses, one check"
TEACHES = ("A tree drafts several continuations and the target checks them all in one pass; it pays only if the "
           "extra tokens it keeps outgrow what the wider check costs, v(N), which depends on the machine.")


def tree_round(run: Run) -> Round | None:
    """A tree round worth drawing: branches to choose from, some kept, some refused."""
    def branched(r):
        return r.tree is not None and len(set(r.tree.parents)) < len(r.tree.parents)
    return pick_round([r for r in run.rounds if r.tree], branched, lambda r: r.n_accepted >= 1,
                      lambda r: "rejected" in r.tree.status, lambda r: r.n_accepted >= 2)


def costs_of(data: Data) -> TreeCosts | None:
    """What a tree buys at this machine's v(N) and at a theoretical flat one, from the tree run's own a_r and c."""
    cost = load_verify_cost()
    tree = data.group(recordings.TREES)["trees:tree"]
    if cost is None or not tree.spec.accept_by_rank():
        return None
    context = len(tree.spec.prompt_ids) + tree.spec.new_tokens // 2
    return tree_costs(tree.spec.accept_by_rank(), tree.cost_ratio, cost, tree.spec.settings["gamma"], context)


def question(data: Data) -> Question | None:
    run = data.group(recordings.TREES)["trees:tree"].spec
    r = tree_round(run)
    if r is None:
        return None
    depth = max(1, run.settings["gamma"])
    return Question(f"trees:{data.source(recordings.TREES)}:{r.index}",
                    f"Round {r.index + 1}: the draft offers a tree of {r.tree.size} nodes, at most {depth} deep. How "
                    "many of its tokens will the target keep?", tuple(str(i) for i in range(depth + 1)), r.n_accepted,
                    f"The target kept {r.n_accepted}: it walks from the root, each time into the child holding its "
                    "own choice, and stops where no child does; every other branch is dropped.")


def claim(data: Data) -> Claim:
    runs = data.group(recordings.TREES)
    tree, chain = runs["trees:tree"], runs["trees:chain"]
    r = tree_round(tree.spec)
    n = tree.spec.settings["tree"]["budget"]
    problems = []
    if not (tree.identical and chain.identical):
        problems.append("a tree or chain run's output differs from the target's")
    if r is None or len(set(r.tree.parents)) == len(r.tree.parents):
        problems.append("no round of the tree run branched")
    gain = tree.spec.mean_accepted_tokens / chain.spec.mean_accepted_tokens - 1
    text = (f"Measured, {n} drafted tokens verified per round either way: the tree kept "
            f"{tree.spec.mean_accepted_tokens:.2f} tokens per round against the chain's "
            f"{chain.spec.mean_accepted_tokens:.2f} ({gain:+.0%}), {times(tree.speedup)} against "
            f"{times(chain.speedup)}.")
    costs = costs_of(data)
    if costs is not None:
        best_here = max(range(len(costs.nodes)), key=lambda i: costs.here_tree[i])
        best_flat = max(range(len(costs.nodes)), key=lambda i: costs.flat_tree[i])
        text += (f" On this machine v(N) grows from {costs.v_here[0]:.2f} steps at N = 1 to {costs.v_here[-1]:.2f} "
                 f"at N = {costs.nodes[-1]}, so by this run's own acceptance the best tree has "
                 f"N = {costs.nodes[best_here]} nodes ({times(costs.here_tree[best_here])} expected); with a "
                 f"theoretical flat v(N) = 1 (a GPU's memory-bound forward, not measured here) it would be "
                 f"N = {costs.nodes[best_flat]} ({times(costs.flat_tree[best_flat])}).")
        if costs.flat_tree[best_flat] < costs.here_tree[best_here]:
            problems.append("a flat v(N) should never make the best tree slower than a growing one")
    return Claim(text, tuple(problems))


def view(data: Data) -> bool:
    runs = data.group(recordings.TREES)
    run = runs["trees:tree"].spec
    shape = run.settings["tree"]
    st.markdown(f"**{run.draft}** drafts a tree of **{shape['budget']} nodes** (each expanded node gets its "
                f"{shape['branching']} best guesses, at most γ = {run.settings['gamma']} deep). The target verifies "
                "every node in one forward, each node seeing only its own ancestors, and keeps one branch. Beside it, "
                f"the same drafter as a chain of γ = {shape['budget']}: as many drafted tokens verified per round.")
    r = tree_round(run)
    revealed = predict(question(data))
    if revealed:
        if r is not None:
            st.caption(f"Round {r.index + 1}: the tree, the kept branch highlighted")
            st.plotly_chart(tree_charts.tree_figure(r), key="lesson-tree")
        parts.runs_table(runs, label)
        costs = costs_of(data)
        if costs is not None:
            st.plotly_chart(lesson_charts.tree_costs_figure(costs), key="lesson-tree-costs")
            st.caption(f"Solid: v(N) measured on {costs.machine} at a context of {costs.context} tokens "
                       "(assets/trees/verify_cost.json, `python -m specviz verify-cost`). Dashed: a flat v(N) = 1, the "
                       "theoretical memory-bound forward of a GPU for small N; no GPU was measured for this lesson.")
        controls.legend()
    session.provenance(data, recordings.TREES, f"{run.draft}, tree and chain")
    session.live_button(recordings.TREES, "the tree and the chain, ~1 min")
    return revealed


STEP = Step("trees", TITLE, TEACHES, question, claim, view)
