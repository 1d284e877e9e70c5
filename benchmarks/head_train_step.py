"""What training a draft head of the shipped shape costs on this machine, against the run its card records.

One training step of `smol-head-v5`'s shape and settings (three target layers fused, 8,192 draft tokens, 32 texts
of 384 tokens, 3 unrolled steps; the project's `train_loop` over `head_loss`: AdamW, clipping, bf16 autocast where
this machine has it) on features of the right shape. A step's time does not depend on the values, so no answers or
captured features are needed. The figure is set beside the card's own run (steps to its best check, steps run,
minutes on its device), so the line printed last says how long that run would take here.

    python benchmarks/head_train_step.py > benchmarks/results/head-train-step-CPU.txt
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.training.head_loss import Batch, head_loss  # noqa: E402
from specviz.training.loop import Schedule, train_loop  # noqa: E402
from specviz.training.train_head import new_head, weight_groups  # noqa: E402

CARD = Path(__file__).resolve().parents[1] / "assets" / "drafts" / "smol-head-v5" / "head.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3, help="timed steps, after one untimed")
    args = ap.parse_args()
    card = json.loads(CARD.read_text(encoding="utf-8"))
    run, config = card["trained"], card["trained"]["config"]
    target = load_model(card["target"], "cpu", "fp32")
    device = target.device
    layers = tuple(card["shape"]["layers"])
    head = new_head(target, 0, layers)
    embedding = target.model.get_input_embeddings().weight.detach().float()
    rows = target.model.get_output_embeddings().weight.detach().float()[torch.tensor(card["vocab"])]
    size, length, hidden = config["batch_size"], config["seq_len"], card["shape"]["hidden"]
    generator = torch.Generator().manual_seed(0)
    batch = Batch(
        tokens=torch.randint(100, target.vocab_size, (size, length), generator=generator),
        features=torch.randn(size, length, hidden, generator=generator),
        mask=torch.ones(size, length - 1, dtype=torch.bool),
        inputs=torch.randn(size, length, hidden * len(layers), generator=generator),
    )

    def step_loss(step: int):
        return head_loss(head, rows, embedding, batch, device, config["ttt_steps"], config["step_decay"],
                         config["feature_weight"])

    schedule = Schedule(args.steps + 1, config["lr"], config["warmup"], checkpoint_every=args.steps + 1)
    with tempfile.TemporaryDirectory() as run_dir:
        log = train_loop(head, weight_groups(head, config["weight_decay"]), schedule, step_loss, Path(run_dir),
                         False, "a timed step", progress=False).log
    elapsed = [row["seconds"] for row in log]  # the loop's own clock, summed over its steps
    seconds = [b - a for a, b in zip(elapsed, elapsed[1:])]  # the first step, untimed, only warms up
    step_seconds = statistics.median(seconds)
    device_step = run["minutes"] * 60 / run["steps"]
    print(f"# {machine('cpu', target.model)}")
    print(f"# one training step of {config['name']}'s shape: {size} texts x {length} tokens, "
          f"{config['ttt_steps']} unrolled steps, layers {','.join(map(str, layers))}, "
          f"{len(card['vocab'])} draft tokens\n")
    print(f"steps timed: {', '.join(f'{s:.2f}' for s in seconds)} s; median {step_seconds:.2f} s a step")
    print(f"the card's run ({run['device']}, torch {run['torch']}): {run['steps']} steps in {run['minutes']:.1f} min, "
          f"{device_step:.3f} s a step, best check at step {run['best_step']}")
    print(f"here: {step_seconds / device_step:.0f} times as long a step; the best check's {run['best_step']} steps "
          f"would take {run['best_step'] * step_seconds / 3600:.1f} h, the whole run's {run['steps']} "
          f"{run['steps'] * step_seconds / 3600:.1f} h (training alone: no answers written, no features captured)")


if __name__ == "__main__":
    main()
