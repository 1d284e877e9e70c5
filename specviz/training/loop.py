"""The optimiser loop every trained draft shares: schedule, clipping, a jsonl loss log, checkpoints, resume.

What differs between a distilled draft and a head is how a step's batch is made and what its loss
is; both come in as functions. A checkpoint holds plain tensors and numbers only, so it is read
back with `torch.load(weights_only=True)` (no pickled code runs). Batches are a function of the
step alone, so a resumed run repeats nothing and skips nothing.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch


@dataclass(frozen=True)
class Schedule:
    steps: int  # optimiser steps in all
    lr: float  # peak AdamW learning rate
    warmup: int  # linear warm-up steps, then cosine decay to a tenth of the peak
    checkpoint_every: int = 50  # steps between checkpoints (one is always written at the end)
    clip: float = 1.0  # gradient norm clipping
    validate_every: int = 0  # steps between checks on held-out text (0 = none)
    patience: int = 0  # stop after this many checks without a better score (0 = never stop early)
    minutes: float = 0.0  # stop once training has taken this long (checked after each step; 0 = no limit)

    def learning_rate(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        progress = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


@dataclass
class Training:
    model: torch.nn.Module
    steps: int
    seconds: float  # training wall time, summed over resumed runs
    final_loss: float  # mean loss over the last steps (up to 20)
    final_agreement: float  # mean greedy agreement over the same steps
    log: list[dict] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)  # held-out checks: step and figures, "score" the one compared
    best_step: int = 0  # the step whose weights the model holds (the last, or the best-scoring check's)


def batch_indices(step: int, batch_size: int, n: int, seed: int) -> list[int]:
    """Rows of one step: shuffled epochs, a function of the step alone (so resuming repeats nothing)."""
    out = []
    for i in range(step * batch_size, (step + 1) * batch_size):
        epoch, position = divmod(i, n)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
        out.append(int(order[position]))
    return out


def read_log(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def train_loop(
    model: torch.nn.Module,
    groups: list[dict],
    schedule: Schedule,
    step_loss: Callable[[int], tuple[torch.Tensor, dict]],
    run_dir: Path,
    resume: bool,
    desc: str,
    progress: bool = True,
    on_step: Callable[[dict], None] | None = None,
    validate: Callable[[], dict] | None = None,
) -> Training:
    """Optimise `model` for schedule.steps: step_loss(step) gives the loss and the figures to log.

    groups: AdamW parameter groups, each with a "scale" (its learning rate relative to the schedule).
    The log row always has step, loss, agreement (greedy agreement of q with p), lr and seconds.
    validate() measures the model on held-out text every schedule.validate_every steps (its "score" is
    compared, higher is better); the checks go to checks.jsonl, and with a patience the loop stops once
    that many checks in a row were no better, and the model gets back the best check's weights.
    """
    from tqdm import tqdm

    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint, log_path, checks_path = run_dir / "checkpoint.pt", run_dir / "loss.jsonl", run_dir / "checks.jsonl"
    optimizer = torch.optim.AdamW(groups, lr=schedule.lr, betas=(0.9, 0.98))
    start, seconds, log = 0, 0.0, []
    if resume and checkpoint.is_file():
        state = torch.load(checkpoint, map_location=next(model.parameters()).device, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start, seconds = state["step"], state["seconds"]
        log = [row for row in read_log(log_path) if row["step"] < start]  # drop steps after the checkpoint
    checks = [row for row in read_log(checks_path) if row["step"] <= start] if resume else []
    with log_path.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in log)
    with checks_path.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in checks)
    best = _Best(checks)
    params = [p for g in groups for p in g["params"]]
    model.train()
    bar = tqdm(total=schedule.steps, initial=start, desc=desc, unit="step", file=sys.stderr, disable=not progress)
    with log_path.open("a", encoding="utf-8") as f:
        for step in range(start, schedule.steps):
            t0 = time.perf_counter()
            for group in optimizer.param_groups:
                group["lr"] = schedule.learning_rate(step) * group["scale"]
            loss, figures = step_loss(step)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, schedule.clip)
            optimizer.step()
            seconds += time.perf_counter() - t0
            row = {"step": step, "loss": round(loss.item(), 5), **{k: round(float(v), 4) for k, v in figures.items()},
                   "lr": schedule.learning_rate(step), "seconds": round(seconds, 2)}
            log.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            bar.set_postfix(loss=f"{row['loss']:.3f}", agree=f"{row.get('agreement', float('nan')):.2f}")
            bar.update()
            if on_step:
                on_step(row)  # the app's live loss curve
            out_of_time = bool(schedule.minutes) and seconds >= 60 * schedule.minutes
            stop = out_of_time
            if validate and schedule.validate_every and ((step + 1) % schedule.validate_every == 0
                                                         or step + 1 == schedule.steps or out_of_time):
                check = {"step": step + 1, **{k: round(float(v), 4) for k, v in validate().items()}}
                model.train()
                checks.append(check)
                with checks_path.open("a", encoding="utf-8") as g:
                    g.write(json.dumps(check) + "\n")
                best.offer(check, model, run_dir)
                stop = out_of_time or (bool(schedule.patience) and best.stale(checks) >= schedule.patience)
                bar.write(f"check at step {step + 1}: {check} (best: step {best.step})")
            if stop or (step + 1) % schedule.checkpoint_every == 0 or step + 1 == schedule.steps:
                scratch = checkpoint.with_suffix(".tmp")
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "step": step + 1, "seconds": seconds}, scratch)
                scratch.replace(checkpoint)
            if stop:
                break
    bar.close()
    best.restore(model, run_dir)
    model.eval()
    tail = log[-20:]
    return Training(
        model=model,
        steps=log[-1]["step"] + 1 if log else start,  # fewer than schedule.steps when it stopped early
        seconds=seconds,
        final_loss=statistics.fmean(r["loss"] for r in tail) if tail else float("nan"),
        final_agreement=statistics.fmean(r.get("agreement", float("nan")) for r in tail) if tail else float("nan"),
        log=log,
        checks=checks,
        best_step=best.step or (log[-1]["step"] + 1 if log else 0),
    )


class _Best:
    """The best-scoring check so far; its weights wait in best.pt (plain tensors) until training ends."""

    def __init__(self, checks: list[dict]):
        scored = [c for c in checks if "score" in c]
        top = max(scored, key=lambda c: c["score"], default=None)
        self.step, self.score = (top["step"], top["score"]) if top else (0, float("-inf"))

    def offer(self, check: dict, model: torch.nn.Module, run_dir: Path) -> None:
        if check.get("score", float("-inf")) > self.score:
            self.step, self.score = check["step"], check["score"]
            scratch = run_dir / "best.tmp"
            torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, scratch)
            scratch.replace(run_dir / "best.pt")

    def stale(self, checks: list[dict]) -> int:
        """Checks since the best one."""
        return sum(1 for c in checks if c["step"] > self.step)

    def restore(self, model: torch.nn.Module, run_dir: Path) -> None:
        if self.step and (run_dir / "best.pt").is_file():
            model.load_state_dict(torch.load(run_dir / "best.pt", map_location=next(model.parameters()).device,
                                             weights_only=True))
