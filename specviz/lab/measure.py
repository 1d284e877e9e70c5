"""Timed comparisons: a speculative run beside the target alone, same prompt and settings.

Speedup is measured, never estimated: both are timed by the same loop (`decode.generate`), after
a warm-up, with device synchronisation on a GPU, and with repeats reduced to their median.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from ..config import Decoding
from ..decode import encode_prompt, generate
from ..drafters import Drafter
from ..models import LoadedModel
from ..records import Comparison, Run

WARMUP_TOKENS = 4


def warm_up(target: LoadedModel, make_drafter: Callable[[], Drafter] | None, prompt: str, settings: Decoding) -> None:
    """A few tokens through both models: first calls pay for allocation and kernel selection."""
    encode_prompt(target, prompt, settings)  # a prompt too long for the real run is refused before warming up
    short = replace(settings, max_new_tokens=WARMUP_TOKENS)
    generate(target, make_drafter() if make_drafter else None, prompt, short)


def timed(
    target: LoadedModel, make_drafter: Callable[[], Drafter] | None, prompt: str, settings: Decoding, repeats: int = 1
) -> tuple[Run, list[float]]:
    """The first run's record and the wall times of all repeats (a fresh drafter for each)."""
    runs = [generate(target, make_drafter() if make_drafter else None, prompt, settings) for _ in range(max(1, repeats))]
    return runs[0], [r.seconds for r in runs]


def compare(
    target: LoadedModel,
    make_drafter: Callable[[], Drafter],
    prompt: str,
    settings: Decoding,
    baseline: tuple[Run, list[float]] | None = None,
    repeats: int = 1,
    warm: bool = True,
) -> Comparison:
    """Measure a speculative run against the baseline (measured here unless one is passed in)."""
    if warm:
        warm_up(target, make_drafter, prompt, settings)
        if baseline is None:
            warm_up(target, None, prompt, settings)
    if baseline is None:
        baseline = timed(target, None, prompt, settings, repeats)
    spec, spec_times = timed(target, make_drafter, prompt, settings, repeats)
    return Comparison(spec, baseline[0], spec_times=spec_times, baseline_times=baseline[1])


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def machine(device: torch.device | str = "cpu") -> str:
    """The hardware a timing was taken on, in words (it goes beside every published figure)."""
    device = torch.device(device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = platform.processor() or platform.machine()
        with contextlib.suppress(OSError):
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
        name = f"{name}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
    return f"{name}; torch {torch.__version__}"


def rss_mb() -> float:
    """Resident set size of this process in MB (psutil when installed, else Linux's /proc)."""
    try:
        import psutil
    except ImportError:
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024
    return psutil.Process().memory_info().rss / 2**20
