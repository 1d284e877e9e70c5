"""An experiment, not used by SpecViz: `auto`'s head with fp32 activations over its bf16 weights on the panels (no
dtype conversion around each product and norm), against the shipped head (bf16 activations), interleaved.

Two `auto` drafters are built side by side; in one, every product of the head takes fp32 rows by its bf16 panels
and gives fp32, and its norms' weights are fp32. Both run the 14 prompts of benchmarks/eval14-prompts.jsonl in turn,
prompt by prompt (the order alternating), twice over: 128 tokens, γ 6, a tree of 8.

    python benchmarks/head_fp32_activations.py > benchmarks/results/head-fp32-activations-CPU.txt
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drafter_runs import in_turn, print_runs  # noqa: E402  (beside this script)

from specviz.config import Decoding, TreeShape  # noqa: E402
from specviz.drafters import build_drafter  # noqa: E402
from specviz.fast_path import PackedLinear  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402

PROMPTS = Path(__file__).with_name("eval14-prompts.jsonl")


def fp32_rows(self, x: torch.Tensor) -> torch.Tensor:
    """x @ W.T (+ bias) for fp32 rows by this linear's bf16 panels, in fp32."""
    rows = x.reshape(-1, x.shape[-1]).float().contiguous()
    y = torch.empty(rows.shape[0], self.out_features)
    if rows.shape[0]:
        self.panels._product_bf16(rows.data_ptr(), self.packed.data_ptr(), y.data_ptr(), rows.shape[0],
                                  self.out_features, rows.shape[1])
    if self.bias is not None:
        y += self.bias.float()
    return y.view(*x.shape[:-1], self.out_features)


def in_fp32(drafter) -> None:
    reader = drafter.head
    for module in list(reader.head.modules()) + [reader.rows]:
        if isinstance(module, PackedLinear):
            if module.panels is None:
                raise SystemExit("the head's products are not on the bf16 panels here")
            module.forward = types.MethodType(fp32_rows, module)
        else:
            for name, parameter in list(module.named_parameters(recurse=False)):
                setattr(module, name, torch.nn.Parameter(parameter.detach().float(), requires_grad=False))
    reader.dtype = torch.float32  # what it casts the target's features and the embeddings to


def main() -> None:
    target = load_model("default", "cpu", "fp32")
    prompts = [json.loads(line)["prompt"] for line in PROMPTS.read_text().splitlines() if line.strip()]
    settings = Decoding(gamma=6, max_new_tokens=128, tree=TreeShape(budget=8, branching=3))
    drafters = {"bf16 activations (shipped)": build_drafter("auto", target, load_model),
                "fp32 activations": build_drafter("auto", target, load_model)}
    in_fp32(drafters["fp32 activations"])
    results = in_turn(target, drafters, prompts, settings)
    print(f"# {machine('cpu', target.model)}; `auto` on the {len(prompts)} prompts of {PROMPTS.name}, twice, in turn\n")
    print_runs("head's activations", results)

if __name__ == "__main__":
    main()
