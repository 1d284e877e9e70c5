"""A speculative run beside the target alone, and the JSON files records travel in.

A `Comparison` pairs a speculative run with the target-alone baseline made with the same settings, timed in
pairs (`specviz.lab.measure.compare`), and derives the measured speedup with its spread, the cost ratio c and
the theory's figures from the two. `dumps`, `loads` and `load_comparisons` write and read the exports and the
shipped recordings, refusing a damaged file with a clear message.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field

from . import theory
from .errors import SpecVizError
from .records import Run, token_agreement

# Student's t for a two-sided 95% interval, 1-30 degrees of freedom
T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)


def t95(df: int) -> float:
    """Student's t for a two-sided 95% interval with `df` degrees of freedom (a table to 30, then a series in 1/df
    whose error is under 0.0002 there)."""
    if df < 1:
        raise ValueError("a t-interval needs at least 2 values")
    if df <= len(T95):
        return T95[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def interval95(ratios: list[float]) -> tuple[float, float] | None:
    """A 95% confidence interval for the typical ratio of a few positive ratios: Student's t over their logs (a
    timing's noise multiplies it), back to ratios; None under 2 ratios."""
    if len(ratios) < 2 or min(ratios) <= 0:
        return None
    logs = [math.log(r) for r in ratios]
    half = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    centre = statistics.mean(logs)
    return math.exp(centre - half), math.exp(centre + half)


