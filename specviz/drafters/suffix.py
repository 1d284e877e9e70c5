"""Suffix drafting (SuffixDecoding-style): continue what followed the same words before, when it pays.

Two sources answer "which tokens followed this context's suffix, how often": the prompt and the
answer so far (`LocalIndex`), and the target's own earlier answers (`SuffixCorpus`: the shipped
answers to the training prompts, then every run this process completes, within a token bound).

Each round the drafter grows one tree from both matches, best first. A candidate's chance of being
reached and kept is its parent's times the chance that the target keeps it once its parent was
kept: `acceptance`, a logistic fit by source of the match's length, the continuation's share of what
followed, how often the pattern was seen and the other source's share for it (fitted on the TRAIN prompts' answers by
benchmarks/fit_suffix_acceptance.py; raw shares promised 0.5 where 0.1 was kept). Where both
sources offer the same token, the surer one counts. The draft is then cut where the expected tokens
per target step peak: (1 + the drafted chances summed) / v(n), with v(n) the verification cost
measured during the run (`costs.Costs`). So the draft length is set each round by how sure the
match is and what this machine charges for each drafted token, up to γ deep (or the tree budget).
No model runs: drafting costs tens of microseconds, and q is one-hot, so verification stays exact.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import MAX_TREE_BUDGET, Sampling
from .base import Drafter, Proposal, Reason
from .costs import Costs
from .suffix_index import LocalIndex, Match, SuffixCorpus

MIN_CONFIDENCE = 0.02  # candidates less likely than this to be reached and kept are not even considered
LOCAL_DEPTH = 8  # longest context suffix looked up in the prompt and answer
CORPUS_DEPTH = 16  # ... and in the corpus of earlier answers
CORPUS_TOKENS = 2_000_000  # the corpus keeps at most this many tokens (16 bytes each), oldest runs dropped first
PRIOR_SLOPE = 0.04  # v(n) = 1 + 0.04 n until the run has timed two draft sizes (CPUs measured 0.03–0.05 per token)
SHIPPED_CORPUS = Path(__file__).resolve().parents[2] / "assets" / "suffix" / "answers.safetensors"
LOCAL, CORPUS = "prompt and answer", "earlier answers"
# P(kept | parent kept) = σ(w · features) by source (`features`), fitted by benchmarks/fit_suffix_acceptance.py
# on the TRAIN prompts' answers (benchmarks/results/suffix-acceptance-fit.md).
ACCEPTANCE = {LOCAL: (-4.605, 0.078, 3.541, 0.862, 1.130, 1.984, 0.339),
              CORPUS: (-5.379, 0.471, 3.026, 0.234, 0.251, 4.299, 1.317)}


def features(depth: int, count: int, seen: int, other_share: float | None) -> list[float]:
    """[1, ln depth, share, ln seen, share · ln depth, other's share, other has no match]: depth is the matched
    pattern's length, share = count / seen the continuation's share of what followed it, and other_share the
    other source's share for the same token (None: the other source has no match)."""
    share, log_depth = count / seen, math.log(depth)
    return [1.0, log_depth, share, math.log(seen), share * log_depth, other_share or 0.0, float(other_share is None)]


def continuations(matches: tuple[Match | None, Match | None], branching: int, never: frozenset[int]):
    """Each source's `branching` most frequent next tokens (never-drafted ones left out), as (source, pattern
    length, token, count, seen, the other source's share for the token or None where it has no match)."""
    counts = [match.counts() if match is not None else None for match in matches]
    for i, (source, match) in enumerate(zip((LOCAL, CORPUS), matches)):
        if match is None:
            continue
        own, other = counts[i], counts[1 - i]
        seen, other_seen = sum(own.values()), sum(other.values()) if other else 0
        for token, count in own.most_common(branching + len(never)):
            if token not in never:
                yield source, match.depth, token, count, seen, other[token] / other_seen if other else None


def acceptance(source: str, depth: int, count: int, seen: int, other_share: float | None) -> float:
    """The chance the target keeps this continuation once the tokens before it were kept (see the module)."""
    z = sum(w * x for w, x in zip(ACCEPTANCE[source], features(depth, count, seen, other_share)))
    return 1 / (1 + math.exp(-z))


@dataclass(frozen=True)
class Cut(Reason):
    """Why a round drafted what it did: the best candidate's match, the chances and where they were cut."""

    matched: bool  # either source has an earlier occurrence of the context's last token
    chances: tuple[float, ...] = ()  # every candidate's chance of being reached and kept, best first
    n: int = 0  # candidates drafted: the cut
    source: str = ""  # the best candidate's source (LOCAL or CORPUS) ...
    depth: int = 0  # ... the length of its match ...
    seen: int = 0  # ... and how often the match was continued
    v: float = 1.0  # v(n) at the cut (v(1) when nothing was drafted), in target steps

    @property
    def confidence(self) -> tuple[float, ...]:
        """Each drafted node's estimated chance of being reached and kept."""
        return self.chances[: self.n]

    def text(self) -> str:
        if not self.matched:
            return "no earlier occurrence of the last token"
        if not self.chances:
            return "nothing followed the match often enough"
        head = f"{self.source}: last {self.depth} tokens seen {self.seen}×"
        if self.n == 0:
            return f"{head}; best guess {self.chances[0]:.0%} likely kept, not worth v(1) = {self.v:.2f} steps"
        return f"{head}; {self.n} drafted, {sum(self.confidence):.1f} expected kept, v({self.n}) = {self.v:.2f} steps"


class SuffixDrafter(Drafter):
    kind = "suffix"

    def __init__(self, name: str = "suffix", corpus: SuffixCorpus | None = None, min_confidence: float = MIN_CONFIDENCE,
                 never: frozenset[int] = frozenset(), verify_cost: Callable[[int], float] | None = None,
                 prior_slope: float = PRIOR_SLOPE):
        super().__init__(name)
        self.corpus = corpus
        self.min_confidence = min_confidence
        self.never = never  # tokens never drafted: the chat template's markers (a prompt has them, an answer not)
        self.verify_cost = verify_cost  # v(n) given (a replay, a test); None: fitted to the loop's times of forwards
        self.prior_slope = prior_slope
        self.costs = Costs(prior_slope=prior_slope)
        self.local = LocalIndex(LOCAL_DEPTH)
        self.key: int | None = None  # the prompt's, so that this prompt never drafts from its own earlier answer
        self.cut: Cut | None = None  # the last round's match and cut, for the Rounds timeline

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.local = LocalIndex(LOCAL_DEPTH)
        self.key = hash(tuple(prompt_ids[0].tolist())) & (2**62 - 1)
        self.costs, self.cut = Costs(prior_slope=self.prior_slope), None

    def draft(self, context, k, sampling: Sampling, generator) -> Proposal:
        self.local.extend(context[0, len(self.local.tokens) :].tolist())
        budget = min(self.tree.budget, MAX_TREE_BUDGET) if self.tree.on else k
        branching = self.tree.branching if self.tree.on else 1
        tokens, parents = [], []
        if k > 0:
            tokens, parents = self.best_tree(budget, branching, max_depth=k)
        ids = torch.tensor(tokens, dtype=torch.long, device=context.device)
        return Proposal(ids, None, parents if self.tree.on and tokens else None, reason=self.cut)

    def feedback(self, kept, hidden=None, timing=None, verified=None):
        if self.verify_cost is None and timing is not None:
            self.costs.observe_forward(timing.verified, timing.verify_seconds)
        super().feedback(kept)

    def v(self, n: int) -> float:
        return self.verify_cost(n) if self.verify_cost is not None else self.costs.v(n)

    def best_tree(self, budget: int, branching: int, max_depth: int) -> tuple[list[int], list[int]]:
        """Candidates from both matches, best first, up to `budget` nodes, then cut where expected tokens per
        step peak. Nodes come out most likely first and after their parents, so every cut is a tree."""
        context = self.local.tokens
        local = self.local.longest_match(context)
        found = self.corpus.longest_match(context, exclude=self.key) if self.corpus is not None else None
        tokens, parents, chances, sources = self._grow((local, found), budget, branching, max_depth)
        n = self._cut(chances)
        self.cut = self._facts(local, found, sources, chances, n)
        return tokens[:n], parents[:n]

    def _grow(self, root: tuple[Match | None, Match | None], budget: int, branching: int, max_depth: int):
        """Up to `budget` nodes, most likely first: each with its parent, chance and source. A node carries both
        matches extended by its token, so its children are offered by whichever source still matches."""
        tokens, parents, chances, sources, depths = [], [], [], [], []
        frontier: list = []
        serial = 0

        def offer(parent: int, reach: float, matches: tuple[Match | None, Match | None]) -> None:
            nonlocal serial
            best: dict[int, tuple[float, str]] = {}
            for source, depth, token, count, seen, other_share in continuations(matches, branching, self.never):
                chance = reach * acceptance(source, depth, count, seen, other_share)
                if chance > best.get(token, (0.0, ""))[0]:
                    best[token] = (chance, source)
            for token, (chance, source) in sorted(best.items(), key=lambda kv: -kv[1][0])[:branching]:
                if chance >= self.min_confidence:
                    heapq.heappush(frontier, (-chance, serial, parent, token, source, matches))
                    serial += 1

        offer(-1, 1.0, root)
        while frontier and len(tokens) < budget:
            chance, _, parent, token, source, (local, found) = heapq.heappop(frontier)
            depth = depths[parent] + 1 if parent >= 0 else 1
            tokens.append(token)
            parents.append(parent)
            chances.append(-chance)
            sources.append(source)
            depths.append(depth)
            if depth < max_depth:
                followed = (local.follow(token) if local else None, found.follow(token) if found else None)
                offer(len(tokens) - 1, -chance, followed)
        return tokens, parents, chances, sources

    def _cut(self, chances: list[float]) -> int:
        """How many of the best-first nodes to draft: the n with the most expected tokens per target step."""
        best_n, best_rate, expected = 0, 1 / self.v(0), 1.0
        for n, chance in enumerate(chances, start=1):
            expected += chance
            rate = expected / self.v(n)
            if rate > best_rate:
                best_n, best_rate = n, rate
        return best_n

    def _facts(self, local, found, sources, chances, n) -> Cut:
        """The round's reason in numbers; `Cut.text` words it after the timed loop."""
        if not chances:
            return Cut(matched=local is not None or found is not None)
        match = local if sources[0] == LOCAL else found
        return Cut(True, tuple(chances), n, sources[0], match.depth, match.total, self.v(max(n, 1)))

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
