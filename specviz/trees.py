"""Token trees: draft several continuations and verify them all in one target forward.

A chain drafts d_1 .. d_γ and loses everything after its first miss. A tree drafts several
candidates per position (SpecInfer, Medusa, EAGLE-2): node i holds a token that follows node
`parents[i]` (-1 is the root, the last committed token). Nodes are listed parents first, and the
children of a node in the order they were drawn. The target reads the root and every node in one
forward where each node attends to the committed context, its ancestors and itself (a 4-D
attention mask, positions by depth), so its p at every node is what a chain through that node
would have produced. Verification walks from the root and keeps one branch:

- greedy: the child holding the target's own choice, as long as there is one;
- sampling: recursive rejection sampling over the children in draw order (SpecInfer; Jeon et
  al.'s recursive speculative decoding for children drawn without replacement). Child i is
  accepted with probability min(1, p_i(t_i) / q_i(t_i)); after a rejection p_{i+1} =
  norm(max(0, p_i - q_i)) and q_{i+1} is q_i without t_i. The token that comes out is distributed
  as p, whatever the children were. A drafter with certain proposals (n-gram) has one-hot q_i.

Both KV caches then keep the accepted branch only (`keep_branch`). Which nodes a drafter grows is
`grow`: every expanded node gets `branching` children (top-k of q, or drawn without replacement
when sampling); at each depth the `branching` best new nodes are expanded further; at the end the
`budget` best nodes are kept. "Best" is the draft's cumulative probability along the path
(EAGLE-2's dynamic tree) or a fixed prior per sibling rank (a static tree: the same shape every
round).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from .config import Sampling, TreeShape, Verification
from .verify import LazyLogits, Verdict, distribution, greatest, residual

# A static tree's prior that the child of sibling rank r is accepted: 0.6 for the draft's first choice, each
# lower rank half the one above. Only the order of the products matters: it fixes the shape.
STATIC_PRIOR = (0.6, 0.3, 0.15, 0.075, 0.0375, 0.01875, 0.009375, 0.0046875)


def depths(parents: list[int]) -> list[int]:
    """Depth of every node (1 for a child of the root)."""
    out: list[int] = []
    for parent in parents:
        out.append(1 if parent < 0 else out[parent] + 1)
    return out


def ancestors(parents: list[int], node: int) -> list[int]:
    """The nodes on the path from the root to `node`, node included, root first."""
    path = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


def children(parents: list[int], node: int) -> list[int]:
    """The children of `node` (-1: the root) in the order they were drawn."""
    return [i for i, parent in enumerate(parents) if parent == node]


# --- attention over a tree -------------------------------------------------------------------
def visibility(parents: list[int], slots: list[int], rows: list[int], past: int, total: int,
               device=None) -> torch.Tensor:
    """Which keys each of `rows` (nodes) may read: the first `past` cache entries, its ancestors and itself.

    slots[i] is the cache entry (after the first `past`) that holds node i. Returns a bool [len(rows), total].
    """
    tail = [[False] * (total - past) for _ in rows]  # built as lists: one tensor copy, not an op per entry
    for r, node in enumerate(rows):
        for a in ancestors(parents, node):
            tail[r][slots[a]] = True
    allowed = torch.ones(len(rows), total, dtype=torch.bool, device=device)
    allowed[:, past:] = torch.tensor(tail, dtype=torch.bool, device=device)
    return allowed


def additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A bool [q, k] visibility as the 4-D additive mask transformers takes as-is: 0 to attend, the minimum not."""
    mask = torch.zeros(1, 1, *allowed.shape, dtype=dtype, device=allowed.device)
    return mask.masked_fill_(~allowed, torch.finfo(dtype).min)


def rooted(parents: list[int]) -> list[int]:
    """The tree with its root as node 0 (what the target reads: the last committed token, then the nodes)."""
    return [-1] + [parent + 1 for parent in parents]


