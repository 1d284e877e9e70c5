"""A round's token tree and its attention mask, drawn from the round's record (no model call).

The tree reads left to right: the last committed token (the root), then every drafted node by
depth. The branch the target kept is green and drawn thick, refused nodes are red crosses, nodes
the target never reached are open grey circles, and the resampled or bonus token follows the kept
branch. Marker shapes repeat what the colours say; hovering a node shows q and p. Where a drafter mixes
sources in one tree (blend), a small mark beside each node says where it came from (a triangle: recycled from
the target's own earlier guesses; a square: copied from earlier answers; a diamond: copied from the prompt and
answer; a star: guessed by a draft head, blend:HEAD), in the legend too.
"""

from __future__ import annotations

import plotly.graph_objects as go

from ...drafters.blend_head import HEAD
from ...drafters.recycle import RECYCLED
from ...drafters.suffix import CORPUS, LOCAL
from ...records import ACCEPTED, BONUS, DRAFTED, REJECTED, RESAMPLED, Round, TreeRecord
from ...theory import sibling_ranks
from ...trees import children, depths, rooted, visibility
from .tokens import COLOURS, DESCRIPTIONS

SYMBOLS = {ACCEPTED: "circle", REJECTED: "x", DRAFTED: "circle-open", RESAMPLED: "diamond", BONUS: "star",
           "root": "square"}


# Each source's mark beside a node: shape and colour both say it (a source not named here gets the next free shape).
SOURCE_MARKS = {RECYCLED: ("triangle-up", "#7b3294"), CORPUS: ("square", "#008080"), LOCAL: ("diamond", "#b35806"),
                HEAD: ("star-triangle-down", "#1b7837")}
SPARE_MARKS = [("pentagon", "#333333"), ("hexagram", "#666666"), ("cross", "#999999")]
SOURCE_WORDS = {RECYCLED: "recycled: the target's own earlier guess after this token",
                CORPUS: "copied: what followed the same words in earlier answers",
                LOCAL: "copied: what followed the same words in the prompt and answer",
                HEAD: "guessed: the draft head's prediction from the target's own hidden states"}


def source_marks(sources: list[str]) -> dict[str, tuple[str, str]]:
    """The mark (shape, colour) of every source in a tree, known ones first."""
    spare = iter(SPARE_MARKS)
    return {name: SOURCE_MARKS.get(name) or next(spare, ("circle-dot", "#000000")) for name in dict.fromkeys(sources)}


def _label(text: str) -> str:
    return repr(text)[1:-1] if text.strip() else repr(text)


def _rows(tree: TreeRecord, next_after: int) -> tuple[list[float], float]:
    """A vertical place per node (the root last) and one for the next token, which follows node `next_after`
    as one more child: leaves one below the other in drawing order, a parent level with its children."""
    place: dict[int | str, float] = {}
    next_leaf = [0]

    def leaf(key) -> float:
        place[key] = next_leaf[0]
        next_leaf[0] += 1
        return place[key]

    def visit(node: int) -> float:
        places = [visit(k) for k in children(tree.parents, node)]
        if node == next_after:
            places.append(leaf("next"))
        place[node] = sum(places) / len(places) if places else leaf(node)
        return place[node]

    visit(-1)
    return [place[i] for i in range(tree.size)] + [place[-1]], place["next"]


