"""Plotly figures of sweeps: across draft lengths γ, and across drafters.

Drawn from the tables and points recorded by `specviz.lab.sweeps`; no model is called here. Data go
into the figures as plain lists, so a chart's JSON spec reads as the numbers that were measured.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import theory
from ...lab.sweeps import Point, acceptance_by_position
from ...records import ACCEPTED, BONUS, REJECTED
from .charts import P_COLOUR, Q_COLOUR, _layout
from .tokens import COLOURS

BEST_COLOUR = "#7b3294"  # the best γ: a colour no token status uses
THEORY_COLOUR = "#555555"
CURVE_STEPS = 20  # points of the smooth theory curve per unit of γ
SYMBOLS = [
    "circle",
    "square",
    "diamond",
    "triangle-up",
    "cross",
    "x",
    "star",
    "hexagon",
]  # lines differ by more than colour


def alpha_figure(table: pd.DataFrame, trees: pd.DataFrame | None = None) -> go.Figure:
    """α and tokens per round vs γ: α falls as drafts grow longer while tokens per round still rise."""
    gammas = table["gamma"].tolist()
    fig = go.Figure()
    fig.add_scatter(
        x=gammas,
        y=table["alpha"].tolist(),
        name="α (accepted / drafted)",
        mode="lines+markers",
        marker=dict(color=COLOURS[ACCEPTED], size=9),
        line=dict(color=COLOURS[ACCEPTED]),
    )
    fig.add_scatter(
        x=gammas,
        y=table["mean_accepted"].tolist(),
        name="tokens per round (accepted + 1)",
        yaxis="y2",
        mode="lines+markers",
        marker=dict(color=COLOURS[BONUS], symbol="diamond", size=9),
        line=dict(color=COLOURS[BONUS], dash="dot"),
    )
    if trees is not None and not trees.empty:
        fig.add_scatter(
            x=trees["gamma"].tolist(),
            y=trees["mean_accepted"].tolist(),
            yaxis="y2",
            mode="lines+markers",
            name="tokens per round, a tree of N = γ nodes",
            marker=dict(color=Q_COLOUR, symbol="star", size=10),
            line=dict(color=Q_COLOUR, dash="dash"),
        )
    fig.update_yaxes(range=[0, 1.05])
    fig.update_xaxes(dtick=1)
    # Tokens per round lie between 1 and γ+1: the right axis shows that whole span.
    fig.update_layout(
        yaxis2=dict(
            overlaying="y", side="right", title="tokens per round", range=[0, max(gammas, default=1) + 1.1], dtick=1
        )
    )
    return _layout(fig, "Acceptance α and tokens per round vs γ", "draft length γ", "α")


def speedup_figure(
    table: pd.DataFrame, alpha: float, c: float, best: int | None, trees: pd.DataFrame | None = None
) -> go.Figure:
    """Measured speedup per γ over the standard model's curve from the measured α and c; the best γ starred.
    `trees`: a tree of N = γ nodes at each point (the same tokens verified), each timed in pairs with the target
    alone."""
    gammas, measured = table["gamma"].tolist(), table["speedup"].tolist()
    top = max(gammas, default=1)
    xs = [1 + i / CURVE_STEPS for i in range((top - 1) * CURVE_STEPS + 1)]
    fig = go.Figure()
    fig.add_scatter(
        x=xs,
        y=[theory.expected_speedup(alpha, g, c) for g in xs],
        mode="lines",
        name=f"theory (1−α^(γ+1))/((1−α)(γc+1)), α={alpha:.2f}, c={c:.3f}",
        line=dict(color=THEORY_COLOUR, dash="dash"),
    )
    fig.add_scatter(
        x=gammas,
        y=table["theoretical_speedup"].tolist(),
        mode="markers",
        name="theory at each γ's own α and c",
        marker=dict(color=THEORY_COLOUR, symbol="circle-open", size=10),
    )
    fig.add_scatter(
        x=gammas,
        y=measured,
        mode="lines+markers",
        name="measured",
        marker=dict(color=P_COLOUR, size=10),
        line=dict(color=P_COLOUR),
    )
    if trees is not None and not trees.empty:
        fig.add_scatter(
            x=trees["gamma"].tolist(),
            y=trees["speedup"].tolist(),
            mode="lines+markers",
            name="measured, a tree of N = γ nodes",
            marker=dict(color=Q_COLOUR, symbol="diamond", size=10),
            line=dict(color=Q_COLOUR, dash="dot"),
        )
    if best is not None:
        at_best = measured[gammas.index(best)]
        fig.add_scatter(
            x=[best],
            y=[at_best],
            mode="markers+text",
            name=f"best γ = {best}",
            text=[f"best γ={best}: {at_best:.2f}×"],
            textposition="top center",
            marker=dict(color=BEST_COLOUR, symbol="star", size=18, line=dict(color="#fff", width=1)),
        )
    fig.add_hline(
        y=1,
        line=dict(color=COLOURS[REJECTED], width=1, dash="dot"),
        annotation_text="target alone (1×)",
        annotation_position="bottom left",
    )
    highest = max(measured + table["theoretical_speedup"].tolist() + [1.0])
    fig.update_xaxes(dtick=1, range=[0.6, top + 0.4])
    fig.update_yaxes(range=[0, 1.2 * highest])  # headroom for the best-γ label
    return _layout(fig, "Speedup vs γ: measured, and what theory predicts", "draft length γ", "speedup (×)", height=400)


def throughput_figure(table: pd.DataFrame) -> go.Figure:
    """Tokens per second vs γ, beside the target alone."""
    fig = go.Figure()
    fig.add_bar(x=table["gamma"].tolist(), y=table["tokens_per_s"].tolist(), name="speculative", marker_color=P_COLOUR)
    if not table.empty:
        fig.add_hline(
            y=float(table["baseline_tokens_per_s"].iloc[0]),
            line=dict(color=THEORY_COLOUR, dash="dash"),
            annotation_text="target alone",
            annotation_position="top left",
        )
    fig.update_xaxes(dtick=1)
    return _layout(fig, "Tokens per second vs γ", "draft length γ", "tokens / s")


def position_figure(points: list[Point], by: str = "gamma") -> go.Figure:
    """P(draft token i accepted | drafted), pooled over prompts: one line per γ (by="gamma") or drafter (by="draft")."""
    fig = go.Figure()
    for i, group in enumerate(dict.fromkeys(getattr(p, by) for p in points)):
        rates = acceptance_by_position([p.comparison.spec for p in points if getattr(p, by) == group])
        fig.add_scatter(
            x=list(range(1, len(rates) + 1)),
            y=rates,
            mode="lines+markers",
            name=f"γ={group}" if by == "gamma" else str(group),
            marker=dict(symbol=SYMBOLS[i % len(SYMBOLS)], size=8),
        )
    fig.update_yaxes(range=[0, 1.05])
    fig.update_xaxes(dtick=1)
    return _layout(fig, "Acceptance by draft position", "position in the draft", "accepted (fraction)")


def draft_bars_figure(table: pd.DataFrame) -> go.Figure:
    """α, measured speedup and c side by side for each drafter."""
    names = table["draft"].tolist()
    alpha, speedup, c = table["alpha"].tolist(), table["speedup"].tolist(), table["c"].tolist()
    fig = make_subplots(rows=1, cols=3, subplot_titles=("α (acceptance)", "measured speedup (×)", "cost ratio c"))
    fig.add_bar(
        x=names, y=alpha, name="α", marker_color=COLOURS[ACCEPTED], text=[f"{v:.2f}" for v in alpha], row=1, col=1
    )
    fig.add_bar(
        x=names, y=speedup, name="speedup", marker_color=P_COLOUR, text=[f"{v:.2f}×" for v in speedup], row=1, col=2
    )
    fig.add_bar(x=names, y=c, name="c", marker_color=Q_COLOUR, text=[f"{v:.3f}" for v in c], row=1, col=3)
    fig.update_traces(textposition="outside", textangle=0, cliponaxis=False)
    fig.add_hline(y=1, line=dict(color=COLOURS[REJECTED], width=1, dash="dot"), row=1, col=2)
    fig.update_yaxes(range=[0, 1.15], row=1, col=1)
    fig.update_yaxes(range=[0, 1.2 * max(speedup + [1.0])], row=1, col=2)
    fig.update_yaxes(range=[0, 1.2 * max(c + [0.01])], row=1, col=3)
    fig.update_layout(showlegend=False)
    return _layout(fig, "Drafters side by side", "", "")


def latency_scatter_figure(table: pd.DataFrame) -> go.Figure:
    """Draft time per token vs α, marker size and colour by speedup: a fast, weaker draft can beat a strong, slow
    one."""
    rows = list(table.itertuples())
    largest = max((r.speedup for r in rows), default=1.0) or 1.0
    fig = go.Figure()
    fig.add_scatter(
        x=[r.draft_ms_per_token for r in rows],
        y=[r.alpha for r in rows],
        mode="markers+text",
        name="drafters",
        text=[f"{r.draft} · {r.speedup:.2f}×" for r in rows],
        hoverinfo="text",
        textposition=["top center" if i % 2 == 0 else "bottom center" for i in range(len(rows))],  # neighbours apart
        hovertext=[
            f"{r.draft}<br>α = {r.alpha:.2f} · {r.draft_ms_per_token:.2f} ms per drafted token · c = {r.c:.3f}"
            f"<br>{r.mean_accepted:.2f} tokens per round · measured speedup {r.speedup:.2f}×"
            for r in rows
        ],
        marker=dict(
            size=[14 + 36 * r.speedup / largest for r in rows],
            color=[r.speedup for r in rows],
            colorscale="RdYlGn",
            cmid=1.0,
            showscale=True,
            colorbar=dict(title=dict(text="speedup ×")),
            line=dict(color="#333", width=1),
        ),
    )
    slowest = max((r.draft_ms_per_token for r in rows), default=1.0) or 1.0
    fig.update_yaxes(range=[-0.2, 1.2])
    fig.update_xaxes(range=[-0.1 * slowest, 1.15 * slowest])  # room for the markers at both ends
    return _layout(
        fig,
        "Draft latency vs acceptance (size and colour: measured speedup)",
        "draft time per drafted token (ms)",
        "α (acceptance)",
        height=420,
    )
