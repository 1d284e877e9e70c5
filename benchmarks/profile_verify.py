"""Where a verification forward's time goes, on the stock path and on SpecViz's fast path (specviz.fast_path).

For each context length: the cost of one forward over the last committed token and N drafted tokens
(a chain, N = 0 is a plain step) with the KV cache restored after each, as the median of interleaved
repeats, on both paths loaded side by side in this process; then torch.profiler's operators for a
step (N = 0) and a verification (N = 5) at each context, so the difference has names.

    python benchmarks/profile_verify.py --context 128,512,1024,2048 > benchmarks/results/profile-verify-cpu.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import DynamicCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.decode import target_forward
from specviz.fast_path import GrowingCache
from specviz.lab.measure import machine
from specviz.models import load_model
from specviz.trees import keep_branch

PATHS = {"stock": DynamicCache, "fast": GrowingCache}  # the KV cache each path runs with


def load(path: str, name: str):
    os.environ["SPECVIZ_FAST_PATH"] = "1" if path == "fast" else "0"
    try:
        return load_model(name, "cpu", "fp32")
    finally:
        os.environ.pop("SPECVIZ_FAST_PATH")


def timings(target, cache_class, ids, context: int, max_n: int, repeats: int):
    """Median seconds of a forward over 1 + n tokens after `context - 1` cached ones (n = 0 .. max_n), and the
    forward."""
    cache = cache_class(config=target.model.config)
    target_forward(target, ids[:, : context - 1], cache, head=False)

    def forward(n: int) -> float:
        start = time.perf_counter()
        _, logits = target_forward(target, ids[:, context - 1 : context + n], cache)
        logits.rows([0])
        seconds = time.perf_counter() - start
        keep_branch(cache, context - 1, n + 1, [])
        return seconds

    for n in (0, max_n, 0):
        forward(n)
    times = {n: [] for n in range(max_n + 1)}
    for _ in range(repeats):
        for n in times:
            times[n].append(forward(n))
    return {n: statistics.median(t) for n, t in times.items()}, forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--context", default="128,512,1024,2048")
    parser.add_argument("--max-n", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rows", type=int, default=14, help="operators shown per profile")
    args = parser.parse_args()
    contexts = [int(c) for c in args.context.split(",")]
    targets = {path: load(path, args.target) for path in PATHS}
    ids = torch.randint(100, 20000, (1, max(contexts) + args.max_n + 1), generator=torch.Generator().manual_seed(0))
    print(f"# {machine('cpu')}, fp32\n")
    print("## v(n): one forward over the last token and n drafts, in plain steps (chain; head on one row)\n")
    print("| path | context | step ms | " + " | ".join(f"v({n})" for n in range(1, args.max_n + 1)) + " |")
    print("|---|---|---|" + "---|" * args.max_n)
    forwards = {}
    with torch.inference_mode():
        for context in contexts:
            for path, target in targets.items():
                t, forwards[path, context] = timings(target, PATHS[path], ids, context, args.max_n, args.repeats)
                print(
                    f"| {path} | {context} | {t[0] * 1e3:.1f} | "
                    + " | ".join(f"{t[n] / t[0]:.2f}" for n in range(1, args.max_n + 1))
                    + " |",
                    flush=True,
                )
        for context in contexts:
            for path in PATHS:
                for n in (0, 5):
                    with profile(activities=[ProfilerActivity.CPU]) as prof:
                        for _ in range(5):
                            forwards[path, context](n)
                    print(f"\n## {path} path, context {context}, n = {n} (5 forwards)\n")
                    print(
                        prof.key_averages().table(
                            sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=48
                        )
                    )


if __name__ == "__main__":
    main()
