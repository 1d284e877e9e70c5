"""The race: the target alone and speculative runs replayed at the pace they were measured, and the latency
figures a user feels (time to first token, the gaps between tokens).

Every new token of a run has an arrival time (`Run.arrival_seconds`): seconds since the run started when
its round's verification ended, device-synchronised. The target alone delivers one token per step; a
speculative run delivers a round's tokens together, in a burst. A record made before SpecViz kept arrival
times is reconstructed from its per-round measured times (prefill, then each round's draft and verify
seconds) and says so: that leaves out the loop's bookkeeping between rounds, so it arrives a little early.
A record with neither cannot race, and the race says so.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from .comparison import Comparison
from .errors import SpecVizError
from .records import REJECTED, Run

MEASURED, RECONSTRUCTED = "measured", "reconstructed from per-round times"
BASELINE = "target alone"
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0)  # replay speeds offered: slower, real time, faster


@dataclass(frozen=True)
class Token:
    text: str
    status: str  # ACCEPTED, RESAMPLED, BONUS or TARGET: the statuses of tokens that reach the output
    at: float  # seconds since the run started
    round: int  # index of the round that delivered it


@dataclass(frozen=True)
class Lane:
    """One runner of the race: a run's output tokens with their arrival times."""

    name: str
    tokens: list[Token]
    source: str  # MEASURED, or RECONSTRUCTED for an older record

    @property
    def finish(self) -> float:
        """When the last token arrived: the answer is complete."""
        return self.tokens[-1].at if self.tokens else 0.0


@dataclass(frozen=True)
class LaneFrame:
    shown: int  # tokens visible
    clock: float  # the lane's elapsed clock (it stops at the finish)
    finished: bool


@dataclass(frozen=True)
class Latency:
    """What a reader of the stream feels: time to the first token and the gaps between the next ones."""

    ttft: float  # seconds from the start (prefill included) to the first token
    gap_median: float  # median seconds between consecutive tokens (0 inside a burst)
    gap_p90: float
    source: str


@dataclass(frozen=True)
class Span:
    """Where a round's time went: one stretch of drafting or of the target's forward, on the wall clock."""

    lane: str  # BASELINE or the drafter's name
    kind: str  # "prefill", "draft" or "target"
    round: int  # -1 for the prefill
    start: float
    end: float


def arrivals(run: Run) -> tuple[list[float], str] | None:
    """Each new token's arrival time and where it comes from; None if the record holds no times at all."""
    if run.arrival_seconds is not None:
        return list(run.arrival_seconds), MEASURED
    if not run.rounds or sum(r.emitted for r in run.rounds) != run.new_tokens:
        return None
    out, clock = [], run.prefill_seconds
    for r in run.rounds:
        clock += r.draft_seconds + r.verify_seconds
        out += [clock] * r.emitted
    return out, RECONSTRUCTED


def delivered(run: Run) -> list[tuple[str, str, int]]:
    """(text, status, round) of every output token: each round's kept drafts and its next token, cut as the
    loop cut them (EOS, max-new-tokens)."""
    out = []
    for r in run.rounds:
        kept = [(text, status, r.index) for _, text, status in r.statuses() if status != REJECTED]
        out += kept[: r.emitted]
    return out


def lane(name: str, run: Run) -> Lane | None:
    """The run as a runner, or None when its record holds no times to race with."""
    times = arrivals(run)
    tokens = delivered(run)
    if times is None or len(times[0]) != len(tokens):
        return None
    return Lane(name, [Token(text, status, at, rnd) for (text, status, rnd), at in zip(tokens, times[0])], times[1])


def race_lanes(comparisons: dict[str, Comparison]) -> tuple[list[Lane], list[str]]:
    """The target alone (the first comparison's baseline) and one lane per speculative run, all on one prompt;
    and a note for each run that cannot race or whose times are reconstructed."""
    if not comparisons:
        return [], []
    first = next(iter(comparisons.values()))
    runs = [(BASELINE, first.baseline)] + [(name, c.spec) for name, c in comparisons.items()]
    lanes, notes = [], []
    for name, run in runs:
        runner = lane(name, run)
        if runner is None:
            notes.append(f"{name}: this record has no arrival or round times, so it cannot race")
        else:
            lanes.append(runner)
            if runner.source == RECONSTRUCTED:
                notes.append(f"{name}: arrival times {RECONSTRUCTED} (an older record; the loop's bookkeeping "
                             "between rounds is left out, so it arrives a little early)")
    if len({c.baseline.prompt for c in comparisons.values()} | {c.spec.prompt for c in comparisons.values()}) > 1:
        notes.append("these runs are not all on one prompt")
    return lanes, notes


