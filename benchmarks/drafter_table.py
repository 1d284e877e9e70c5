"""One table per drafter, one row per workload, from `specviz bench` JSONL files.

    python benchmarks/drafter_table.py benchmarks/results/eval84-t128-g6-auto.jsonl

Columns: prompts; α at draft positions 1, 2 and 3 (kept / drafted there, pooled over the workload's prompts,
as bench's position_reached and position_accepted count them: a token drafted at position 2 counts as
drafted whether or not position 1 was kept, so from position 2 on this is the chance that the draft and
every one before it were kept, not the conditional α of the theory); tokens per round (mean
over prompts); c (draft seconds per drafted token over a target step) and v (a verification forward in
target steps), means over prompts; the measured speedup, mean and lowest; and how many outputs were
identical to the target alone's.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def rows_of(paths: list[str]) -> list[dict]:
    rows = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if "speedup" in r]


def alpha_at(rows: list[dict], position: int) -> str:
    reached = sum(r["position_reached"][position] for r in rows if len(r.get("position_reached", [])) > position)
    kept = sum(r["position_accepted"][position] for r in rows if len(r.get("position_accepted", [])) > position)
    return f"{kept / reached:.2f}" if reached else "–"


def line(name: str, rows: list[dict]) -> str:
    speedups = [r["speedup"] for r in rows]
    return (
        f"| {name} | {len(rows)} | {alpha_at(rows, 0)} · {alpha_at(rows, 1)} · {alpha_at(rows, 2)} | "
        f"{statistics.mean(r['mean_accepted_tokens'] for r in rows):.2f} | "
        f"{statistics.mean(r['cost_ratio'] for r in rows):.3f} | "
        f"{statistics.mean(r['verify_cost'] for r in rows):.2f} | "
        f"**{statistics.mean(speedups):.2f}×** (lowest {min(speedups):.2f}×) | "
        f"{sum(bool(r['identical']) for r in rows)}/{len(rows)} |"
    )


def tables(rows: list[dict]) -> str:
    by_draft: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_draft[r["draft"]].append(r)
    out = []
    for draft, mine in by_draft.items():
        gammas = sorted({r["gamma"] for r in mine})
        out += [
            f"**{draft}** (γ {', '.join(map(str, gammas))}, {mine[0].get('max_new_tokens', '?')} new tokens, "
            f"{mine[0].get('machine', '')})",
            "",
            "| workload | prompts | α at 1 · 2 · 3 | tokens / round | c | v | speedup | identical |",
            "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: |",
        ]
        by_category: dict[str, list[dict]] = defaultdict(list)
        for r in mine:
            by_category[r.get("category", "?")].append(r)
        out += [line(category, by_category[category]) for category in sorted(by_category)]
        out += [line("all", mine), ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(tables(rows_of(sys.argv[1:])))