@dataclass
class Comparison:
    """A speculative run beside the target-alone baseline: same prompt, same settings.

    A paired comparison (`paired`) timed the two in turn, pair by pair (specviz.lab.measure.compare): its
    speedup is the median of the pairs' ratios, so a moment when the machine was busy slows both runs of a
    pair and not one side of the comparison. `spec` and `baseline` are the runs of the median pair.
    """

    spec: Run
    baseline: Run
    spec_times: list[float] = field(default_factory=list)  # wall time of each timed run, in pair order
    baseline_times: list[float] = field(default_factory=list)
    paired: bool = False  # spec_times[i] and baseline_times[i] were timed back to back (pair i)
    other_work: list[float] = field(default_factory=list)  # share of the machine's CPU other programs took, per pair
    busy_pairs: int = 0  # of the pairs, those added because other programs took a noticeable share (measure.compare)

    @property
    def spec_seconds(self) -> float:
        return statistics.median(self.spec_times) if self.spec_times else self.spec.seconds

    @property
    def baseline_seconds(self) -> float:
        return statistics.median(self.baseline_times) if self.baseline_times else self.baseline.seconds

    @property
    def pair_ratios(self) -> list[float]:
        """Each pair's baseline seconds ÷ speculative seconds (one ratio for an unpaired comparison)."""
        if self.paired and self.spec_times and len(self.spec_times) == len(self.baseline_times):
            return [b / s for b, s in zip(self.baseline_times, self.spec_times) if s > 0]
        return [self.baseline_seconds / self.spec_seconds] if self.spec_seconds > 0 else []

    @property
    def pairs(self) -> int:
        """How many pairs were timed (0 for a comparison whose runs were not timed in pairs)."""
        return len(self.pair_ratios) if self.paired else 0

    @property
    def speedup(self) -> float:
        """Measured: the median of the pairs' ratios (baseline seconds ÷ speculative seconds); unpaired, the
        ratio of the median times."""
        ratios = self.pair_ratios
        return statistics.median(ratios) if ratios else 0.0

    @property
    def speedup_range(self) -> tuple[float, float]:
        """The lowest and highest pair ratio: the spread shown beside the speedup."""
        ratios = self.pair_ratios or [0.0]
        return min(ratios), max(ratios)

    @property
    def speedup_interval(self) -> tuple[float, float] | None:
        """A 95% confidence interval for the speedup from the pairs (None under 2 pairs): Student's t over the logs
        of the pairs' ratios (a ratio's noise multiplies it), back to ratios.

        The range of n pairs holds the median of their ratios' distribution with probability 1 − 2·½ⁿ, 3 in 4 for 3
        pairs, and a run's pairs, timed within seconds of each other, agree more closely than runs a minute apart:
        the range of one `specviz run` held the median of seven other runs of the same case in 13 of 16 tries (Xeon,
        benchmarks/range_coverage.py), this interval in 16 of 16. With few pairs it is wide, as it should be.
        """
        return interval95(self.pair_ratios) if self.paired else None

    @property
    def identical(self) -> bool:
        return self.spec.output_ids == self.baseline.output_ids

    @property
    def agreement(self) -> float:
        """Fraction of positions where the two outputs agree (over the longer output)."""
        return token_agreement(self.spec.output_ids, self.baseline.output_ids)

    @property
    def cost_ratio(self) -> float:
        """c = draft time per drafted token / target time per decoding step (measured)."""
        step = self.baseline.step_seconds
        return self.spec.draft_seconds_per_token / step if step > 0 else 0.0

    @property
    def verify_cost(self) -> float:
        """Time of one verification forward (γ+1 tokens) in target decoding steps (1 in theory)."""
        step = self.baseline.step_seconds
        return self.spec.step_seconds / step if step > 0 else 0.0

    @property
    def theoretical_speedup(self) -> float:
        """(1-α^(γ+1)) / ((1-α)(γc+1)) from the run's own per-token α, c and γ (tokens drafted per round).
        A tree run: the tree theory's tokens per round (its shapes and a_r) over its drafting cost plus one step."""
        if self.spec.is_tree:
            return self._tree_theory(1.0)
        return theory.expected_speedup(self.spec.implied_alpha, self.spec.mean_drafted, self.cost_ratio)

    @property
    def theoretical_speedup_measured_verify(self) -> float:
        """The same with the verification forward costed as measured instead of as one step."""
        if self.spec.is_tree:
            return self._tree_theory(self.verify_cost)
        return theory.expected_speedup(
            self.spec.implied_alpha, self.spec.mean_drafted, self.cost_ratio, self.verify_cost
        )

    def _tree_theory(self, verify_steps: float) -> float:
        return theory.tree_speedup(self.spec.tree_expected_tokens(), self.cost_ratio * self.spec.mean_verified,
                                   verify_steps)

    def summary(self) -> dict:
        interval = self.speedup_interval or (None, None)
        return {
            **self.spec.summary(),
            "spec_seconds": self.spec_seconds,
            "baseline_seconds": self.baseline_seconds,
            "speedup": self.speedup,
            "speedup_low": self.speedup_range[0],
            "speedup_high": self.speedup_range[1],
            "speedup_interval_low": interval[0],
            "speedup_interval_high": interval[1],
            "pairs": self.pairs,
            "busy_pairs": self.busy_pairs,
            "other_work": max(self.other_work) if self.other_work else None,
            "identical": self.identical,
            "agreement": self.agreement,
            "cost_ratio": self.cost_ratio,
            "verify_cost": self.verify_cost,
            "theoretical_speedup": self.theoretical_speedup,
            "theoretical_speedup_measured_verify": self.theoretical_speedup_measured_verify,
        }

    def to_dict(self) -> dict:
        return {
            "spec": self.spec.to_dict(),
            "baseline": self.baseline.to_dict(),
            "spec_times": self.spec_times,
            "baseline_times": self.baseline_times,
            "paired": self.paired,
            "other_work": self.other_work,
            "busy_pairs": self.busy_pairs,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Comparison:
        if not isinstance(data, dict) or "spec" not in data or "baseline" not in data:
            raise SpecVizError(
                "not a SpecViz comparison export (expected 'spec' and 'baseline' runs); "
                "load a file saved by a 'Runs (JSON, replayable)' button"
            )
        return cls(
            Run.from_dict(data["spec"]),
            Run.from_dict(data["baseline"]),
            list(data.get("spec_times", [])),
            list(data.get("baseline_times", [])),
            bool(data.get("paired", False)),
            [float(x) for x in data.get("other_work", [])],
            int(data.get("busy_pairs", 0)),
        )


def pooled_pair_ratios(comparisons: list[Comparison]) -> list[float]:
    """Pair i of every comparison pooled: Σ baseline seconds ÷ Σ speculative seconds of the i-th pairs (for a
    group of prompts: one ratio per pair index, as many as the fewest pairs of any comparison)."""
    n = min((len(c.pair_ratios) for c in comparisons), default=0)
    if not all(c.paired for c in comparisons):
        spec = sum(c.spec_seconds for c in comparisons)
        return [sum(c.baseline_seconds for c in comparisons) / spec] if spec > 0 else []
    ratios = []
    for i in range(n):
        spec = sum(c.spec_times[i] for c in comparisons)
        ratios.append(sum(c.baseline_times[i] for c in comparisons) / spec if spec > 0 else 0.0)
    return ratios


def dumps(record: Run | Comparison) -> str:
    return json.dumps(record.to_dict())


def _parse(text: str | bytes):
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpecVizError(
            f"the file is not valid JSON ({exc.__class__.__name__}; damaged or cut short?); export the run again from "
            f"SpecViz"
        ) from None


def loads(text: str | bytes) -> Comparison | Run:
    """A run or comparison exported as JSON, checked, for replay without models."""
    data = _parse(text)
    if isinstance(data, dict) and "spec" in data:
        return Comparison.from_dict(data)
    return Run.from_dict(data)


def load_comparisons(text: str | bytes) -> dict[str, Comparison]:
    """Comparisons by name from a JSON export: one comparison, or several saved by a download button."""
    data = _parse(text)
    if isinstance(data, dict) and "spec" in data:
        return {"loaded run": Comparison.from_dict(data)}
    if isinstance(data, dict) and data and all(isinstance(v, dict) for v in data.values()):
        return {name: Comparison.from_dict(v) for name, v in data.items()}
    raise SpecVizError("the file is not a SpecViz export; load a file saved by a 'Runs (JSON, replayable)' button")
