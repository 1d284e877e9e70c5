"""A draft head's products in bf16: oneDNN (torch's packed bf16 product) against SpecViz's bf16 panels
(specviz/panels.c), one linear at a time and in whole runs.

1. Each of `auto`'s head's linears (smol-head-v5 beside the default target) with 2 rows: warm (called over and over)
   and cold (after a pass over 64 MB, as a draft read comes after a target forward that streamed 540 MB), µs.
   Since the head's output rows went to int8 (`panels.Int8Rows`, benchmarks/head_step.py), the shipped drafter's
   "output rows" are int8 here; benchmarks/results/head-products-amd.txt predates that (bf16 rows).
2. With --runs: `auto` on the prompts, two drafters built side by side, one with its head on the bf16 panels and one
   on oneDNN, run in turn prompt by prompt (the order alternating), twice over: drafting ms per round, tokens per
   round and tokens per second after the prefill.

    python benchmarks/head_products.py --runs > benchmarks/results/head-products-CPU.txt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drafter_runs import cold, eval14_in_turn, warm  # noqa: E402  (beside this script)

from specviz import fast_path, products  # noqa: E402
from specviz.drafters import build_drafter  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402


def on_onednn(target):
    """`auto` with its head's bf16 products on oneDNN (the bf16 panels withheld while it is built)."""
    kept = products.bf16_panels
    products.bf16_panels = fast_path.bf16_panels = lambda directory=None: None
    try:
        return build_drafter("auto", target, load_model)
    finally:
        products.bf16_panels = fast_path.bf16_panels = kept


def linears(target) -> None:
    drafters = {"oneDNN": on_onednn(target), "bf16 panels": build_drafter("auto", target, load_model)}
    print("| linear | weight | oneDNN warm | oneDNN cold | bf16 panels warm | bf16 panels cold |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    sums = [0.0] * 4
    named = {kind: dict([(n, m) for n, m in d.head.head.named_modules() if isinstance(m, torch.nn.Linear)]
                        + [("output rows", d.head.rows)]) for kind, d in drafters.items()}
    with torch.inference_mode():
        for name, module in named["oneDNN"].items():
            x = torch.randn(2, module.in_features).bfloat16()
            times = []
            for kind in drafters:
                layer = named[kind][name]
                times += [warm(lambda layer=layer: layer(x)), cold(lambda layer=layer: layer(x))]
            sums = [s + t for s, t in zip(sums, times)]
            print(f"| {name} | {module.out_features}×{module.in_features} | " + " | ".join(f"{t:.0f}" for t in times)
                  + " |")
    print("| all | | " + " | ".join(f"**{t:.0f}**" for t in sums) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", action="store_true", help="also time whole runs of `auto` (about 3 minutes)")
    args = parser.parse_args()
    target = load_model("default", "cpu", "fp32")
    print(f"# {machine('cpu', None)}; target fp32, head bf16; µs\n")
    linears(target)
    if args.runs:
        drafters = {"bf16 panels": build_drafter("auto", target, load_model), "oneDNN": on_onednn(target)}
        eval14_in_turn(target, drafters, "head's products")


if __name__ == "__main__":
    main()
