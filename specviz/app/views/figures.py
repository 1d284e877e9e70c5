"""Headline figures of a comparison, as (label, value, help) rows for metric cards."""

from __future__ import annotations

from ...busy import NOTICEABLE_SHARE
from ...comparison import Comparison
from ...lab.measure import noise_warning, speedup_text, spread_text


def headline(c: Comparison) -> list[tuple[str, str, str]]:
    spec = c.spec
    ratio = c.speedup / c.theoretical_speedup_measured_verify if c.theoretical_speedup_measured_verify else 0.0
    return [
        (
            "α",
            f"{spec.acceptance_rate:.2f}",
            f"acceptance rate: {spec.accepted} of {spec.drafted} drafted tokens accepted",
        ),
        ("tokens/round", f"{spec.mean_accepted_tokens:.2f}", "accepted drafts plus the resampled or bonus token"),
        ("tokens/s", f"{spec.tokens_per_second:.1f}", f"target alone: {c.baseline.tokens_per_second:.1f} tokens/s"),
        ("speedup", speedup_value(c), speedup_help(c)),
        (
            "theory",
            f"{c.theoretical_speedup_measured_verify:.2f}×",
            f"(1−α^(γ+1))/((1−α)(γc+v)) with this run's c, α = {spec.implied_alpha:.2f} per tested draft (the rate "
            f"that "
            f"gives its tokens per round), γ = {spec.mean_drafted:.2f} tokens drafted per round and "
            f"v = {c.verify_cost:.2f}: one verification forward costs {c.verify_cost:.2f} target steps here "
            f"(with the textbook v = 1: {c.theoretical_speedup:.2f}×)",
        ),
        (
            "÷ theory",
            f"{ratio:.2f}",
            "Measured speedup ÷ theory. What the theory leaves out: time outside the draft and verify forwards (cache "
            "rollback, bookkeeping, "
            "recording) and rounds that do not look like the average one. Near 1: the loop wastes little.",
        ),
        ("c", f"{c.cost_ratio:.3f}", "cost ratio: draft time per token ÷ target time per step, both measured"),
    ]


def speedup_value(c: Comparison) -> str:
    """The measured speedup as a card shows it: the median of the pairs, or their range when they disagree too much."""
    if noise_warning(c):
        low, high = spread_text(c)
        return f"{low}–{high}×"
    return f"{c.speedup:.2f}×"


def speedup_help(c: Comparison) -> str:
    pairs = (
        f"The target alone and the speculative run were timed side by side, {c.pairs} pairs; the speedup "
        "is the median of the pairs' ratios, the range their spread, and the 95% interval (Student's t over the "
        "pairs) where the speedup of these settings lies: a run's pairs agree more closely than runs a minute apart. "
        if c.pairs
        else "Timed once each, not in pairs. "
    )
    return (
        f"Measured: {speedup_text(c)}. {pairs}Median times: target alone {c.baseline_seconds:.2f} s, speculative "
        f"{c.spec_seconds:.2f} s."
    )


def spread_caption(c: Comparison) -> str:
    """One line under the cards: the speedup with its spread, said in words."""
    caption = (
        f"Measured speedup **{speedup_text(c)}**: "
        "the target alone and speculative decoding timed side by side, pair by pair."
    )
    if c.other_work:
        caption += f" Other programs took up to {max(c.other_work):.0%} of the machine's CPU meanwhile."
    if c.busy_pairs:
        caption += (f" They took over {NOTICEABLE_SHARE:.0%} while the first pairs ran, so {c.busy_pairs} more pairs "
                    "were timed: a busy machine moves each pair more.")
    return caption


def fidelity(c: Comparison) -> tuple[bool, str]:
    """(ok, message): identity with the target alone in exact mode, drift in relaxed mode."""
    exact = c.spec.settings["verification"]["mode"] == "exact"
    greedy = c.spec.settings["sampling"]["temperature"] == 0
    if c.identical:
        return True, "✔ Identical to the target alone"
    if exact and not greedy:
        return True, "Sampling: tokens differ from the baseline draw, but their distribution is the target's (lossless)"
    if exact:
        return (
            False,
            f"✘ Differs from the target alone ({c.agreement:.0%} token agreement) — low precision can flip near ties",
        )
    return False, f"≈ Relaxed verification drifted: {c.agreement:.0%} token agreement with the target's own output"
