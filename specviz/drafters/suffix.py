"""Suffix drafting (SuffixDecoding-style): continue what followed the same words before, as often as it did.

Two sources answer "which tokens followed this context's suffix, how often": the prompt and the
answer so far (`LocalIndex`), and the target's own earlier answers (`SuffixCorpus`: the shipped
answers to the training prompts, then every run this process completes, within a token bound).
From the longer match of the two, the drafter walks forward best first. Each node's confidence is
its parent's times the continuation's share of what followed, count / (total + 1/depth): a long
match seen once is trusted more than a one-token match seen once. Nodes below MIN_CONFIDENCE are
not drafted, so the draft length is set each round by how sure the match is, up to γ (or the tree
budget). No model runs: drafting costs tens of microseconds, and q is one-hot, so verification
stays exact.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import json
from pathlib import Path

import torch

from ..config import Sampling
from .base import Drafter, Proposal
from .suffix_index import LocalIndex, SuffixCorpus

MIN_CONFIDENCE = 0.2  # a node is drafted only while its estimated chance of being reached and kept stays above this (chosen on TRAIN by replay: benchmarks/replay_drafters.py)
LOCAL_DEPTH = 8  # longest context suffix looked up in the prompt and answer
CORPUS_DEPTH = 16  # ... and in the corpus of earlier answers
CORPUS_TOKENS = 2_000_000  # the corpus keeps at most this many tokens (16 bytes each), oldest runs dropped first
SHIPPED_CORPUS = Path(__file__).resolve().parents[2] / "assets" / "suffix" / "answers.safetensors"


class SuffixDrafter(Drafter):
    kind = "suffix"

    def __init__(self, name: str = "suffix", corpus: SuffixCorpus | None = None, min_confidence: float = MIN_CONFIDENCE,
                 never: frozenset[int] = frozenset()):
        super().__init__(name)
        self.corpus = corpus
        self.min_confidence = min_confidence
        self.never = never  # tokens never drafted: the chat template's markers, which a prompt has but an answer does not
        self.local = LocalIndex(LOCAL_DEPTH)
        self.key: int | None = None  # the prompt's, so that this prompt never drafts from its own earlier answer
        self.why = ""  # the last round's source and match, for the Rounds timeline
        self.confidence: list[float] = []  # the last proposal's: each node's estimated chance of being reached and kept

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.local = LocalIndex(LOCAL_DEPTH)
        self.key = hash(tuple(prompt_ids[0].tolist())) & (2**62 - 1)

    def draft(self, context, k, sampling: Sampling, generator) -> Proposal:
        self.local.extend(context[0, len(self.local.tokens) :].tolist())
        budget = min(self.tree.budget, 64) if self.tree.on else k
        branching = self.tree.branching if self.tree.on else 1
        tokens, parents = [], []
        if k > 0:
            tokens, parents = self.best_tree(budget, branching, max_depth=k)
        ids = torch.tensor(tokens, dtype=torch.long, device=context.device)
        return Proposal(ids, None, parents if self.tree.on and tokens else None)

    def best_tree(self, budget: int, branching: int, max_depth: int) -> tuple[list[int], list[int]]:
        """Up to `budget` nodes, best first by confidence, from the local or the corpus match: whichever tree
        promises more kept tokens (the sum of its nodes' confidences)."""
        context = self.local.tokens
        local = self.local.longest_match(context)
        found = self.corpus.longest_match(context, exclude=self.key) if self.corpus is not None else None
        self.confidence = []
        if local is None and found is None:
            self.why = "no earlier occurrence of the last token"
            return [], []
        best = None
        for root in (local, found):
            if root is not None:
                tree = self._walk(root, budget, branching, max_depth)
                if best is None or sum(tree[2]) > sum(best[2]):
                    best, chosen = tree, root
        tokens, parents, self.confidence = best
        self.why = (f"{'prompt and answer' if chosen is local else 'earlier answers'}: last {chosen.depth} tokens "
                    f"seen {chosen.total}×")
        return tokens, parents

    def _walk(self, root, budget: int, branching: int, max_depth: int) -> tuple[list[int], list[int], list[float]]:
        """Best-first walk from a match: nodes with their parents and confidences, none below the floor."""
        tokens, parents, confidence = [], [], []
        frontier = [(-1.0, 0, -1, root)]  # (-confidence, tie-break, parent node, match to expand)
        serial = 1
        while frontier and len(tokens) < budget:
            reach, _, parent, match = heapq.heappop(frontier)
            depth = _depth(parents, parent) + 1
            if depth > max_depth:
                continue
            counts = match.counts()
            total = sum(counts.values()) + 1 / match.depth
            for token, count in counts.most_common(branching):
                if token in self.never:
                    continue
                share = -reach * count / total
                if share < self.min_confidence or len(tokens) >= budget:
                    break
                tokens.append(token)
                parents.append(parent)
                confidence.append(share)
                child = match.follow(token)
                if child is not None:
                    heapq.heappush(frontier, (-share, serial, len(tokens) - 1, child))
                    serial += 1
        return tokens, parents, confidence

    def finish(self, output_ids: list[int]) -> None:
        """A finished run's answer joins the corpus that runs of other prompts draft from."""
        if self.corpus is not None:
            self.corpus.add(output_ids, key=self.key)
            self.corpus.refresh()


def template_tokens(tokenizer) -> frozenset[int]:
    """The tokenizer's special tokens but its end of sequence: chat-template markers an answer never writes.

    Copied from the prompt they made the first round's draft wrong: after "<|im_start|>assistant", the
    prompt's earlier "<|im_start|>" line is a match, and what followed it there is another role's marker.
    """
    eos = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    return frozenset(i for i in getattr(tokenizer, "all_special_ids", []) if i not in eos)


def _depth(parents: list[int], node: int) -> int:
    depth = 0
    while node != -1:
        node, depth = parents[node], depth + 1
    return depth


@functools.lru_cache(maxsize=8)
def tokenizer_fingerprint(tokenizer) -> str:
    """A short hash of a tokenizer's vocabulary: a corpus of token ids is only read by a target that shares it."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return hashlib.sha256(json.dumps(vocab).encode()).hexdigest()[:16]


def corpus_for(tokenizer) -> SuffixCorpus:
    """The process's corpus for this tokenizer (every run's drafter reads it, and finished runs join it)."""
    return _corpus(tokenizer_fingerprint(tokenizer))


@functools.lru_cache(maxsize=8)
def _corpus(fingerprint: str) -> SuffixCorpus:
    corpus = SuffixCorpus(max_tokens=CORPUS_TOKENS, max_depth=CORPUS_DEPTH)
    header, documents = read_corpus(SHIPPED_CORPUS)
    if header.get("tokenizer") == fingerprint:
        for document in documents:
            corpus.add(document)
    return corpus


def save_corpus(path: Path, documents: list[list[int]], header: dict) -> None:
    """Token id documents in one safetensors file (flat int32 ids and offsets), with how they were made."""
    from safetensors.torch import save_file

    ids = torch.tensor([t for document in documents for t in document], dtype=torch.int32)
    offsets = torch.tensor([0] + [len(d) for d in documents], dtype=torch.int64).cumsum(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"ids": ids, "offsets": offsets}, str(path), metadata={"json": json.dumps(header)})


def read_corpus(path: Path) -> tuple[dict, list[list[int]]]:
    """What `save_corpus` wrote: the header and the documents; ({}, []) when there is no readable file."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            header = json.loads((f.metadata() or {}).get("json", "{}"))
        tensors = load_file(str(path))
    except (OSError, SafetensorError, ValueError):
        return {}, []
    ids, bounds = tensors["ids"].tolist(), tensors["offsets"].tolist()
    return header, [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
