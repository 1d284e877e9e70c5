"""Tables and exports (CSV, JSON) of run records."""

from __future__ import annotations

import json

import pandas as pd

from ...comparison import Comparison
from ...records import Run


def rounds_frame(run: Run) -> pd.DataFrame:
    """One row per round, for tables and CSV export."""
    return pd.DataFrame([
        {
            "round": r.index + 1,
            "gamma": r.gamma,
            "drafted": "".join(r.drafted_text),
            "drafted_ids": " ".join(map(str, r.drafted)),
            "accepted": r.n_accepted,
            "rejected_position": None if r.rejected_position is None else r.rejected_position + 1,
            "next_token": r.next_text,
            "next_kind": r.next_kind,
            "q": " ".join(f"{v:.3f}" for v in r.q),
            "p": " ".join("–" if v is None else f"{v:.3f}" for v in r.p),
            "emitted": r.emitted,
            "draft_ms": 1000 * r.draft_seconds,
            "verify_ms": 1000 * r.verify_seconds,
        }
        for r in run.rounds
    ])


def summary_frame(comparisons: dict[str, Comparison]) -> pd.DataFrame:
    """One row per labelled comparison with its headline figures."""
    return pd.DataFrame([{"run": name, **c.summary()} for name, c in comparisons.items()])


def to_json(comparisons: dict[str, Comparison]) -> str:
    return json.dumps({name: c.to_dict() for name, c in comparisons.items()})
