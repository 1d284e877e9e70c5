"""The drafter interface: a proposal, and the base class that holds γ and its schedule."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ..attention import top_rows
from ..config import MAX_GAMMA, Decoding, Sampling, TreeShape
from ..verify import LazyLogits, top_k


class Reason:
    """The facts behind a drafter's choice (numbers), which `text` puts into a line for the Rounds timeline.

    A drafter records them while the loop's clock runs; the loop has them written out after it stops.
    """

    def text(self) -> str:
        raise NotImplementedError


@dataclass
class Proposal:
    ids: torch.Tensor  # [k] drafted token ids (k may be 0); a tree's nodes, parents first
    probs: torch.Tensor | None  # [k, V] the q each token was drawn from; None when certain (one-hot q)
    parents: list[int] | None = None  # a tree: node i follows node parents[i] (-1 = the last committed token)
    source: str = ""  # which drafter made it, where one drafter chooses among several (auto)
    reason: Reason | None = None  # ... and why (suffix, auto), in facts put into words after the timed loop
    sources: list[str] | None = None  # each node's source, where one tree mixes several (recycle, blend)


@dataclass(frozen=True)
class Timing:
    """What the loop measured in one round, handed to the drafter in `feedback` (drafters keep no clock)."""

    draft_seconds: float  # the drafter's `propose`
    verify_seconds: float  # the target's forward over the last committed token and the drafts, the check, the rollback
    verified: int  # drafts (a tree's nodes) that forward read after the last committed token


@dataclass
class Verified:
    """What the round's verification forward read and computed, handed to the drafter in `feedback`.

    tokens: what the target read, [1 + N]: the last committed token (the root), then every drafted node, kept or
    refused; parents: a tree's (None for a chain, each token then follows the one before). `top` gives the
    target's top-k at the rows its head has computed already (every row of a small forward,
    `decode.HEAD_ROWS_AT_ONCE`): reading them never makes the head run over another row. A replay, which has no
    target, gives the rows it knows in `known` instead.
    """

    tokens: torch.Tensor
    parents: list[int] | None = None
    logits: LazyLogits | None = None
    known: tuple[list[int], torch.Tensor, torch.Tensor] | None = None  # rows, top ids [m, k], probabilities [m, k]

    def top(self, k: int) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """(rows, ids [m, k], p [m, k]): the k likeliest next tokens at each computed row and their probabilities
        (temperature 1), rows counted from the root (0)."""
        if self.known is not None:
            rows, ids, probs = self.known
            return rows, ids[:, :k], probs[:, :k]
        rows, logits = self.logits.known() if self.logits is not None else ([], None)
        if logits is None:
            return [], torch.empty(0, k, dtype=torch.long), torch.empty(0, k)
        fast = top_rows(logits, k)  # the kernel's pass over each row (specviz.attention), where it is built
        if fast is not None:
            return rows, *fast
        logits = logits.float()
        values, ids = top_k(logits, k)
        return rows, ids, logits.softmax(-1).gather(1, ids)  # softmax: one pass, where logsumexp takes several

    def previous(self, row: int, before_root: int = -1) -> int:
        """The token before `row` in the text it extends: its parent's (for the root, `before_root`)."""
        if row == 0:
            return before_root
        parent = row - 2 if self.parents is None else self.parents[row - 1]
        return int(self.tokens[parent + 1])


def drop_last(cache: DynamicCache, count: int) -> None:
    """Remove the newest `count` positions from a KV cache (transformers' crop takes a negative count)."""
    if count > 0:
        cache.crop(-count)


class Drafter:
    """Base class: holds γ and its schedule. Subclasses implement `draft`; the loop calls `propose`."""

    kind = "base"
    # The target's hidden states this drafter reads in `start` and `feedback`, as indices into the target's
    # hidden-state list (a head's `HeadShape.layers`); empty: its final hidden state.
    reads_layers: tuple[int, ...] = ()

    def __init__(self, name: str):
        self.name = name
        self.gamma = 1
        self.adaptive = False
        self.tree = TreeShape()  # budget 0: chains
        self.drafted = 0  # tokens (or tree nodes) in the last proposal

    def start(self, prompt_ids: torch.Tensor, settings: Decoding, hidden: torch.Tensor | None = None) -> None:
        self.gamma = settings.gamma
        self.adaptive = settings.adaptive
        self.tree = settings.tree

    def propose(self, context: torch.Tensor, k: int, sampling: Sampling, generator) -> Proposal:
        """Up to k drafts after the committed `context` [1, L] (a tree when the settings give one a budget)."""
        proposal = self.draft(context, k, sampling, generator)
        self.drafted = proposal.ids.shape[0]
        return proposal

    def draft(self, context: torch.Tensor, k: int, sampling: Sampling, generator) -> Proposal:
        raise NotImplementedError

    def feedback(self, kept: list[int], hidden: torch.Tensor | None = None, timing: Timing | None = None,
                 verified: Verified | None = None) -> None:
        """After verification: the kept drafts (by index), the target's hidden states at the last committed
        token and each of them, the round's times (None where nothing was timed: a replay), and what the
        verification forward read and computed (`Verified`: the target's logits at every node, refused ones too).
        Adaptive γ, the well-known schedule: +2 after a fully kept round, -1 otherwise."""
        if self.adaptive and self.drafted:
            if len(kept) == self.drafted:
                self.gamma = min(MAX_GAMMA, self.gamma + 2)
            else:
                self.gamma = max(1, self.gamma - 1)

    def finish(self, output_ids: list[int]) -> None:
        """After the run: its new tokens. Drafters that learn across runs keep them; the rest ignore them."""


class NoDrafter(Drafter):
    """Proposes nothing: every round is one plain target step. This is the baseline."""

    kind = "none"

    def draft(self, context, k, sampling, generator) -> Proposal:
        return Proposal(context.new_empty(0), None)
