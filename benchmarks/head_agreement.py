"""The offline check of draft heads: greedy acceptance by draft position on the target's own EVAL answers.

    python benchmarks/head_agreement.py smol-head-v3 smol-head-v4 [--steps 3] [--work artifacts/heads]

The target (fp32, this machine) answers the 84 EVAL prompts greedily (128 new tokens, cached in the work folder),
its features are captured over those answers (the layers each head reads), and `specviz.training.agreement` unrolls
each head on its own predictions: α at position s is P(its top draft = the target's token | drafts 1..s-1 kept).
This is the check a head's training watches; prints a table and writes JSON lines to --out if given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.drafters.head_net import load_head  # noqa: E402
from specviz.drafters.registry import head_folder  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.training.agreement import HeldOut, agreement, eval_answers  # noqa: E402
from specviz.training.features import Features  # noqa: E402
from specviz.training.train_head import WORK_DIR  # noqa: E402


def by_category(held: HeldOut, category: str) -> HeldOut:
    keep = [i for i, c in enumerate(held.categories) if c == category]
    f = held.features
    return HeldOut(Features([f.tokens[i] for i in keep], [f.features[i] for i in keep],
                            [f.answer_from[i] for i in keep], [f.sources[i] for i in keep],
                            None if f.inputs is None else [f.inputs[i] for i in keep]),
                   category, [category] * len(keep))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("heads", nargs="+", help="head names (shipped or trained here) or folders")
    p.add_argument("--steps", type=int, default=3, help="draft positions checked (default 3)")
    p.add_argument("--work", default=str(WORK_DIR), help="where the answers and features are cached")
    p.add_argument("--out", default="", help="a JSONL file for the figures")
    args = p.parse_args()
    target = load_model("default")
    embedding = target.model.get_input_embeddings().weight.detach().float()
    rows_out = []
    for name in args.heads:
        folder = head_folder(name) or Path(name)
        head, info = load_head(folder, target.model, target.name)
        head = head.float()
        held = eval_answers(target, Path(args.work), "default", progress=False, say=lambda m: None,
                            layers=info.shape.layers)
        vocab = torch.tensor(info.vocab)
        rows = target.model.get_output_embeddings().weight.detach().float()[vocab]
        sets = [("all", held)] + [(c, by_category(held, c)) for c in dict.fromkeys(held.categories)]
        for label, part in sets:
            alphas = agreement(head, part, embedding, rows, vocab, steps=args.steps)
            row = {"head": folder.name, "layers": list(info.shape.layers), "set": label,
                   "texts": len(part.features.tokens), **{f"alpha_{s}": round(a, 4) for s, a in enumerate(alphas, 1)}}
            rows_out.append(row)
            print(f"{folder.name:<16} {label:<14} {row['texts']:>5} "
                  + " ".join(f"{a:.3f}" for a in alphas), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows_out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
