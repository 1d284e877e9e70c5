"""Sweeps: the same prompts measured across draft lengths γ, or across drafters.

Notation as everywhere: p target, q draft, γ (`gamma`) draft length, α (`alpha`) acceptance
rate, c draft/target cost ratio. A sweep is a list of `Point`s, one measured `Comparison` each;
the tables and charts are derived from those points and never call a model.

Fairness: every point times its own target-alone runs in pairs with its speculative runs
(`measure.compare`), so a busy moment of the machine slows both sides of a point and not one point
against another. The target alone and each drafter are warmed up once per prompt before their first
timed run.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pandas as pd

from .. import theory
from ..comparison import Comparison, interval95, pooled_pair_ratios
from ..config import MAX_GAMMA, Decoding, TreeShape
from ..drafters import Loader, build_drafter
from ..errors import ConfigError
from ..models import LoadedModel, load_model
from ..records import Run
from . import measure

MIN_DRAFTS, MAX_DRAFTS = 2, 4  # a comparison of one is no comparison; more than four is unreadable


@dataclass
class Point:
    """One measured run of a sweep: a drafter at one γ on one prompt, against that prompt's baseline."""

    prompt_index: int  # index into the sweep's prompt list
    draft: str  # the drafter spec as asked for ('ngram', 'layerskip:8', a model name…)
    gamma: int
    comparison: Comparison

    @property
    def label(self) -> str:
        """A unique, readable name for exports: draft, γ and prompt."""
        return f"{self.draft}-g{self.gamma}-p{self.prompt_index + 1}"


OnPoint = Callable[[Point, int, int], None]  # (point, points done, points planned)
ShouldStop = Callable[[], bool]

RUNNING, DONE, STOPPED, INTERRUPTED, FAILED = "running", "done", "stopped", "interrupted", "failed"


@dataclass(eq=False)
class Sweep:
    """A sweep as the app keeps it between reruns: the points measured so far and how it ended.

    Each point is kept the moment it is measured, so a Stop, a failure or a page rerun keeps the
    points done. `stop` is called from another script run than the one measuring (Streamlit starts
    a new run on every button press), so the status and the points change under one lock: once
    stopped, a point the stopped run finishes afterwards is not added to what the page has shown.
    """

    planned: int  # points the sweep would measure if left to finish
    setup: dict  # what the page asked for (target, drafts, prompts, settings…), to caption the result
    points: list[Point] = field(default_factory=list)
    status: str = RUNNING  # running, then done, stopped (the Stop button), interrupted (another control) or failed
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def add(self, point: Point, done: int = 0, total: int = 0) -> None:
        """An `OnPoint`: keep a point, unless the sweep was stopped meanwhile."""
        with self._lock:
            if self.status == RUNNING:
                self.points.append(point)

    def should_stop(self) -> bool:
        """A `ShouldStop`: checked by the sweep between points."""
        return self.status != RUNNING

    def stop(self, status: str = STOPPED) -> None:
        """End a running sweep where it is (no effect on a finished one)."""
        with self._lock:
            if self.status == RUNNING:
                self.status = status

    def finish(self) -> None:
        """After the sweep function returned or raised: done if every point was measured, else failed."""
        with self._lock:
            if self.status == RUNNING:
                self.status = DONE if len(self.points) == self.planned else FAILED

    def message(self, noun: str = "points") -> str | None:
        """What to tell the user about a sweep that did not measure everything; None when it did."""
        done = f"{len(self.points)} of {self.planned} {noun}"
        return {
            STOPPED: f"Stopped after {done}; the {noun} done are shown below.",
            INTERRUPTED: f"Stopped after {done}: a control changed while it ran. The {noun} done are shown below.",
            FAILED: f"The sweep ended with an error after {done}; the {noun} done are shown below.",
            RUNNING: f"Measuring: {done} so far.",
        }.get(self.status)