def tree_figure(r: Round) -> go.Figure:
    """The round's tree, root at the left, with the kept branch highlighted and the next token after it."""
    tree = r.tree
    level = depths(tree.parents)
    kept = [i for i, s in enumerate(tree.status) if s == ACCEPTED]
    last = kept[-1] if kept else -1
    y, next_y = _rows(tree, last)
    root_y = y[-1]
    ranks = sibling_ranks(tree.parents)
    text = tree.text or [str(t) for t in tree.tokens]
    fig = go.Figure()
    for status in (DRAFTED, REJECTED, ACCEPTED):  # edges: kept ones thick and green, the others thin grey
        xs, ys = [], []
        for i in (i for i in range(tree.size) if tree.status[i] == status):
            parent = tree.parents[i]
            xs += [level[parent] if parent >= 0 else 0, level[i], None]
            ys += [y[parent] if parent >= 0 else root_y, y[i], None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(color=COLOURS[ACCEPTED] if status == ACCEPTED else "#c8c8c8",
                                           width=4 if status == ACCEPTED else 1.5)))
    fig.add_trace(go.Scatter(x=[0], y=[root_y], mode="markers+text", text=["last token"], textposition="bottom center",
                             marker=dict(symbol=SYMBOLS["root"], size=14, color="#555555"), name="last committed token",
                             hovertemplate="the last committed token: every node extends it<extra></extra>"))
    for status in (ACCEPTED, REJECTED, DRAFTED):
        nodes = [i for i in range(tree.size) if tree.status[i] == status]
        if not nodes:
            continue
        hover = [
            f"{DESCRIPTIONS.get(status, status) if status != DRAFTED else 'drafted, never reached by the target'}"
            f"<br>node {i} · depth {level[i]} · rank {ranks[i] + 1} among its siblings"
            f"<br>q (draft) = {tree.q[i]:.3f} · p (target) = "
            + ("not computed" if tree.p[i] is None else f"{tree.p[i]:.3f}")
            + (f"<br>source: {SOURCE_WORDS.get(tree.source[i], tree.source[i])}" if tree.source else "")
            for i in nodes
        ]
        fig.add_trace(
            go.Scatter(
                x=[level[i] for i in nodes],
                y=[y[i] for i in nodes],
                mode="markers+text",
                text=[_label(text[i]) for i in nodes],
                textposition="top center",
                hovertext=hover,
                hoverinfo="text",
                marker=dict(
                    symbol=SYMBOLS[status],
                    size=16 if status == ACCEPTED else 13,
                    color=COLOURS[status],
                    line=dict(width=2, color=COLOURS[status]),
                ),
                name={
                    ACCEPTED: "kept (accepted branch)",
                    REJECTED: "refused by the target",
                    DRAFTED: "drafted, never reached",
                }[status],
            )
        )
    for name, (symbol, colour) in source_marks(tree.source).items():  # where each node came from, beside it
        nodes = [i for i in range(tree.size) if tree.source[i] == name]
        fig.add_trace(
            go.Scatter(
                x=[level[i] + 0.16 for i in nodes],
                y=[y[i] + 0.3 for i in nodes],
                mode="markers",
                marker=dict(symbol=symbol, size=9, color=colour),
                name=f"source: {name}",
                hovertext=[f"node {i}: {SOURCE_WORDS.get(name, name)}" for i in nodes],
                hoverinfo="text",
            )
        )
    next_x = (level[last] if last >= 0 else 0) + 1  # the next token follows the kept branch
    fig.add_trace(
        go.Scatter(
            x=[next_x - 1, next_x],
            y=[y[last] if last >= 0 else root_y, next_y],
            mode="lines",
            hoverinfo="skip",
            showlegend=False,
            line=dict(color=COLOURS[r.next_kind], width=3, dash="dot"),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[next_x],
            y=[next_y],
            mode="markers+text",
            text=[_label(r.next_text)],
            textposition="top center",
            marker=dict(symbol=SYMBOLS[r.next_kind], size=16, color=COLOURS[r.next_kind]),
            name=DESCRIPTIONS[r.next_kind],
            hovertext=[f"{DESCRIPTIONS[r.next_kind]} · p (target) = {r.next_p:.3f}"],
            hoverinfo="text",
        )
    )
    fig.update_layout(
        height=max(300, 44 * (max(y + [next_y]) + 3)),
        margin=dict(l=10, r=10, t=50, b=10),
        title=f"Round {r.index + 1}: a tree of {tree.size} nodes, {len(kept)} kept, verified in one target forward"
        + (f" (kept: {r.source})" if tree.source and r.source else ""),
        xaxis=dict(title="depth (tokens after the last committed one)", dtick=1, range=[-0.4, max(level) + 1.6]),
        yaxis=dict(visible=False, range=[max(y + [next_y]) + 0.6, -0.8]),  # top to bottom, room for the labels above
        legend=dict(orientation="h", y=-0.3),
    )
    return fig


def mask_figure(r: Round) -> go.Figure:
    """The target's attention over the tree: row i may read column j when j is i's ancestor or i itself."""
    tree = r.tree
    text = ["last token"] + [f"{i}:{_label(t)}" for i, t in enumerate(tree.text or map(str, tree.tokens))]
    n = tree.size + 1
    # the very mask the target reads (specviz.trees), without the committed context in front
    allowed = visibility(rooted(tree.parents), list(range(n)), list(range(n)), 0, n).int().tolist()
    fig = go.Figure(
        go.Heatmap(
            z=allowed,
            x=text,
            y=text,
            colorscale=[[0, "#f4f4f4"], [1, "#4575b4"]],
            showscale=False,
            xgap=1,
            ygap=1,
            hovertemplate="%{y} reads %{x}: %{z}<extra></extra>",
        )
    )
    fig.update_layout(
        title="Tree attention mask (blue: may attend; every row also reads the whole context)",
        height=max(300, 22 * n + 120),
        margin=dict(l=10, r=10, t=50, b=10),
        yaxis=dict(autorange="reversed"),
        xaxis=dict(side="top", tickangle=-60),
    )
    return fig
