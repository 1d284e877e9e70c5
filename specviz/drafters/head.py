"""Drafting from the target's own hidden states: a feature-level head, and the n-gram + head hybrid."""

from __future__ import annotations

from dataclasses import replace

import torch

from ..config import TreeShape
from ..fast_path import activations, product
from ..panels import Int8Rows
from ..trees import TreeFeed, grow, merge_trees
from ..verify import choose, distribution
from .base import Drafter, Proposal
from .head_net import KVCache
from .ngram import NgramDrafter


class HeadDrafter(Drafter):
    """A feature-level draft head (specviz.drafters.head_net) over the target's own hidden states.

    The head reads pairs (f_j, e(x_{j+1})): the target's feature at position j and the token after
    it. Before a round it reads every pair it has not read yet, all with the target's true features
    (the prompt's from the prefill, then those of each round's kept tokens from verification); its
    last output predicts f at the last committed position, whose output head gives q for d_1. Each
    further draft reads (its own predicted feature, the token it drafted).
    """

    kind = "head"

    def __init__(self, name: str, head, vocab_ids: torch.Tensor, embedding: torch.Tensor, output: torch.Tensor,
                 vocab_size: int):
        super().__init__(name)
        self.head = head
        self.reads_layers = head.shape.layers  # several layers (EAGLE-3): the loop hands them over concatenated
        self.vocab_ids = vocab_ids  # [N] target ids of the draft vocabulary
        self.embedding = embedding  # the target's input embedding, shared and read-only
        # The head's weights' dtype (bf16 beside an fp32 target where that is faster: fast_path.draft_dtype), and its
        # activations' (fp32 where its bf16 products are all on the panels: fast_path.activations). What it reads is
        # cast to the latter, and q is always computed in fp32 from its logits.
        weights = next(head.parameters()).dtype
        # x ↦ x @ [N, H].T: the target's output head on the draft vocabulary (int8 beside a head on the bf16 panels)
        rows = output.index_select(0, vocab_ids)
        self.rows = product(rows.to(weights))
        self.dtype = activations(head) if activations(self.rows) == torch.float32 else weights
        if self.dtype == torch.float32 and weights == torch.bfloat16:
            self.rows = Int8Rows(rows, self.rows.panels)
        self.vocab_size = vocab_size
        self.cache = None
        self.read = 0  # pairs read with the target's true features
        self.true_length = 0  # the head's cache length after reading them
        self.pending = embedding.new_empty(0, head.input_width)  # true features of pairs not read yet

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.cache, self.read, self.true_length, self.feature = KVCache(), 0, 0, None
        self.pending = hidden if hidden is not None else self.pending[:0]
        if self.pending.shape[0]:  # the prompt's pairs, read beside the target's prefill (one forward, as long as the
            self.catch_up(prompt_ids)  # prompt): the rounds then read only what each kept, and time only that

    def draft(self, context, k, sampling, generator) -> Proposal:
        if not self.catch_up(context) or k == 0:
            return Proposal(context.new_empty(0), None)
        if self.tree.on:
            return self._propose_tree(context, k, sampling, generator, self.tree)
        ids, probs = [], []
        feature = self.feature
        for i in range(k):
            q = distribution(self.rows(feature).float(), sampling)  # q over the draft vocabulary
            choice = choose(q, sampling, generator)
            token = self.vocab_ids[choice]
            ids.append(token)
            probs.append(q)
            if i < k - 1:  # the next draft reads (predicted feature, drafted token)
                feature = self.step(token.view(1), feature.view(1, -1))[0]
        full = torch.zeros(k, self.vocab_size, dtype=probs[0].dtype, device=context.device)
        full[:, self.vocab_ids] = torch.stack(probs)  # q is 0 outside the draft vocabulary
        return Proposal(torch.stack(ids), full)

    def guesses(self, context, depth: int, sampling, generator, budget: int) -> Proposal:
        """A tree of at most `budget` nodes to set beside another drafter's branches (the hybrid's)."""
        if not self.catch_up(context) or depth == 0:
            return Proposal(context.new_empty(0), None)
        return self._propose_tree(context, depth, sampling, generator, replace(self.tree, budget=budget))

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The target's input embeddings of `tokens` [n], in the head's dtype."""
        return self.embedding[tokens].to(self.dtype)

    def step(self, tokens: torch.Tensor, features: torch.Tensor, positions: torch.Tensor | None = None,
             allowed: torch.Tensor | None = None) -> torch.Tensor:
        """Read the pairs (features [n, H], tokens [n]) after the cached ones (a tree's at `positions`, seeing what
        `allowed` lets each see: head_net.DraftHead.step); the predicted next features [n, H]."""
        return self.head.step(self.embed(tokens), features, self.cache, positions, allowed)

    def catch_up(self, context) -> bool:
        """Before drafting after the committed `context`: read the pairs (f_j, e(x_{j+1})) for j = read .. L-2 in one
        forward; whether there is a feature to draft from (a one-token prompt has none yet)."""
        new_tokens = context[0, self.read + 1 :]
        if new_tokens.shape[0] != self.pending.shape[0]:
            raise RuntimeError(f"head drafter out of step: {new_tokens.shape[0]} tokens, "
                               f"{self.pending.shape[0]} features")
        if new_tokens.shape[0]:
            true = self.head.lift(self.pending.to(self.dtype))  # the target's features, as the head reads them
            self.feature = self.step(new_tokens, true)[-1]
            self.read, self.pending = context.shape[1] - 1, self.pending[:0]
        self.true_length = self.cache.length
        return self.cache.length > 0

    def _propose_tree(self, context, depth, sampling, generator, shape: TreeShape) -> Proposal:
        """Grow a tree: each expansion reads the chosen nodes' pairs (parent's predicted feature, token) at once."""
        features: dict[int, torch.Tensor] = {}  # node -> the feature the head predicted after reading it
        # The root's prediction came from the pair at true_length - 1; a node of depth d sits d places later.
        feed = TreeFeed(self.true_length)

        def q_draft(feature):  # q on the draft vocabulary
            return distribution(self.rows(feature).float(), sampling)

        def expand(nodes, tokens, parents):
            allowed, positions = feed.read(nodes, parents, context.device)
            inputs = torch.stack([features[parents[n]] if parents[n] >= 0 else self.feature for n in nodes])
            token_ids = torch.tensor([tokens[n] for n in nodes], device=context.device)
            out = self.step(token_ids, inputs, positions, allowed)
            for node, feature in zip(nodes, out):
                features[node] = feature
            return q_draft(out)

        grown = grow(q_draft(self.feature.view(1, -1))[0], expand, shape, depth, sampling, generator, self.vocab_ids)
        full = torch.zeros(len(grown.tokens), self.vocab_size, dtype=grown.rows.dtype, device=context.device)
        full[:, self.vocab_ids] = grown.rows  # q is 0 off the draft vocabulary
        return Proposal(torch.tensor(grown.tokens, device=context.device), full, grown.parents)

    def feedback(self, kept, hidden=None, timing=None, verified=None):
        super().feedback(kept)
        # Drop every pair read while drafting (a chain's or a tree's): they carried the head's predicted
        # features. The target's true features for the last committed token and the kept drafts (the
        # rows the loop hands over) are read before the next round instead.
        self.cache.truncate(self.true_length)
        if hidden is not None:
            self.pending = torch.cat([self.pending, hidden[: len(kept) + 1].to(self.pending.dtype)])


class HybridDrafter(Drafter):
    """n-gram lookup when the context has a match, the head otherwise: copying is free, the head guesses."""

    kind = "hybrid"

    def __init__(self, name: str, ngram: NgramDrafter, head: HeadDrafter):
        super().__init__(name)
        self.ngram, self.head = ngram, head
        self.reads_layers = head.reads_layers

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.ngram.start(prompt_ids, settings)
        self.head.start(prompt_ids, settings, hidden)

    def draft(self, context, k, sampling, generator) -> Proposal:
        proposal = self.ngram.propose(context, k, sampling, generator)
        if not proposal.ids.shape[0]:
            return self.head.propose(context, k, sampling, generator)
        if not self.tree.on or proposal.ids.shape[0] >= self.tree.budget:
            # In an n-gram round the head reads nothing: the true features wait for its next proposal.
            return proposal
        # A tree with room left: the n-gram branches first, then the head's best guesses beside them (where the
        # copied text goes wrong, the head's alternatives may be right). Both are kept as certain proposals (one-hot
        # q): candidates fixed before verification keep recursive rejection sampling exact whatever drew them.
        copied = proposal.parents if proposal.parents is not None else list(range(-1, proposal.ids.shape[0] - 1))
        guessed = self.head.guesses(context, k, sampling, generator, self.tree.budget - len(copied))
        tokens, parents = merge_trees((proposal.ids.tolist(), copied),
                                      (guessed.ids.tolist(), guessed.parents or []), self.tree.budget)
        return Proposal(torch.tensor(tokens, dtype=torch.long, device=context.device), None, parents)

    def feedback(self, kept, hidden=None, timing=None, verified=None):
        super().feedback(kept)
        self.head.feedback(kept, hidden, timing)
