"""The standard model of speculative decoding (Leviathan et al., 2023).

With per-token acceptance probability α, draft length γ and cost ratio c (one draft token costs c
target steps), a round yields (1-α^(γ+1))/(1-α) tokens on average and costs γc + v target steps,
where v, the cost of verifying γ+1 tokens in one forward, is 1 in the paper's model.
"""

from __future__ import annotations


def expected_tokens(alpha: float, gamma: float) -> float:
    """Expected tokens per round: accepted drafts plus the resampled/bonus token."""
    if alpha >= 1.0:
        return gamma + 1.0
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, gamma: float, c: float, verify_cost: float = 1.0) -> float:
    """(1-α^(γ+1)) / ((1-α)(γc + v)) — wall-clock speedup over the target alone."""
    return expected_tokens(alpha, gamma) / (gamma * c + verify_cost)


def optimal_gamma(alpha: float, c: float, verify_cost: float = 1.0, max_gamma: int = 32) -> int:
    """The γ in 1..max_gamma with the highest expected speedup."""
    return max(range(1, max_gamma + 1), key=lambda g: expected_speedup(alpha, g, c, verify_cost))


def alpha_from_mean_tokens(mean_tokens: float, gamma: float) -> float:
    """The per-token α for which expected_tokens(α, γ) equals a measured mean (bisection)."""
    target = min(max(mean_tokens, 1.0), gamma + 1.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens(mid, gamma) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- token trees -------------------------------------------------------------------------------
# A tree of N nodes is verified in one forward costing v(N) target steps (measured: specviz.lab.verify_cost).
# If the draft's rank-r choice at a node matches the target with probability a_r (ranks exclude each
# other, so the a_r add up to at most 1), a node is reached and kept with the product of a_rank along
# its path, and a round yields 1 + the sum of those products. A chain is the tree with rank 0 only:
# a_0 = α gives the formula above.


def sibling_ranks(parents: list[int]) -> list[int]:
    """Each node's rank among its siblings (0 = its parent's first child)."""
    seen: dict[int, int] = {}
    ranks = []
    for parent in parents:
        ranks.append(seen.get(parent, 0))
        seen[parent] = ranks[-1] + 1
    return ranks


def tree_expected_tokens(parents: list[int], accept_by_rank: list[float]) -> float:
    """Expected tokens per round from a tree's shape and the chance a_r that a rank-r child is kept."""
    reach: list[float] = []
    for parent, rank in zip(parents, sibling_ranks(parents)):
        a = accept_by_rank[rank] if rank < len(accept_by_rank) else 0.0
        reach.append((1.0 if parent < 0 else reach[parent]) * a)
    return 1.0 + sum(reach)


def tree_speedup(tokens_per_round: float, draft_steps: float, verify_steps: float) -> float:
    """Tokens per round ÷ what a round costs in target steps (drafting plus the tree's verification)."""
    return tokens_per_round / (draft_steps + verify_steps)


def best_tree(accept_by_rank: list[float], budget: int, max_depth: int = 16) -> list[int]:
    """Parents of the tree of `budget` nodes with the most expected tokens for the given a_r: grown one node at a
    time, always the candidate (a next child of a node already in) with the highest chance of being reached."""
    parents: list[int] = []
    reach: list[float] = []
    depth: list[int] = []
    next_rank = {-1: 0}
    while len(parents) < budget:
        best, value = None, -1.0
        for node, rank in next_rank.items():
            if rank >= len(accept_by_rank) or (node >= 0 and depth[node] >= max_depth):
                continue
            candidate = (1.0 if node < 0 else reach[node]) * accept_by_rank[rank]
            if candidate > value:
                best, value = node, candidate
        if best is None:
            break
        parents.append(best)
        reach.append(value)
        depth.append(1 if best < 0 else depth[best] + 1)
        next_rank[best] += 1
        next_rank[len(parents) - 1] = 0
    return parents
