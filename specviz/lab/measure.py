"""Timed comparisons: a speculative run beside the target alone, same prompt and settings, timed in pairs.

Speedup is measured, never estimated: both are timed by the same loop (`decode.generate`), after a
warm-up, with device synchronisation on a GPU. They are timed side by side, pair by pair: within a pair a
round of one run, then a round of the other, each on its own clock (paused while the other works), the one
behind in its answer going next, so that both spread over the same stretch of the machine's time. A busy
spell of the machine (another program, a page drawn for another visitor) then slows both runs of a pair
alike, where two runs timed one after the other would each meet a different moment. The speedup is the
median of the pairs' ratios and their range is its spread; a 95% interval from the pairs (Student's t) says
where the speedup of these settings lies (`comparison.Comparison`). A baseline timed earlier is never reused:
every comparison pairs its own.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from .. import busy, products
from ..clock import Clock
from ..comparison import Comparison
from ..config import ConfigError, Decoding
from ..decode import encode_prompt, generate, rounds
from ..drafters import Drafter
from ..fast_path import FEW_ROW_SDPA
from ..models import LoadedModel
from ..records import Run

WARMUP_TOKENS = 4
PAIRS = 3  # timed pairs of a comparison in the app and `run`: a median and a spread (bench times 1 per prompt)
MAX_PAIRS = 9  # more pairs only make a learner wait
BUSY_PAIRS = 2  # pairs the app and `run` add to a spread (2+ pairs) when other programs took a noticeable share


def check_pairs(value: int | str, name: str = "pairs", low: int = 1, high: int = MAX_PAIRS) -> int:
    """How many timed pairs, checked in one place for every way in (`compare`, `--pairs`, SPECVIZ_PAIRS, and with
    low=0 the added pairs of SPECVIZ_BUSY_PAIRS): a whole number from `low` to `high`, else a ConfigError that names
    `name`."""
    text = str(value).strip()
    if not text.isdigit() or not low <= int(text) <= high:
        raise ConfigError(f"{name} must be a whole number from {low} to {high}, got {text!r}")
    return int(text)


def warm_up(target: LoadedModel, make_drafter: Callable[[], Drafter] | None, prompt: str, settings: Decoding) -> None:
    """A few tokens through both models: first calls pay for allocation and kernel selection. A speculative warm-up
    runs long enough for one full round (γ drafts, or the tree's nodes), so the widest verification forward of
    the run is not first met inside a timed run."""
    encode_prompt(target, prompt, settings)  # a prompt too long for the real run is refused before warming up
    widest = settings.tree.budget if settings.tree.on else settings.gamma
    tokens = WARMUP_TOKENS if make_drafter is None else max(WARMUP_TOKENS, widest + 2)
    short = replace(settings, max_new_tokens=min(tokens, settings.max_new_tokens))
    generate(target, make_drafter() if make_drafter else None, prompt, short)


def timed(
    target: LoadedModel, make_drafter: Callable[[], Drafter] | None, prompt: str, settings: Decoding, repeats: int = 1
) -> tuple[Run, list[float]]:
    """The first run's record and the wall times of all repeats (a fresh drafter for each)."""
    runs = [
        generate(target, make_drafter() if make_drafter else None, prompt, settings) for _ in range(max(1, repeats))
    ]
    return runs[0], [r.seconds for r in runs]


def compare(
    target: LoadedModel,
    make_drafter: Callable[[], Drafter],
    prompt: str,
    settings: Decoding,
    pairs: int = 1,
    warm: bool = True,
    should_stop: Callable[[], bool] | None = None,
    busy_pairs: int = 0,
) -> Comparison:
    """The speculative run and the target alone timed side by side in `pairs` pairs, alternating which goes first.

    busy_pairs: how many more pairs to time when other programs took more than busy.NOTICEABLE_SHARE of the machine
    while the pairs ran (the median of the pairs' shares); the app and `run` ask for BUSY_PAIRS, and the comparison
    records how many were added. Three pairs' range covers
    the median of their ratios only 3 times in 4, and a busy machine moves each pair more; five cover it 15 times
    in 16. A quiet machine keeps the shorter wait. Only for a spread (2 or more pairs): one pair stays one.
    should_stop() is asked between pairs: a comparison stopped early keeps the pairs it timed (at least one).
    """
    check_pairs(pairs)
    if warm:
        warm_up(target, None, prompt, settings)
        warm_up(target, make_drafter, prompt, settings)
    runs: list[tuple[Run, Run]] = []  # (baseline, speculative) of each pair
    others: list[float] = []  # the share of the machine other programs took while each pair ran
    planned = pairs
    while len(runs) < planned:
        if runs and should_stop and should_stop():
            break
        before = busy.read()
        runs.append(side_by_side(target, make_drafter, prompt, settings, spec_first=len(runs) % 2 == 1))
        if (work := busy.between(before, busy.read())) is not None:
            others.append(work.share)
        if busy_pairs and len(runs) == pairs >= 2 and _noticeable(others):
            planned = min(MAX_PAIRS, pairs + busy_pairs)
    ratios = [b.seconds / s.seconds if s.seconds > 0 else 0.0 for b, s in runs]
    middle = sorted(range(len(runs)), key=ratios.__getitem__)[(len(runs) - 1) // 2]  # the (lower) median pair
    base, spec = runs[middle]
    return Comparison(
        spec,
        base,
        spec_times=[s.seconds for _, s in runs],
        baseline_times=[b.seconds for b, _ in runs],
        paired=True,
        other_work=others,
        busy_pairs=max(0, len(runs) - pairs),
    )


def _noticeable(others: list[float]) -> bool:
    """Whether the median of the shares of the machine other programs took, over the pairs so far, is noticeable."""
    return bool(others) and statistics.median(others) > busy.NOTICEABLE_SHARE


def side_by_side(target: LoadedModel, make_drafter: Callable[[], Drafter], prompt: str, settings: Decoding,
                 spec_first: bool = False) -> tuple[Run, Run]:
    """The target alone and the speculative run, a round of one and then a round of the other: (baseline, spec).

    Each run has its own clock, paused while the other works, so its seconds are its own rounds' (and its
    tokens' arrival times its own). The run with fewer tokens so far goes next (the first named on a tie):
    both reach the end of their answers at about the same moment, so each samples the same stretch of the
    machine's time. Neither run's tokens depend on the other's: each has its own caches and random generator.
    """
    clocks = [Clock(target.device), Clock(target.device)]
    steps = [rounds(target, None, prompt, settings, clocks[0]),
             rounds(target, make_drafter(), prompt, settings, clocks[1])]
    order = [1, 0] if spec_first else [0, 1]
    made, done = [0, 0], [None, None]
    for clock in clocks:
        clock.pause()
    while None in done:
        i = min((j for j in order if done[j] is None), key=lambda j: made[j])
        clocks[i].resume()
        try:
            made[i] = next(steps[i])
        except StopIteration as end:
            done[i] = end.value
        clocks[i].pause()
    return done[0], done[1]


NOISY_SPREAD = 0.15  # pairs whose ratios range over more than 15% of their median cannot pin the speedup down


def outward(low: float, high: float) -> tuple[str, str]:
    """A range at two decimals, rounded outward, so that what is shown holds it whole (rounded to the nearest,
    1.1561–1.1788 would read 1.16–1.18, a range that leaves its lowest end out)."""
    return f"{math.floor(low * 100 + 1e-9) / 100:.2f}", f"{math.ceil(high * 100 - 1e-9) / 100:.2f}"


def spread_text(c: Comparison) -> tuple[str, str]:
    """The pairs' lowest and highest ratio at two decimals, rounded outward: the range shown holds every pair."""
    return outward(*c.speedup_range)


def interval_text(c: Comparison) -> str | None:
    """The speedup's 95% confidence interval, '95% interval 1.10–1.24' (rounded outward; None under 2 pairs)."""
    interval = c.speedup_interval
    return None if interval is None else "95% interval {}–{}".format(*outward(*interval))


def row_spread_text(row) -> str:
    """A sweep table row's spread: '1.12–1.21; 95% interval 1.07–1.27' (the range alone when the row has no
    interval, one pair)."""
    text = "–".join(outward(row["speedup_low"], row["speedup_high"]))
    low, high = row.get("speedup_interval_low"), row.get("speedup_interval_high")
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return text
    return f"{text}; 95% interval " + "–".join(outward(low, high))


def speedup_text(c: Comparison) -> str:
    """The measured speedup with its spread and its 95% interval: '1.17× (1.12–1.21 over 3 pairs; 95% interval
    1.07–1.27)'. The range is what the pairs did; the interval, where the speedup of these settings lies (wider: a
    run's pairs agree more closely than runs a minute apart, `Comparison.speedup_interval`)."""
    low, high = spread_text(c)
    if c.pairs >= 2:
        interval = interval_text(c)
        return f"{c.speedup:.2f}× ({low}–{high} over {c.pairs} pairs" + (f"; {interval})" if interval else ")")
    return (
        f"{c.speedup:.2f}× (" + ("1 pair: no spread" if c.pairs == 1 else "timed once, not in pairs: no spread") + ")"
    )


def noise_warning(c: Comparison) -> str | None:
    """What to say instead of a confident figure when the pairs disagree too much (None when they agree)."""
    low, high = c.speedup_range
    if c.pairs < 2 or c.speedup <= 0 or (high - low) / c.speedup <= NOISY_SPREAD:
        return None
    shown_low, shown_high = spread_text(c)
    if low < 1 < high:
        return (
            f"The {c.pairs} timed pairs range from {shown_low}× to {shown_high}×: timing noise is larger than the "
            "effect, so these runs cannot tell whether speculative decoding was faster. The machine was busy "
            "(other runs, other programs); run again, or with more tokens."
        )
    return (
        f"The {c.pairs} timed pairs range from {shown_low}× to {shown_high}×: the machine was busy while they ran, so "
        f"the speedup lies somewhere in that range and the median ({c.speedup:.2f}×) is not a precise figure."
    )


def busy_warning(c: Comparison) -> str | None:
    """What to say when other programs took a large share of the machine while the pairs were timed."""
    return busy.busy_text(c.other_work)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def machine(device: torch.device | str = "cpu", model=None) -> str:
    """The hardware a timing was taken on, in words (it goes beside every published figure); with the target's
    `model`, also the products its forwards take on a CPU (`products.choose_packs` and `choose_blas_rows`) and its
    attention where it takes the few-row kernel (`attention.choose`)."""
    device = torch.device(device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{products.cpu()[0]}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
        if (rows := products.blas_rows(model)) is not None:
            name += f", {products.products_text(rows, products.packs(model))}"
        if getattr(getattr(model, "config", None), "_attn_implementation", None) == FEW_ROW_SDPA:
            name += ", few-row attention"
    return f"{name}; torch {torch.__version__}"


def rss_mb() -> float:
    """Resident set size of this process in MB (psutil when installed, else Linux's /proc)."""
    try:
        import psutil
    except ImportError:
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024
    return psutil.Process().memory_info().rss / 2**20
