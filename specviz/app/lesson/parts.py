"""Views several lesson steps share: a round before and after the target checks it, and a table of runs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ...comparison import Comparison
from ...records import Round, Run
from ..views import tokens


def context(run: Run, r: Round) -> None:
    """The output up to the round before `r`, then r's drafted tokens, not yet verified."""
    before = tokens.output_html(run, upto_round=r.index - 1) if r.index else tokens.CSS + '<div class="sv-text"></div>'
    st.caption("The text so far (earlier rounds, coloured by what happened to each token):")
    st.html(before)
    st.caption(f"Round {r.index + 1}: the draft proposes")
    st.html(tokens.pending_round_html(r))


def verified(r: Round) -> None:
    st.caption(f"Round {r.index + 1}, after the target's one forward pass")
    st.html(tokens.CSS + '<div class="sv-text">' + "".join(tokens.round_spans(r, upto_emitted=False)) + "</div>")


def runs_table(runs: dict[str, Comparison], label) -> None:
    """One row per run against the target alone: α, tokens per round, c, speedup measured and in theory, times."""
    rows = [{"run": label(n), "α": c.spec.acceptance_rate, "tokens / round": c.spec.mean_accepted_tokens,
             "c": c.cost_ratio, "speedup": c.speedup, "theory": c.theoretical_speedup_measured_verify,
             "identical": c.identical, "target alone (s)": c.baseline_seconds, "speculative (s)": c.spec_seconds}
            for n, c in runs.items()]
    number = st.column_config.NumberColumn
    st.dataframe(pd.DataFrame(rows), hide_index=True, column_config={
        "α": number(format="%.2f"), "tokens / round": number(format="%.2f"), "c": number(format="%.3f"),
        "speedup": number(format="%.2f×"), "theory": number(format="%.2f×"), "target alone (s)": number(format="%.2f"),
        "speculative (s)": number(format="%.2f")})
