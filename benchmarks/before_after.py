"""Mean measured speedup by workload, before → after, from two `specviz bench` JSONL files of the same prompts.

    python benchmarks/before_after.py benchmarks/results/eval14-t128-g2-before.jsonl \
        benchmarks/results/eval14-t128-g2-after.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys

CATEGORIES = ["chat", "code", "summarisation", "translation", "qa", "math", "retrieval"]


def rows(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def mean_speedup(table: list[dict], draft: str, category: str | None = None) -> float:
    return statistics.fmean(r["speedup"] for r in table if r["draft"] == draft and category in (None, r["category"]))


def main(before_path: str, after_path: str) -> None:
    before, after = rows(before_path), rows(after_path)
    drafts = list(dict.fromkeys(r["draft"] for r in after))
    print("| drafter | " + " | ".join(CATEGORIES) + " | mean | identical (before, after) |")
    print("|---|" + "---|" * (len(CATEGORIES) + 2))
    for d in drafts:
        cells = [f"{mean_speedup(before, d, c):.2f} → {mean_speedup(after, d, c):.2f}" for c in CATEGORIES]
        n = sum(r["draft"] == d for r in after)
        same = [sum(r["identical"] for r in t if r["draft"] == d) for t in (before, after)]
        print(f"| {d} | " + " | ".join(cells) + f" | **{mean_speedup(before, d):.2f} → {mean_speedup(after, d):.2f}** "
              f"| {same[0]}/{n}, {same[1]}/{n} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
