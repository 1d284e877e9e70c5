"""The target's forwards with the few-row attention against the same forwards with SDPA, taken in turn.

Two copies of the target are loaded in one process, one with SPECVIZ_FEW_ROWS=0 (attention by torch's SDPA,
`fast_path.grouped_sdpa`) and one as SpecViz loads it (the few-row kernel where it was measured faster,
`attention.choose`). For each context: a step (0 drafts) and a tree verification of 8 and 16 nodes, one forward of
each copy in turn, the median of --repeats, the cache cropped back after each; then v(n) = forward(n) / step for
both. Products and everything else are the same in both copies.

    python benchmarks/attention_forwards.py --context 512,1024 > benchmarks/results/attention-forwards-CPU.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.decode import target_forward  # noqa: E402
from specviz.fast_path import GrowingCache  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.trees import target_attention  # noqa: E402

PARENTS = [-1, -1, 0, 0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]  # a tree of 16: two roots, then mostly a line


def load(few_rows: bool, name: str):
    os.environ["SPECVIZ_FEW_ROWS"] = "" if few_rows else "0"
    try:
        return load_model(name, "cpu", "fp32")
    finally:
        os.environ.pop("SPECVIZ_FEW_ROWS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--context", default="512,1024")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    models = {"SDPA": load(False, args.target), "few-row kernel": load(True, args.target)}
    print(f"# {machine('cpu', None)}, fp32; attention: "
          + ", ".join(f"{k} = {m.model.config._attn_implementation}" for k, m in models.items()))
    print(f"# median of {args.repeats} forwards of each, taken in turn, ms\n")
    print("| context | drafted nodes | SDPA | few-row kernel | difference |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    ratios = []
    with torch.inference_mode():
        for context in [int(c) for c in args.context.split(",")]:
            ids = torch.randint(0, models["SDPA"].vocab_size, (1, context + 20),
                                generator=torch.Generator().manual_seed(0))
            caches = {}
            for kind, target in models.items():
                caches[kind] = GrowingCache(config=target.model.config)
                target_forward(target, ids[:, : context - 1], caches[kind], head=False)
            medians = {}
            for n in (0, 8, 16):
                tree = None if n == 0 else target_attention(PARENTS[:n], context - 1, torch.float32, "cpu")
                times = {kind: [] for kind in models}
                for _ in range(args.repeats + 1):
                    for kind, target in models.items():
                        start = time.perf_counter()
                        _, logits = target_forward(target, ids[:, context - 1: context + n], caches[kind], tree=tree)
                        logits.upto(n + 1)
                        caches[kind].crop(-(n + 1))
                        times[kind].append(time.perf_counter() - start)
                medians[n] = {kind: statistics.median(t[1:]) * 1e3 for kind, t in times.items()}  # first: warm-up
                a, b = medians[n]["SDPA"], medians[n]["few-row kernel"]
                print(f"| {context} | {n} | {a:.2f} | {b:.2f} | {b - a:+.2f} |")
            for n in (8, 16):
                ratios.append((context, n, *(medians[n][k] / medians[0][k] for k in models)))
    print("\n| context | drafted nodes | v(n), SDPA | v(n), few-row kernel |")
    print("| ---: | ---: | ---: | ---: |")
    for context, n, a, b in ratios:
        print(f"| {context} | {n} | {a:.3f} | {b:.3f} |")


if __name__ == "__main__":
    main()
