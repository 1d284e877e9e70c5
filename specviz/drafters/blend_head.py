"""The blended tree with a feature head as a third source, where it pays (`blend:HEAD`).

Copying and recycling offer candidates for microseconds a node; both are silent where the text is new and the
target's earlier guesses after the last token were wrong. A draft head (`head`) guesses from the target's own
hidden states, so it has something to say at every node, but each node it continues from costs a forward of its
own: c, a few hundredths of a target step (`Costs.c`, measured during the run).

So the head joins the scored tree (`blend`) as one more source, and reads a node only where that can pay:

- The root: the head reads the pairs the last round kept (as it does alone) and offers its likeliest next tokens.
- A node taken into the tree with score s (its chance of being reached and kept) is read by the head, giving its
  children's guesses, only if s times the head's running acceptance beats c: a head guess below a node that is
  rarely reached cannot repay the forward that made it. Reads are also capped per round.
- A head offer's chance is the head's probability for the token, times a running calibration (tokens of the
  head's that were kept over the probability it gave them, among its nodes the target judged). Where copying or
  recycling offers the same token, the surer offer counts (`scored.merge`).

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
from .scored import Offer, merge

HEAD = "head"  # the source of a node the draft head guessed
MAX_READS = 8  # head forwards per round beyond the root's, at most
PRIOR = 1.0  # pseudo-observations behind the starting calibration (1) and acceptance (1/2)


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
        self.kept_of_promised = [PRIOR, PRIOR]  # decaying sums: head tokens kept, and the probability it gave them
        self.kept_of_judged = [PRIOR / 2, PRIOR]  # decaying sums: head nodes kept, and head nodes judged
        self.ratio = 1.0  # this round's calibration (kept over promised)
        self.root: HeadNode | None = None
        self.feed: TreeFeed | None = None
        self.read_parents: list[int] = []  # the parent (in read numbering) of each node the head read this round
        self.reads = 0
        self.drafted_parents: list[int] = []  # the last proposal's parents (a chain's too: each node's predecessor)

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.head.start(prompt_ids, settings, hidden)
        self._reset()

    # --- drafting ----------------------------------------------------------------------------
    def draft(self, context, k, sampling, generator):
        self.ratio = self.kept_of_promised[0] / self.kept_of_promised[1]
        self.root = HeadNode(self.head.feature if self.head._read(context) and k > 0 else None)
        self.feed, self.read_parents, self.reads = TreeFeed(self.head.true_length), [], 0
        return super().draft(context, k, sampling, generator)

    def offers(self, matches: Matches, token: int, width: int, node: HeadNode | None = None) -> list[Offer]:
        """Copied and recycled offers after `token`, and the head's where it has read the node."""
        node = node if node is not None else self.root
        blended = [Offer(o.token, o.chance, o.source, (matches, node)) for o in super().offers(matches, token, width)]
        return merge(blended + self.guesses(matches, node, width), width)

    def expand(self, offer: Offer, width: int, score: float = 1.0) -> list[Offer]:
        matches, parent = offer.state
        node = self.read(offer.token, parent, score)
        return self.offers(follow(matches, offer.token), offer.token, width, node)

    def guesses(self, matches: Matches, node: HeadNode, width: int) -> list[Offer]:
        """The head's likeliest next tokens after `node`, each with its calibrated chance of being kept."""
        if node.feature is None:
            return []
        probs = torch.softmax(self.head.rows(node.feature.view(1, -1))[0].float(), dim=-1)
        values, index = probs.topk(min(width + len(self.never), probs.shape[0]))
        offers = []
        for p, token in zip(values.tolist(), self.head.vocab_ids[index].tolist()):
            if token not in self.never and p * self.ratio >= MIN_SCORE:
                offers.append(Offer(token, min(p * self.ratio, 0.99), HEAD, (matches, node)))
        return offers[:width]

    def read(self, token: int, parent: HeadNode, score: float) -> HeadNode:
        """The head's feature after `token` below `parent`, if reading it can pay (else an unread node)."""
        if parent.feature is None or self.reads >= MAX_READS or score * self.alpha() <= self.c():
            return HeadNode(None)
        number = len(self.read_parents)
        self.read_parents.append(parent.read)
        device = parent.feature.device
        allowed, positions = self.feed.read([number], self.read_parents, device)
        embedded = self.head._embed(torch.tensor([token], device=device))
        out = self.head.head.step(embedded, parent.feature.view(1, -1), self.head.cache, positions, allowed)
        self.reads += 1
        return HeadNode(out[0], number)

    def alpha(self) -> float:
        """How often a head guess the target judged was kept (decaying, from 1/2)."""
        return self.kept_of_judged[0] / self.kept_of_judged[1]

    def c(self) -> float:
        """A head forward's cost in target steps, as measured (a prior of 0.05 until a step is timed)."""
        measured = self.costs.c(HEAD)
        return measured if measured else 0.05

    def proposal(self, tree, device):
        self.drafted_parents = list(tree.parents)
        return super().proposal(tree, device)

    # --- after verification ------------------------------------------------------------------
    def feedback(self, kept, hidden=None, timing=None, verified=None):
        if timing is not None:  # this round's drafting seconds, charged to the head's forwards (the rest is µs)
            self.costs.observe_draft(HEAD, timing.draft_seconds, self.reads + 1)
        self._judge(kept)
        super().feedback(kept, None, timing, verified)
        self.head.feedback(kept, hidden, timing)  # the head reads the target's true features every round

    def _judge(self, kept: list[int]) -> None:
        """Update the calibration from the head's nodes the target judged (their parent was kept, or the root)."""
        drawn = self.last
        if drawn is None or not drawn.n:
            return
        chosen, scores, sources = set(kept), drawn.scores[: drawn.n], drawn.sources[: drawn.n]
        parents = self.drafted_parents
        promised = judged = hits = 0.0
        for i, (score, source) in enumerate(zip(scores, sources)):
            parent = parents[i]
            if source != HEAD or not (parent < 0 or parent in chosen):
                continue
            chance = score / (scores[parent] if parent >= 0 else 1.0)
            promised += chance / self.ratio  # the head's own probability for the token
            judged += 1
            hits += i in chosen
        if judged:
            self.kept_of_promised = [DECAY * self.kept_of_promised[0] + hits,
                                     DECAY * self.kept_of_promised[1] + promised]
            self.kept_of_judged = [DECAY * self.kept_of_judged[0] + hits, DECAY * self.kept_of_judged[1] + judged]
