"""Suffix structures over token sequences, for drafting by what followed the same words before.

SuffixDecoding (Oliaro et al.) drafts from suffix trees over the current request and over the
target's earlier outputs: find the longest suffix of the context seen before, then walk forward
along the most frequent continuations while the frequencies stay convincing. Two structures
serve that walk here, both answering "which tokens followed this pattern, how often":

- `LocalIndex`: the prompt and the answer so far, growing every round: n-gram → end positions,
  extended incrementally (a few microseconds per token).
- `SuffixCorpus`: a large, slowly growing corpus (the target's own answers): a suffix array, so
  every suffix starting with a pattern sits in one contiguous range, and extending the pattern by
  one token narrows the range by binary search. It holds documents up to a token bound, dropping
  the oldest, and rebuilds its array after additions.

A `Match` is the state of one walk: the pattern length matched and where it occurs; `counts()`
gives the next tokens with their frequencies and `follow(token)` extends the match.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from collections.abc import Iterable

import numpy as np

SEPARATOR = -1  # between documents in a corpus: no pattern matches across it
COUNT_SAMPLE = 4096  # at most this many occurrences are read to count continuations (a stride sample)
SMALL_COUNT = 256  # up to this many occurrences are counted in Python


class Match:
    """Occurrences of a pattern: `depth` tokens long, continued `total` times. A match is fixed once made (a
    round's tree asks several offers of the same one), so `counts` counts once."""

    depth: int
    total: int
    _counts: Counter | None = None

    def counts(self) -> Counter:
        if self._counts is None:
            self._counts = self.count()
        return self._counts

    def count(self) -> Counter:
        raise NotImplementedError

    def follow(self, token: int) -> Match | None:
        raise NotImplementedError


class LocalMatch(Match):
    def __init__(self, tokens: list[int], ends: list[int], depth: int):
        self.tokens, self.ends, self.depth = tokens, ends, depth  # ends: index of the token after each occurrence
        self.total = len(ends)

    def count(self) -> Counter:
        return Counter(self.tokens[e] for e in self.ends)

    def follow(self, token: int) -> LocalMatch | None:
        ends = [e + 1 for e in self.ends if self.tokens[e] == token and e + 1 < len(self.tokens)]
        return LocalMatch(self.tokens, ends, self.depth + 1) if ends else None


class LocalIndex:
    """Every n-gram (n ≤ max_depth) of a growing sequence, with where each was continued."""

    def __init__(self, max_depth: int = 8):
        self.max_depth = max_depth
        self.tokens: list[int] = []
        self.ends: dict[tuple[int, ...], list[int]] = {}

    def extend(self, new_tokens: Iterable[int]) -> None:
        for token in new_tokens:
            self.tokens.append(token)
            end = len(self.tokens) - 1  # the n-grams just before `token` are now continued by it
            for n in range(1, min(self.max_depth, end) + 1):
                self.ends.setdefault(tuple(self.tokens[end - n : end]), []).append(end)

    def longest_match(self, context: list[int]) -> LocalMatch | None:
        """The longest suffix of `context` (≤ max_depth tokens) seen before, continued at least once."""
        for n in range(min(self.max_depth, len(context)), 0, -1):
            ends = self.ends.get(tuple(context[-n:]))
            if ends:
                return LocalMatch(self.tokens, ends, n)
        return None


class CorpusMatch(Match):
    def __init__(self, corpus: SuffixCorpus, lo: int, hi: int, depth: int, exclude: int | None):
        self.corpus, self.lo, self.hi, self.depth, self.exclude = corpus, lo, hi, depth, exclude
        self.starts = self._starts()
        self.total = len(self.starts)

    def _starts(self) -> np.ndarray:
        """Where the occurrences are continued by a token (a stride sample of at most COUNT_SAMPLE), the
        excluded document's left out; an occurrence that ends its document is not a continuation."""
        step = max(1, (self.hi - self.lo) // COUNT_SAMPLE)
        starts = self.corpus.order[self.lo : self.hi : step]
        if self.exclude is not None:
            starts = starts[self.corpus.document_of[starts] != self.exclude]
        starts = starts + self.depth
        starts = starts[starts < len(self.corpus.tokens)]
        return starts[self.corpus.tokens[starts] != SEPARATOR]

    def count(self) -> Counter:
        step = max(1, (self.hi - self.lo) // COUNT_SAMPLE)
        following = self.corpus.tokens[self.starts]
        if len(following) <= SMALL_COUNT:  # most matches deep in a tree: counted in Python, quicker than a sort
            counts = Counter(following.tolist())  # then in token order, as np.unique gives them (ties break alike)
            return Counter({token: counts[token] * step for token in sorted(counts)})
        tokens, counts = np.unique(following, return_counts=True)
        return Counter(dict(zip(tokens.tolist(), (counts * step).tolist())))

    def follow(self, token: int) -> CorpusMatch | None:
        lo, hi = _narrow(self.corpus.tokens, self.corpus.order, self.lo, self.hi, self.depth, token)
        match = CorpusMatch(self.corpus, lo, hi, self.depth + 1, self.exclude)
        return match if match.total else None


class SuffixCorpus:
    """Documents of token ids under one suffix array, bounded to `max_tokens` (oldest dropped first).

    A document may carry a key (its prompt's): a look-up can leave that document out, so that a
    prompt run again never drafts from its own earlier answer when speed is being measured.
    """

    def __init__(self, documents: Iterable[list[int]] = (), max_tokens: int = 2_000_000, max_depth: int = 16):
        self.max_tokens, self.max_depth = max_tokens, max_depth
        self.documents: list[tuple[int | None, list[int]]] = []
        self.size = 0
        self.lock = threading.Lock()
        self.tokens = np.empty(0, dtype=np.int64)  # the documents, each followed by SEPARATOR
        self.order = np.empty(0, dtype=np.int64)  # the suffix array of `tokens`
        self.document_of = np.empty(0, dtype=np.int64)  # each position's document key (-1: none)
        self.stale = False
        for document in documents:
            self.add(document)

    def add(self, document: list[int], key: int | None = None) -> None:
        """Add one document (a run's answer); one per key: a later one of the same key replaces it."""
        if not document:
            return
        with self.lock:
            if key is not None:
                self.documents = [d for d in self.documents if d[0] != key]
            self.documents.append((key, list(document)))
            self.size = sum(len(d) for _, d in self.documents)
            while self.size > self.max_tokens and len(self.documents) > 1:
                self.size -= len(self.documents.pop(0)[1])
            self.stale = True

    def refresh(self) -> None:
        """Rebuild the suffix array now if documents were added (else the next look-up does)."""
        with self.lock:
            if not self.stale:
                return
            parts, owners = [], []
            for key, document in self.documents:
                parts += [document, [SEPARATOR]]
                owners.append(np.full(len(document) + 1, -1 if key is None else key, dtype=np.int64))
            self.tokens = np.array([t for part in parts for t in part], dtype=np.int64)
            self.document_of = np.concatenate(owners) if owners else np.empty(0, dtype=np.int64)
            self.order = suffix_array(self.tokens)
            self.stale = False

    def longest_match(self, context: list[int], exclude: int | None = None) -> CorpusMatch | None:
        """The longest suffix of `context` (≤ max_depth tokens) found in the corpus and continued there,
        outside the document keyed `exclude`. If a suffix occurs, every shorter one does too: bisection."""
        self.refresh()
        best, low, high = None, 1, min(self.max_depth, len(context))
        while low <= high:
            n = (low + high) // 2
            lo, hi = _range(self.tokens, self.order, context[-n:])
            match = CorpusMatch(self, lo, hi, n, exclude) if hi > lo else None
            if match is not None and match.total:
                best, low = match, n + 1
            else:
                high = n - 1
        return best


def _range(corpus: np.ndarray, order: np.ndarray, pattern: list[int]) -> tuple[int, int]:
    """The suffixes order[lo:hi] that start with `pattern`. A suffix that runs out (or meets a
    separator) compares smaller, as `suffix_array` sorts it."""
    m = len(pattern)

    def head(i: int) -> list[int]:
        return corpus[order[i] : order[i] + m].tolist()

    lo = bisect.bisect_left(range(len(order)), pattern, key=head)
    return lo, bisect.bisect_right(range(len(order)), pattern, lo=lo, key=head)


def _narrow(corpus: np.ndarray, order: np.ndarray, lo: int, hi: int, depth: int, token: int) -> tuple[int, int]:
    """Within suffixes order[lo:hi] (all sharing their first `depth` tokens), those whose next token is `token`."""

    def next_token(i: int) -> int:
        position = order[i] + depth
        return int(corpus[position]) if position < len(corpus) else SEPARATOR - 1  # run out: smallest

    start = bisect.bisect_left(range(len(order)), token, lo=lo, hi=hi, key=next_token)
    return start, bisect.bisect_right(range(len(order)), token, lo=start, hi=hi, key=next_token)


def suffix_array(tokens: np.ndarray) -> np.ndarray:
    """Start positions of all suffixes of `tokens` in lexicographic order (prefix doubling, O(n log² n)).

    The order matches `_narrow`: a suffix that runs out sorts before its extensions.
    """
    n = len(tokens)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    rank = np.unique(tokens, return_inverse=True)[1].astype(np.int64) + 1  # 1.. ; 0 means "past the end"
    order = np.argsort(rank, kind="stable")
    step = 1
    while True:
        second = np.zeros(n, dtype=np.int64)
        second[: n - step] = rank[step:] if step < n else second[:0]
        key = rank * (n + 1) + second
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        fresh = np.empty(n, dtype=np.int64)
        fresh[order] = np.concatenate(([1], 1 + np.cumsum(ordered[1:] != ordered[:-1])))
        rank = fresh
        if rank.max() == n or step >= n:
            return order
        step *= 2
