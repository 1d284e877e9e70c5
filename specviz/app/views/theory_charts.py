"""Charts of the speed models: the standard model's curves, measured runs on them, and token trees' costs.

Notation: α (`alpha`) = acceptance rate, γ (`gamma`) = draft length, c = draft/target cost ratio,
v = cost of one verification forward in target steps (1 in the paper's model).

The figures draw `specviz.theory` and place measured comparisons on its curves (the relaxed-verification
trade-off is drawn in `tolerance_charts`). Nothing here calls a model, so every figure is cheap to redraw.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ... import theory
from ...comparison import Comparison
from ...records import ACCEPTED, BONUS, REJECTED, RESAMPLED
from .charts import P_COLOUR, Q_COLOUR
from .tokens import COLOURS

MAX_GAMMA = 32  # the speedup-vs-γ curve and optimal_gamma look this far
HEATMAP_GAMMA = 16
OPTIMUM_COLOUR, CHOSEN_COLOUR, MEASURED_COLOUR = COLOURS[BONUS], COLOURS[RESAMPLED], COLOURS[ACCEPTED]
EXACT_COLOUR = COLOURS[REJECTED]


def chart_layout(fig: go.Figure, title: str, x: str, y: str, height: int = 360) -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, height=height, margin=dict(l=40, r=20, t=50, b=40),
                      legend=dict(orientation="h", y=-0.25))
    return fig


# --- the standard model ----------------------------------------------------------------------
def speedup_vs_gamma_figure(
    alpha: float, c: float, v: float, gamma: int, measured: pd.DataFrame | None = None
) -> go.Figure:
    """Expected speedup over γ for one α and c, with the optimum, the chosen γ and measured runs marked."""
    gammas = list(range(1, MAX_GAMMA + 1))
    speedups = [theory.expected_speedup(alpha, g, c, v) for g in gammas]
    best = theory.optimal_gamma(alpha, c, v, MAX_GAMMA)
    fig = go.Figure()
    fig.add_scatter(
        x=gammas,
        y=speedups,
        mode="lines",
        name=f"model: α={alpha:.2f}, c={c:.3g}, v={v:.2g}",
        line=dict(color=P_COLOUR),
        hovertemplate="γ=%{x}<br>speedup %{y:.2f}×<extra></extra>",
    )
    fig.add_scatter(
        x=[best],
        y=[theory.expected_speedup(alpha, best, c, v)],
        mode="markers",
        name=f"optimal γ = {best}",
        marker=dict(symbol="star", size=16, color=OPTIMUM_COLOUR),
    )
    fig.add_scatter(
        x=[gamma],
        y=[theory.expected_speedup(alpha, gamma, c, v)],
        mode="markers",
        name=f"chosen γ = {gamma}",
        marker=dict(symbol="circle-open", size=14, line=dict(width=3), color=CHOSEN_COLOUR),
    )
    if measured is not None and not measured.empty:
        fig.add_scatter(
            x=measured["gamma"],
            y=measured["speedup"],
            mode="markers",
            name="measured runs (this session)",
            marker=dict(symbol="diamond", size=11, color=MEASURED_COLOUR, line=dict(width=1, color="#222")),
            customdata=measured[["name", "alpha", "cost_ratio", "theory"]].to_numpy(),
            hovertemplate=(
                "%{customdata[0]}<br>mean γ %{x:.1f} · measured %{y:.2f}×<br>its own α %{customdata[1]:.2f}, "
                "c %{customdata[2]:.3f} → model %{customdata[3]:.2f}×<extra></extra>"
            ),
        )
    fig.add_hline(
        y=1, line_dash="dash", line_color=Q_COLOUR, annotation_text="target alone", annotation_position="bottom right"
    )
    fig.update_yaxes(rangemode="tozero")
    return chart_layout(fig, "Expected speedup vs draft length γ", "draft length γ", "speedup (×)", height=400)


def speedup_heatmap(c: float, v: float, alpha: float | None = None, gamma: int | None = None) -> go.Figure:
    """Expected speedup over (α, γ) for one c: blue pays off, red is slower than the target alone."""
    alphas = np.round(np.arange(0.0, 1.0, 0.01), 2)
    gammas = list(range(1, HEATMAP_GAMMA + 1))
    z = [[theory.expected_speedup(a, g, c, v) for g in gammas] for a in alphas]
    top = max(max(row) for row in z)
    # Red below 1× (slower than the target alone), white at 1×, blue above: 1× sits where it falls in [0, top].
    one = min(1.0 / top, 1.0) if top > 0 else 1.0
    scale = [[0.0, "#b2182b"], [one, "#f7f7f7"], [1.0, "#2166ac"]] if one < 1 else [[0.0, "#b2182b"], [1.0, "#f7f7f7"]]
    fig = go.Figure(
        go.Heatmap(
            x=gammas,
            y=alphas,
            z=z,
            zmin=0.0,
            zmax=max(top, 1.0),
            colorscale=scale,
            colorbar=dict(title="speedup"),
            hovertemplate="α=%{y:.2f} · γ=%{x}<br>speedup %{z:.2f}×<extra></extra>",
        )
    )
    best = [theory.optimal_gamma(a, c, v, HEATMAP_GAMMA) for a in alphas]
    fig.add_scatter(
        x=best, y=alphas, mode="lines", name="optimal γ for each α", line=dict(color="#111", width=2, shape="hv")
    )
    if alpha is not None and gamma is not None:
        fig.add_scatter(
            x=[gamma],
            y=[alpha],
            mode="markers",
            name="chosen α, γ",
            marker=dict(symbol="x", size=14, color=CHOSEN_COLOUR, line=dict(width=2, color="#111")),
        )
    return chart_layout(
        fig, f"Expected speedup over α and γ (c={c:.3g}, v={v:.2g})", "draft length γ", "acceptance rate α", height=400
    )


def acceptance_example(alpha: float, gamma: int, c: float, v: float) -> tuple[float, float, str]:
    """(tokens per round, speedup, one sentence) for an α at the chosen γ and c."""
    tokens = theory.expected_tokens(alpha, gamma)
    speedup = theory.expected_speedup(alpha, gamma, c, v)
    best = theory.optimal_gamma(alpha, c, v, MAX_GAMMA)
    if speedup >= 1.1:
        verdict = "faster than the target alone"
    elif speedup > 1:
        verdict = "barely faster than the target alone: most drafts are wasted work"
    else:
        verdict = "slower than the target alone: the drafts cost more than the target steps they save"
    sentence = (
        f"At α={alpha:.1f} a round of γ={gamma} drafts keeps {tokens - 1:.2f} of them on average and yields "
        f"{tokens:.2f} tokens for {gamma * c + v:.2f} target steps, so it runs {speedup:.2f}× — {verdict}. "
        f"The best γ at this α is {best}."
    )
    return tokens, speedup, sentence


# --- the acceptance worksheet ----------------------------------------------------------------
def worksheet_default(gamma: int = 4) -> pd.DataFrame:
    """Five example rounds of γ drafts with a typical spread of accepted counts."""
    accepted = [gamma, gamma // 2, 0, max(gamma - 1, 0), 1]
    return pd.DataFrame({"drafted": [gamma] * 5, "accepted": [min(a, gamma) for a in accepted]})


@dataclass
class Worksheet:
    rounds: int  # complete, valid rows
    drafted: int
    accepted: int
    invalid: list[int]  # 1-based rows refused (accepted > drafted, negative counts)
    blank: int  # rows with a missing count, ignored

    @property
    def alpha(self) -> float:
        """α = accepted / drafted over all rounds."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def mean_accepted(self) -> float:
        """Accepted drafts per round."""
        return self.accepted / self.rounds if self.rounds else 0.0

    @property
    def tokens_per_round(self) -> float:
        """Accepted drafts plus the resampled or bonus token every round adds."""
        return self.mean_accepted + 1 if self.rounds else 0.0

    @property
    def mean_gamma(self) -> float:
        return self.drafted / self.rounds if self.rounds else 0.0


