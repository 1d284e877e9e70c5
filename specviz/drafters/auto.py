"""Choosing the drafter each round: the suffix drafter, a feature head or none, and how many tokens.

Speculative decoding pays when a round's expected tokens, 1 + E[accepted], beat what the round
costs in target steps: v(n) for a forward over the last token and n drafts, plus n·c for drafting
them (c = draft seconds per token / target step seconds). `AutoDrafter` keeps running estimates
of every term and each round takes the option with the most expected tokens per step:

- the head's α(i): how often its draft at position i is kept once the drafts before it were, by
  position, counted with a decay so that the estimate follows the text. It starts at 1/2 with
  little weight, so the head is tried before it is judged.
- the suffix drafter's own confidence in each drafted token (how often that continuation followed
  the same words), times a running calibration: tokens it got kept over tokens its confidence
  promised. A long match seen often and a one-token match seen once differ far more than draft
  positions do.
- c_s: the seconds per drafted token of the rounds each source drafted, as the loop timed them
  (`base.Timing`; a head round's include the suffix lookup before it, tens of microseconds).
- v(n): the seconds of verification forwards, on a line fitted through the sizes n it has seen,
  over those of a plain step (n = 0) (`costs.Costs`). The suffix drafter, handed the same times,
  fits the same line and cuts its own draft by it.

The suffix drafter proposes first (it costs microseconds and its draft ends where its confidence
does); the head is asked only when it could win. Whatever is chosen, the target verifies it with
the usual rule, so the output is the target's own: choosing among drafters changes speed only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import Drafter, Proposal, Reason
from .costs import DECAY, Costs
from .head import HeadDrafter
from .suffix import Cut, SuffixDrafter

PRIOR = 1.0  # pseudo-observations of the starting α = 1/2 at each position


@dataclass
class Acceptance:
    """α by draft position for one source: kept / tried with a decaying count, starting at 1/2."""

    kept: list[float] = field(default_factory=list)
    tried: list[float] = field(default_factory=list)

    def alpha(self, i: int) -> float:
        kept = self.kept[i] if i < len(self.kept) else 0.0
        tried = self.tried[i] if i < len(self.tried) else 0.0
        return (kept + PRIOR / 2) / (tried + PRIOR)

    def expected(self, n: int) -> float:
        """E[accepted] for a chain of n drafts: Σ_i Π_{j ≤ i} α(j)."""
        total, reach = 0.0, 1.0
        for i in range(n):
            reach *= self.alpha(i)
            total += reach
        return total

    def observe(self, depth: int, accepted: int) -> None:
        """A round that drafted `depth` positions deep and kept the first `accepted` of them."""
        while len(self.tried) < depth:
            self.kept.append(0.0)
            self.tried.append(0.0)
        for i in range(min(depth, accepted + 1)):  # positions past the first rejection were never judged
            self.tried[i] = self.tried[i] * DECAY + 1
            self.kept[i] = self.kept[i] * DECAY + (1.0 if i < accepted else 0.0)


@dataclass(frozen=True)
class Choice:
    source: str  # "suffix", the head's name, or "none"
    n: int  # drafts asked for
    gain: float  # expected tokens per target step
    cut: Cut | None = None  # the suffix drafter's reason for its draft (suffix options)


@dataclass(frozen=True)
class Weighed(Reason):
    """A round's choice and the options it was weighed against, in numbers (`text` words them after the loop)."""

    best: Choice
    options: tuple[Choice, ...]

    def text(self) -> str:
        """What was chosen, its expected tokens per step, and the best option of every other source."""
        best, others = self.best, {}
        for o in self.options:
            if o.source != best.source and (o.source not in others or o.gain > others[o.source].gain):
                others[o.source] = o
        rivals = ", ".join(f"{o.source}{f' ×{o.n}' if o.n else ''} {o.gain:.2f}" for o in others.values())
        chosen = f"{best.source}{f' ×{best.n}' if best.n else ''}: {best.gain:.2f} tokens per step"
        match = f" ({best.cut.text()})" if best.cut else ""
        return f"{chosen}{match}" + (f"; against {rivals}" if rivals else "")


