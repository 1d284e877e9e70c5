"""What one verification forward costs on a GPU, by dtype: a plain step, a chain of 8 drafts, and a tree of 8.

Two tables, on the embedded target, each forward's seconds with the device synchronised (medians of interleaved
repeats):

- at fixed contexts (the cache restored after each forward), as SpecViz prepares the model;
- at a growing context, as a decoding loop meets it (each round keeps a token or two, so every forward has a new
  shape), with SDPA's cuDNN backend on and off. The first GPU bench (scripts/device_check.sh) found bf16
  verification at two to three target steps and its steps slow; cuDNN plans anew for each new shape, which a
  fixed context never shows.

    python benchmarks/verify_gpu.py --device cuda > verify-gpu.txt
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.decode import target_forward
from specviz.fast_path import GrowingCache
from specviz.lab.measure import machine
from specviz.models import load_model
from specviz.trees import keep_branch, target_attention

TREE = [-1, -1, -1, 0, 0, 3, 5, 1]  # 8 nodes: three children of the root, a branch of depth 4, a second child of one
CHAIN = [-1, 0, 1, 2, 3, 4, 5, 6]  # the same 8 tokens as a line, through the tree's mask
SHAPES = {"step": None, "chain 8 (no mask)": "line", "chain 8 (as a tree)": CHAIN, "tree 8": TREE}


def forwards(target, ids: torch.Tensor, context: int):
    cache = GrowingCache(config=target.model.config)
    target_forward(target, ids[:, : context - 1], cache, head=False)
    sync = torch.cuda.synchronize if target.device.type == "cuda" else (lambda: None)

    def forward(shape) -> float:
        sync()
        start = time.perf_counter()
        if shape is None:
            n, tree = 0, None
        elif shape == "line":
            n, tree = len(CHAIN), None
        else:
            n = len(shape)
            tree = target_attention(shape, context - 1, target.dtype, target.device)
        _, logits = target_forward(target, ids[:, context - 1: context + n], cache, tree=tree)
        logits.rows([0])
        sync()
        seconds = time.perf_counter() - start
        keep_branch(cache, context - 1, n + 1, [])
        return seconds

    return forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--contexts", default="256,1024")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=60, help="rounds of the growing context")
    args = parser.parse_args()
    contexts = [int(c) for c in args.contexts.split(",")]
    print(f"# {machine(args.device)}\n")
    print("| dtype | context | step ms | " + " | ".join(f"{name}: v" for name in list(SHAPES)[1:]) + " |")
    print("|---|---|---|" + "---|" * (len(SHAPES) - 1))
    with torch.inference_mode():
        for dtype in args.dtypes.split(","):
            target = load_model("default", args.device, dtype)
            ids = torch.randint(100, 20000, (1, max(contexts) + 16), generator=torch.Generator().manual_seed(0))
            ids = ids.to(target.device)
            for context in contexts:
                forward = forwards(target, ids, context)
                for shape in SHAPES.values():  # first calls of each shape: warm-up
                    forward(shape), forward(shape)
                times = {name: [] for name in SHAPES}
                for _ in range(args.repeats):
                    for name, shape in SHAPES.items():
                        times[name].append(forward(shape))
                median = {name: statistics.median(t) for name, t in times.items()}
                step = median["step"]
                print(f"| {dtype} | {context} | {step * 1e3:.2f} | "
                      + " | ".join(f"{median[name] / step:.2f}" for name in list(SHAPES)[1:]) + " |", flush=True)
            del target
    if args.device == "cuda":
        print("\n## A growing context (a round keeps a token or two, so each forward has a new shape)\n")
        print("| dtype | cuDNN attention | step ms | tree 8 ms | v | slowest tree 8 ms |")
        print("|---|---|---|---|---|---|")
        with torch.inference_mode():
            for dtype in args.dtypes.split(","):
                target = load_model("default", args.device, dtype)
                for cudnn in (True, False):
                    torch.backends.cuda.enable_cudnn_sdp(cudnn)
                    step, tree, worst = growing(target, args.rounds)
                    print(f"| {dtype} | {'on' if cudnn else 'off'} | {step * 1e3:.2f} | {tree * 1e3:.2f} | "
                          f"{tree / step:.2f} | {worst * 1e3:.0f} |", flush=True)
                del target
        torch.backends.cuda.enable_cudnn_sdp(False)  # as fast_path.prepare leaves it


def growing(target, rounds: int) -> tuple[float, float, float]:
    """Median seconds of a step and of a tree-8 verification over `rounds` rounds from a context of 300 that grows
    by one token after a step and two after a verification (the first 10 rounds left out), and the slowest tree-8
    forward of all."""
    ids = torch.randint(100, 20000, (1, 300 + 3 * rounds), generator=torch.Generator().manual_seed(1)).to(target.device)
    cache = GrowingCache(config=target.model.config)
    target_forward(target, ids[:, :299], cache, head=False)
    times: dict[str, list[float]] = {"step": [], "tree": []}
    for _ in range(rounds):
        for name, shape in (("step", None), ("tree", TREE)):
            past = cache.get_seq_length()
            tree = None if shape is None else target_attention(shape, past, target.dtype, target.device)
            n = 0 if shape is None else len(shape)
            torch.cuda.synchronize()
            start = time.perf_counter()
            _, logits = target_forward(target, ids[:, past: past + n + 1], cache, tree=tree)
            logits.rows([0])
            torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
            keep_branch(cache, past, n + 1, [0] if n else [])
    return statistics.median(times["step"][10:]), statistics.median(times["tree"][10:]), max(times["tree"])


if __name__ == "__main__":
    main()
