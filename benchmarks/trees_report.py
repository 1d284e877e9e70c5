"""Chain against tree from `bench --tree-vs-chain` files: tokens per round and speedup per drafter and workload.

    python benchmarks/trees_report.py benchmarks/results/trees-eval14-n4-t128.jsonl [more.jsonl ...]

Each file pairs, per prompt and drafter, a tree of N nodes with the chain of γ = N (the same drafted tokens
verified per round), timed against the same baseline. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path


def mean(rows, key):
    return statistics.fmean(r[key] for r in rows)


def report(path: Path) -> list[str]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    groups = defaultdict(list)
    for r in rows:
        groups[(r["draft"], r["tree_budget"] > 0, r["category"])].append(r)
    trees = [r for r in rows if r["tree_budget"]]
    n = trees[0]["tree_budget"] if trees else 0
    shape = trees[0]["shape"] if trees else ""
    out = [f"### {path.name}: {shape} against a chain of γ = {n} ({len({r['id'] for r in rows})} prompts, "
           f"{rows[0]['max_new_tokens']} new tokens, {rows[0]['machine'].split(';')[0]})", "",
           "| drafter | workload | tokens/round chain | tokens/round tree | gain | speedup chain | speedup tree | "
           "identical |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for draft in dict.fromkeys(r["draft"] for r in rows):
        categories = sorted({r["category"] for r in rows if r["draft"] == draft})
        for category in categories + ["**all**"]:
            mine = [r for r in rows if r["draft"] == draft and (category == "**all**" or r["category"] == category)]
            chain = [r for r in mine if r["tree_budget"] == 0]
            tree = [r for r in mine if r["tree_budget"] > 0]
            if not chain or not tree:
                continue
            gain = mean(tree, "mean_accepted_tokens") / mean(chain, "mean_accepted_tokens") - 1
            out.append(
                f"| {draft} | {category} | {mean(chain, 'mean_accepted_tokens'):.2f} | "
                f"{mean(tree, 'mean_accepted_tokens'):.2f} | {gain:+.0%} | {mean(chain, 'speedup'):.2f}× | "
                f"{mean(tree, 'speedup'):.2f}× | {sum(r['identical'] for r in tree + chain)}/{len(tree + chain)} |"
            )
    return out + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    for path in parser.parse_args().files:
        print("\n".join(report(path)))


if __name__ == "__main__":
    main()
