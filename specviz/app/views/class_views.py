"""The room as a class, drawn: a question's tally as bars, and a challenge's leaderboard as a table.

Both read records of `specviz.classroom` (no model, no store): the page hands them what the store holds now.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ...classroom.challenge import Row
from ...classroom.tally import Tally
from ...records import ACCEPTED
from .charts import P_COLOUR, _layout
from .tokens import COLOURS


def tally_figure(tally: Tally, answer: int | None = None) -> go.Figure:
    """One bar per option, its count and share written on it; after the reveal the measured answer is marked in
    colour and with a ✔ in its label (colour is never the only cue)."""
    labels = [f"✔ {o}" if i == answer else o for i, o in enumerate(tally.options)]
    colours = [COLOURS[ACCEPTED] if i == answer else P_COLOUR for i in range(len(tally.options))]
    texts = [f"{n} ({tally.share(i):.0%})" if n else "0" for i, n in enumerate(tally.counts)]
    fig = go.Figure()
    fig.add_bar(y=labels, x=list(tally.counts), orientation="h", text=texts, textposition="outside",
                marker_color=colours, name="answers")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(rangemode="tozero", dtick=1 if tally.total <= 10 else None)
    people = f"{tally.total} answer{'s' if tally.total != 1 else ''}"
    fig = _layout(fig, f"The room's predictions: {people}", "learners", "", height=140 + 40 * len(labels))
    fig.update_layout(showlegend=False)
    return fig


LEADERBOARD_COLUMNS = {
    "rank": st.column_config.TextColumn("rank", help="by measured speedup; ⚠ lossy: not the target's own output"),
    "entry": st.column_config.TextColumn("entry", help="drafter · γ · tree of N nodes · verification rule"),
    "speedup": st.column_config.NumberColumn("speedup", format="%.2f×", help="median of the timed pairs' ratios"),
    "spread": st.column_config.TextColumn("measured", help="the speedup with its spread over the timed pairs"),
    "tokens / round": st.column_config.NumberColumn("tokens / round", format="%.2f"),
    "α": st.column_config.NumberColumn("α", format="%.2f", help="accepted ÷ drafted"),
    "output": st.column_config.TextColumn("output", help="identical to the target alone, or how far it drifted"),
    "entries": st.column_config.NumberColumn("entries", help="learners who entered this choice (no names)"),
    "timed": st.column_config.NumberColumn("timed", help="measurements of this choice: identical entries share one"),
    "yours": st.column_config.TextColumn("yours"),
}


def leaderboard_frame(rows: list[Row]) -> pd.DataFrame:
    """One line per measured choice, ranked; a lossy line says so in its rank and shows its drift."""
    return pd.DataFrame(
        [{"rank": r.rank_text(), "entry": r.result.choice.label(), "speedup": r.result.speedup,
          "spread": r.result.spread, "tokens / round": r.result.tokens_per_round, "α": r.result.alpha,
          "output": ("⚠ " if r.lossy else "✔ ") + r.result.drift(), "entries": r.entries, "timed": r.measurements,
          "yours": "★ yours" if r.yours else ""} for r in rows],
        columns=list(LEADERBOARD_COLUMNS))
