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
