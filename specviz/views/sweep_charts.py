"""Plotly figures of sweeps: across draft lengths γ, and across drafters. Drawn from tables and
points recorded by `specviz.sweeps`; no model is called here.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import theory
from ..records import ACCEPTED, BONUS, REJECTED
from ..sweeps import Point, acceptance_by_position
from .charts import P_COLOUR, Q_COLOUR, _layout
from .tokens import COLOURS

BEST_COLOUR = "#7b3294"  # the best γ: a colour no token status uses
THEORY_COLOUR = "#555555"
CURVE_STEPS = 20  # points of the smooth theory curve per unit of γ
_SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon"]  # lines differ by more than colour


def alpha_figure(table: pd.DataFrame) -> go.Figure:
    """α and tokens per round vs γ: α falls as drafts grow longer, tokens per round still rise."""
    fig = go.Figure()
    fig.add_scatter(x=table["gamma"], y=table["alpha"], name="α (accepted / drafted)", mode="lines+markers",
                    marker=dict(color=COLOURS[ACCEPTED], symbol="circle", size=9), line=dict(color=COLOURS[ACCEPTED]))
    fig.add_scatter(x=table["gamma"], y=table["mean_accepted"], name="tokens per round (accepted + 1)", yaxis="y2",
                    mode="lines+markers", marker=dict(color=COLOURS[BONUS], symbol="diamond", size=9),
                    line=dict(color=COLOURS[BONUS], dash="dot"))
    fig.update_yaxes(range=[0, 1.05])
    fig.update_layout(yaxis2=dict(overlaying="y", side="right", title="tokens per round", rangemode="tozero"))
    fig.update_xaxes(dtick=1)
    return _layout(fig, "Acceptance α and tokens per round vs γ", "draft length γ", "α")


def speedup_figure(table: pd.DataFrame, alpha: float, c: float, best: int | None) -> go.Figure:
    """Measured speedup per γ over the standard model's curve from the measured α and c; best γ starred."""
    fig = go.Figure()
    top = int(table["gamma"].max()) if not table.empty else 1
    xs = [1 + i / CURVE_STEPS for i in range((top - 1) * CURVE_STEPS + 1)]
    fig.add_scatter(x=xs, y=[theory.expected_speedup(alpha, g, c) for g in xs], mode="lines",
                    name=f"theory (1−α^(γ+1))/((1−α)(γc+1)), α={alpha:.2f}, c={c:.3f}",
                    line=dict(color=THEORY_COLOUR, dash="dash"))
    fig.add_scatter(x=table["gamma"], y=table["theoretical_speedup"], mode="markers", name="theory at each γ's own α, c",
                    marker=dict(color=THEORY_COLOUR, symbol="circle-open", size=10))
    fig.add_scatter(x=table["gamma"], y=table["speedup"], mode="lines+markers", name="measured",
                    marker=dict(color=P_COLOUR, size=10), line=dict(color=P_COLOUR))
    if best is not None:
        row = table[table["gamma"] == best].iloc[0]
        fig.add_scatter(x=[best], y=[row["speedup"]], mode="markers+text", name=f"best γ = {best}",
                        text=[f"best γ={best}: {row['speedup']:.2f}×"], textposition="top center",
                        marker=dict(color=BEST_COLOUR, symbol="star", size=18, line=dict(color="#fff", width=1)))
    fig.add_hline(y=1, line=dict(color=COLOURS[REJECTED], width=1, dash="dot"),
                  annotation_text="target alone (1×)", annotation_position="bottom right")
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, "Speedup vs γ: measured, and what theory predicts", "draft length γ", "speedup (×)", height=400)


def throughput_figure(table: pd.DataFrame) -> go.Figure:
    """Tokens per second vs γ, beside the target alone."""
    fig = go.Figure()
    fig.add_bar(x=table["gamma"], y=table["tokens_per_s"], name="speculative", marker_color=P_COLOUR)
    if not table.empty:
        fig.add_hline(y=float(table["baseline_tokens_per_s"].iloc[0]), line=dict(color=THEORY_COLOUR, dash="dash"),
                      annotation_text="target alone", annotation_position="top left")
    fig.update_xaxes(dtick=1)
    return _layout(fig, "Tokens per second vs γ", "draft length γ", "tokens / s")


def position_figure(points: list[Point], by: str = "gamma") -> go.Figure:
    """P(draft token i accepted | drafted), pooled over prompts, one line per γ (or per drafter)."""
    fig = go.Figure()
    groups = dict.fromkeys(getattr(p, by) for p in points)
    for i, group in enumerate(groups):
        rates = acceptance_by_position([p.comparison.spec for p in points if getattr(p, by) == group])
        name = f"γ={group}" if by == "gamma" else str(group)
        fig.add_scatter(x=list(range(1, len(rates) + 1)), y=rates, mode="lines+markers", name=name,
                        marker=dict(symbol=_SYMBOLS[i % len(_SYMBOLS)], size=8))
    fig.update_yaxes(range=[0, 1.05])
    fig.update_xaxes(dtick=1)
    return _layout(fig, "Acceptance by draft position", "position in the draft", "accepted (fraction)")


def draft_bars_figure(table: pd.DataFrame) -> go.Figure:
    """α, measured speedup and c side by side for each drafter."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=("α (acceptance)", "measured speedup (×)", "cost ratio c"))
    names = table["draft"].tolist()
    fig.add_bar(x=names, y=table["alpha"], name="α", marker_color=COLOURS[ACCEPTED],
                text=[f"{v:.2f}" for v in table["alpha"]], row=1, col=1)
    fig.add_bar(x=names, y=table["speedup"], name="speedup", marker_color=P_COLOUR,
                text=[f"{v:.2f}×" for v in table["speedup"]], row=1, col=2)
    fig.add_bar(x=names, y=table["c"], name="c", marker_color=Q_COLOUR, text=[f"{v:.3f}" for v in table["c"]], row=1, col=3)
    fig.add_hline(y=1, line=dict(color=COLOURS[REJECTED], width=1, dash="dot"), row=1, col=2)
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_layout(showlegend=False)
    return _layout(fig, "Drafters side by side", "", "")


def latency_scatter_figure(table: pd.DataFrame) -> go.Figure:
    """Draft cost per token vs α, marker size by speedup: a fast, weaker draft can beat a strong, slow one."""
    speedups = table["speedup"].tolist()
    largest = max(speedups, default=1.0) or 1.0
    hover = [f"{r.draft}<br>α = {r.alpha:.2f} · {r.draft_ms_per_token:.2f} ms per drafted token · c = {r.c:.3f}"
             f"<br>tokens per round {r.mean_accepted:.2f} · measured speedup {r.speedup:.2f}×"
             for r in table.itertuples()]
    fig = go.Figure()
    fig.add_scatter(
        x=table["draft_ms_per_token"], y=table["alpha"], mode="markers+text", name="drafters",
        text=[f"{d} · {s:.2f}×" for d, s in zip(table["draft"], speedups)], textposition="top center",
        hovertext=hover, hoverinfo="text",
        marker=dict(size=[14 + 36 * s / largest for s in speedups], sizemode="diameter", color=speedups,
                    colorscale="RdYlGn", cmid=1.0, showscale=True, colorbar=dict(title="speedup ×"),
                    line=dict(color="#333", width=1)),
    )
    fig.update_yaxes(range=[-0.05, 1.15])
    fig.update_xaxes(rangemode="tozero")
    return _layout(fig, "Draft latency vs acceptance (size and colour: measured speedup)",
                   "draft time per drafted token (ms)", "α (acceptance)", height=420)
