"""What a token tree buys at a given verification cost v(N): the lesson's trees step, as numbers.

From a tree run's own acceptance by sibling rank (a_r) and draft cost c, the theory gives the expected
speedup of the best tree of N nodes and of the chain of γ = N, each verified at v(N) target steps
(`specviz.theory`). Two v(N) curves are compared: this machine's, measured (`python -m specviz
verify-cost`, shipped in assets/trees/verify_cost.json), and a *theoretical* flat v(N) = 1, the
memory-bound forward a GPU has for small N. No GPU was measured here; the flat curve is labelled as
theory wherever it is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import theory
from ..lab.verify_cost import at_context

FLAT_GPU = "theoretical GPU: v(N) = 1 (a memory-bound forward, not measured here)"


@dataclass(frozen=True)
class TreeCosts:
    nodes: list[int]
    v_here: list[float]  # this machine's v(N), measured, in target steps
    here_tree: list[float]  # expected speedup of the best tree of N nodes at v_here
    here_chain: list[float]  # ... of the chain of γ = N
    flat_tree: list[float]  # the same at the theoretical flat v(N) = 1
    flat_chain: list[float]
    machine: str
    context: int

    def gain(self, n: int, flat: bool = False) -> float:
        """Tree ÷ chain at N nodes: above 1, the tree buys speed."""
        i = self.nodes.index(n)
        tree, chain = (self.flat_tree, self.flat_chain) if flat else (self.here_tree, self.here_chain)
        return tree[i] / chain[i] if chain[i] else 0.0


def tree_costs(accept_by_rank: list[float], c: float, cost: dict, depth: int, context: int) -> TreeCosts:
    measured = at_context(cost, context)
    nodes, steps = list(measured["nodes"]), list(measured["steps"])

    def curves(v_of):
        tree = [
            theory.tree_speedup(
                theory.tree_expected_tokens(theory.best_tree(accept_by_rank, n, depth), accept_by_rank), n * c, v_of(i)
            )
            for i, n in enumerate(nodes)
        ]
        chain = [theory.expected_tokens(accept_by_rank[0], n) / (n * c + v_of(i)) for i, n in enumerate(nodes)]
        return tree, chain

    here_tree, here_chain = curves(lambda i: steps[i])
    flat_tree, flat_chain = curves(lambda i: 1.0)
    return TreeCosts(
        nodes, steps, here_tree, here_chain, flat_tree, flat_chain, measured.get("machine", "?"), measured["context"]
    )
