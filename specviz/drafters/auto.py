"""Choosing the drafter each round: the suffix drafter, a feature head or none, and how many tokens.

Speculative decoding pays when a round's expected tokens, 1 + E[accepted], beat what the round
costs in target steps: v(n) for a forward over the last token and n drafts, plus n·c for drafting
them (c = draft seconds per token / target step seconds). `AutoDrafter` keeps running estimates
of every term and each round takes the option with the most expected tokens per step:

- α_s(i): how often source s's draft at position i is kept once the drafts before it were, by
  position, counted with a decay so that the estimate follows the text (copying pays in a passage
  being quoted, guessing in free prose). Every source starts at 1/2 with little weight, so each one
  is tried before it is judged.
- c_s: the seconds each source took per drafted token, measured here around its own `propose`.
- v(n): the seconds of the verification forwards it has seen, by n, over those of plain steps
  (n = 0); until a size has been seen, a line through the ones that have.

The suffix drafter proposes first (it costs microseconds and its draft ends where its confidence
does); the head is asked only when it could win. Whatever is chosen, the target verifies it with
the usual rule, so the output is the target's own: choosing among drafters changes speed only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .base import Drafter, Proposal
from .head import HeadDrafter
from .suffix import SuffixDrafter

DECAY = 0.95  # weight left on an old observation after each new one (about the last 20 rounds count)
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


@dataclass
class Costs:
    """Running seconds: each source's drafting per token, and verification forwards by drafts verified."""

    draft: dict[str, float] = field(default_factory=dict)  # source -> seconds per drafted token
    forward: dict[int, float] = field(default_factory=dict)  # n drafts -> seconds of the forward over 1 + n tokens

    def observe_draft(self, source: str, seconds: float, tokens: int) -> None:
        if tokens:
            self.draft[source] = _mix(self.draft.get(source), seconds / tokens)

    def observe_forward(self, n: int, seconds: float) -> None:
        self.forward[n] = _mix(self.forward.get(n), seconds)

    def step(self) -> float | None:
        """Seconds of one target step (a forward over one token), measured or read off the line."""
        if 0 in self.forward:
            return self.forward[0]
        line = self._line()
        return line[0] if line else None

    def v(self, n: int) -> float:
        """v(n): a verification forward over 1 + n tokens in target steps (1 until anything is measured)."""
        step = self.step()
        if not step:
            return 1.0
        seconds = self.forward.get(n)
        if seconds is None:
            a, b = self._line()
            seconds = a + b * n
        return max(seconds / step, 1.0)

    def c(self, source: str) -> float:
        step = self.step()
        return self.draft.get(source, 0.0) / step if step else 0.0

    def _line(self) -> tuple[float, float] | None:
        """seconds ≈ a + b·n by least squares over the sizes seen (flat through one size)."""
        if not self.forward:
            return None
        ns = list(self.forward)
        mean_n = sum(ns) / len(ns)
        mean_s = sum(self.forward.values()) / len(ns)
        spread = sum((n - mean_n) ** 2 for n in ns)
        b = max(sum((n - mean_n) * (self.forward[n] - mean_s) for n in ns) / spread, 0.0) if spread else 0.0
        return mean_s - b * mean_n, b


def _mix(old: float | None, new: float) -> float:
    return new if old is None else DECAY * old + (1 - DECAY) * new


@dataclass(frozen=True)
class Choice:
    source: str  # "suffix", the head's name, or "none"
    n: int  # drafts asked for
    gain: float  # expected tokens per target step
    why: str


