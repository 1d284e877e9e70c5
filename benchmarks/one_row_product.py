"""A step and v(n) on this CPU with oneDNN's packed weights throughout, against the fast path's measured choice
(torch's BLAS for forwards of few rows where it is clearly faster).

SpecViz's fast path packs every weight for oneDNN (specviz.fast_path) and, at load, measures up to how many rows a
forward takes the BLAS instead (`choose_blas_rows`). This script loads the target twice, one copy with oneDNN
throughout (SPECVIZ_BLAS_ROWS=0) and one with the measured choice, and times a step and a forward over 1 + n tokens
on both, in turn, at each context (the median of --repeats), several rounds. (Until 2026-11-29 the choice was for
one row only: benchmarks/results/one-row-product-xeon.txt.)

    python benchmarks/one_row_product.py --context 512,1024 --rounds 2 > benchmarks/results/blas-rows-CPU.txt
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_verify import timings  # noqa: E402

from specviz.fast_path import GrowingCache  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.products import BLAS_ROWS_ENV, blas_rows, packs, products_text  # noqa: E402

SHOWN = (1, 2, 3, 4, 6, 8)


def load(choice: str, name: str):
    """The target with oneDNN throughout ("0") or with the measured choice ("")."""
    os.environ[BLAS_ROWS_ENV] = choice
    try:
        return load_model(name, "cpu", "fp32")
    finally:
        os.environ.pop(BLAS_ROWS_ENV)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--context", default="512,1024")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=12)
    args = parser.parse_args()
    contexts = [int(c) for c in args.context.split(",")]
    targets = {"oneDNN throughout": load("0", args.target), "measured choice": load("", args.target)}
    ids = torch.randint(100, 20000, (1, max(contexts) + max(SHOWN) + 1), generator=torch.Generator().manual_seed(0))
    print(f"# {machine('cpu')}, fp32\n")
    for name, target in targets.items():
        print(f"- {name}: {products_text(blas_rows(target.model), packs(target.model))}")
    print("\n| round | context | products | step ms | " + " | ".join(f"v({n})" for n in SHOWN)
          + " | " + " | ".join(f"ms at n={n}" for n in SHOWN) + " |")
    print("|---|---|---|---|" + "---|" * (2 * len(SHOWN)))
    with torch.inference_mode():
        for round_ in range(1, args.rounds + 1):
            for context in contexts:
                for choice, target in targets.items():
                    t, _ = timings(target, GrowingCache, ids, context, max(SHOWN), args.repeats)
                    print(f"| {round_} | {context} | {choice} | {t[0] * 1e3:.1f} | "
                          + " | ".join(f"{t[n] / t[0]:.2f}" for n in SHOWN) + " | "
                          + " | ".join(f"{t[n] * 1e3:.1f}" for n in SHOWN) + " |", flush=True)


if __name__ == "__main__":
    main()