def frame(runner: Lane, t: float) -> LaneFrame:
    """The lane `t` seconds into the race: every token that had arrived by then."""
    shown = sum(token.at <= t for token in runner.tokens)
    return LaneFrame(shown, min(t, runner.finish), bool(runner.tokens) and t >= runner.finish)


def frames(lanes: list[Lane], t: float) -> list[LaneFrame]:
    return [frame(runner, t) for runner in lanes]


def bursts(runner: Lane) -> list[int]:
    """How many tokens arrived together at each moment a lane moved (1s for the target alone)."""
    sizes: list[int] = []
    last = None
    for token in runner.tokens:
        if token.at == last:
            sizes[-1] += 1
        else:
            sizes.append(1)
            last = token.at
    return sizes


# --- latency --------------------------------------------------------------------------------------
def _p90(values: list[float]) -> float:
    """The 90th percentile, linear between the two nearest ranks (numpy's default)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def latency(run: Run) -> Latency | None:
    """TTFT and the median and p90 gap between consecutive tokens; None without times or tokens."""
    times = arrivals(run)
    if times is None or not times[0]:
        return None
    at, source = times
    gaps = [b - a for a, b in zip(at, at[1:])] or [0.0]
    return Latency(at[0], statistics.median(gaps), _p90(gaps), source)


def latency_fields(spec: Run, baseline: Run | None = None) -> dict:
    """The latency figures of a run (and of its target-alone baseline) as flat fields for `run --json` and
    `bench` rows (new names only; `baseline_` before the baseline's)."""
    out = {}
    for prefix, run in (("", spec), ("baseline_", baseline)):
        if run is None:
            continue
        figures = latency(run)
        out.update({
            f"{prefix}ttft_seconds": figures.ttft if figures else None,
            f"{prefix}gap_median_seconds": figures.gap_median if figures else None,
            f"{prefix}gap_p90_seconds": figures.gap_p90 if figures else None,
            f"{prefix}arrival_times": figures.source if figures else None,
        })
    return out


# --- where the time goes --------------------------------------------------------------------------
def spans(name: str, run: Run) -> list[Span]:
    """The prefill, then per round the drafting and the target's forward, placed on the wall clock: a round
    ends when its tokens arrive, its forward ends there, its drafting comes before (a drafter's roll-back after
    a round is counted in its drafting time and drawn with it). Empty when the record holds no times."""
    times = arrivals(run)
    if times is None:
        return []
    out = [Span(name, "prefill", -1, 0.0, run.prefill_seconds)]
    first = 0
    for r in run.rounds:
        if r.emitted == 0:
            continue
        end = times[0][first]
        first += r.emitted
        verify_start = end - r.verify_seconds
        if r.draft_seconds > 0 and r.drafted:
            out.append(Span(name, "draft", r.index, verify_start - r.draft_seconds, verify_start))
        out.append(Span(name, "target", r.index, verify_start, end))
    return out


# --- a shipped race -------------------------------------------------------------------------------
RACE_FILE = Path(__file__).resolve().parents[1] / "assets" / "race" / "race.json"


@dataclass
class Recording:
    """Comparisons on one prompt (every drafter against one target-alone run) and how they were made."""

    runs: dict[str, Comparison]
    info: dict  # made_by (the command), made_on (the machine), date, how

    def to_dict(self) -> dict:
        return {**self.info, "runs": {name: c.to_dict() for name, c in self.runs.items()}}


def save_recording(path: Path, recording: Recording) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recording.to_dict()), encoding="utf-8")


def load_recording(path: Path = RACE_FILE) -> Recording:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        runs = {name: Comparison.from_dict(c) for name, c in data.pop("runs").items()}
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise SpecVizError(f"the race recording {path.name} cannot be read ({exc.__class__.__name__}); "
                           "make it again with scripts/record_race.py") from None
    return Recording(runs, data)
