"""Reading what an AppTest page drew: its Plotly charts by title."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest


def chart_titles(at: AppTest) -> list[str]:
    return [json.loads(chart.proto.spec)["layout"]["title"]["text"] for chart in at.get("plotly_chart")]


def figure(at: AppTest, title_start: str) -> dict:
    """The spec of the first chart whose title starts with `title_start`."""
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if spec["layout"]["title"]["text"].startswith(title_start):
            return spec
    raise AssertionError(f"no chart titled {title_start!r}")
