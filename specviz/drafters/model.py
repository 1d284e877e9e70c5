"""Drafting with a model: a small causal LM with its own KV cache, or the target's first layers (layer skip)."""

from __future__ import annotations

import copy

import torch

from ..errors import ConfigError
from ..fast_path import GrowingCache
from ..trees import Grown, TreeFeed, additive, grow, keep_branch
from ..verify import choose, distribution
from .base import Drafter, Proposal, drop_last


class ModelDrafter(Drafter):
    """A small causal LM drafting autoregressively with its own KV cache."""

    kind = "model"

    def __init__(self, name: str, model: torch.nn.Module, vocab_size: int):
        super().__init__(name)
        self.model = model
        self.vocab_size = vocab_size
        self.cache = None
        self.seen = 0  # context positions whose keys/values are in self.cache
        self.context_len = 0  # committed tokens when the last proposal was made
        self.grown: Grown | None = None  # the last proposal's tree, if it was one
        self.feed: TreeFeed | None = None  # the tree's nodes this model read, after the context

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.cache = GrowingCache(config=self.model.config)
        self.seen = 0
        if prompt_ids.shape[1] > 1:  # like the target, keep the last prompt token for the first round
            self.model(prompt_ids[:, :-1], past_key_values=self.cache, use_cache=True, logits_to_keep=1)
            self.seen = prompt_ids.shape[1] - 1

    def draft(self, context, k, sampling, generator) -> Proposal:
        self.context_len = context.shape[1]
        self.grown = None
        if k == 0:
            return Proposal(context.new_empty(0), None)
        if self.tree.on:
            return self._propose_tree(context, k, sampling, generator)
        ids, probs = [], []
        step_input = context[:, self.seen :]  # tokens committed since the last round
        for _ in range(k):
            logits = self.model(step_input, past_key_values=self.cache, use_cache=True, logits_to_keep=1).logits
            q = distribution(logits[0, -1, : self.vocab_size], sampling)
            token = choose(q, sampling, generator)
            ids.append(token)
            probs.append(q)
            step_input = token.view(1, 1)
        # d_k was proposed but never fed, so the cache holds the context and d_1 .. d_{k-1}.
        self.seen = self.context_len + k - 1
        return Proposal(torch.stack(ids), torch.stack(probs))

    def _propose_tree(self, context, depth, sampling, generator) -> Proposal:
        """Grow a tree: the context first, then one forward per depth over the nodes expanded there."""
        logits = self.model(context[:, self.seen :], past_key_values=self.cache, use_cache=True,
                            logits_to_keep=1).logits
        self.seen = self.context_len
        self.feed = TreeFeed(self.context_len)

        def expand(nodes, tokens, parents):
            allowed, positions = self.feed.read(nodes, parents, context.device)
            step = torch.tensor([[tokens[n] for n in nodes]], device=context.device)
            out = self.model(step, past_key_values=self.cache, attention_mask=additive(allowed, self.model.dtype),
                             position_ids=positions.view(1, -1), use_cache=True).logits
            return distribution(out[0, :, : self.vocab_size], sampling)

        self.grown = grow(distribution(logits[0, -1, : self.vocab_size], sampling), expand, self.tree, depth,
                          sampling, generator)
        return Proposal(torch.tensor(self.grown.tokens, device=context.device), self.grown.rows, self.grown.parents)

    def feedback(self, kept, hidden=None, timing=None):
        super().feedback(kept)
        if self.drafted == 0:
            return
        if self.grown is not None:
            # The cache holds the context and the nodes this model read; keep those of the accepted branch.
            slots = self.feed.kept_slots([self.grown.origin[node] for node in kept])
            keep_branch(self.cache, self.context_len, len(self.feed.fed), slots)
            self.seen = self.context_len + len(slots)
            return
        # Keep the context and the accepted drafts the cache has seen: min(accepted, k-1) of them.
        # After a fully accepted round nothing is dropped: d_k and the bonus token are fed next round.
        keep = self.context_len + min(len(kept), self.drafted - 1)
        drop_last(self.cache, self.seen - keep)
        self.seen = keep


def layer_skip_view(model: torch.nn.Module, n_layers: int) -> torch.nn.Module:
    """The target's first n_layers, final norm and head as a model of its own.

    A new module tree that shares the target's weights by reference: the shared target is never
    modified (a cached model serves every app session at once).
    """
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ConfigError(f"layer-skip drafting needs a decoder with model.layers; {type(model).__name__} has none")
    if not 1 <= n_layers < len(layers):
        raise ConfigError(f"layerskip:{n_layers} keeps too many layers: this target has {len(layers)}, "
                          f"so use layerskip:1 … layerskip:{len(layers) - 1}")
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = n_layers
    if getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[:n_layers]
    with torch.device("meta"):
        view = type(model)(config)
    for child_name, child in inner.named_children():
        kept = torch.nn.ModuleList(list(layers)[:n_layers]) if child_name == "layers" else child
        setattr(view.model, child_name, kept)
    for child_name, child in model.named_children():
        if child_name != "model":
            setattr(view, child_name, child)
    if any(t.is_meta for t in list(view.parameters()) + list(view.buffers())):
        raise ConfigError(f"cannot build a layer-skip view of {type(model).__name__}")
    view.generation_config = copy.deepcopy(model.generation_config)  # HF assisted generation writes to it
    return view.eval()