def worksheet(frame: pd.DataFrame) -> Worksheet:
    """Totals of a table of rounds with 'drafted' and 'accepted' counts, refusing impossible rows."""
    rounds = drafted = accepted = blank = 0
    invalid = []
    for i, (d, a) in enumerate(
        zip(pd.to_numeric(frame["drafted"], errors="coerce"), pd.to_numeric(frame["accepted"], errors="coerce")), 1
    ):
        if pd.isna(d) or pd.isna(a):
            blank += 1
        elif d < 0 or a < 0 or a > d or d != int(d) or a != int(a):
            invalid.append(i)
        else:
            rounds, drafted, accepted = rounds + 1, drafted + int(d), accepted + int(a)
    return Worksheet(rounds, drafted, accepted, invalid, blank)


# --- measured runs on the curves -------------------------------------------------------------
def find_comparisons(values: Mapping, max_depth: int = 6) -> list[tuple[str, Comparison]]:
    """Every Comparison inside a mapping (such as st.session_state), however the pages stored it:
    directly, in lists, tuples or dicts, or inside dataclasses such as a tolerance Sweep."""
    found: dict[int, tuple[str, Comparison]] = {}

    def walk(value, name: str, depth: int) -> None:
        if isinstance(value, Comparison):
            found.setdefault(id(value), (name, value))
        elif depth >= max_depth:
            return
        elif isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{name} · {k}" if name else str(k), depth + 1)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, name, depth + 1)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                walk(getattr(value, f.name), name, depth + 1)

    walk(values, "", 0)
    return list(found.values())


