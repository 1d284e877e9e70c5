"""One scored tree from any number of sources, grown best first and cut where it stops paying.

Each source offers, after a node, candidate next tokens with a chance: the estimated probability that the target
keeps the candidate once the node itself was kept. A node's score is the product of the chances along its path
(EAGLE-2's ranking): the probability that the target reaches and keeps it. Nodes are taken best first, so every
prefix of the list is a tree (a node never scores above its parent, and comes after it), and the greedy
tokens expected per round are 1 + the scores summed. The draft is then cut at the size n with the most expected
tokens per target step, (1 + Σ scores) / v(n), with v(n) the verification cost measured during the run (Sequoia
sizes its tree for the hardware the same way).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Offer:
    """A candidate after some node: its token, its chance of being kept once that node was, who offered it, and
    what its own children are looked up from (a source's state, opaque here)."""

    token: int
    chance: float
    source: str
    state: object = None


@dataclass
class ScoredTree:
    """Nodes best first: tokens, parents (-1: the root), scores (chance of being reached and kept), sources."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def first(self, n: int) -> ScoredTree:
        return ScoredTree(self.tokens[:n], self.parents[:n], self.scores[:n], self.sources[:n])


def grow(root: list[Offer], expand: Callable[[Offer, float], list[Offer]], budget: int, max_depth: int,
         min_score: float = 0.0) -> ScoredTree:
    """Up to `budget` nodes, most likely first, none deeper than `max_depth`: `root` holds the offers after the last
    committed token, `expand(offer, score)` those after a node taken with that score (a source whose offers cost
    something can weigh them against it). Offers scoring below `min_score` are never taken."""
    tree, depth = ScoredTree(), []
    frontier: list = []
    serial = 0

    def push(parent: int, reach: float, offers: list[Offer]) -> None:
        nonlocal serial
        for offer in offers:
            score = reach * offer.chance
            if score >= min_score and score > 0:
                heapq.heappush(frontier, (-score, serial, parent, offer))
                serial += 1

    push(-1, 1.0, root)
    while frontier and len(tree.tokens) < budget:
        score, _, parent, offer = heapq.heappop(frontier)
        tree.tokens.append(offer.token)
        tree.parents.append(parent)
        tree.scores.append(-score)
        tree.sources.append(offer.source)
        depth.append(depth[parent] + 1 if parent >= 0 else 1)
        if depth[-1] < max_depth:
            push(len(tree.tokens) - 1, -score, expand(offer, -score))
    return tree


def best_size(scores: list[float], v: Callable[[int], float]) -> int:
    """How many of the best-first nodes to draft: the n with the most expected tokens per target step."""
    best_n, best_rate, expected = 0, 1 / v(0), 1.0
    for n, score in enumerate(scores, start=1):
        expected += score
        rate = expected / v(n)
        if rate > best_rate:
            best_n, best_rate = n, rate
    return best_n


def merge(offers: list[Offer], width: int) -> list[Offer]:
    """The `width` best offers with one per token: where sources offer the same token, the surer one counts."""
    best: dict[int, Offer] = {}
    for offer in offers:
        if offer.token not in best or offer.chance > best[offer.token].chance:
            best[offer.token] = offer
    return sorted(best.values(), key=lambda o: -o.chance)[:width]