def target_attention(parents: list[int], past: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The 4-D additive mask and position ids for a target forward over [root, node 0 .. node N-1].

    The root (the last committed token) sits at position `past`, a node of depth d at past + d.
    """
    n = len(parents) + 1
    allowed = visibility(rooted(parents), list(range(n)), list(range(n)), past, past + n, device)
    positions = torch.tensor([[past] + [past + d for d in depths(parents)]], device=device)
    return additive(allowed, dtype), positions


class TreeFeed:
    """A drafter's reads while growing a tree: the nodes whose keys follow its `past` cached entries, in order.

    Its last cached entry holds the last committed token (position past - 1), so a node of depth d sits at
    position past - 1 + d and reads the cache, its ancestors and itself.
    """

    def __init__(self, past: int):
        self.past = past
        self.fed: list[int] = []  # nodes in the order they were read (numbered as `grow` numbers them)
        self.slot: dict[int, int] = {}

    def read(self, nodes: list[int], parents: list[int], device) -> tuple[torch.Tensor, torch.Tensor]:
        """Record `nodes` as read next; their visibility (bool [n, past + all read]) and positions [n]."""
        for node in nodes:
            self.slot[node] = len(self.fed)
            self.fed.append(node)
        slots = [self.slot.get(i, -1) for i in range(len(parents))]
        allowed = visibility(parents, slots, nodes, self.past, self.past + len(self.fed), device)
        level = depths(parents)
        return allowed, torch.tensor([self.past - 1 + level[n] for n in nodes], device=device)

    def kept_slots(self, branch: list[int]) -> list[int]:
        """Cache slots of the kept branch's nodes that were read: a node is read only after its parent, so they
        are a prefix of the branch."""
        slots = []
        for node in branch:
            if node not in self.slot:
                break
            slots.append(self.slot[node])
        return slots


def keep_branch(cache: DynamicCache, start: int, fed: int, kept: list[int]) -> None:
    """Keep, of the `fed` cache entries from `start` on, those at offsets `kept` (in order); drop the rest.

    A chain keeps a prefix, which is a crop. A tree keeps one branch scattered among its siblings:
    those entries are moved down to follow `start` and the cache is cut after them.
    """
    if kept != list(range(len(kept))):
        index = torch.tensor(kept, device=cache.layers[0].keys.device) + start
        for layer in cache.layers:
            layer.keys[..., start : start + len(kept), :] = layer.keys.index_select(-2, index)
            layer.values[..., start : start + len(kept), :] = layer.values.index_select(-2, index)
    if fed > len(kept):
        cache.crop(-(fed - len(kept)))


# --- growing a tree --------------------------------------------------------------------------
@dataclass
class Grown:
    """A drafted tree: tokens, parents and, per node, the q row it was drawn from (None: one-hot)."""

    tokens: list[int]
    parents: list[int]
    rows: torch.Tensor | None  # [N, V]: node i was drawn from rows[i] (its parent's q); None for certain proposals
    origin: list[int]  # each kept node's number while growing (what `expand` was called with)


def grow(root_q: torch.Tensor, expand: Callable[[list[int], list[int], list[int]], torch.Tensor],
         shape: TreeShape, max_depth: int, sampling: Sampling, generator, vocab: torch.Tensor | None = None) -> Grown:
    """Grow a tree from q at the root (EAGLE-2's expand, then rerank).

    expand(nodes, tokens, parents) reads the given new nodes (their tokens, the tree so far) and returns q
    at each of them, [len(nodes), V]: the drafter's forward over them with tree attention. q may live on a
    draft vocabulary: `vocab` then maps its indices to token ids, and the rows returned stay on it.
    """
    k = shape.branching
    tokens: list[int] = []
    parents: list[int] = []
    rows: list[torch.Tensor] = []
    scores: list[float] = []
    value = [1.0]  # value of the nodes expanded this depth (the root first)
    frontier, frontier_q = [-1], root_q.unsqueeze(0)
    for depth in range(1, max_depth + 1):
        new = []
        for parent, q, parent_value in zip(frontier, frontier_q, value):
            drawn = _draw(q, k, sampling, generator)
            running = float("inf")
            token_ids = (drawn if vocab is None else vocab[drawn]).tolist()
            for rank, (index, token) in enumerate(zip(drawn.tolist(), token_ids)):
                prior = STATIC_PRIOR[min(rank, len(STATIC_PRIOR) - 1)] if shape.mode == "static" else float(q[index])
                # A later sibling never outranks an earlier one: kept children are a prefix of the draw order,
                # which recursive rejection sampling requires.
                running = min(running, parent_value * prior)
                new.append(len(tokens))
                tokens.append(token)
                parents.append(parent)
                rows.append(q)
                scores.append(running)
        if depth == max_depth:
            break
        chosen = sorted(new, key=lambda i: -scores[i])[:k]
        frontier, value = chosen, [scores[i] for i in chosen]
        frontier_q = expand(chosen, tokens, parents)
    keep = _best(scores, shape.budget)
    renumber = {old: new for new, old in enumerate(keep)}
    return Grown(
        tokens=[tokens[i] for i in keep],
        parents=[renumber[parents[i]] if parents[i] >= 0 else -1 for i in keep],
        rows=torch.stack([rows[i] for i in keep]),
        origin=keep,
    )


def _draw(q: torch.Tensor, k: int, sampling: Sampling, generator) -> torch.Tensor:
    """k distinct children of a node: the top k of q (greedy) or k draws without replacement."""
    k = min(k, int((q > 0).sum()))
    if sampling.greedy:
        return q.topk(k).indices
    return torch.multinomial(q, k, replacement=False, generator=generator)


def _best(scores: list[float], budget: int) -> list[int]:
    """The `budget` nodes of highest score, in drafting order. A node never scores above its parent and is
    numbered after it, so ordering by (score, number) puts every parent before its children: the nodes kept
    always include their ancestors."""
    return sorted(sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:budget])


def trie(branches: list[list[int]], budget: int) -> tuple[list[int], list[int]]:
    """Merge token sequences into a tree of at most `budget` nodes (shared prefixes become one path)."""
    tokens: list[int] = []
    parents: list[int] = []
    index: dict[tuple[int, int], int] = {}  # (parent, token) -> node
    for branch in branches:
        parent = -1
        for token in branch:
            node = index.get((parent, token))
            if node is None:
                if len(tokens) >= budget:
                    break
                node = index[(parent, token)] = len(tokens)
                tokens.append(token)
                parents.append(parent)
            parent = node
    return tokens, parents


def merge_trees(first: tuple[list[int], list[int]], second: tuple[list[int], list[int]], budget: int):
    """One tree of at most `budget` nodes: every path of the first tree, then those of the second (shared
    prefixes become one path). Each tree is (tokens, parents)."""
    def paths(tokens, parents):
        return [[tokens[a] for a in ancestors(parents, node)] for node in range(len(tokens))]

    return trie(paths(*first) + paths(*second), budget)


# --- verification ----------------------------------------------------------------------------
@dataclass
class TreeVerdict(Verdict):
    """A verdict on a tree; p holds the target's distribution at the root and at each accepted node."""

    path: list[int] = None  # the accepted nodes, nearest the root first
    checked: list[int] = None  # nodes the target tested and refused

    @property
    def kept(self) -> list[int]:
        return self.path


def verify_tree(logits: LazyLogits, tokens: torch.Tensor, parents: list[int], rows: torch.Tensor | None,
                sampling: Sampling, rule: Verification, generator=None) -> TreeVerdict:
    """Walk the tree from the root and keep one branch.

    logits: the target's logits at [root, node 0 .. node N-1] (row 0 is the root's). rows: the q row each node
    was drawn from ([N, V], siblings share their parent's), or None for certain proposals (one-hot q).
    """
    relaxed = rule.mode == "relaxed"
    if relaxed and not sampling.greedy and rule.lenience != 1.0:
        raise ValueError("trees verify sampled drafts exactly; relaxed lenience is for chains")
    token_list = tokens.tolist()
    path: list[int] = []
    rejected: list[int] = []
    shown_rows = [0]  # rows of p computed along the path
    node = -1
    while True:
        row = 0 if node < 0 else node + 1
        logit = _row(logits, row)
        options = children(parents, node)
        if sampling.greedy:
            chosen = _greedy_child(logit, options, token_list, rule if relaxed else None)
            rejected += [c for c in options if c != chosen] if chosen is not None else options
            if chosen is None:
                next_token, resampled = int(greatest(logit)), bool(options)
                break
        else:
            p = distribution(logit.unsqueeze(0), sampling)[0]
            chosen, next_token, tested = _sample_child(p, options, token_list, rows, generator)
            rejected += tested
            if chosen is None:
                resampled = bool(options)
                break
        path.append(chosen)
        node = chosen
        shown_rows.append(chosen + 1)
    p_rows = distribution(torch.stack([_row(logits, r) for r in shown_rows]), sampling)
    return TreeVerdict(len(path), next_token, resampled, p_rows, path=path, checked=rejected)


def _row(logits: LazyLogits, row: int) -> torch.Tensor:
    return logits.rows([row])[0]


def _greedy_child(logit: torch.Tensor, options: list[int], tokens: list[int], relaxed: Verification | None):
    """The child holding the target's choice (exact) or the likeliest child that passes the relaxed test."""
    if not options:
        return None
    if relaxed is None:
        best = int(greatest(logit))
        return next((c for c in options if tokens[c] == best), None)
    logp = logit.float().log_softmax(-1)
    passing = [c for c in options
               if int((logp > logp[tokens[c]]).sum()) < relaxed.top_k
               and logp[tokens[c]] >= logp.max() - relaxed.tolerance]
    return max(passing, key=lambda c: float(logp[tokens[c]]), default=None)


def _sample_child(p: torch.Tensor, options: list[int], tokens: list[int], rows, generator):
    """Recursive rejection sampling over the children in draw order: (accepted child or None, token, rejected)."""
    tested = []
    q = None if rows is None or not options else rows[options[0]].clone()
    for child in options:
        t = tokens[child]
        q_i = q if q is not None else _one_hot(p, t)
        if float(torch.rand((), generator=generator, device=p.device)) * float(q_i[t]) < float(p[t]):
            return child, t, tested
        tested.append(child)
        p = residual(p, q_i)  # p_{i+1} = norm(max(0, p_i - q_i)); it holds no mass on t any more
        if q is not None:  # the next child was drawn without t: q_{i+1} = q_i without t, renormalised
            q[t] = 0.0
            q = q / q.sum() if float(q.sum()) > 0 else q
    return None, int(torch.multinomial(p, 1, generator=generator)), tested


def _one_hot(p: torch.Tensor, token: int) -> torch.Tensor:
    q = torch.zeros_like(p)
    q[token] = 1.0
    return q


# --- what a round keeps --------------------------------------------------------------------------
def branch_rows(hidden: torch.Tensor, kept: list[int]) -> torch.Tensor:
    """Rows of a verification forward for the root and the kept nodes (a chain's are a prefix: a view)."""
    if kept == list(range(len(kept))):
        return hidden[: len(kept) + 1]
    return hidden[torch.tensor([0] + [node + 1 for node in kept], device=hidden.device)]
