"""What a lesson step says about the runs it shows, in words computed from those runs.

A step's fixed sentence (`Step.teaches`) is general; what it claims about the recording it shows is written
from that recording ("fastest at γ = 8, still rising", never "peaks at a moderate γ" when the numbers
climb), beside the statements of the step that the runs contradict. The test over every step must find none,
and a live re-run that disagrees is told so on the page. Each step writes its own claim
(specviz/app/lesson/steps/); the words and measures they share are here. Pure logic, no Streamlit, no model.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..comparison import Comparison

NOISE = 0.05  # speedups closer than 5% are within a shared CPU's timing noise
ALMOST_FREE = 0.1  # a draft below this c costs less than a tenth of a target step per token


@dataclass(frozen=True)
class Claim:
    text: str  # what this step's runs show, in words computed from them
    problems: tuple[str, ...] = ()  # statements of the step that the runs contradict (none when it holds)


def direction(speedup: float) -> int:
    """0 faster, 1 about the same (within the noise), 2 slower."""
    return 0 if speedup > 1 + NOISE else (2 if speedup < 1 - NOISE else 1)


def label(name: str) -> str:
    """A run's name without its group: "gamma:3" -> "3"."""
    return name.split(":", 1)[1]


def cost_text(value: float) -> str:
    return f"c = {value:.3f}" if value >= 0.001 else "c < 0.001"


def times(value: float) -> str:
    return f"{value:.2f}×"


def near(runs: dict[str, Comparison], best: str) -> list[str]:
    """The other runs within the timing noise of the fastest."""
    top = runs[best].speedup
    return [label(n) for n, c in runs.items() if n != best and c.speedup >= top * (1 - NOISE)]
