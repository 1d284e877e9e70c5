"""Token Recycling's table: for every token id, the target's likeliest next tokens and their probabilities.

Token Recycling (Luo et al., 2024) keeps, for each token id t, the top-k tokens the target expected after t the
last time it read t, with their probabilities. They cost nothing to get: a verification forward computes the
target's logits at every node it reads, refused ones included, and those logits say what the target expects
after each node's token. So every round the table's rows for the tokens just read are overwritten
(`RecycleTable.learn`), and a drafter reads a tree of likely continuations out of it, token by token.

- `RecycleTable`: one run's table, [V, k] ids (-1: none yet) and probabilities, with the rows it changed.
- `RecycleStore`: the process's table, which every run starts from and every finished run writes back to, as the
  suffix corpus keeps finished answers. A row keeps its latest writer's prompt key and the latest row written
  under another key, so a prompt run again never starts from what its own earlier run taught (`table_for`).
- The warm start: one teacher-forced pass of the target over the shipped answer corpus (`warm_rows`: each
  token's next-token probabilities averaged over its occurrences), saved beside the corpus (`save_table`).
  A damaged file is refused with a clear message (`read_table`); the store then starts empty and says why.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from pathlib import Path

import numpy as np
import torch

from ..errors import SpecVizError

TOP_K = 8  # next tokens kept per token id (Token Recycling keeps 8)
SHIPPED_TABLE = Path(__file__).resolve().parents[2] / "assets" / "suffix" / "recycle.safetensors"
NO_KEY = -1  # rows of the warm start, and of runs that give no key

_log = logging.getLogger("specviz")


class TableError(SpecVizError):
    """The recycle table file cannot be read."""


class RecycleTable:
    """One run's table: ids [V, k] (-1 where nothing was seen yet) and their probabilities [V, k]."""

    def __init__(self, vocab: int, k: int = TOP_K, ids: np.ndarray | None = None, probs: np.ndarray | None = None):
        self.vocab, self.k = vocab, k
        self.ids = np.full((vocab, k), -1, dtype=np.int64) if ids is None else ids
        self.probs = np.zeros((vocab, k), dtype=np.float32) if probs is None else probs
        self.changed: set[int] = set()  # token ids whose rows this run wrote
        self.read: dict[int, tuple[list[int], list[float]]] = {}  # rows read as lists since `learn` last wrote them

    def row(self, token: int) -> tuple[list[int], list[float]]:
        """The next tokens stored for `token`, likeliest first, and their probabilities (empty when none)."""
        if not 0 <= token < self.vocab:
            return [], []
        kept = self.read.get(token)
        if kept is None:
            ids = self.ids[token]
            n = int((ids >= 0).sum())
            kept = self.read[token] = ids[:n].tolist(), self.probs[token, :n].tolist()
        return kept

    def learn(self, tokens: list[int], ids: torch.Tensor, probs: torch.Tensor) -> None:
        """Overwrite the rows of `tokens` with what the target expected after each ([m, ≤k] ids and probabilities).
        Where a token occurs twice, the later row wins: callers put the rows they trust most last."""
        if not tokens:
            return
        width = min(self.k, ids.shape[1])
        rows = np.asarray(tokens, dtype=np.int64)
        inside = (rows >= 0) & (rows < self.vocab)
        rows, new_ids, new_probs = rows[inside], ids.cpu().numpy()[inside], probs.float().cpu().numpy()[inside]
        for token in rows.tolist():
            self.read.pop(token, None)
        self.ids[rows] = -1
        self.probs[rows] = 0.0
        self.ids[rows, :width] = new_ids[:, :width]
        self.probs[rows, :width] = new_probs[:, :width]
        self.changed.update(rows.tolist())

    def copy(self) -> RecycleTable:
        return RecycleTable(self.vocab, self.k, self.ids.copy(), self.probs.copy())


class RecycleStore:
    """The process's table: every run starts from it (`table_for`) and writes back what it changed (`keep`).

    Two slots per token: the latest row and its writer's key, and the latest row written under another key. A run
    keyed K reads the latest row not written by K, so its own earlier runs never draft for it.
    """

    def __init__(self, vocab: int, k: int = TOP_K):
        self.vocab, self.k = vocab, k
        self.ids = np.full((2, vocab, k), -1, dtype=np.int64)
        self.probs = np.zeros((2, vocab, k), dtype=np.float32)
        self.keys = np.full((2, vocab), NO_KEY, dtype=np.int64)
        self.problem = ""  # why the warm start is missing, where a file was there but could not be read
        self.warm = 0  # rows filled by the warm start
        self.lock = threading.Lock()

    def start_from(self, tokens: np.ndarray, ids: np.ndarray, probs: np.ndarray) -> None:
        """Fill rows from a warm start (its rows may hold fewer than k next tokens)."""
        inside = (tokens >= 0) & (tokens < self.vocab)
        tokens, ids, probs = tokens[inside], ids[inside], probs[inside]
        width = min(self.k, ids.shape[1])
        with self.lock:
            self.ids[0, tokens, :width] = ids[:, :width]
            self.probs[0, tokens, :width] = probs[:, :width]
            self.keys[0, tokens] = NO_KEY
            self.warm = len(tokens)

    def table_for(self, key: int | None = None) -> RecycleTable:
        """A run's own copy: each row the latest one not written under `key`."""
        with self.lock:
            own = self.keys[0] == key if key is not None else None
            if own is None or not own.any():
                return RecycleTable(self.vocab, self.k, self.ids[0].copy(), self.probs[0].copy())
            return RecycleTable(self.vocab, self.k, np.where(own[:, None], self.ids[1], self.ids[0]),
                                np.where(own[:, None], self.probs[1], self.probs[0]))

    def keep(self, table: RecycleTable, key: int | None = None) -> None:
        """Write back the rows a finished run changed, under its key."""
        rows = np.fromiter(table.changed, dtype=np.int64, count=len(table.changed))
        if not len(rows):
            return
        key = NO_KEY if key is None else key
        with self.lock:
            other = rows[self.keys[0, rows] != key]  # their latest row moves to the second slot
            self.ids[1, other], self.probs[1, other], self.keys[1, other] = (
                self.ids[0, other], self.probs[0, other], self.keys[0, other])
            self.ids[0, rows], self.probs[0, rows], self.keys[0, rows] = table.ids[rows], table.probs[rows], key


