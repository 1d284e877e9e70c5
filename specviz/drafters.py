"""Drafters: everything that can propose tokens for the target to verify, behind one interface.

A drafter is made fresh for each run and owns its per-run state (a KV cache, an n-gram index,
the adaptive γ), so the models it reads from can be shared by every session and never change.

    drafter.start(prompt_ids, settings, hidden)      once, before the first round
    drafter.propose(context, k, ...)                 up to k token ids and q at each (None = one-hot)
    drafter.feedback(n_accepted, n_drafted, hidden, kept)  roll own state back to what was kept, adapt γ

With a tree budget in the settings (specviz.trees) a drafter that can branches: its proposal then
carries `parents`, and `kept` names the accepted branch's nodes.

`hidden` is what the target's forward computed: its final hidden state at every position it just
read (the prompt but its last token at the start; after a verification, the last committed token
and the kept drafts). Most drafters ignore it; a feature-level head (specviz.heads) drafts from it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch
from transformers import DynamicCache

from .config import MAX_GAMMA, Decoding, Sampling, TreeShape
from .errors import ConfigError
from .fast_path import GrowingCache
from .heads import KVCache, is_head, load_head
from .models import LoadedModel, draft_folders, load_model, shared_vocab
from .trees import Grown, TreeFeed, additive, grow, keep_branch, merge_trees, trie
from .verify import choose, distribution


@dataclass
class Proposal:
    ids: torch.Tensor  # [k] drafted token ids (k may be 0); a tree's nodes, parents first
    probs: torch.Tensor | None  # [k, V] the q each token was drawn from; None when the proposal is certain (one-hot q)
    parents: list[int] | None = None  # a tree: node i follows node parents[i] (-1 = the last committed token)


def drop_last(cache: DynamicCache, count: int) -> None:
    """Remove the newest `count` positions from a KV cache (transformers' crop takes a negative count)."""
    if count > 0:
        cache.crop(-count)


class Drafter:
    """Base class: holds γ and its schedule. Subclasses implement `propose`."""

    kind = "base"

    def __init__(self, name: str):
        self.name = name
        self.gamma = 1
        self.adaptive = False
        self.tree = TreeShape()  # budget 0: chains

    def start(self, prompt_ids: torch.Tensor, settings: Decoding, hidden: torch.Tensor | None = None) -> None:
        self.gamma = settings.gamma
        self.adaptive = settings.adaptive
        self.tree = settings.tree

    def propose(self, context: torch.Tensor, k: int, sampling: Sampling, generator) -> Proposal:
        raise NotImplementedError

    def feedback(self, n_accepted: int, n_drafted: int, hidden: torch.Tensor | None = None,
                 kept: list[int] | None = None) -> None:
        """Adaptive γ, the well-known schedule: +2 after a fully accepted round, -1 otherwise."""
        if self.adaptive and n_drafted:
            if n_accepted == n_drafted:
                self.gamma = min(MAX_GAMMA, self.gamma + 2)
            else:
                self.gamma = max(1, self.gamma - 1)


class NoDrafter(Drafter):
    """Proposes nothing: every round is one plain target step. This is the baseline."""

    kind = "none"

    def propose(self, context, k, sampling, generator) -> Proposal:
        return Proposal(context.new_empty(0), None)


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

    def propose(self, context, k, sampling, generator) -> Proposal:
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
        logits = self.model(context[:, self.seen :], past_key_values=self.cache, use_cache=True, logits_to_keep=1).logits
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

    def feedback(self, n_accepted, n_drafted, hidden=None, kept=None):
        super().feedback(n_accepted, n_drafted)
        if n_drafted == 0:
            return
        if self.grown is not None:
            # The cache holds the context and the nodes this model read; keep those of the accepted branch.
            slots = self.feed.kept_slots([self.grown.origin[node] for node in kept or []])
            keep_branch(self.cache, self.context_len, len(self.feed.fed), slots)
            self.seen = self.context_len + len(slots)
            return
        # Keep the context and the accepted drafts the cache has seen: min(n_accepted, k-1) of them.
        # After a fully accepted round nothing is dropped: d_k and the bonus token are fed next round.
        keep = self.context_len + min(n_accepted, n_drafted - 1)
        drop_last(self.cache, self.seen - keep)
        self.seen = keep


class NgramDrafter(Drafter):
    """Prompt lookup: continue the latest earlier occurrence of the context's last n tokens.

    No model and no cost to speak of; q is one-hot, so the same verification rule covers it.
    """

    kind = "ngram"

    # min_ngram 2: a lone matching token predicts too little. On 42 evaluation prompts (greedy, γ=4) a replay of
    # the target's output gave 0.43 acceptance and ~1.19x (estimated, verify = 1.5 steps) against 0.20 and ~1.11x
    # with 1-token matches, and it was ahead in every workload.
    # weak_match_tokens 2: a match of only min_ngram tokens drafts at most 2 tokens. On a CPU verifying 3 tokens
    # costs ~1.16 target steps and 5 tokens ~1.58, and short matches rarely run on; the same replay (with that
    # measured cost curve) gave 1.24x against 1.22x at γ=4, and 1.27x against 1.24x at γ=8.
    def __init__(self, name: str = "ngram", max_ngram: int = 3, min_ngram: int = 2, weak_match_tokens: int = 2):
        super().__init__(name)
        self.max_ngram, self.min_ngram, self.weak_match_tokens = max_ngram, min_ngram, weak_match_tokens
        self.tokens: list[int] = []
        self.starts: dict[tuple[int, ...], list[int]] = {}  # n-gram -> starts of its continuations, oldest first

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.tokens, self.starts = [], {}

    def _extend(self, new_tokens: list[int]) -> None:
        for token in new_tokens:
            self.tokens.append(token)
            end = len(self.tokens) - 1  # the n-grams ending just before `token` now have a continuation
            for n in range(self.min_ngram, self.max_ngram + 1):
                if end - n >= 0:
                    self.starts.setdefault(tuple(self.tokens[end - n : end]), []).append(end)

    def _matches(self, k: int, limit: int):
        """Continuations of the context's last n-gram, longest n first and latest match first (at most `limit`)."""
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            length = k if n > self.min_ngram else min(k, self.weak_match_tokens)
            for start in reversed(self.starts.get(tuple(self.tokens[-n:]), [])[-limit:]):
                yield self.tokens[start : start + length]

    def propose(self, context, k, sampling, generator) -> Proposal:
        self._extend(context[0, len(self.tokens) :].tolist())
        if k > 0 and self.tree.on:  # a tree: several earlier matches as branches, shared prefixes merged
            tokens, parents = trie(list(self._matches(k, self.tree.budget)), self.tree.budget)
            if tokens:
                return Proposal(torch.tensor(tokens, dtype=torch.long, device=context.device), None, parents)
        found = next(self._matches(k, 1), []) if k > 0 else []
        return Proposal(torch.tensor(found, dtype=torch.long, device=context.device), None)


class HeadDrafter(Drafter):
    """A feature-level draft head (specviz.heads) over the target's own hidden states.

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
        self.vocab_ids = vocab_ids  # [N] target ids of the draft vocabulary
        self.embedding = embedding  # the target's input embedding, shared and read-only
        self.rows = output.index_select(0, vocab_ids)  # [N, H] the target's output head on the draft vocabulary
        self.vocab_size = vocab_size
        self.cache = None
        self.read = 0  # pairs read with the target's true features
        self.true_length = 0  # the head's cache length after reading them
        self.pending = embedding.new_empty(0, embedding.shape[1])  # true features of pairs not read yet

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.cache, self.read, self.true_length, self.feature = KVCache(), 0, 0, None
        self.pending = hidden if hidden is not None else self.pending[:0]

    def propose(self, context, k, sampling, generator, budget: int | None = None) -> Proposal:
        """Up to k tokens, or with a tree budget a tree (`budget` overrides the settings' node count)."""
        # Read the pairs (f_j, e(x_{j+1})) for j = read .. L-2: one forward over all of them.
        new_tokens = context[0, self.read + 1 :]
        if new_tokens.shape[0] != self.pending.shape[0]:
            raise RuntimeError(f"head drafter out of step: {new_tokens.shape[0]} tokens, {self.pending.shape[0]} features")
        if new_tokens.shape[0]:
            self.feature = self.head.step(self.embedding[new_tokens], self.pending, self.cache)[-1]
            self.read, self.pending = context.shape[1] - 1, self.pending[:0]
        self.true_length = self.cache.length
        if k == 0 or self.cache.length == 0:  # a one-token prompt: no feature to draft from yet
            return Proposal(context.new_empty(0), None)
        if self.tree.on:
            return self._propose_tree(context, k, sampling, generator,
                                      replace(self.tree, budget=budget) if budget else self.tree)
        ids, probs = [], []
        feature = self.feature
        for i in range(k):
            q = distribution(self.rows @ feature, sampling)  # q over the draft vocabulary
            choice = choose(q, sampling, generator)
            token = self.vocab_ids[choice]
            ids.append(token)
            probs.append(q)
            if i < k - 1:  # the next draft reads (predicted feature, drafted token)
                feature = self.head.step(self.embedding[token].view(1, -1), feature.view(1, -1), self.cache)[0]
        full = torch.zeros(k, self.vocab_size, dtype=probs[0].dtype, device=context.device)
        full[:, self.vocab_ids] = torch.stack(probs)  # q is 0 outside the draft vocabulary
        return Proposal(torch.stack(ids), full)

    def _propose_tree(self, context, depth, sampling, generator, shape: TreeShape) -> Proposal:
        """Grow a tree: each expansion reads the chosen nodes' pairs (parent's predicted feature, token) at once."""
        features: dict[int, torch.Tensor] = {}  # node -> the feature the head predicted after reading it
        # The root's prediction came from the pair at true_length - 1; a node of depth d sits d places later.
        feed = TreeFeed(self.true_length)

        def q_draft(feature):  # q on the draft vocabulary
            return distribution(feature @ self.rows.T, sampling)

        def expand(nodes, tokens, parents):
            allowed, positions = feed.read(nodes, parents, context.device)
            inputs = torch.stack([features[parents[n]] if parents[n] >= 0 else self.feature for n in nodes])
            token_ids = torch.tensor([tokens[n] for n in nodes], device=context.device)
            out = self.head.step(self.embedding[token_ids], inputs, self.cache, positions, allowed)
            for node, feature in zip(nodes, out):
                features[node] = feature
            return q_draft(out)

        grown = grow(q_draft(self.feature.view(1, -1))[0], expand, shape, depth, sampling, generator, self.vocab_ids)
        full = torch.zeros(len(grown.tokens), self.vocab_size, dtype=grown.rows.dtype, device=context.device)
        full[:, self.vocab_ids] = grown.rows  # q is 0 off the draft vocabulary
        return Proposal(torch.tensor(grown.tokens, device=context.device), full, grown.parents)

    def feedback(self, n_accepted, n_drafted, hidden=None, kept=None):
        super().feedback(n_accepted, n_drafted)
        # Drop every pair read while drafting (a chain's or a tree's): they carried the head's predicted
        # features. The target's true features for the last committed token and the kept drafts (the
        # first n_accepted + 1 rows the loop hands over) are read before the next round instead.
        self.cache.truncate(self.true_length)
        if hidden is not None:
            self.pending = torch.cat([self.pending, hidden[: n_accepted + 1].to(self.pending.dtype)])


class HybridDrafter(Drafter):
    """n-gram lookup when the context has a match, the head otherwise: copying is free, the head guesses."""

    kind = "hybrid"

    def __init__(self, name: str, ngram: NgramDrafter, head: HeadDrafter):
        super().__init__(name)
        self.ngram, self.head = ngram, head

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.ngram.start(prompt_ids, settings)
        self.head.start(prompt_ids, settings, hidden)

    def propose(self, context, k, sampling, generator) -> Proposal:
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
        guessed = self.head.propose(context, k, sampling, generator, budget=self.tree.budget - len(copied))
        tokens, parents = merge_trees((proposal.ids.tolist(), copied),
                                      (guessed.ids.tolist(), guessed.parents or []), self.tree.budget)
        return Proposal(torch.tensor(tokens, dtype=torch.long, device=context.device), None, parents)

    def feedback(self, n_accepted, n_drafted, hidden=None, kept=None):
        super().feedback(n_accepted, n_drafted)
        self.head.feedback(n_accepted, n_drafted, hidden, kept)


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
        setattr(view.model, child_name, torch.nn.ModuleList(list(layers)[:n_layers]) if child_name == "layers" else child)
    for child_name, child in model.named_children():
        if child_name != "model":
            setattr(view, child_name, child)
    if any(t.is_meta for t in list(view.parameters()) + list(view.buffers())):
        raise ConfigError(f"cannot build a layer-skip view of {type(model).__name__}")
    view.generation_config = copy.deepcopy(model.generation_config)  # HF assisted generation writes to it
    return view.eval()


# --- the registry --------------------------------------------------------------------------
Loader = Callable[[str], LoadedModel]


def _model_drafter(arg: str, target: LoadedModel, load: Loader) -> Drafter:
    draft = load(arg)
    vocab = shared_vocab(target, draft)
    if draft.device != target.device:
        raise ConfigError(f"{draft.name} is on {draft.device} but the target is on {target.device}")
    return ModelDrafter(arg, draft.model, vocab)


def _ngram_drafter(arg: str, target, load) -> Drafter:
    n = 3 if not arg else _positive_int(arg, "ngram:N (longest n-gram matched)")
    return NgramDrafter("ngram" if not arg else f"ngram:{n}", max_ngram=n, min_ngram=min(2, n))


def _layerskip_drafter(arg: str, target: LoadedModel, load) -> Drafter:
    n_layers = _positive_int(arg or "", "layerskip:K (number of target layers to keep)")
    return ModelDrafter(f"layerskip:{n_layers}", layer_skip_view(target.model, n_layers), target.vocab_size)


def _head_drafter(arg: str, target: LoadedModel, load) -> Drafter:
    folder = head_folder(arg)
    if folder is None:
        raise ConfigError(f"no draft head named {arg!r}; `python -m specviz models` lists the heads here")
    head, info = load_head(folder, target.model, target.name)
    embedding = target.model.get_input_embeddings().weight
    vocab = torch.tensor(info.vocab, device=embedding.device)
    return HeadDrafter(folder.name, head, vocab, embedding, target.model.get_output_embeddings().weight,
                       target.vocab_size)


def _hybrid_drafter(arg: str, target: LoadedModel, load) -> Drafter:
    head = _head_drafter(arg, target, load)
    return HybridDrafter(f"ngram+{head.name}", _ngram_drafter("", target, load), head)


def head_folder(name: str):
    """The folder of a draft head called `name` (shipped or trained here), or a folder path that holds one."""
    for _, folder in draft_folders():
        if folder.name == name and is_head(folder):
            return folder
    path = Path(name).expanduser()
    return path if name and is_head(path) else None


def _target_drafter(arg: str, target: LoadedModel, load) -> Drafter:
    return ModelDrafter("target", target.model, target.vocab_size)


def _positive_int(text: str, what: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{what} must be a positive whole number, got {text!r}")
    return int(text)


DRAFTERS: dict[str, Callable[[str, LoadedModel, Loader], Drafter]] = {
    "model": _model_drafter,  # model:NAME, or just NAME: a compatible small causal LM
    "ngram": _ngram_drafter,  # prompt lookup, one-hot q
    "layerskip": _layerskip_drafter,  # layerskip:K, the target's first K layers
    "target": _target_drafter,  # the target drafting for itself: α = 1 at full cost
    "head": _head_drafter,  # head:NAME, or just NAME: a feature-level head over the target's hidden states
    "ngram+head": _hybrid_drafter,  # ngram+head:NAME (or ngram+NAME): n-gram when it matches, the head otherwise
}


def build_drafter(spec: str, target: LoadedModel, load: Loader = load_model) -> Drafter:
    """A fresh drafter for one run from a spec such as 'ngram', 'layerskip:8', 'target' or a model name."""
    spec = (spec or "").strip()
    if not spec:
        raise ConfigError("no drafter given; try ngram, layerskip:8, target or a model name")
    kind, _, arg = spec.partition(":")
    if kind in DRAFTERS and kind != "model":
        return DRAFTERS[kind](arg, target, load)
    if spec.startswith("ngram+") and head_folder(spec[len("ngram+"):]):
        return _hybrid_drafter(spec[len("ngram+"):], target, load)
    if head_folder(spec):
        return _head_drafter(spec, target, load)
    return _model_drafter(arg if kind == "model" else spec, target, load)