def measured_points(values: Mapping) -> pd.DataFrame:
    """One row per speculative comparison found: its mean γ, measured speedup, own α and c."""
    rows = []
    for name, c in find_comparisons(values):
        run = c.spec
        if not run.rounds or run.mean_drafted <= 0:
            continue
        mode = run.settings.get("verification", {}).get("mode", "exact")
        rows.append(
            {
                "name": f"{name}: {run.draft} → {run.target}, {mode}",
                "gamma": run.mean_drafted,
                "speedup": c.speedup,
                "alpha": run.acceptance_rate,
                "cost_ratio": c.cost_ratio,
                "theory": c.theoretical_speedup,
            }
        )
    return pd.DataFrame(rows, columns=["name", "gamma", "speedup", "alpha", "cost_ratio", "theory"])


def pairs_figure(values: Mapping) -> go.Figure | None:
    """Every timed pair of this session's paired runs as a dot, the median as a bar: how far two timings of the
    same run apart can land. None when no run here was timed in two or more pairs."""
    runs = [(name, c) for name, c in find_comparisons(values) if c.pairs >= 2]
    if not runs:
        return None
    fig = go.Figure()
    labels = [f"{i + 1}. {c.spec.draft} (γ={c.spec.settings.get('gamma')})" for i, (_, c) in enumerate(runs)]
    fig.add_bar(
        x=labels,
        y=[c.speedup for _, c in runs],
        name="median of the pairs (the figure shown)",
        marker_color="rgba(120,120,120,0.35)",
    )
    fig.add_scatter(
        x=[label for label, (_, c) in zip(labels, runs) for _ in c.pair_ratios],
        y=[r for _, c in runs for r in c.pair_ratios],
        mode="markers",
        name="one timed pair",
        marker={"size": 10, "symbol": "diamond", "color": "#1f77b4"},
    )
    fig.add_hline(y=1, line_dash="dot", annotation_text="1× (no gain)")
    fig.update_layout(
        title="This session's runs: each timed pair's speedup, and the median shown",
        yaxis_title="target alone ÷ speculative",
        height=340,
        margin={"t": 50, "b": 40},
    )
    return fig


# --- token trees -------------------------------------------------------------------------------
def verify_cost_figure(cost: dict, context: int | None = None) -> go.Figure:
    """v(N) as measured: one target forward over a tree of N drafted nodes, in plain decoding steps.

    One line per measured context; the chosen one (nearest `context`) first and solid, the others dotted.
    """
    measured = cost.get("by_context") or [cost]
    chosen = min(measured, key=lambda m: abs(m["context"] - (context or measured[0]["context"])))
    fig = go.Figure()
    for m in [chosen] + [m for m in measured if m is not chosen]:
        fig.add_trace(
            go.Scatter(
                x=cost["nodes"],
                y=m["steps"],
                mode="lines+markers",
                name=f"context {m['context']}",
                line_dash="solid" if m is chosen else "dot",
                opacity=1.0 if m is chosen else 0.6,
                hovertemplate=f"context {m['context']}, N = %{{x}} nodes: %{{y:.2f}} target steps<extra></extra>",
            )
        )
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="one plain step (the paper's v)")
    fig.update_layout(
        title="Verification cost v(N), measured (machine below)",
        xaxis_title="drafted tokens verified in one forward (N)",
        yaxis_title="target steps",
        height=360,
        margin=dict(l=10, r=10, t=50, b=10),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def tree_vs_chain_figure(accept_by_rank: list[float], c: float, cost: dict, depth: int) -> go.Figure:
    """Expected speedup of a chain of γ=N and of the best tree of N nodes (depth ≤ `depth`), both verified at v(N)."""
    nodes = cost["nodes"]
    chain = [theory.expected_tokens(accept_by_rank[0], n) / (n * c + v) for n, v in zip(nodes, cost["steps"])]
    tree = [
        theory.tree_speedup(
            theory.tree_expected_tokens(theory.best_tree(accept_by_rank, n, depth), accept_by_rank), n * c, v
        )
        for n, v in zip(nodes, cost["steps"])
    ]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=nodes,
            y=chain,
            mode="lines+markers",
            name="chain of γ = N",
            hovertemplate="chain, γ = %{x}: %{y:.2f}×<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=nodes,
            y=tree,
            mode="lines+markers",
            name=f"best tree of N nodes (depth ≤ {depth})",
            marker_symbol="diamond",
            hovertemplate="tree, N = %{x}: %{y:.2f}×<extra></extra>",
        )
    )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_layout(
        title="Chain or tree at the same tokens verified, with v(N) as measured",
        xaxis_title="drafted tokens verified per round (N)",
        yaxis_title="expected speedup",
        height=360,
        margin=dict(l=10, r=10, t=50, b=10),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig
