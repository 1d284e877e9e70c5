"""An experiment for the next cost to cut: attention over a few query rows, as a verification forward asks for it,
timed against torch's SDPA (what SpecViz's forwards use today). Not used by SpecViz yet.

In a verification of 8 nodes on an AMD EPYC, SDPA took 221 µs a layer against 86 µs for a step's one query row (a
context of 512; docs/performance.md). `benchmarks/few_row_attention.c` shares each key and value load among the rows
of one key/value head and splits the keys in two for the two cores. This script builds it with the machine's C
compiler and times both on SmolLM2-135M's shape (9 query heads over 3 key/value heads of 64), with 1 and 9 query
tokens (a step, a tree of 8) over several contexts and the last tokens under a tree mask, the best of 7 timings of
300 calls, in turn. It checks the result against SDPA, and that a row gets the same bits alone as among others.

    python benchmarks/few_row_attention.py --contexts 520,1040,2080 > benchmarks/results/few-row-attention-CPU.txt
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz import panels  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402

SOURCE = Path(__file__).with_name("few_row_attention.c")
KV_HEADS, GROUPS, DIM = 3, 3, 64  # SmolLM2-135M: 9 query heads share 3 key/value heads


def build(directory: Path):
    compiler = panels.find_compiler()
    if not compiler:
        raise SystemExit("no C compiler here ($CC, cc or gcc)")
    try:
        path = panels.compile_library(compiler, directory / "few_row_attention.so", ("-ffast-math", "-lm"), SOURCE)
    except OSError as exc:
        raise SystemExit(f"{compiler} could not build {SOURCE.name}: {exc}") from exc
    function = ctypes.CDLL(str(path)).specviz_few_row_attention
    function.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p] + \
        [ctypes.c_long] * 3 + [ctypes.c_float]
    function.restype = ctypes.c_int
    return function


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
    torch.manual_seed(0)
    scale = DIM ** -0.5
    with tempfile.TemporaryDirectory() as directory:
        attention = build(Path(directory))
    print(f"# {machine('cpu', None)}, fp32; attention of {KV_HEADS * GROUPS} query heads over {KV_HEADS} key/value "
          f"heads of {DIM}; best of 7 timings of 300 calls, µs\n")
    print("| keys | query tokens | SDPA | few-row kernel | ratio | largest difference | a row alone: same bits |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for keys in [int(c) for c in args.contexts.split(",")]:
        for tokens in [int(t) for t in args.tokens.split(",")]:
            rows = GROUPS * tokens
            q = torch.randn(1, KV_HEADS, rows, DIM)
            k, v = torch.randn(1, KV_HEADS, keys, DIM), torch.randn(1, KV_HEADS, keys, DIM)
            visible = torch.ones(rows, keys, dtype=torch.bool)  # the context, then the new tokens under a tree mask
            tree = torch.rand(tokens, tokens) > 0.5
            tree.fill_diagonal_(True)
            visible[:, keys - tokens:] = tree.repeat(GROUPS, 1)
            mask = visible.to(torch.uint8).contiguous()
            out = torch.empty(1, KV_HEADS, rows, DIM)

            def kernel(q=q, k=k, v=v, mask=mask, out=out, rows=rows, keys=keys):
                if attention(q.data_ptr(), k.data_ptr(), v.data_ptr(), keys * DIM, mask.data_ptr(), out.data_ptr(),
                             KV_HEADS, rows, keys, scale):
                    raise SystemExit("the kernel refused the shapes")

            with torch.inference_mode():
                reference = F.scaled_dot_product_attention(q, k, v, attn_mask=visible[None, None], scale=scale)
                kernel()
                difference = float((out - reference).abs().max())
                among = out.clone()
                last = torch.empty(1, KV_HEADS, 1, DIM)  # the last row of each head alone
                alone = q[:, :, -1:].contiguous()
                attention(alone.data_ptr(), k.data_ptr(), v.data_ptr(), keys * DIM, mask[-1:].contiguous().data_ptr(),
                          last.data_ptr(), KV_HEADS, 1, keys, scale)
                same = torch.equal(last[:, :, 0], among[:, :, -1])
                sdpa = best_us(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=visible[None, None],
                                                                      scale=scale))
                own = best_us(kernel)
            print(f"| {keys} | {tokens} | {sdpa:.0f} | {own:.0f} | {own / sdpa:.2f} | {difference:.1e} | "
                  f"{'yes' if same else 'no'} |")


if __name__ == "__main__":
    main()
