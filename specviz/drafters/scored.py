"""One scored tree from any number of sources, grown best first and cut where it stops paying.

Each source offers, after a node, candidate next tokens with a chance: the estimated probability that the target
keeps the candidate once the node itself was kept. A node's score is the product of the chances along its path
(EAGLE-2's ranking): the probability that the target reaches and keeps it. Nodes are taken best first, so every
prefix of the list is a tree (a node never scores above its parent, and comes after it), and the greedy
tokens expected per round are 1 + the scores summed. The draft is then cut at the size n with the most expected
tokens per target step, (1 + Σ scores) / v(n), with v(n) the verification cost measured during the run (Sequoia
sizes its tree for the hardware the same way).

Both the ranking and the cut trust the chances, and a source's own chance need not hold: a recycled guess is the
target's probability after the same token in another context, and was kept about 0.6 times as often as promised. So a
`Calibration` scales each source's chances by how often that source's judged nodes were kept for the chance they
were given (a decaying count, learned every round), and the offers after one node, which exclude each other, never
sum to more than 1.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from .costs import DECAY

MAX_CHANCE = 0.99  # no offer is sure
PRIOR = 1.0  # pseudo-observations behind a source's starting factor of 1 (its chances taken as they are)


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
    """Nodes best first: tokens, parents (-1: the root), scores (chance of being reached and kept), sources, and the
    chance each node's source gave it (before calibration)."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    promised: list[float] = field(default_factory=list)

    def first(self, n: int) -> ScoredTree:
        return ScoredTree(self.tokens[:n], self.parents[:n], self.scores[:n], self.sources[:n], self.promised[:n])


@dataclass
class Calibration:
    """How far each source's chances hold: per source, decaying sums of its judged nodes (those whose parent was
    kept, the root's children included) — how many the target kept, and the chances the source gave them. A source's
    chances are scaled by kept ÷ promised (1 until it has been judged). A round that judges none of a source's nodes
    moves its sums back toward the start by the same decay, so a source priced out of the tree is tried again."""

    sums: dict[str, tuple[float, float]] = field(default_factory=dict)  # source -> (kept, promised), decaying

    def factor(self, source: str) -> float:
        kept, promised = self.sums.get(source, (PRIOR, PRIOR))
        return kept / promised

    def chances(self, offers: list[Offer]) -> list[float]:
        """The chances of the offers after one node, each scaled by its source's factor, together at most 1: they are
        offers of different tokens, of which the target keeps one at most."""
        chances = [min(offer.chance * self.factor(offer.source), MAX_CHANCE) for offer in offers]
        total = sum(chances)
        return chances if total <= 1 else [chance / total for chance in chances]

    def judge(self, drafted: ScoredTree, kept: list[int]) -> None:
        """Learn from a verified tree: `drafted` as proposed, `kept` the nodes the target kept."""
        chosen, judged = set(kept), {}
        for node, (parent, source, promised) in enumerate(zip(drafted.parents, drafted.sources, drafted.promised)):
            if parent < 0 or parent in chosen:
                hits, given = judged.get(source, (0.0, 0.0))
                judged[source] = (hits + (node in chosen), given + promised)
        for source, (hits, given) in judged.items():
            old_hits, old_given = self.sums.get(source, (PRIOR, PRIOR))
            self.sums[source] = (DECAY * old_hits + hits, DECAY * old_given + given)
        for source, (old_hits, old_given) in self.sums.items():
            if source not in judged:
                self.sums[source] = (DECAY * old_hits + (1 - DECAY) * PRIOR, DECAY * old_given + (1 - DECAY) * PRIOR)


def grow(root: list[Offer], expand: Callable[[Offer, float], list[Offer]], budget: int, max_depth: int,
         min_score: float = 0.0, calibration: Calibration | None = None) -> ScoredTree:
    """Up to `budget` nodes, most likely first, none deeper than `max_depth`: `root` holds the offers after the last
    committed token, `expand(offer, score)` those after a node taken with that score (a source whose offers cost
    something can weigh them against it). Offers scoring below `min_score` are never taken. With a `calibration`,
    each node's chance is its source's calibrated one.

    A node is expanded only when its children could still be taken: a taken node waits in the frontier with its own
    score, which bounds its children's (no chance is above 1), and is expanded when that comes first. So the
    tree is the one expanding every node would grow, without asking for the offers after the last, least likely
    nodes, whose children would not fit (for a head, each such ask can be a forward)."""
    tree, depth, taken = ScoredTree(), [], []
    frontier: list = []  # (-score, serial, parent, offer), or (-score, serial, node, None): a node to expand
    serial = 0

    def push(parent: int, reach: float, offers: list[Offer]) -> None:
        nonlocal serial
        chances = calibration.chances(offers) if calibration is not None else [offer.chance for offer in offers]
        for offer, chance in zip(offers, chances):
            score = reach * chance
            if score >= min_score and score > 0:
                heapq.heappush(frontier, (-score, serial, parent, offer))
                serial += 1

    push(-1, 1.0, root)
    while frontier and len(tree.tokens) < budget:
        score, _, parent, offer = heapq.heappop(frontier)
        if offer is None:  # a taken node whose children may now be the likeliest left
            push(parent, -score, expand(taken[parent], -score))
            continue
        tree.tokens.append(offer.token)
        tree.parents.append(parent)
        tree.scores.append(-score)
        tree.sources.append(offer.source)
        tree.promised.append(offer.chance)
        taken.append(offer)
        depth.append(depth[parent] + 1 if parent >= 0 else 1)
        if depth[-1] < max_depth:
            heapq.heappush(frontier, (score, serial, len(tree.tokens) - 1, None))
            serial += 1
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
