"""What a scored tree promised against what the target kept: the calibration of `recycle`, `blend` and `auto`.

Each round a scored drafter ranks its nodes by a score, the chance that the node is reached and kept, and cuts the
tree where expected tokens per target step peak (`specviz.drafters.scored`). This runs the drafter on evaluation
prompts (greedy; the target alone is not run) and reports, from every round's proposal and what verification kept:

- tokens per round made, and the 1 + Σ scores the trees promised;
- by source: the nodes drafted, their mean score, and how often they were reached and kept;
- per judged node (its parent kept, or the root): the chance its source gave it (score ÷ parent's score) against
  how often it was kept, at the root and below it;
- nodes, drafting and verification milliseconds per round, and milliseconds per token (drafting + verification).

It reads only what every version of the scored drafters records (a proposal's scores, sources and parents), so the
same command run at an earlier commit gives the "before" figures.

    python benchmarks/tree_calibration.py --draft auto --tree-budget 8 --per-category 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.config import Decoding, TreeShape
from specviz.decode import generate
from specviz.drafters import recycle
from specviz.drafters.registry import build_drafter
from specviz.lab.measure import machine
from specviz.models import load_model
from specviz.prompts import first_per_category, load_prompt_set


def record_rounds(log: list[dict]) -> None:
    """Every scored drafter's proposal (scores, sources, parents of the nodes drafted) and what was kept, into `log`."""
    proposal, feedback = recycle.RecycleDrafter.proposal, recycle.RecycleDrafter.feedback

    def logged_proposal(self, tree, device):
        out = proposal(self, tree, device)
        n = int(out.ids.shape[0])
        log.append({"scores": list(tree.scores[:n]), "sources": list(tree.sources[:n]),
                    "parents": list(tree.parents[:n])})
        return out

    def logged_feedback(self, kept, hidden=None, timing=None, verified=None):
        if log and "kept" not in log[-1]:
            log[-1]["kept"] = list(kept)
        return feedback(self, kept, hidden, timing, verified)

    recycle.RecycleDrafter.proposal, recycle.RecycleDrafter.feedback = logged_proposal, logged_feedback


def summary(log: list[dict]) -> dict:
    rounds = [r for r in log if "kept" in r]
    by_source = defaultdict(lambda: [0, 0.0, 0])  # nodes, Σ score, reached and kept
    by_edge = defaultdict(lambda: [0, 0.0, 0])  # (source, at root) -> judged nodes, Σ chance, kept
    for r in rounds:
        kept, scores, parents = set(r["kept"]), r["scores"], r["parents"]
        for node, (score, source, parent) in enumerate(zip(scores, r["sources"], parents)):
            cell = by_source[source]
            cell[0], cell[1], cell[2] = cell[0] + 1, cell[1] + score, cell[2] + (node in kept)
            if parent < 0 or parent in kept:
                edge = by_edge[source, parent < 0]
                chance = score / (scores[parent] if parent >= 0 else 1.0)
                edge[0], edge[1], edge[2] = edge[0] + 1, edge[1] + chance, edge[2] + (node in kept)
    n = max(1, len(rounds))
    return {"rounds": len(rounds), "promised": sum(1 + sum(r["scores"]) for r in rounds) / n,
            "made": sum(1 + len(r["kept"]) for r in rounds) / n, "nodes": sum(len(r["scores"]) for r in rounds) / n,
            "by_source": dict(by_source), "by_edge": dict(by_edge)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draft", default="auto", help="a scored drafter: recycle, blend, blend:HEAD or auto")
    parser.add_argument("--tree-budget", type=int, default=8)
    parser.add_argument("--tree-branching", type=int, default=3)
    parser.add_argument("--gamma", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--per-category", type=int, default=2, help="evaluation prompts per workload")
    args = parser.parse_args()
    target = load_model("default", "cpu", "fp32")
    drafter = build_drafter(args.draft, target)
    tree = TreeShape(budget=args.tree_budget, branching=args.tree_branching)
    prompts = first_per_category(load_prompt_set(split="eval"), args.per_category)
    generate(target, drafter, prompts[0]["prompt"], Decoding(gamma=args.gamma, max_new_tokens=16, tree=tree))  # warm-up
    log: list[dict] = []
    record_rounds(log)
    settings = Decoding(gamma=args.gamma, max_new_tokens=args.max_new_tokens, tree=tree)
    draft = verify = 0.0
    rounds = tokens = 0
    per_workload = defaultdict(list)
    with torch.inference_mode():
        for prompt in prompts:
            run = generate(target, drafter, prompt["prompt"], settings)
            draft += sum(r.draft_seconds for r in run.rounds)
            verify += sum(r.verify_seconds for r in run.rounds)
            rounds, tokens = rounds + len(run.rounds), tokens + len(run.output_ids)
            per_workload[prompt.get("category")].append(len(run.output_ids) / len(run.rounds))
    s = summary(log)
    print(f"# {machine('cpu')}, fp32; {args.draft}, tree of at most {args.tree_budget} (branching "
          f"{args.tree_branching}), γ {args.gamma}, {args.max_new_tokens} tokens, {len(prompts)} evaluation prompts\n")
    print(f"tokens per round: made {tokens / rounds:.3f}; the trees promised {s['promised']:.3f} "
          f"(made, counted from the proposals: {s['made']:.3f})")
    print(f"nodes per round {s['nodes']:.2f}; drafting {draft / rounds * 1e3:.2f} ms and verification "
          f"{verify / rounds * 1e3:.2f} ms a round; {(draft + verify) / tokens * 1e3:.2f} ms a token\n")
    print("| source | nodes | mean score | reached and kept |\n|---|---:|---:|---:|")
    for source, (n, score, kept) in sorted(s["by_source"].items()):
        print(f"| {source} | {n} | {score / n:.3f} | {kept / n:.3f} |")
    print("\n| source, judged node | nodes | chance given | kept |\n|---|---:|---:|---:|")
    for (source, root), (n, chance, kept) in sorted(s["by_edge"].items()):
        print(f"| {source}, {'at the root' if root else 'below it'} | {n} | {chance / n:.3f} | {kept / n:.3f} |")
    print("\ntokens per round by workload: " + ", ".join(
        f"{w} {statistics.mean(v):.2f}" for w, v in per_workload.items()))


if __name__ == "__main__":
    main()
