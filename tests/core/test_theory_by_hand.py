"""The theory's formulas against numbers worked out by hand, not against the formulas themselves.

α = per-token acceptance, γ = draft length, c = draft/target cost ratio, v = verification cost.
"""

from __future__ import annotations

import pytest

from specviz import theory


def test_expected_tokens_per_round_by_hand():
    # (1 - α^(γ+1)) / (1 - α) at α = 0.5, γ = 3: (1 - 1/16) / (1/2) = 15/8
    assert theory.expected_tokens(0.5, 3) == pytest.approx(1.875)
    # α = 0.8, γ = 4: (1 - 0.32768) / 0.2
    assert theory.expected_tokens(0.8, 4) == pytest.approx(3.3616)
    assert theory.expected_tokens(0.0, 5) == pytest.approx(1.0)  # every draft refused: the target's token only
    assert theory.expected_tokens(1.0, 3) == pytest.approx(4.0)  # every draft kept, plus the bonus token


def test_expected_speedup_and_best_gamma_by_hand():
    # 1.875 tokens for γc + v = 3 · 0.1 + 1 = 1.3 target steps
    assert theory.expected_speedup(0.5, 3, 0.1) == pytest.approx(1.875 / 1.3)
    # γ = 1: 1.5 / 1.1 = 1.364; γ = 2: 1.75 / 1.2 = 1.458; γ = 3: 1.875 / 1.3 = 1.442
    assert theory.optimal_gamma(0.5, 0.1) == 2
    # a verification costing 2 steps halves the speedup at c = 0
    assert theory.expected_speedup(0.5, 3, 0.0, verify_cost=2.0) == pytest.approx(1.875 / 2)


@pytest.mark.parametrize("alpha, gamma", [(0.5, 3), (0.8, 4), (0.2, 1), (0.95, 8)])
def test_inverse_recovers_alpha(alpha, gamma):
    assert theory.alpha_from_mean_tokens(theory.expected_tokens(alpha, gamma), gamma) == pytest.approx(alpha, abs=1e-9)


def test_inverse_clamps_to_what_a_round_can_yield():
    assert theory.alpha_from_mean_tokens(1.875, 3) == pytest.approx(0.5)
    assert theory.alpha_from_mean_tokens(0.5, 3) == pytest.approx(0.0, abs=1e-9)  # under 1 token: α = 0
    # over γ + 1: α = 1 (the curve is flat there, so bisection gets within a few 1e-9)
    assert theory.alpha_from_mean_tokens(9.0, 3) == pytest.approx(1.0, abs=1e-6)


# A small tree: two children of the root (ranks 0, 1), two children of node 0 (ranks 0, 1), one child of node 2.
#        root
#       /    \
#     n0      n1
#    /  \
#  n2    n3
#  |
#  n4
SMALL_TREE = [-1, -1, 0, 0, 2]


def test_sibling_ranks_by_hand():
    assert theory.sibling_ranks(SMALL_TREE) == [0, 1, 0, 1, 0]


def test_tree_formula_on_a_small_tree_by_hand():
    # a_0 = 0.6, a_1 = 0.2: reach n0 = .6, n1 = .2, n2 = .6 · .6 = .36, n3 = .6 · .2 = .12, n4 = .36 · .6 = .216
    assert theory.tree_expected_tokens(SMALL_TREE, [0.6, 0.2]) == pytest.approx(1 + 0.6 + 0.2 + 0.36 + 0.12 + 0.216)
    assert theory.tree_expected_tokens(SMALL_TREE, [0.6, 0.2]) == pytest.approx(2.496)
    # a rank with no chance given (a_1 missing) keeps only the rank-0 path: 1 + .6 + .36 + .216
    assert theory.tree_expected_tokens(SMALL_TREE, [0.6]) == pytest.approx(2.176)
    # 2.496 tokens for 0.3 draft steps + 1.2 verification steps
    assert theory.tree_speedup(2.496, 0.3, 1.2) == pytest.approx(1.664)


def test_a_chain_is_the_tree_with_rank_zero_only():
    assert theory.tree_expected_tokens([-1, 0, 1], [0.5]) == pytest.approx(1.875)  # 1 + .5 + .25 + .125


def test_best_tree_by_hand():
    # grown greedily by the chance of reaching the new node: n0 under the root (.6), n1 under n0 (.36),
    # n2 under n1 (.216); the fourth node goes back to the root's second child (.2 beats .1296 under n2).
    assert theory.best_tree([0.6, 0.2], 3) == [-1, 0, 1]
    assert theory.best_tree([0.6, 0.2], 4) == [-1, 0, 1, -1]
    # one level deep and two ranks: the root's two children are all there is, whatever the budget
    assert theory.best_tree([0.6, 0.2], 4, max_depth=1) == [-1, -1]
