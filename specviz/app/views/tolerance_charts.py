"""Charts of relaxed verification's measured trade-off: speed and quality drift at each tolerance.

They draw a `Sweep` from `specviz.lab.quality`. Nothing here calls a model, so every figure is cheap to redraw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go

from .charts import P_COLOUR, Q_COLOUR
from .theory_charts import EXACT_COLOUR, MEASURED_COLOUR, chart_layout

if TYPE_CHECKING:  # the tolerance page draws without importing the model stack
    from ...lab.quality import Sweep


QUALITY_METRICS = {  # column of Sweep.frame() -> axis title
    "agreement": "token agreement with exact",
    "bleu": "BLEU vs exact (0-100)",
    "rouge_l": "ROUGE-L F1 vs exact",
    "log_likelihood": "target log-likelihood per token",
}


def _parameter_title(sweep: Sweep) -> str:
    return f"tolerance τ (nats, top-{sweep.top_k})" if sweep.greedy else "lenience l (1 = exact; lower accepts more)"


def speedup_vs_tolerance_figure(sweep: Sweep) -> go.Figure:
    """Measured speedup and α at each tolerance, with the exact reference as dashed lines."""
    frame = sweep.frame().iloc[1:]
    ref = sweep.reference
    fig = go.Figure()
    fig.add_scatter(
        x=frame["value"],
        y=frame["speedup"],
        mode="lines+markers",
        name="speedup (measured)",
        line=dict(color=P_COLOUR),
        marker=dict(symbol="circle", size=9),
    )
    fig.add_scatter(
        x=frame["value"],
        y=frame["alpha"],
        mode="lines+markers",
        name="α (acceptance)",
        yaxis="y2",
        line=dict(color=MEASURED_COLOUR, dash="dot"),
        marker=dict(symbol="triangle-up", size=9),
    )
    fig.add_hline(
        y=ref.speedup,
        line_dash="dash",
        line_color=EXACT_COLOUR,
        annotation_text=f"exact: {ref.speedup:.2f}×, α={ref.alpha:.2f}",
        annotation_position="top left",
    )
    fig.update_layout(
        yaxis=dict(rangemode="tozero"), yaxis2=dict(overlaying="y", side="right", title="α", range=[0, 1.05])
    )
    if not sweep.greedy:
        fig.update_xaxes(autorange="reversed")
    return chart_layout(fig, "Speed: relaxing verification", _parameter_title(sweep), "speedup (×)")


def quality_vs_tolerance_figure(sweep: Sweep) -> go.Figure:
    """Agreement, BLEU/100 and ROUGE-L on [0, 1]; log-likelihood on its own axis, exact dashed."""
    frame = sweep.frame().iloc[1:]
    ref = sweep.reference
    fig = go.Figure()
    styles = {"agreement": ("circle", "#1b9e77"), "bleu": ("square", "#7570b3"), "rouge_l": ("diamond", "#e7298a")}
    for column, (symbol, colour) in styles.items():
        scale = 100 if column == "bleu" else 1
        fig.add_scatter(
            x=frame["value"],
            y=frame[column] / scale,
            mode="lines+markers",
            marker=dict(symbol=symbol, size=9),
            line=dict(color=colour),
            name="BLEU / 100" if column == "bleu" else QUALITY_METRICS[column],
        )
    fig.add_scatter(
        x=frame["value"],
        y=frame["log_likelihood"],
        mode="lines+markers",
        yaxis="y2",
        name="log-likelihood (right axis)",
        line=dict(color=P_COLOUR, dash="dot"),
        marker=dict(symbol="x", size=9),
    )
    fig.add_hline(
        y=ref.quality.log_likelihood,
        yref="y2",
        line_dash="dash",
        line_color=EXACT_COLOUR,
        annotation_text=f"exact log-likelihood {ref.quality.log_likelihood:.2f}",
        annotation_position="bottom right",
    )
    fig.update_layout(
        yaxis=dict(range=[0, 1.05]), yaxis2=dict(overlaying="y", side="right", title="mean log p per token")
    )
    if not sweep.greedy:
        fig.update_xaxes(autorange="reversed")
    title = "Quality: drift from the exact output"
    return chart_layout(fig, title, _parameter_title(sweep), "score (1 = same as exact)")


def speedup_quality_figure(sweep: Sweep, metric: str = "bleu") -> go.Figure:
    """Speedup against one quality metric: each tolerance a point, exact mode the reference star."""
    frame = sweep.frame()
    ref, points = frame.iloc[:1], frame.iloc[1:]
    fig = go.Figure()
    fig.add_scatter(
        x=points[metric],
        y=points["speedup"],
        mode="markers+text",
        text=points["rule"],
        textposition="top center",
        name="relaxed",
        marker=dict(symbol="circle", size=10, color=P_COLOUR),
    )
    fig.add_scatter(
        x=ref[metric],
        y=ref["speedup"],
        mode="markers+text",
        text=["exact (reference)"],
        textposition="bottom center",
        name="exact (reference)",
        marker=dict(symbol="star", size=18, color=EXACT_COLOUR, line=dict(width=1, color="#222")),
    )
    fig.add_hline(y=1, line_dash="dash", line_color=Q_COLOUR)
    return chart_layout(fig, "Speed vs quality", QUALITY_METRICS[metric], "speedup (×)")


def sweep_table(sweep: Sweep) -> pd.DataFrame:
    """The sweep's rows under readable column names."""
    return sweep.frame().rename(
        columns={
            "value": "τ" if sweep.greedy else "lenience",
            "alpha": "α",
            "mean_accepted": "tokens / round",
            "speedup": "speedup (×)",
            "bleu": "BLEU",
            "rouge_l": "ROUGE-L",
            "log_likelihood": "log-likelihood",
        }
    )


