"""Fit the chance that the target keeps a recycled candidate, from live greedy runs on TRAIN prompts.

The recycle table stores, after each token, the target's top-k next tokens and their probabilities the last time it
read that token, in another context. How often the target keeps such a candidate once its parent was kept is
fitted here as P(kept) = σ(a + b·ln p + c·rank), p the stored probability, rank its place in the row
(`recycle.CHANCE`). The blend drafter drafts trees of up to 24 nodes, γ 6, with verification priced as free (so
unlikely candidates are drafted and tested too), the warm-started table learning as it goes, on the first N TRAIN
prompts of each category (never an EVAL prompt); every node whose parent was kept is one sample. The copies'
fitted chance (the suffix drafter's `acceptance`) is checked for calibration beside it.

    python benchmarks/fit_recycle_chance.py --per-category 4 --out benchmarks/results/recycle-fit.md
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.config import Decoding, TreeShape  # noqa: E402
from specviz.decode import generate  # noqa: E402
from specviz.drafters import build_drafter  # noqa: E402
from specviz.drafters.recycle import RECYCLED  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.prompts import first_per_category, load_prompt_set  # noqa: E402


def watch(drafter, samples: list[tuple]) -> None:
    """Record, for every node tested (its parent kept), (source, chance given its parent, stored p, rank, kept)."""
    propose, feedback, pending = drafter.propose, drafter.feedback, []

    def watched_propose(context, k, sampling, generator):
        table = drafter.table  # as it was when the tree was drawn
        proposal = propose(context, k, sampling, generator)
        tokens = proposal.ids.tolist()
        parents = proposal.parents if proposal.parents is not None else list(range(-1, len(tokens) - 1))
        scores = drafter.last.scores
        nodes = []
        for i, token in enumerate(tokens):
            parent = parents[i]
            before = int(context[0, -1]) if parent < 0 else tokens[parent]
            ids, probs = table.row(before)
            rank = ids.index(token) if token in ids else -1
            chance = scores[i] / (scores[parent] if parent >= 0 else 1.0)
            nodes.append((proposal.sources[i], chance, probs[rank] if rank >= 0 else 0.0, rank, parent))
        pending[:] = nodes
        return proposal

    def watched_feedback(kept, hidden=None, timing=None, verified=None):
        kept_set = set(kept)
        for i, (source, chance, p, rank, parent) in enumerate(pending):
            if parent < 0 or parent in kept_set:
                samples.append((source, chance, p, rank, i in kept_set))
        feedback(kept, hidden, timing, verified)

    drafter.propose, drafter.feedback = watched_propose, watched_feedback


def logistic(x: np.ndarray, y: np.ndarray, steps: int = 50) -> np.ndarray:
    """Weights w of P(y) = σ(x·w), by Newton's method (a little ridge keeps it finite)."""
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-x @ w))
        grad = x.T @ (y - p) - 1e-3 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + 1e-3 * np.eye(x.shape[1])
        w += np.linalg.solve(hess, grad)
    return w


def calibration(chance: np.ndarray, kept: np.ndarray) -> list[str]:
    lines = ["| predicted | nodes | kept (observed) |", "| --- | ---: | ---: |"]
    for low, high in [(0, 0.1), (0.1, 0.2), (0.2, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 1.01)]:
        inside = (chance >= low) & (chance < high)
        if inside.any():
            lines.append(f"| {low:.1f}–{min(high, 1):.1f} (mean {chance[inside].mean():.2f}) | {inside.sum()} | "
                         f"{kept[inside].mean():.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-category", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    target = load_model("default")
    prompts = first_per_category(load_prompt_set(split="train"), args.per_category)
    samples: list[tuple] = []
    settings = Decoding(gamma=6, max_new_tokens=args.max_new_tokens, tree=TreeShape(budget=24, branching=3))
    began = time.perf_counter()
    for row in prompts:
        drafter = build_drafter("blend", target)
        drafter.verify_cost = lambda n: 1.0  # draft every candidate the budget allows: the fit sees unlikely ones too
        watch(drafter, samples)
        generate(target, drafter, row["prompt"], settings, detail=False)  # its finish keeps what the run taught
    recycled = [s for s in samples if s[0] == RECYCLED and s[3] >= 0]
    p = np.array([s[2] for s in recycled])
    rank = np.array([s[3] for s in recycled], dtype=float)
    kept = np.array([s[4] for s in recycled], dtype=float)
    x = np.stack([np.ones_like(p), np.log(np.maximum(p, 1e-6)), rank], axis=1)
    a, b, c = logistic(x, kept)
    fitted = 1 / (1 + np.exp(-x @ np.array([a, b, c])))
    copies = [s for s in samples if s[0] != RECYCLED]
    lines = [
        f"# The chance a recycled candidate is kept ({machine(target.device)})",
        "",
        f"`python benchmarks/fit_recycle_chance.py --per-category {args.per_category}"
        f" --max-new-tokens {args.max_new_tokens}`: {len(prompts)} TRAIN prompts, {len(samples)} tested nodes"
        f" ({len(recycled)} recycled, {len(copies)} copied), {time.perf_counter() - began:.0f} s.",
        "",
        f"P(kept | parent kept) = σ({a:.3f} + {b:.3f}·ln p + {c:.3f}·rank)",
        "",
        "Recycled, the stored p as the chance (before the fit):",
        "",
        *calibration(p, kept),
        "",
        "Recycled, the fitted chance:",
        "",
        *calibration(fitted, kept),
        "",
        "Copied (the suffix drafter's fitted acceptance, in the blended tree):",
        "",
        *calibration(np.array([s[1] for s in copies]), np.array([s[4] for s in copies], dtype=float)),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    print(f"CHANCE = ({a:.3f}, {b:.3f}, {c:.3f})")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    assert all(math.isfinite(w) for w in (a, b, c))


if __name__ == "__main__":
    main()
