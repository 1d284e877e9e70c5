"""Headline figures of a comparison, as (label, value, help) rows for metric cards."""

from __future__ import annotations

from ...records import Comparison


def headline(c: Comparison) -> list[tuple[str, str, str]]:
    spec = c.spec
    ratio = c.speedup / c.theoretical_speedup_measured_verify if c.theoretical_speedup_measured_verify else 0.0
    return [
        ("α", f"{spec.acceptance_rate:.2f}", f"acceptance rate: {spec.accepted} of {spec.drafted} drafted tokens accepted"),
        ("tokens/round", f"{spec.mean_accepted_tokens:.2f}", "accepted drafts plus the resampled or bonus token"),
        ("tokens/s", f"{spec.tokens_per_second:.1f}", f"target alone: {c.baseline.tokens_per_second:.1f} tokens/s"),
        ("speedup", f"{c.speedup:.2f}×", f"measured: baseline {c.baseline_seconds:.2f} s ÷ speculative {c.spec_seconds:.2f} s"),
        ("theory", f"{c.theoretical_speedup_measured_verify:.2f}×",
         f"(1−α^(γ+1))/((1−α)(γc+v)) with this run's c, α = {spec.implied_alpha:.2f} per tested draft (the rate that "
         f"gives its tokens per round), γ = {spec.mean_drafted:.2f} tokens drafted per round and "
         f"v = {c.verify_cost:.2f}: one verification forward costs {c.verify_cost:.2f} target steps here "
         f"(with the textbook v = 1: {c.theoretical_speedup:.2f}×)"),
        ("÷ theory", f"{ratio:.2f}",
         "Measured speedup ÷ theory. What the theory leaves out: time outside the draft and verify forwards (cache rollback, bookkeeping, "
         "recording) and rounds that do not look like the average one. Near 1: the loop wastes little."),
        ("c", f"{c.cost_ratio:.3f}", "cost ratio: draft time per token ÷ target time per step, both measured"),
    ]


def fidelity(c: Comparison) -> tuple[bool, str]:
    """(ok, message): identity with the target alone in exact mode, drift in relaxed mode."""
    exact = c.spec.settings["verification"]["mode"] == "exact"
    greedy = c.spec.settings["sampling"]["temperature"] == 0
    if c.identical:
        return True, "✔ Identical to the target alone"
    if exact and not greedy:
        return True, "Sampling: tokens differ from the baseline draw, but their distribution is the target's (lossless)"
    if exact:
        return False, f"✘ Differs from the target alone ({c.agreement:.0%} token agreement) — low precision can flip near ties"
    return False, f"≈ Relaxed verification drifted: {c.agreement:.0%} token agreement with the target's own output"
