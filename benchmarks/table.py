"""Markdown tables from a `specviz bench` JSONL: per draft, and per draft and workload category.

    python benchmarks/table.py results.jsonl
"""

import json
import statistics
import sys
from collections import defaultdict


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["draft"], "all")].append(r)
        groups[(r["draft"], r.get("category") or "-")].append(r)
    hf = "ratio_vs_hf" in rows[0]
    head = "| draft | category | prompts | α | mean accepted tokens | c | speedup (mean) | speedup (median) | identical |"
    head += " ours/HF tokens/s (median) | our baseline/HF greedy (median) |" if hf else ""
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for (draft, category), mine in groups.items():
        mean = lambda k: statistics.fmean(r[k] for r in mine)  # noqa: E731
        med = lambda k: statistics.median(r[k] for r in mine)  # noqa: E731
        line = (f"| {draft} | {category} | {len(mine)} | {mean('acceptance_rate'):.3f} | {mean('mean_accepted_tokens'):.2f} | "
                f"{mean('cost_ratio'):.3f} | {mean('speedup'):.2f}x | {med('speedup'):.2f}x | "
                f"{sum(r['identical'] for r in mine)}/{len(mine)} |")
        if hf:
            line += f" {med('ratio_vs_hf'):.3f} | {med('baseline_ratio_vs_hf'):.3f} |"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
