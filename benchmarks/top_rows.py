"""The recycle table's top-k each round: the few-row kernel's pass over each row (`attention.top_rows`: the largest,
the log-sum-exp, the k largest) against torch's (`verify.top_k` and a softmax over every entry), on logits shaped as a
verification's of a tree of 8 (9 rows of SmolLM2's 49,152), in turn, µs a call.

    python benchmarks/top_rows.py > benchmarks/results/top-rows-CPU.txt
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz import attention  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.verify import top_k  # noqa: E402


def by_torch(logits: torch.Tensor, k: int):
    _, ids = top_k(logits, k)
    return ids, logits.softmax(-1).gather(1, ids)


def main() -> None:
    if attention.available() is None:
        raise SystemExit("the few-row kernel cannot be built here")
    logits = torch.randn(9, 49152, generator=torch.Generator().manual_seed(0)) * 3
    calls = {"torch: top_k and softmax": lambda: by_torch(logits, 8),
             "kernel: attention.top_rows": lambda: attention.top_rows(logits, 8)}
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(5):  # passes in turn, the best of each
        for name, call in calls.items():
            for _ in range(20):
                call()
            start = time.perf_counter()
            for _ in range(200):
                call()
            best[name] = min(best[name], (time.perf_counter() - start) / 200 * 1e6)
    (ids, probs), (fast_ids, fast_probs) = by_torch(logits, 8), attention.top_rows(logits, 8)
    print(f"# {machine('cpu', None)}; 9 rows of 49,152 logits, the 8 largest, µs a call (the best of 5 passes)\n")
    print("| how | µs |")
    print("| --- | ---: |")
    for name, seconds in best.items():
        print(f"| {name} | {seconds:.0f} |")
    print(f"\nsame ids: {torch.equal(ids, fast_ids)}; largest difference in probability: "
          f"{float((probs - fast_probs).abs().max()):.1e}")


if __name__ == "__main__":
    main()
