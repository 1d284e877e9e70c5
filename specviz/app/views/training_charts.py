"""The Distil page's figures: the training curve and the race against the shipped drafts."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


def training_figure(losses: list[dict], name: str) -> go.Figure:
    """Loss and greedy agreement with the target by step."""
    frame = pd.DataFrame(losses)
    fig = go.Figure()
    fig.add_scatter(x=frame["step"], y=frame["loss"], name="loss", mode="lines")
    fig.add_scatter(x=frame["step"], y=frame["agreement"], name="agreement with the target", yaxis="y2", mode="lines")
    fig.update_layout(title=f"Training {name}", xaxis_title="step", yaxis_title="loss", height=320,
                      yaxis2=dict(overlaying="y", side="right", range=[0, 1], title="greedy agreement"))
    return fig


def race_table(evaluation: dict[str, dict]) -> pd.DataFrame:
    """One row per draft raced: α, tokens per round, c, measured speedup and identical outputs."""
    return pd.DataFrame([
        {"draft": ("ngram+" if str(path).startswith("ngram+") else "") + str(path).rsplit("/", 1)[-1],
         "α": e["all"]["alpha"],
         "tokens / round": e["all"]["mean_accepted_tokens"], "c": e["all"]["c"],
         "measured speedup": e["all"]["speedup"], "identical": f"{e['all']['identical']}/{e['all']['prompts']}"}
        for path, e in evaluation.items()])