def gamma_sweep(
    target: LoadedModel,
    draft: str,
    prompts: list[str],
    gammas: list[int],
    settings: Decoding,
    load: Loader = load_model,
    on_point: OnPoint | None = None,
    should_stop: ShouldStop | None = None,
    pairs: int = 1,
    tree_depth: int = 0,
) -> list[Point]:
    """One drafter at every γ in `gammas` on every prompt; stops early (keeping what is done) on request.

    tree_depth > 0 also measures, at each γ = N, a token tree of N nodes at most tree_depth deep (the settings'
    branching and mode): it verifies as many drafted tokens per round as the chain. Its points are named
    `tree_label(draft)`.
    """
    gammas = sorted(set(gammas))
    if not gammas:
        raise ConfigError("no draft length γ to measure; pick a range such as 1 to 8")
    at_gamma = {g: replace(settings, gamma=g, tree=TreeShape()) for g in gammas}  # refuses an out-of-range γ up front
    shape = settings.tree if settings.tree.on else TreeShape(budget=1)
    as_tree = (
        {g: replace(settings, gamma=tree_depth, tree=replace(shape, budget=g)) for g in gammas} if tree_depth else {}
    )
    _check_prompts(prompts)
    build_drafter(draft, target, load)  # refuse an unknown or incompatible draft before timing anything

    def make():  # a fresh drafter per run
        return build_drafter(draft, target, load)

    points: list[Point] = []
    total = len(prompts) * len(gammas) * (2 if as_tree else 1)
    for index, prompt in enumerate(prompts):
        if should_stop and should_stop():
            break
        measure.warm_up(target, None, prompt, settings)
        measure.warm_up(target, make, prompt, at_gamma[gammas[0]])
        for gamma in gammas:
            if should_stop and should_stop():
                return points
            c = measure.compare(target, make, prompt, at_gamma[gamma], pairs=pairs, warm=False, should_stop=should_stop)
            points.append(Point(index, draft, gamma, c))
            if on_point:
                on_point(points[-1], len(points), total)
            if gamma in as_tree and not (should_stop and should_stop()):
                c = measure.compare(
                    target, make, prompt, as_tree[gamma], pairs=pairs, warm=False, should_stop=should_stop
                )
                points.append(Point(index, tree_label(draft), gamma, c))
                if on_point:
                    on_point(points[-1], len(points), total)
    return points


def tree_label(draft: str) -> str:
    return f"{draft} · tree"


def compare_drafts(
    target: LoadedModel,
    drafts: list[str],
    prompts: list[str],
    settings: Decoding,
    load: Loader = load_model,
    on_point: OnPoint | None = None,
    should_stop: ShouldStop | None = None,
    pairs: int = 1,
) -> list[Point]:
    """Every drafter on every prompt at the same γ and seed, each timed in pairs with the target alone.

    With a tree budget N in the settings each drafter runs twice: as that tree and as a chain of γ=N, which
    verifies as many drafted tokens per round (`variants`).
    """
    check_draft_count(drafts)
    _check_prompts(prompts)
    makers = {}
    for spec in drafts:
        build_drafter(spec, target, load)  # refuse a bad draft before timing anything
        makers[spec] = lambda s=spec: build_drafter(s, target, load)
    runs = variants(drafts, settings)
    points: list[Point] = []
    total = len(prompts) * len(runs)
    for index, prompt in enumerate(prompts):
        if should_stop and should_stop():
            break
        measure.warm_up(target, None, prompt, settings)
        for label, spec, at in runs:
            if should_stop and should_stop():
                return points
            measure.warm_up(target, makers[spec], prompt, at)
            c = measure.compare(target, makers[spec], prompt, at, pairs=pairs, warm=False, should_stop=should_stop)
            points.append(Point(index, label, at.gamma, c))
            if on_point:
                on_point(points[-1], len(points), total)
    return points


def variants(drafts: list[str], settings: Decoding) -> list[tuple[str, str, Decoding]]:
    """(label, drafter spec, settings) of every run per prompt: each drafter as asked, and with a tree
    budget N also as a chain of γ=N (the same number of drafted tokens verified per round)."""
    if not settings.tree.on:
        return [(spec, spec, settings) for spec in drafts]
    n = settings.tree.budget
    chain = replace(settings, gamma=min(n, MAX_GAMMA), tree=TreeShape())
    return [
        row
        for spec in drafts
        for row in ((f"{spec} · tree {n}", spec, settings), (f"{spec} · chain γ={n}", spec, chain))
    ]


def check_draft_count(drafts: list[str]) -> None:
    if len(set(drafts)) != len(drafts):
        raise ConfigError("each drafter can be picked once; remove the duplicate")
    if not MIN_DRAFTS <= len(drafts) <= MAX_DRAFTS:
        raise ConfigError(f"pick {MIN_DRAFTS} to {MAX_DRAFTS} drafters to compare, not {len(drafts)}")


def _check_prompts(prompts: list[str]) -> None:
    if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
        raise ConfigError("no prompt to measure; pick a preset prompt or type one")


def draft_parameters(spec: str, target: LoadedModel, load: Loader = load_model) -> int:
    """Parameters the drafter runs: 0 for n-gram lookup, the kept layers plus embedding and head for
    layer-skip, the whole target for 'target', the draft model's own count otherwise (tied weights once)."""
    model = getattr(build_drafter(spec, target, load), "model", None)
    return sum(p.numel() for p in model.parameters()) if model is not None else 0


# --- aggregates (no model calls) ---------------------------------------------------------------
GAMMA_COLUMNS = [
    "gamma",
    "alpha",
    "alpha_theory",
    "mean_accepted",
    "speedup",
    "speedup_low",
    "speedup_high",
    "speedup_interval_low",
    "speedup_interval_high",
    "theoretical_speedup",
    "c",
    "verify_cost",
    "draft_ms_per_token",
    "tokens_per_s",
    "baseline_tokens_per_s",
    "identical",
    "prompts",
]
DRAFT_COLUMNS = [
    "draft",
    "parameters",
    "draft_ms_per_token",
    "c",
    "alpha",
    "alpha_theory",
    "mean_accepted",
    "speedup",
    "speedup_low",
    "speedup_high",
    "speedup_interval_low",
    "speedup_interval_high",
    "theoretical_speedup",
    "tokens_per_s",
    "identical",
    "prompts",
]


