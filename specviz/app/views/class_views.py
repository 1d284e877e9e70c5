"""The room as a class, drawn: a question's tally as bars, and a challenge's leaderboard as a table.

Both read records of `specviz.classroom` (no model, no store): the page hands them what the store holds now.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

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
                marker_color=colours, name="answers", cliponaxis=False)
    fig.update_yaxes(autorange="reversed")
    # room to the right of the longest bar for its count and share, which are written after it
    fig.update_xaxes(range=[0, 1.3 * max((1, *tally.counts))], dtick=1 if tally.total <= 10 else None)
    people = f"{tally.total} answer{'s' if tally.total != 1 else ''}"
    fig = _layout(fig, f"The room's predictions: {people}", "learners", "", height=140 + 40 * len(labels))
    fig.update_layout(showlegend=False)
    return fig


def leaderboard_frame(rows: list[Row]) -> pd.DataFrame:
    """One line per measured choice, ranked, as text (a plain table projects well and reads the same everywhere);
    a lossy line says so in its rank and shows its drift."""
    return pd.DataFrame(
        [{"rank": r.rank_text(), "entry": r.result.choice.label(), "speedup (spread)": r.result.spread,
          "tokens / round": f"{r.result.tokens_per_round:.2f}", "α": f"{r.result.alpha:.2f}",
          "output": ("⚠ " if r.lossy else "✔ ") + r.result.drift(), "entries": r.entries, "timed": r.measurements,
          "yours": "★" if r.yours else ""} for r in rows],
        columns=["rank", "entry", "speedup (spread)", "tokens / round", "α", "output", "entries", "timed", "yours"],
    ).set_index("rank")
