"""The shared optimiser loop's held-out checks: it stops once they stop improving and keeps the best weights."""

from __future__ import annotations

import torch

from specviz.training.loop import Schedule, read_log, train_loop


def test_training_stops_after_checks_without_a_better_score_and_keeps_the_best_weights(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    scores = iter([0.1, 0.3, 0.2, 0.25, 0.2, 0.9])  # best at the second check; the sixth is never reached
    weights = {}

    def step_loss(step):
        return torch.nn.functional.mse_loss(model(x), y), {"agreement": 0.0}

    def validate():
        score = next(scores)
        weights[score] = model.weight.detach().clone()
        return {"score": score}

    schedule = Schedule(steps=100, lr=0.05, warmup=1, checkpoint_every=1000, validate_every=5, patience=3)
    done = train_loop(model, [{"params": list(model.parameters()), "scale": 1.0}], schedule, step_loss, tmp_path,
                      False, "test", progress=False, validate=validate)
    assert [c["step"] for c in done.checks] == [5, 10, 15, 20, 25]
    assert done.steps == 25 and done.best_step == 10
    torch.testing.assert_close(model.weight, weights[0.3])
    assert [c["score"] for c in read_log(tmp_path / "checks.jsonl")] == [0.1, 0.3, 0.2, 0.25, 0.2]


def test_a_time_limit_ends_training_with_one_last_check(tmp_path):
    """With `minutes`, the loop stops once training has taken that long, checks the weights it ends with, and keeps
    the best check's."""
    import time

    model = torch.nn.Linear(4, 1)
    x, y = torch.randn(16, 4), torch.randn(16, 1)

    def step_loss(step):
        time.sleep(0.05)
        return torch.nn.functional.mse_loss(model(x), y), {"agreement": 0.0}

    schedule = Schedule(steps=10_000, lr=0.05, warmup=1, checkpoint_every=1000, validate_every=100, minutes=0.002)
    done = train_loop(model, [{"params": list(model.parameters()), "scale": 1.0}], schedule, step_loss, tmp_path,
                      False, "test", progress=False, validate=lambda: {"score": 1.0})
    assert 2 <= done.steps <= 5  # 0.12 s of 0.05 s steps
    assert [c["step"] for c in done.checks] == [done.steps]
    assert (tmp_path / "checkpoint.pt").is_file()
