"""SpecViz's few-row attention (specviz/attention.c) against torch's SDPA, on the attention of a step and of a
verification: SmolLM2-135M's shape (9 query heads over 3 key/value heads of 64), 1 and 9 query tokens (a step, a tree
of 8) over several contexts, the last tokens under a tree mask, the best of 7 timings of 300 calls, in turn. Each
call is what a layer of the target pays: SDPA as `fast_path.grouped_attention` calls it, the kernel through
`attention.FewRows.attend` (its buffers and the query's copy included). It checks the result against SDPA, and that a
row gets the same bits alone as among others.

    python benchmarks/few_row_attention.py --contexts 520,1040,2080 > benchmarks/results/few-row-attention-CPU.txt
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz import attention  # noqa: E402
from specviz.fast_path import grouped_attention  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402

KV_HEADS, GROUPS, DIM = 3, 3, 64  # SmolLM2-135M: 9 query heads share 3 key/value heads


def best_us(call, calls: int = 300, tries: int = 7) -> float:
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", default="520,1040,2080", help="keys in the cache, the new ones included")
    parser.add_argument("--tokens", default="1,9", help="query tokens: 1 a step, 9 a tree of 8")
    args = parser.parse_args()
    built = attention.available()
    if built is None:
        raise SystemExit("the few-row kernel cannot be built here (see the log)")
    torch.manual_seed(0)
    scale = DIM ** -0.5
    print(f"# {machine('cpu', None)}, fp32; attention of {KV_HEADS * GROUPS} query heads over {KV_HEADS} key/value "
          f"heads of {DIM}; best of 7 timings of 300 calls, µs\n")
    print("| keys | query tokens | SDPA | few-row kernel | ratio | largest difference | a row alone: same bits |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for keys in [int(c) for c in args.contexts.split(",")]:
        for tokens in [int(t) for t in args.tokens.split(",")]:
            query = torch.randn(1, KV_HEADS * GROUPS, tokens, DIM)
            key, value = torch.randn(1, KV_HEADS, keys, DIM), torch.randn(1, KV_HEADS, keys, DIM)
            visible = torch.ones(tokens, keys, dtype=torch.bool)  # the context, then the new tokens under a tree mask
            tree = torch.rand(tokens, tokens) > 0.5
            tree.fill_diagonal_(True)
            visible[:, keys - tokens:] = tree
            additive = torch.zeros(1, 1, tokens, keys).masked_fill_(~visible, torch.finfo(torch.float32).min)
            rows = visible.repeat(GROUPS, 1).to(torch.uint8) if tokens > 1 else None
            with torch.inference_mode():
                reference = grouped_attention(query, key, value, additive, scale=scale)
                out = built.attend(query, key, value, rows, scale)
                difference = float((out - reference).abs().max())
                alone = built.attend(query[:, :, -1:], key, value,
                                     None if rows is None else visible[-1:].repeat(GROUPS, 1), scale)
                same = torch.equal(alone[:, :, 0], out[:, :, -1])
                sdpa = best_us(lambda: grouped_attention(query, key, value, additive if tokens > 1 else None,
                                                         scale=scale))
                own = best_us(lambda: built.attend(query, key, value, rows, scale))
            print(f"| {keys} | {tokens} | {sdpa:.0f} | {own:.0f} | {own / sdpa:.2f} | {difference:.1e} | "
                  f"{'yes' if same else 'no'} |")


if __name__ == "__main__":
    main()
