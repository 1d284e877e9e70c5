"""The products of one forward over the target's weights, by rows: torch's BLAS (`F.linear`) against oneDNN's
packed weights, packed with no size given and for 8, 16 and 32 rows, and against SpecViz's panel product.

SpecViz's fast path (specviz.fast_path) packs every weight for the panel product or for oneDNN (for PACK_ROWS rows),
whichever `products.choose_packs` finds clearly faster, and gives forwards of up to `products.choose_blas_rows` rows
to the BLAS where it is clearly faster still. This script shows the table those choices read:
the best of --repeats passes over all 211 products of SmolLM2-135M (513 MB of fp32 weights, more than any cache), each
product and row count in turn.

    python benchmarks/row_products.py --rows 1,2,3,4,5,6,7,8,9,16,33 > benchmarks/results/row-products-CPU.txt
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz import panels  # noqa: E402
from specviz.fast_path import PackedLinear  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402

HINTS = (None, 8, 16, 32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--rows", default="1,2,3,4,5,6,7,8,9,16,33")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = [int(r) for r in args.rows.split(",")]
    target = load_model(args.target, "cpu", "fp32")
    linears = [m for m in target.model.modules() if isinstance(m, PackedLinear)]
    packed = {hint: [torch.ops.mkldnn._reorder_linear_weight(m.weight.detach(), hint) for m in linears]
              for hint in HINTS}
    built = panels.available()
    panel_weights = [built.pack(m.weight) for m in linears] if built else []
    inputs = {r: {m.in_features: torch.randn(r, m.in_features) for m in linears} for r in rows}
    kinds = ["blas", *HINTS, *(["panels"] if built else [])]

    def seconds(kind, r: int) -> float:
        start = time.perf_counter()
        for i, m in enumerate(linears):
            x = inputs[r][m.in_features]
            if kind == "blas":
                F.linear(x, m.weight, m.bias)
            elif kind == "panels":
                built.product(x, panel_weights[i], m.out_features, m.bias)
            else:
                torch.ops.mkldnn._linear_pointwise(x, packed[kind][i], m.bias, "none", [], "")
        return time.perf_counter() - start

    best = {(k, r): float("inf") for k in kinds for r in rows}
    with torch.inference_mode():
        for _ in range(args.repeats):
            for r in rows:
                for k in kinds:
                    best[k, r] = min(best[k, r], seconds(k, r))
    size = sum(m.weight.numel() * m.weight.element_size() for m in linears) / 2**20
    print(f"# {machine('cpu', target.model)}, fp32; {len(linears)} products, {size:.0f} MB of weights; "
          f"best of {args.repeats}, ms\n")
    print("| rows | BLAS | oneDNN, packed with no size | packed for 8 rows | for 16 | for 32 |"
          + (" panels |" if built else ""))
    print("| ---: " * len(kinds) + "| ---: |")
    for r in rows:
        print(f"| {r} | " + " | ".join(f"{best[k, r] * 1e3:.1f}" for k in kinds) + " |")


if __name__ == "__main__":
    main()