def _pooled(points: list[Point]) -> dict:
    """Figures of a group of points pooled over prompts: totals first, then ratios of totals."""
    runs = [p.comparison.spec for p in points]
    drafted, accepted = sum(r.drafted for r in runs), sum(r.accepted for r in runs)
    tokens, rounds = sum(r.new_tokens for r in runs), sum(len(r.rounds) for r in runs)
    spec_s = sum(p.comparison.spec_seconds for p in points)
    base_s = sum(p.comparison.baseline_seconds for p in points)
    base_tokens = sum(p.comparison.baseline.new_tokens for p in points)
    ratios = pooled_pair_ratios([p.comparison for p in points]) or [0.0]
    interval = interval95(ratios) or (None, None)  # none for one pair
    return {
        "alpha": accepted / drafted if drafted else 0.0,
        # the theory's per-token α, and γ as drafted (see Run.implied_alpha)
        "alpha_theory": theory.alpha_from_mean_tokens(tokens / rounds, drafted / rounds) if drafted else 0.0,
        "drafted_per_round": drafted / rounds if rounds else 0.0,
        "mean_accepted": tokens / rounds if rounds else 0.0,
        "speedup": statistics.median(ratios),  # the pairs' median, each pair pooled over the prompts
        "speedup_low": min(ratios),
        "speedup_high": max(ratios),
        "speedup_interval_low": interval[0],
        "speedup_interval_high": interval[1],
        "c": statistics.fmean(p.comparison.cost_ratio for p in points),
        "verify_cost": statistics.fmean(p.comparison.verify_cost for p in points),
        "draft_ms_per_token": 1000 * sum(r.draft_seconds for r in runs) / drafted if drafted else 0.0,
        "tokens_per_s": tokens / spec_s if spec_s > 0 else 0.0,
        "baseline_tokens_per_s": base_tokens / base_s if base_s > 0 else 0.0,
        "identical": all(p.comparison.identical for p in points),
        "prompts": len({p.prompt_index for p in points}),
    }


def gamma_table(points: list[Point]) -> pd.DataFrame:
    """One row per γ: α, tokens per round, measured and theoretical speedup, c, tokens/s; best γ flagged."""
    rows = []
    for gamma in sorted({p.gamma for p in points}):
        row = {"gamma": gamma, **_pooled([p for p in points if p.gamma == gamma])}
        row["theoretical_speedup"] = theory.expected_speedup(row["alpha_theory"], row["drafted_per_round"], row["c"])
        rows.append(row)
    frame = pd.DataFrame(rows, columns=GAMMA_COLUMNS)
    frame["best"] = frame["gamma"] == best_gamma(frame)
    return frame


def best_gamma(frame: pd.DataFrame) -> int | None:
    """The γ with the highest measured speedup (the smaller γ on a tie); None for an empty table."""
    if frame.empty:
        return None
    return int(frame.sort_values(["speedup", "gamma"], ascending=[False, True]).iloc[0]["gamma"])


def overall_alpha_c(points: list[Point]) -> tuple[float, float]:
    """The theory's per-token α pooled over the whole sweep and the mean c: what the smooth theory curve is drawn
    from."""
    pooled = _pooled(points)
    return pooled["alpha_theory"], pooled["c"]


def draft_table(points: list[Point], parameters: dict[str, int] | None = None) -> pd.DataFrame:
    """One row per drafter, in the order picked: size, draft cost, c, α, tokens per round, speedup."""
    rows = []
    for draft in dict.fromkeys(p.draft for p in points):
        mine = [p for p in points if p.draft == draft]
        row = {"draft": draft, "parameters": (parameters or {}).get(draft), **_pooled(mine)}
        row["theoretical_speedup"] = theory.expected_speedup(row["alpha_theory"], row["drafted_per_round"], row["c"])
        rows.append(row)
    return pd.DataFrame(rows, columns=DRAFT_COLUMNS)


def acceptance_by_position(runs: list[Run]) -> list[float]:
    """P(draft token i accepted | it was drafted), pooled over runs (Run.acceptance_by_position for many)."""
    rounds = [r for run in runs for r in run.rounds]
    longest = max((len(r.drafted) for r in rounds), default=0)
    rates = []
    for i in range(longest):
        reached = [r for r in rounds if len(r.drafted) > i]
        rates.append(sum(r.n_accepted > i for r in reached) / len(reached))
    return rates


def comparisons(points: list[Point]) -> dict[str, Comparison]:
    """Points by label, for the export buttons."""
    return {p.label: p.comparison for p in points}
