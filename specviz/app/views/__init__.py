"""Rendering of run records: HTML for tokens, plotly figures, pandas tables. No model calls here."""
