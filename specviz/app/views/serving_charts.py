"""Plotly figures of the Serving page: engine runs beside lab runs, and speedup against concurrency.

Drawn from engine-bench and bench records (`specviz.engine.results`); lines differ by marker and
dash as well as colour.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ...engine.results import Acceptance
from ...records import REJECTED
from .charts import P_COLOUR, Q_COLOUR, _layout
from .tokens import COLOURS


def position_figure(engine: Acceptance, lab: Acceptance | None) -> go.Figure:
    """P(draft token i accepted | drafted) on the engine and in the lab, position by position."""
    fig = go.Figure()
    fig.add_scatter(x=list(range(1, len(engine.by_position) + 1)), y=engine.by_position, mode="lines+markers",
                    name=f"engine: {engine.source}", marker=dict(color=P_COLOUR, symbol="circle", size=10),
                    line=dict(color=P_COLOUR))
    if lab is not None and lab.by_position:
        fig.add_scatter(x=list(range(1, len(lab.by_position) + 1)), y=lab.by_position, mode="lines+markers",
                        name=f"lab: {lab.source}", marker=dict(color=Q_COLOUR, symbol="square", size=10),
                        line=dict(color=Q_COLOUR, dash="dash"))
    fig.update_yaxes(range=[0, 1.05])
    fig.update_xaxes(dtick=1)
    return _layout(fig, "Acceptance by draft position: engine and lab", "position in the draft", "accepted (fraction)")


def speedup_figure(frame: pd.DataFrame) -> go.Figure:
    """Speedup from speculation at each concurrency: throughput and latency ratios, 1× marked."""
    fig = go.Figure()
    fig.add_scatter(x=frame["concurrency"].tolist(), y=frame["speedup"].tolist(), mode="lines+markers+text",
                    name="output tokens/s ÷ baseline's", text=[f"{v:.2f}×" for v in frame["speedup"]],
                    textposition="top center", marker=dict(color=P_COLOUR, size=11), line=dict(color=P_COLOUR))
    fig.add_scatter(x=frame["concurrency"].tolist(), y=frame["latency_speedup"].tolist(), mode="lines+markers",
                    name="baseline's end-to-end latency ÷ speculative's", marker=dict(color=Q_COLOUR, symbol="diamond",
                                                                                   size=9),
                    line=dict(color=Q_COLOUR, dash="dot"))
    fig.add_hline(y=1, line=dict(color=COLOURS[REJECTED], width=1, dash="dot"),
                  annotation_text="1× = no gain", annotation_position="bottom left")
    fig.update_xaxes(type="log", tickvals=frame["concurrency"].tolist())
    top = max(frame["speedup"].max(), frame["latency_speedup"].max(), 1.0) if len(frame) else 1.0
    fig.update_yaxes(range=[0, 1.2 * top])
    return _layout(fig, "Speedup from speculation vs concurrency", "requests in flight (log scale)", "speedup (×)")


def throughput_figure(frame: pd.DataFrame) -> go.Figure:
    """Output tokens/s of both servers against concurrency: the baseline catches up as the batch fills."""
    fig = go.Figure()
    fig.add_scatter(x=frame["concurrency"].tolist(), y=frame["throughput"].tolist(), mode="lines+markers",
                    name="speculative", marker=dict(color=P_COLOUR, size=10), line=dict(color=P_COLOUR))
    fig.add_scatter(x=frame["concurrency"].tolist(), y=frame["baseline_throughput"].tolist(), mode="lines+markers",
                    name="baseline", marker=dict(color=Q_COLOUR, symbol="square", size=10),
                    line=dict(color=Q_COLOUR, dash="dash"))
    fig.update_xaxes(type="log", tickvals=frame["concurrency"].tolist())
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, "Output throughput vs concurrency", "requests in flight (log scale)", "tokens / s")
