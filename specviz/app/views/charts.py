"""Plotly figures drawn from run records (cheap to redraw; no model is called)."""

from __future__ import annotations

import plotly.graph_objects as go

from ...records import BONUS, REJECTED, RESAMPLED, Round, Run
from .tokens import COLOURS

P_COLOUR, Q_COLOUR, RESIDUAL_COLOUR = "#4575b4", "#8c8c8c", COLOURS[RESAMPLED]


def _layout(fig: go.Figure, title: str, x: str, y: str, height: int = 340) -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, height=height, margin=dict(l=40, r=20, t=50, b=40),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def residual_figure(r: Round) -> go.Figure:
    """At the rejected position: p, q and the residual max(0, p - q) the replacement is drawn from."""
    pos = r.n_accepted
    alts = sorted(r.alternatives[pos], key=lambda a: -a.p)
    labels = [repr(a.text)[1:-1] or f"id {a.token}" for a in alts]
    residual = [max(0.0, a.p - a.q) for a in alts]
    fig = go.Figure()
    fig.add_bar(name="p (target)", x=labels, y=[a.p for a in alts], marker_color=P_COLOUR)
    fig.add_bar(name="q (draft)", x=labels, y=[a.q for a in alts], marker_color=Q_COLOUR)
    fig.add_bar(name="max(0, p − q)", x=labels, y=residual, marker_color=RESIDUAL_COLOUR)
    for i, a in enumerate(alts):
        if pos < len(r.drafted) and a.token == r.drafted[pos]:
            fig.add_annotation(
                x=labels[i], y=max(a.p, a.q), text="✗ drafted", showarrow=True, arrowcolor=COLOURS[REJECTED]
            )
        if a.token == r.next_token:
            fig.add_annotation(
                x=labels[i],
                y=max(a.p, residual[i]),
                text="★ resampled",
                showarrow=True,
                ay=-45,
                arrowcolor=RESIDUAL_COLOUR,
            )
    fig.update_layout(barmode="group")
    return _layout(
        fig, f"Round {r.index + 1}, position {pos + 1}: where the replacement came from", "token", "probability"
    )


def acceptance_by_position_figure(runs: dict[str, Run]) -> go.Figure:
    """P(draft token i accepted | drafted) for each run: acceptance decays along the draft."""
    fig = go.Figure()
    for name, run in runs.items():
        rates = run.acceptance_by_position()
        fig.add_scatter(x=list(range(1, len(rates) + 1)), y=rates, mode="lines+markers", name=name)
    fig.update_yaxes(range=[0, 1.05])
    return _layout(fig, "Acceptance by draft position", "position in the draft", "accepted (fraction)")


def round_times_figure(run: Run) -> go.Figure:
    """Where the time goes, round by round: drafting vs verifying."""
    x = [r.index + 1 for r in run.rounds]
    fig = go.Figure()
    fig.add_bar(name="draft", x=x, y=[1000 * r.draft_seconds for r in run.rounds], marker_color=Q_COLOUR)
    fig.add_bar(
        name="verify (target forward)", x=x, y=[1000 * r.verify_seconds for r in run.rounds], marker_color=P_COLOUR
    )
    fig.add_scatter(
        name="tokens gained",
        x=x,
        y=[r.emitted for r in run.rounds],
        yaxis="y2",
        mode="markers",
        marker=dict(color=COLOURS[BONUS], symbol="diamond"),
    )
    fig.update_layout(barmode="stack", yaxis2=dict(overlaying="y", side="right", title="tokens", rangemode="tozero"))
    return _layout(fig, "Time per round", "round", "milliseconds")
