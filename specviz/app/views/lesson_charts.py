"""Figures of the lesson, drawn from recorded runs and the distribution lab (no model is called)."""

from __future__ import annotations

from collections import Counter

import plotly.graph_objects as go

from ...comparison import Comparison
from ...lab.same_distribution import ALONE, EXACT, RELAXED, LabRecord
from ...lesson.tree_costs import TreeCosts
from ...records import ACCEPTED, BONUS, REJECTED, RESAMPLED, Run
from .charts import P_COLOUR, Q_COLOUR, _layout
from .tokens import COLOURS

SET_COLOURS = {ALONE: P_COLOUR, EXACT: COLOURS[ACCEPTED], RELAXED: COLOURS[REJECTED]}
SET_PATTERNS = {ALONE: "", EXACT: "/", RELAXED: "x"}  # colour is never the only cue


def step_times_figure(baseline: Run) -> go.Figure:
    """The target alone: one forward pass per token, each bar one measured step."""
    x = list(range(1, len(baseline.rounds) + 1))
    ms = [1000 * r.verify_seconds for r in baseline.rounds]
    fig = go.Figure()
    fig.add_bar(x=x, y=ms, name="one target forward = one token", marker_color=P_COLOUR)
    if ms:
        mean = sum(ms) / len(ms)
        fig.add_hline(y=mean, line_dash="dash", annotation_text=f"mean {mean:.1f} ms", annotation_position="top left")
    return _layout(fig, "The target alone: every token waits for a full forward pass", "token", "milliseconds")


def _speedup_bars(labels: list[str], runs: list[Comparison], title: str, x: str, texts: list[str]) -> go.Figure:
    fig = go.Figure()
    colours = [COLOURS[ACCEPTED] if c.speedup >= 1 else COLOURS[REJECTED] for c in runs]
    fig.add_bar(x=labels, y=[c.speedup for c in runs], text=texts, textposition="outside", marker_color=colours,
                name="measured speedup", marker_pattern_shape=["" if c.speedup >= 1 else "x" for c in runs])
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="target alone (1×)", annotation_position="bottom right")
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, title, x, "speedup (×, measured)")


def gamma_figure(runs: dict[str, Comparison]) -> go.Figure:
    """Measured speedup at each γ beside the theory fed the run's own α, c and verification cost."""
    gammas = [int(n.split(":", 1)[1]) for n in runs]
    comps = list(runs.values())
    fig = go.Figure()
    fig.add_scatter(x=gammas, y=[c.speedup for c in comps], mode="lines+markers", name="measured",
                    marker=dict(color=COLOURS[ACCEPTED], size=10))
    fig.add_scatter(x=gammas, y=[c.theoretical_speedup_measured_verify for c in comps], mode="lines+markers",
                    name="theory (this run's α, c, v)", line=dict(dash="dash", color=Q_COLOUR),
                    marker=dict(symbol="diamond"))
    fig.add_hline(y=1.0, line_dash="dot")
    return _layout(fig, "Speedup against draft length γ", "γ (draft length)", "speedup (×)")


def drafts_figure(runs: dict[str, Comparison]) -> go.Figure:
    labels = [n.split(":", 1)[1] for n in runs]
    comps = list(runs.values())
    texts = [f"{c.speedup:.2f}× · α {c.spec.acceptance_rate:.2f} · c {c.cost_ratio:.2f}" for c in comps]
    return _speedup_bars(labels, comps, "Each drafter against the target alone (same prompt, γ, length)", "drafter",
                         texts)


def relaxed_figure(runs: dict[str, Comparison]) -> go.Figure:
    taus = [f"τ = {n.split(':', 1)[1]}" for n in runs]
    comps = list(runs.values())
    fig = go.Figure()
    fig.add_bar(x=taus, y=[c.speedup for c in comps], name="speedup (×)", marker_color=COLOURS[ACCEPTED])
    fig.add_bar(x=taus, y=[c.agreement for c in comps], name="agreement with the target's text",
                marker_color=COLOURS[RESAMPLED], marker_pattern_shape="/")
    fig.add_scatter(x=taus, y=[c.spec.acceptance_rate for c in comps], name="α", mode="lines+markers",
                    marker=dict(color=COLOURS[BONUS], symbol="diamond", size=10))
    fig.update_layout(barmode="group")
    return _layout(fig, "Relaxed verification: more accepted, less of the target's own text", "tolerance τ (nats)", "")


def faster_figure(runs: dict[str, Comparison]) -> go.Figure:
    labels = [n.split(":", 1)[1] for n in runs]
    comps = list(runs.values())
    texts = [f"{c.speedup:.2f}× ({c.baseline_seconds:.2f} s → {c.spec_seconds:.2f} s)" for c in comps]
    return _speedup_bars(labels, comps, "Speculative against the target alone, prompt by prompt", "prompt", texts)


def lab_figure(record: LabRecord, top: int = 10) -> go.Figure:
    """The first token's histogram for each set, side by side (the target's likeliest tokens first)."""
    counts = {name: Counter(tokens) for name, tokens in record.first_tokens.items()}
    order = [t for t, _ in counts[ALONE].most_common(top)]
    labels = [repr(record.texts.get(t, str(t)))[1:-1] for t in order] + ["other"]
    fig = go.Figure()
    for name, c in counts.items():
        n = max(1, sum(c.values()))
        y = [c[t] / n for t in order] + [1 - sum(c[t] for t in order) / n]
        fig.add_bar(x=labels, y=y, name=f"{name} ({n} runs)", marker_color=SET_COLOURS.get(name, Q_COLOUR),
                    marker_pattern_shape=SET_PATTERNS.get(name, ""))
    fig.update_layout(barmode="group")
    return _layout(fig, f"First token of {len(record.first_tokens[ALONE])} seeded runs per set",
                   "first generated token", "share of runs", height=380)


def tree_costs_figure(costs: TreeCosts) -> go.Figure:
    """Expected speedup of the best tree and of the chain by N: this machine's measured v(N), and a flat v(N) = 1
    drawn dashed and named as theory (no GPU was measured)."""
    fig = go.Figure()
    for values, name, dash in ((costs.here_tree, "best tree, this machine's v(N) (measured)", "solid"),
                               (costs.here_chain, "chain γ = N, this machine's v(N) (measured)", "solid"),
                               (costs.flat_tree, "best tree, v(N) = 1: theoretical GPU, not measured", "dash"),
                               (costs.flat_chain, "chain γ = N, v(N) = 1: theoretical GPU, not measured", "dash")):
        fig.add_trace(go.Scatter(x=costs.nodes, y=values, name=name, mode="lines+markers",
                                 line=dict(dash=dash), marker_symbol="diamond" if "tree" in name else "circle",
                                 hovertemplate=name + ", N = %{x}: %{y:.2f}×<extra></extra>"))
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_layout(title="What a tree buys: expected speedup by nodes verified (N), from this run's acceptance",
                      xaxis_title="drafted tokens verified per round (N)", yaxis_title="expected speedup", height=380,
                      margin=dict(l=10, r=10, t=50, b=10), legend=dict(orientation="h", y=-0.25))
    return fig
