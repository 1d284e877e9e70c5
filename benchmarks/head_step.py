"""A draft head's step in one C call (specviz/head_step.c) and its output rows in int8, against torch's operations and
bf16 rows: one call at a time, and in whole `auto` runs.

1. `auto`'s head (smol-head-v5 beside the default target): a step of 1 and of 3 rows over 500 cached entries, and the
   8,192 output rows for one row, warm (called over and over) and cold (after a pass over 64 MB, as a draft read
   comes after a target forward that streamed 540 MB), µs.
2. With --runs: `auto` on the prompts, three drafters built side by side (the shipped one; its head's steps by
   torch's operations; its output rows in bf16), run in turn prompt by prompt (the order rotating), twice over:
   drafting ms per round, tokens per round, tokens per second after the prefill.

    python benchmarks/head_step.py --runs > benchmarks/results/head-step-CPU.txt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drafter_runs import cold, eval14_in_turn, warm  # noqa: E402  (beside this script)

from specviz.drafters import build_drafter  # noqa: E402
from specviz.drafters.head_net import KVCache  # noqa: E402
from specviz.fast_path import product  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402

SHIPPED, TORCH_OPS, BF16_ROWS = "C step, int8 rows (shipped)", "torch's operations, int8 rows", "C step, bf16 rows"


def variants(target) -> dict:
    drafters = {name: build_drafter("auto", target, load_model) for name in (SHIPPED, TORCH_OPS, BF16_ROWS)}
    if drafters[SHIPPED].head.head.kernel is None:
        raise SystemExit("the head step is not bound here (no compiler, or the head is not on the bf16 panels)")
    drafters[TORCH_OPS].head.head.kernel = None
    reader = drafters[BF16_ROWS].head
    output = target.model.get_output_embeddings().weight.detach()
    reader.rows = product(output.index_select(0, reader.vocab_ids).bfloat16())  # as before int8: bf16 panels
    return drafters


def calls(drafters) -> None:
    shipped, ops, bf16 = drafters[SHIPPED].head, drafters[TORCH_OPS].head, drafters[BF16_ROWS].head
    hidden = shipped.head.shape.hidden
    print("| call | torch / bf16 warm | torch / bf16 cold | C / int8 warm | C / int8 cold |")
    print("| --- | ---: | ---: | ---: | ---: |")
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for rows in (1, 3):
            times = []
            for reader in (ops, shipped):
                cache = KVCache()
                reader.head.step(torch.randn(500, hidden, generator=generator) * 0.05,
                                 torch.randn(500, hidden, generator=generator), cache)
                e = torch.randn(rows, hidden, generator=generator) * 0.05
                f = torch.randn(rows, hidden, generator=generator)

                def step(reader=reader, cache=cache, e=e, f=f):
                    reader.head.step(e, f, cache)
                    cache.truncate(500)

                times += [warm(step), cold(step)]
            print(f"| head step, {rows} row{'s' if rows > 1 else ''} over 500 entries | "
                  + " | ".join(f"{t:.0f}" for t in times) + " |")
        x = torch.randn(1, hidden, generator=generator)
        times = [warm(lambda: bf16.rows(x)), cold(lambda: bf16.rows(x)), warm(lambda: shipped.rows(x)),
                 cold(lambda: shipped.rows(x))]
        print(f"| output rows ({shipped.rows.out_features}×{hidden}), 1 row | " + " | ".join(f"{t:.0f}" for t in times)
              + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", action="store_true", help="also time whole runs of `auto` (about 6 minutes)")
    args = parser.parse_args()
    target = load_model("default", "cpu", "fp32")
    drafters = variants(target)
    print(f"# {machine('cpu', target.model)}; target fp32, head bf16 on the panels; µs\n")
    calls(drafters)
    if args.runs:
        eval14_in_turn(target, drafters, "head")


if __name__ == "__main__":
    main()
