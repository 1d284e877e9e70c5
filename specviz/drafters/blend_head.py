"""The blended tree with a feature head as a third source, where it pays (`blend:HEAD`).

Copying and recycling offer candidates for microseconds a node; both are silent where the text is new and the
target's earlier guesses after the last token were wrong. A draft head (`head`) guesses from the target's own
hidden states, so it has something to say at every node, but each node it continues from costs a forward of its
own: c, a few hundredths of a target step (`Costs.c`, measured during the run).

So the head joins the scored tree (`blend`) as one more source, and reads only where that can pay. A read is worth
what it adds beside the other sources: where copying or recycling already offers likely tokens, the head's guess is
mostly one of them. So at a node (the root included) the other sources offer first, and the head reads the node only
if

    score · t · (1 − Σ other chances)  >  c · r

where score is the node's chance of being reached and kept (1 at the root), t the calibrated chance of the head's
best guess after a node it reads (a running average), 1 − Σ other chances the chance that every other offer there
is wrong (offers of different tokens are exclusive), c a read's measured cost in target steps and r the tokens per
target step the run makes so far (a read adds its expected tokens and its cost to a round; it pays only if they come
at a better rate than the round's). A round that skips the root leaves the head's reading of the kept tokens for a
later round, which reads them all in one forward. Reads are also capped per round.

- The root: when read, the head reads the pairs the last rounds kept (as it does alone) and offers its likeliest
  next tokens.
- A head offer's chance is the head's probability for the token, scaled like every source's by a running
  calibration (`scored.Calibration`: the head's tokens that were kept over the probability it gave them, among its
  nodes the target judged). Where copying or recycling offers the same token, the surer offer counts
  (`scored.merge`).

Candidates are fixed before verification and q is one-hot, so the usual rule keeps the output exact. Each node
carries its source, so Rounds marks the head's guesses beside the copied and recycled ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..trees import TreeFeed
from .blend import BlendDrafter, Matches, follow
from .costs import DECAY
from .head import HeadDrafter
from .recycle import MIN_SCORE
from .scored import MAX_CHANCE, Offer, merge

HEAD = "head"  # the source of a node the draft head guessed
TREE = "tree"  # (in `costs`) a round's drafting without the head: the copied and recycled offers
MAX_READS = 8  # head forwards per round beyond the root's, at most
PRIOR = 1.0  # pseudo-observations behind the starting rate (1 token a step) and best-guess chance (1/2)
PRIOR_C = 0.05  # a head read's cost in target steps until one is timed


@dataclass
class HeadNode:
    """Where the head stands after a node: the feature it predicted there (None: not read), and the node's number
    among the nodes it read this round (-1: the root, whose feature came from the target's true pairs)."""

    feature: torch.Tensor | None
    read: int = -1


class HeadBlendDrafter(BlendDrafter):
    kind = "blend"

    def __init__(self, name: str, head: HeadDrafter, **blend):
        super().__init__(name, **blend)
        self.head = head
        self.reads_layers = head.reads_layers
        self._reset()

    def _reset(self) -> None:
        self.made = [PRIOR, PRIOR]  # decaying sums: tokens a round made, and the target steps it cost
        self.tops = [PRIOR / 2, PRIOR]  # decaying sums: the calibrated chance of the head's best guess at a read, reads
        self.root = HeadNode(None)
        self.feed: TreeFeed | None = None
        self.read_parents: list[int] = []  # the parent (in read numbering) of each node the head read this round
        self.reads = 0

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.head.start(prompt_ids, settings, hidden)
        self._reset()

    # --- drafting ----------------------------------------------------------------------------
    def draft(self, context, k, sampling, generator):
        self.root, self.feed, self.read_parents, self.reads = HeadNode(None), None, [], 0
        return super().draft(context, k, sampling, generator)

    def root_offers(self, matches: Matches, token: int, width: int, context) -> list[Offer]:
        """Copied and recycled offers after the last committed token, and the head's if reading the root pays: it
        then reads the pairs kept since it last read (`HeadDrafter.catch_up`)."""
        others = self.offers(matches, token, width)
        if self.pays(1.0, others) and self.head.catch_up(context):
            self.root, self.feed = HeadNode(self.head.feature), TreeFeed(self.head.true_length)
        return self.joined(matches, others, self.root, width)

    def expand(self, offer: Offer, width: int, score: float = 1.0) -> list[Offer]:
        matches, parent = offer.state
        matches = follow(matches, offer.token)
        others = self.offers(matches, offer.token, width)
        return self.joined(matches, others, self.read(offer.token, parent, score, others), width)

    def joined(self, matches: Matches, others: list[Offer], node: HeadNode, width: int) -> list[Offer]:
        """The other sources' offers after a node and the head's where it read the node, one per token, the best
        `width`; each carries the node's matches and where the head stands (what its children are looked up from)."""
        blended = [Offer(o.token, o.chance, o.source, (matches, node)) for o in others]
        return merge(blended + self.guesses(matches, node, width), width)

    def guesses(self, matches: Matches, node: HeadNode, width: int) -> list[Offer]:
        """The head's likeliest next tokens after `node`, each offered with the head's probability for it (which `grow`
        calibrates)."""
        if node.feature is None:
            return []
        probs = torch.softmax(self.head.rows(node.feature.view(1, -1))[0].float(), dim=-1)
        values, index = probs.topk(min(width + len(self.never), probs.shape[0]))
        ratio = self.calibration.factor(HEAD)  # what the head's probabilities were worth so far
        best = min(float(values[0]) * ratio, MAX_CHANCE)
        self.tops = [DECAY * self.tops[0] + best, DECAY * self.tops[1] + 1]
        offers = []
        for p, token in zip(values.tolist(), self.head.vocab_ids[index].tolist()):
            if token not in self.never and p * ratio >= MIN_SCORE:
                offers.append(Offer(token, min(p, MAX_CHANCE), HEAD, (matches, node)))  # `grow` calibrates it
        return offers[:width]

    def read(self, token: int, parent: HeadNode, score: float, others: list[Offer]) -> HeadNode:
        """The head's feature after `token` below `parent`, if reading it pays beside `others` (else an unread
        node)."""
        if parent.feature is None or self.reads >= MAX_READS or not self.pays(score, others):
            return HeadNode(None)
        number = len(self.read_parents)
        self.read_parents.append(parent.read)
        device = parent.feature.device
        allowed, positions = self.feed.read([number], self.read_parents, device)
        out = self.head.step(torch.tensor([token], device=device), parent.feature.view(1, -1), positions, allowed)
        self.reads += 1
        return HeadNode(out[0], number)

    def pays(self, score: float, others: list[Offer]) -> bool:
        """Whether a head read at a node with this score adds more tokens than its cost buys at the run's rate:
        score · (the head's best guess's chance) · P(every other offer there is wrong) > c · tokens per step."""
        unsure = max(0.0, 1.0 - sum(self.calibration.chances(others)))
        return score * self.top() * unsure > self.c() * self.rate()

    def top(self) -> float:
        """What a read is expected to add: the calibrated chance of the head's best guess after it (a decaying
        average over its reads, from 1/2)."""
        return self.tops[0] / self.tops[1]

    def c(self) -> float:
        """A head read's cost in target steps, as measured (the prior until a read is timed)."""
        measured = self.costs.c(HEAD)
        return measured if measured else PRIOR_C

    def rate(self) -> float:
        """Tokens per target step the run has made so far, rounds drafting and verification included (decaying,
        from 1)."""
        return self.made[0] / self.made[1]

    # --- after verification ------------------------------------------------------------------
    def feedback(self, kept, hidden=None, timing=None, verified=None):
        step = self.costs.step()
        if timing is not None:  # a round's drafting: the tree's own (rounds the head sat out), then the head's reads
            if self.root.feature is None:
                self.costs.observe_draft(TREE, timing.draft_seconds, 1)
            else:
                seconds = max(timing.draft_seconds - self.costs.draft.get(TREE, 0.0), 0.0)
                if HEAD not in self.costs.draft and step:  # a first read (which may pay a first call's costs)
                    seconds = min(seconds, 2 * PRIOR_C * step * (self.reads + 1))  # counts twice the prior at most
                self.costs.observe_draft(HEAD, seconds, self.reads + 1)
            if step:
                steps = (timing.draft_seconds + timing.verify_seconds) / step
                self.made = [DECAY * self.made[0] + len(kept) + 1, DECAY * self.made[1] + steps]
        super().feedback(kept, None, timing, verified)
        self.head.feedback(kept, hidden, timing)  # the head keeps the target's true features (read when it drafts)
