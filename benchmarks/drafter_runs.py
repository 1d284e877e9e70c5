"""What the drafter benchmarks share (not a benchmark itself): one call timed warm and cold, and drafters built side
by side run in turn on the same prompts.

- `warm`: a call repeated, µs each.
- `cold`: a call after a pass over 64 MB each time, as a draft read comes after a target forward that streamed 540 MB
  through the caches, µs each.
- `in_turn` and `print_runs`: each prompt run by every drafter, the order rotating prompt by prompt and pass by pass
  (two drafters: alternating), and drafting ms a round, tokens a round and tokens/s after the prefill per drafter.
- `eval14_in_turn`: `in_turn` on the 14 prompts of benchmarks/eval14-prompts.jsonl with the issue's settings (128
  tokens, γ 6, a tree of 8), twice, printed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.config import Decoding, TreeShape  # noqa: E402
from specviz.decode import generate  # noqa: E402
from specviz.lab.measure import warm_up  # noqa: E402

EVICT = torch.randn(64 * 2**20 // 4)  # 64 MB, more than the L3
EVAL14 = Path(__file__).with_name("eval14-prompts.jsonl")
SETTINGS = Decoding(gamma=6, max_new_tokens=128, tree=TreeShape(budget=8, branching=3))


def warm(call, n: int = 200) -> float:
    for _ in range(10):
        call()
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n * 1e6


def cold(call, n: int = 50) -> float:
    total = 0.0
    for _ in range(n):
        EVICT.add_(1.0)
        start = time.perf_counter()
        call()
        total += time.perf_counter() - start
    return total / n * 1e6


def in_turn(target, drafters: dict, prompts: list[str], settings, passes: int = 2) -> dict:
    """name -> (drafting ms a round, tokens a round, tokens/s after the prefill), every drafter warmed up first."""
    for drafter in drafters.values():
        warm_up(target, lambda drafter=drafter: drafter, prompts[0], settings)
    totals = {name: [0.0, 0, 0, 0.0] for name in drafters}
    names = list(drafters)
    for repeat in range(passes):
        for i, prompt in enumerate(prompts):
            turn = (i + repeat) % len(names)
            for name in names[turn:] + names[:turn]:
                run = generate(target, drafters[name], prompt, settings)
                total = totals[name]
                total[0] += sum(r.draft_seconds for r in run.rounds)
                total[1] += len(run.rounds)
                total[2] += len(run.output_ids)
                total[3] += run.seconds - run.prefill_seconds
    return {name: (draft / rounds * 1e3, tokens / rounds, tokens / seconds)
            for name, (draft, rounds, tokens, seconds) in totals.items()}


def print_runs(label: str, results: dict) -> None:
    print(f"| {label} | drafting, ms a round | tokens a round | tokens/s after the prefill |")
    print("| --- | ---: | ---: | ---: |")
    for name, (draft, per_round, per_second) in results.items():
        print(f"| {name} | {draft:.2f} | {per_round:.3f} | {per_second:.1f} |")


def eval14_in_turn(target, drafters: dict, label: str) -> None:
    """`in_turn` on the 14 prompts of eval14-prompts.jsonl (SETTINGS, twice), printed with `label` over the names."""
    prompts = [json.loads(line)["prompt"] for line in EVAL14.read_text().splitlines() if line.strip()]
    results = in_turn(target, drafters, prompts, SETTINGS)
    print(f"\n`auto` on the {len(prompts)} prompts of {EVAL14.name}, twice, in turn (128 tokens, γ 6, tree of 8):\n")
    print_runs(label, results)