class AutoDrafter(Drafter):
    """Each round, suffix drafting, a feature head or the target alone, whichever promises the most tokens per step."""

    kind = "auto"

    def __init__(self, name: str, suffix: SuffixDrafter, head: HeadDrafter | None = None):
        super().__init__(name)
        self.suffix, self.head = suffix, head
        self.acceptance: dict[str, Acceptance] = {}
        self.costs = Costs()
        self.choice: Choice | None = None
        self.depth = 0  # how deep this round's proposal reaches
        self.verify_started = 0.0
        self.sync = None

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.suffix.start(prompt_ids, settings)
        if self.head is not None:
            self.head.start(prompt_ids, settings, hidden)
        self.acceptance = {"suffix": Acceptance(), **({self.head.name: Acceptance()} if self.head else {})}
        self.costs, self.choice = Costs(), None
        self.sync = torch.cuda.synchronize if prompt_ids.device.type == "cuda" else None

    def draft(self, context, k, sampling, generator) -> Proposal:
        copied, seconds = self._timed(self.suffix, context, k, sampling, generator)
        depth = _depth(copied)
        self.costs.observe_draft("suffix", seconds, depth)
        tree = self.tree.budget if self.tree.on else 0  # a tree's forward reads its nodes, not its depth
        options = [self._option("none", 0, 0, "")]
        if depth:
            options.append(self._option("suffix", depth, copied.ids.shape[0], self.suffix.why))
        if self.head is not None and k:
            options += [self._option(self.head.name, n, tree or n, "") for n in range(1, k + 1)]
        best = max(options, key=lambda o: o.gain)
        if best.source == "suffix":
            proposal = copied
        elif best.source == "none":
            proposal = Proposal(context.new_empty(0), None)
        else:
            proposal, seconds = self._timed(self.head, context, best.n, sampling, generator)
            self.costs.observe_draft(best.source, seconds, _depth(proposal))
        self.choice, self.depth = best, _depth(proposal)
        proposal.source, proposal.why = best.source, self._explain(best, options)
        self.verify_started = self._now()
        return proposal

    def feedback(self, kept, hidden=None):
        seconds = self._now() - self.verify_started
        super().feedback(kept)
        self.costs.observe_forward(self.drafted, seconds)
        if self.choice and self.choice.source != "none":
            self.acceptance[self.choice.source].observe(self.depth, len(kept))
        self.suffix.feedback(kept)
        if self.head is not None:
            self.head.feedback(kept, hidden)  # the head keeps reading the target's true features every round

    def finish(self, output_ids):
        self.suffix.finish(output_ids)

    # --- the choice ------------------------------------------------------------------------
    def _option(self, source: str, n: int, nodes: int, why: str) -> Choice:
        """Drafting n positions deep (`nodes` tokens in all) from `source`: expected tokens per target step."""
        if source == "none":
            return Choice("none", 0, 1.0 / self.costs.v(0), why)
        expected = self.acceptance[source].expected(n)
        cost = self.costs.v(nodes) + nodes * self.costs.c(source)
        return Choice(source, n, (1 + expected) / cost, why)

    def _explain(self, best: Choice, options: list[Choice]) -> str:
        """One line for the Rounds timeline: what was chosen, its expected tokens per step, and the runner-up."""
        others = {}
        for o in options:
            if o.source != best.source and (o.source not in others or o.gain > others[o.source].gain):
                others[o.source] = o
        rivals = ", ".join(f"{o.source}{f' ×{o.n}' if o.n else ''} {o.gain:.2f}" for o in others.values())
        chosen = f"{best.source}{f' ×{best.n}' if best.n else ''}: {best.gain:.2f} tokens per step"
        match = f" ({best.why})" if best.why else ""
        return f"{chosen}{match}" + (f"; against {rivals}" if rivals else "")

    def _timed(self, drafter: Drafter, context, k, sampling, generator) -> tuple[Proposal, float]:
        t0 = self._now()
        proposal = drafter.propose(context, k, sampling, generator)
        return proposal, self._now() - t0

    def _now(self) -> float:
        if self.sync:
            self.sync()
        return time.perf_counter()


def _depth(proposal: Proposal) -> int:
    """How many positions deep a proposal reaches (a chain's length, a tree's deepest node)."""
    if proposal.parents is None:
        return int(proposal.ids.shape[0])
    depths: list[int] = []
    for parent in proposal.parents:
        depths.append(1 if parent < 0 else depths[parent] + 1)
    return max(depths, default=0)
