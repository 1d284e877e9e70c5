"""Token Recycling: draft from the target's own earlier guesses, kept in a table by token.

Every verification forward computes the target's logits at each node it reads, kept or refused. Their top-k
is what the target expected after that node's token: Token Recycling (Luo et al., 2024) keeps it, for every
token id, in a table (`recycle_table`) and drafts from it: after the last committed token t, the target's
earlier guesses after t; after each of those, the guesses after it; and so on. The table is warm-started from
one teacher-forced pass of the target over the shipped answer corpus, updated every round from the logits the
target computed anyway (`base.Verified`), and carried from run to run through the process (as the suffix
corpus is). No model runs to draft; q is one-hot (the candidates are fixed before verification), so the
usual rule stays exact.

A candidate's chance of being kept is its stored probability (`recycled_chance`; a fixed calibration σ(a + b·ln
p + c·rank) can be fitted on live runs of TRAIN prompts by benchmarks/fit_recycle_chance.py, none is set), scaled
during the run by how often recycled nodes were kept for what they promised (`scored.Calibration`: a stored
probability comes from another context, and beside copies and a head they promised 1.6 times what was kept); the
tree is grown best first by the product of the chances along each path and cut where expected tokens per target
step peak under the v(n) timed during the run (`scored`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..config import MAX_TREE_BUDGET
from .base import Drafter, Proposal, Reason, Verified
from .costs import Costs
from .recycle_table import TOP_K, RecycleStore, RecycleTable
from .scored import Calibration, Offer, ScoredTree, best_size, grow

RECYCLED = "recycled"  # the source of a node drafted from the table
MIN_SCORE = 0.02  # nodes less likely than this to be reached and kept are not considered
PRIOR_SLOPE = 0.04  # v(n) = 1 + 0.04 n until the run has timed two draft sizes (as the suffix drafter's)
# P(kept | parent kept) = σ(a + b·ln p + c·rank) for a candidate stored with probability p at a rank in its row
# (benchmarks/fit_recycle_chance.py on live runs of TRAIN prompts); None: the stored p itself, uncalibrated.
CHANCE: tuple[float, float, float] | None = None


def recycled_chance(p: float, rank: int) -> float:
    """The chance that the target keeps a recycled candidate stored with probability p at `rank` in its row."""
    if CHANCE is None:
        return p
    a, b, c = CHANCE
    return 1 / (1 + math.exp(-(a + b * math.log(max(p, 1e-6)) + c * rank)))


def recycled_offers(table: RecycleTable, token: int, width: int, never: frozenset[int], state=None) -> list[Offer]:
    """The table's `width` likeliest next tokens after `token` (never-drafted ones left out), as offers."""
    ids, probs = table.row(token)
    offers = []
    for rank, (next_token, p) in enumerate(zip(ids, probs)):
        if next_token not in never:
            offers.append(Offer(next_token, recycled_chance(p, rank), RECYCLED, state))
        if len(offers) == width:
            break
    return offers


def learn_from(table: RecycleTable, verified: Verified | None, kept: list[int], k: int = TOP_K) -> None:
    """Write the target's top-k at every row the verification computed into the table: the refused and unreached
    nodes first, then the root and the kept branch (the text that was really written wins a token's row)."""
    if verified is None:
        return
    rows, ids, probs = verified.top(k)
    if not rows:
        return
    tokens = verified.tokens.tolist()
    branch = [0] + [node + 1 for node in kept]
    on_branch = set(branch)
    position = {row: i for i, row in enumerate(rows)}
    order = [position[r] for r in rows if r not in on_branch] + [position[r] for r in branch if r in position]
    table.learn([tokens[rows[i]] for i in order], ids[order], probs[order])


