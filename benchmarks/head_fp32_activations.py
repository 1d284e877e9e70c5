"""`auto`'s head with fp32 activations over its bf16 weights on the panels (`fast_path.activations`, shipped: no dtype
conversion around each product and norm) against bf16 activations, both by torch's operations (the C step unbound)
and with bf16 output rows, so that only the activations differ; interleaved.

Two `auto` drafters are built side by side and run the 14 prompts of benchmarks/eval14-prompts.jsonl in turn, prompt
by prompt (the order alternating), twice over: 128 tokens, γ 6, a tree of 8.
benchmarks/results/head-fp32-activations-amd.txt was written when fp32 activations were an experiment here (then the
head's attention still took SDPA in both).

    python benchmarks/head_fp32_activations.py > benchmarks/results/head-fp32-activations-CPU.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drafter_runs import eval14_in_turn  # noqa: E402  (beside this script)

from specviz.drafters import build_drafter  # noqa: E402
from specviz.fast_path import product  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402

FP32, BF16 = "fp32 activations (shipped)", "bf16 activations"


def by_torch_ops(drafter, target, activations: torch.dtype) -> None:
    """The drafter's head by torch's operations, its output rows in bf16, its activations in `activations`."""
    reader = drafter.head
    if reader.dtype != torch.float32 or reader.head.kernel is None:
        raise SystemExit("the head does not run fp32 activations on the bf16 panels here")
    reader.head.kernel = None
    output = target.model.get_output_embeddings().weight.detach()
    reader.rows = product(output.index_select(0, reader.vocab_ids).bfloat16())
    reader.dtype = activations  # what it casts the target's features and the embeddings to


def main() -> None:
    target = load_model("default", "cpu", "fp32")
    drafters = {name: build_drafter("auto", target, load_model) for name in (FP32, BF16)}
    by_torch_ops(drafters[FP32], target, torch.float32)
    by_torch_ops(drafters[BF16], target, torch.bfloat16)
    print(f"# {machine('cpu', target.model)}")
    eval14_in_turn(target, drafters, "head's activations")


if __name__ == "__main__":
    main()