def warm_rows(documents: list[list[int]], top_ids: list[np.ndarray], top_probs: list[np.ndarray],
              k: int = TOP_K) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each token's row from a teacher-forced pass: the next-token probabilities the target gave after it, summed
    over its occurrences (each occurrence's top list), divided by how often it occurred, the k largest kept.

    documents[d][i] is followed, in the target's eyes, by top_ids[d][i] with top_probs[d][i] ([len, K] each).
    Returns (tokens [R], ids [R, k], probs [R, k]), ids -1 where a token's occurrences named fewer than k.
    """
    tokens = np.concatenate([np.asarray(d, dtype=np.int64) for d in documents])
    ids = np.concatenate(top_ids).astype(np.int64)
    probs = np.concatenate(top_probs).astype(np.float64)
    base = int(ids.max()) + 1
    pairs, where = np.unique(np.repeat(tokens, ids.shape[1]) * base + ids.reshape(-1), return_inverse=True)
    mass = np.bincount(where, weights=probs.reshape(-1))  # summed probability of each (token, next) pair
    pair_token, pair_next = pairs // base, pairs % base
    order = np.lexsort((-mass, pair_token))  # by token, then likeliest next first
    pair_token, pair_next, mass = pair_token[order], pair_next[order], mass[order]
    unique, first, seen = np.unique(pair_token, return_index=True, return_counts=True)
    rank = np.arange(len(pair_token)) - np.repeat(first, seen)
    keep = rank < k
    row = np.repeat(np.arange(len(unique)), seen)[keep]
    occurrences = np.bincount(tokens)[unique]
    out_ids = np.full((len(unique), k), -1, dtype=np.int64)
    out_probs = np.zeros((len(unique), k), dtype=np.float32)
    out_ids[row, rank[keep]] = pair_next[keep]
    out_probs[row, rank[keep]] = mass[keep] / occurrences[row]
    return unique, out_ids, out_probs


def save_table(path: Path, tokens: np.ndarray, ids: np.ndarray, probs: np.ndarray, header: dict) -> None:
    """Warm rows in one small safetensors file: int32 token ids and next ids, fp16 probabilities."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"tokens": torch.from_numpy(np.asarray(tokens, dtype=np.int32)),
               "ids": torch.from_numpy(np.asarray(ids, dtype=np.int32)),
               "probs": torch.from_numpy(np.asarray(probs, dtype=np.float16))},
              str(path), metadata={"json": json.dumps(header)})


def read_table(path: Path) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """What `save_table` wrote: (header, tokens [R], ids [R, k], probs [R, k]); TableError when it is damaged."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            header = json.loads((f.metadata() or {}).get("json", "{}"))
        tensors = load_file(str(path))
        tokens, ids, probs = (tensors[name].numpy() for name in ("tokens", "ids", "probs"))
    except (OSError, SafetensorError, ValueError, KeyError) as exc:
        raise TableError(f"the recycle table {path} cannot be read ({exc}); delete it, or make it again with "
                         "scripts/make_recycle_table.py") from None
    if ids.ndim != 2 or ids.shape != probs.shape or tokens.shape != (ids.shape[0],):
        raise TableError(f"the recycle table {path} is damaged (shapes {tuple(tokens.shape)}, {tuple(ids.shape)}, "
                         f"{tuple(probs.shape)}); make it again with scripts/make_recycle_table.py")
    return header, tokens.astype(np.int64), ids.astype(np.int64), probs.astype(np.float32)


def store_from(path: Path | None, vocab: int, fingerprint: str) -> RecycleStore:
    """A store warm-started from `path` when it holds rows for this tokenizer; empty (saying why) otherwise."""
    store = RecycleStore(vocab)
    if path is None or not Path(path).exists():
        return store
    try:
        header, tokens, ids, probs = read_table(Path(path))
    except TableError as exc:
        store.problem = str(exc)
        _log.warning("%s; the recycle drafter starts with an empty table", exc)
        return store
    if header.get("tokenizer") == fingerprint:
        store.start_from(tokens, ids, probs)
    return store


@functools.lru_cache(maxsize=8)
def shared_store(fingerprint: str, vocab: int) -> RecycleStore:
    """The process's table for a tokenizer (every run's recycle drafter starts from it and writes back to it)."""
    return store_from(SHIPPED_TABLE, vocab, fingerprint)