class AutoDrafter(Drafter):
    """Each round, suffix drafting, a feature head or the target alone, whichever promises the most tokens per step."""

    kind = "auto"

    def __init__(self, name: str, suffix: SuffixDrafter, head: HeadDrafter | None = None):
        super().__init__(name)
        self.suffix, self.head = suffix, head
        self.reads_layers = head.reads_layers if head is not None else ()
        self.acceptance: dict[str, Acceptance] = {}
        self.costs = Costs()
        self.choice: Choice | None = None
        # Tokens the suffix drafter got kept, and those its confidence promised (decaying sums).
        self.copied = [PRIOR, PRIOR]
        self.depth = 0  # how deep this round's proposal reaches
        self.drafting = ("suffix", 0)  # this round's drafting: the source charged for its seconds, and its tokens

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.suffix.start(prompt_ids, settings)
        if self.head is not None:
            self.head.start(prompt_ids, settings, hidden)
        self.acceptance = {self.head.name: Acceptance()} if self.head else {}
        self.costs, self.choice, self.copied = Costs(prior_slope=self.suffix.prior_slope), None, [PRIOR, PRIOR]

    def draft(self, context, k, sampling, generator) -> Proposal:
        copied = self.suffix.propose(context, k, sampling, generator)
        self.drafting = ("suffix", copied.ids.shape[0])
        tree = self.tree.budget if self.tree.on else 0  # a tree's forward reads its nodes, not its depth
        options, size = [self._option("none", 0, 0)], copied.ids.shape[0]
        if copied.parents is not None and size:  # a suffix tree: all of it, its nodes' confidence summed
            options.append(self._copy_option(size, size, copied.reason))
        elif copied.parents is None:  # a chain: any prefix of it
            options += [self._copy_option(n, n, copied.reason) for n in range(1, size + 1)]
        if self.head is not None and k:
            options += [self._option(self.head.name, n, tree or n) for n in range(1, k + 1)]
        best = max(options, key=lambda o: o.gain)
        if best.source == "suffix":
            proposal = copied if copied.parents is not None else Proposal(copied.ids[: best.n], None)
        elif best.source == "none":
            proposal = Proposal(context.new_empty(0), None)
        else:
            proposal = self.head.propose(context, best.n, sampling, generator)
            self.drafting = (best.source, _depth(proposal))
        self.choice, self.depth = best, _depth(proposal)
        proposal.source, proposal.reason = best.source, Weighed(best, tuple(options))
        return proposal

    def feedback(self, kept, hidden=None, timing=None, verified=None):
        super().feedback(kept)
        if timing is not None:  # the loop's times: this round's drafting, charged to its source, and its forward
            source, tokens = self.drafting
            self.costs.observe_draft(source, timing.draft_seconds, tokens)
            self.costs.observe_forward(timing.verified, timing.verify_seconds)
        if self.choice and self.choice.source == "suffix":
            promised = sum(self.choice.cut.confidence[: self.choice.n])
            self.copied = [DECAY * self.copied[0] + len(kept), DECAY * self.copied[1] + promised]
        elif self.choice and self.choice.source != "none":
            self.acceptance[self.choice.source].observe(self.depth, len(kept))
        self.suffix.feedback(kept, None, timing)  # the suffix drafter fits its v(n) to the same forwards
        if self.head is not None:
            self.head.feedback(kept, hidden, timing)  # the head keeps reading the target's true features every round

    def finish(self, output_ids):
        self.suffix.finish(output_ids)

    # --- the choice ------------------------------------------------------------------------
    def _copy_option(self, n: int, nodes: int, cut: Cut) -> Choice:
        """The suffix drafter's first n tokens: its confidence in them, calibrated by what it got kept so far."""
        expected = self.copied[0] / self.copied[1] * sum(cut.confidence[:n])
        cost = self.costs.v(nodes) + nodes * self.costs.c("suffix")
        return Choice("suffix", n, (1 + expected) / cost, cut)

    def _option(self, source: str, n: int, nodes: int) -> Choice:
        """Drafting n positions deep (`nodes` tokens in all) from `source`: expected tokens per target step."""
        if source == "none":
            return Choice("none", 0, 1.0 / self.costs.v(0))
        expected = self.acceptance[source].expected(n)
        cost = self.costs.v(nodes) + nodes * self.costs.c(source)
        return Choice(source, n, (1 + expected) / cost)


def _depth(proposal: Proposal) -> int:
    """How many positions deep a proposal reaches (a chain's length, a tree's deepest node)."""
    if proposal.parents is None:
        return int(proposal.ids.shape[0])
    depths: list[int] = []
    for parent in proposal.parents:
        depths.append(1 if parent < 0 else depths[parent] + 1)
    return max(depths, default=0)