@dataclass(frozen=True)
class Drawn(Reason):
    """Why a round drafted what it did: the scores of the nodes grown, by source, and where they were cut."""

    scores: tuple[float, ...] = ()  # every grown node's chance of being reached and kept, best first
    sources: tuple[str, ...] = ()  # ... and who offered it
    n: int = 0  # nodes drafted: the cut
    v: float = 1.0  # v(n) at the cut (v(1) when nothing was drafted), in target steps

    def text(self) -> str:
        if not self.scores:
            return "no source had a candidate"
        if self.n == 0:
            best = f"best guess {self.scores[0]:.0%} likely kept ({self.sources[0]})"
            return f"{best}, not worth v(1) = {self.v:.2f} steps"
        counts: dict[str, int] = {}
        for source in self.sources[: self.n]:
            counts[source] = counts.get(source, 0) + 1
        parts = ", ".join(f"{count} {source}" for source, count in counts.items())
        return (f"{self.n} drafted ({parts}), {sum(self.scores[: self.n]):.1f} expected kept, "
                f"v({self.n}) = {self.v:.2f} steps")


class RecycleDrafter(Drafter):
    kind = "recycle"

    def __init__(self, name: str = "recycle", store: RecycleStore | None = None, vocab: int = 0,
                 never: frozenset[int] = frozenset(), verify_cost: Callable[[int], float] | None = None,
                 prior_slope: float = PRIOR_SLOPE):
        super().__init__(name)
        self.store, self.vocab = store, store.vocab if store is not None else vocab
        self.never = never  # tokens never drafted: the chat template's markers
        self.verify_cost = verify_cost  # v(n) given (a replay, a test); None: fitted to the loop's times of forwards
        self.prior_slope = prior_slope
        self.costs = Costs(prior_slope=prior_slope)
        self.table = RecycleTable(self.vocab)
        self.key: int | None = None
        self.last: Drawn | None = None
        self.proposed: ScoredTree | None = None  # the last proposal's nodes, judged in `feedback`
        self.calibration = Calibration()  # each source's chances against what was kept, learned during the run

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.key = hash(tuple(prompt_ids[0].tolist())) & (2**62 - 1)
        self.table = self.store.table_for(self.key) if self.store is not None else RecycleTable(self.vocab)
        self.costs, self.last, self.proposed = Costs(prior_slope=self.prior_slope), None, None
        self.calibration = Calibration()

    def v(self, n: int) -> float:
        return self.verify_cost(n) if self.verify_cost is not None else self.costs.v(n)

    def shape(self, k: int) -> tuple[int, int]:
        """(budget, branching) of this round: a tree's, or a chain's (k nodes, one child each)."""
        return (min(self.tree.budget, MAX_TREE_BUDGET), self.tree.branching) if self.tree.on else (k, 1)

    def draft(self, context, k, sampling, generator) -> Proposal:
        budget, width = self.shape(k)
        tree = ScoredTree()
        if k > 0:
            root = recycled_offers(self.table, int(context[0, -1]), width, self.never)
            tree = grow(root, lambda offer, _score: recycled_offers(self.table, offer.token, width, self.never),
                        budget, k, MIN_SCORE, self.calibration)
        return self.proposal(tree, context.device)

    def proposal(self, tree: ScoredTree, device) -> Proposal:
        """The tree cut where expected tokens per step peak, with each node's source and the round's reason."""
        n = best_size(tree.scores, self.v)
        self.last = Drawn(tuple(tree.scores), tuple(tree.sources), n, self.v(max(n, 1)))
        cut = self.proposed = tree.first(n)
        ids = torch.tensor(cut.tokens, dtype=torch.long, device=device)
        parents = cut.parents if self.tree.on and n else None
        return Proposal(ids, None, parents, reason=self.last, sources=cut.sources)

    def feedback(self, kept, hidden=None, timing=None, verified=None):
        if self.verify_cost is None and timing is not None:
            self.costs.observe_forward(timing.verified, timing.verify_seconds)
        if self.proposed is not None:
            self.calibration.judge(self.proposed, kept)
            self.proposed = None
        learn_from(self.table, verified, kept, self.table.k)
        super().feedback(kept)

    def finish(self, output_ids: list[int]) -> None:
        """What this run taught the table joins the process's table, for later runs of other prompts."""
        if self.store is not None:
            self.store.keep(self.table, key=self.key)
