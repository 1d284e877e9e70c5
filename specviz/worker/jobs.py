"""What the measurement worker can do: every model call the app makes, as a job with plain arguments.

Each job runs in the worker process (`worker.serve`) with a `Context`: a loader that keeps each model
once, `emit` to send the page a progress event (a point of a sweep, a training step), and
`should_stop` (the page left or pressed Stop). A job returns a record; records travel back pickled.
Jobs are thin: the measuring itself is `measure`, `sweeps`, `quality`, the lesson's and the trainers'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..comparison import Comparison
from ..config import Decoding
from ..drafters import build_drafter, learns_across_runs
from ..errors import OUT_OF_MEMORY
from ..lab import measure, quality, sweeps
from ..models import LoadedModel


@dataclass
class WorkerState:
    """What lives in the worker between jobs: how many runs of drafters that learn across runs have ended, in all
    and by the prompt they ran (None: runs of several prompts, as a sweep's).

    A drafter that learns never drafts from its own prompt's earlier runs (the suffix drafter's corpus leaves them
    out), so what it learned for a prompt is the runs of other prompts: `learned_for` is the part of a shared run's
    key that says so, and an identical press after it is served the same measurement."""

    learned_runs: int = 0
    by_prompt: dict = field(default_factory=dict)  # (prompt, chat) -> runs of that prompt alone

    def learned(self) -> tuple[int, dict]:
        return self.learned_runs, dict(self.by_prompt)


@dataclass
class Context:
    load: Callable[[str], LoadedModel]  # a model by name, loaded once per worker
    emit: Callable[[Any], None]  # a progress event for the page that asked
    should_stop: Callable[[], bool]  # the page gave the job up
    state: WorkerState = field(default_factory=WorkerState)

    def ran(self, *drafts: str, prompt: tuple[str, bool] | None = None) -> None:
        """Note runs of these drafters (of one prompt, when `prompt` names it with its chat setting): those that
        learn across runs changed what the next run of another prompt drafts."""
        n = sum(learns_across_runs(d) for d in drafts)
        self.state.learned_runs += n
        if n and prompt is not None:
            self.state.by_prompt[prompt] = self.state.by_prompt.get(prompt, 0) + n


def load(ctx: Context, name: str) -> str:
    """Load a model (the first use of a target converts it); returns where it runs."""
    model = ctx.load(name)
    return f"{model.device} {str(model.dtype).replace('torch.', '')}"


def compare(ctx: Context, target: str, draft: str, prompt: str, settings: Decoding, pairs: int,
            busy_pairs: int = 0) -> Comparison:
    """One measured run: the drafter and the target alone, timed in pairs, more when the machine is busy
    (`measure.compare`)."""
    model = ctx.load(target)
    make = lambda: build_drafter(draft, model, ctx.load)  # noqa: E731 — a fresh drafter per run
    make()  # an unknown or incompatible draft is refused before anything is timed
    comparison = measure.compare(model, make, prompt, settings, pairs=pairs, should_stop=ctx.should_stop,
                                 busy_pairs=busy_pairs)
    ctx.ran(draft, prompt=(prompt, settings.chat))
    return comparison


def gamma_sweep(ctx: Context, target: str, draft: str, prompts: list[str], gammas: list[int], settings: Decoding,
                pairs: int, tree_depth: int = 0) -> int:
    """Draft length: every point is sent as ("point", point, done, total); returns how many were measured."""
    model = ctx.load(target)
    points = sweeps.gamma_sweep(model, draft, prompts, gammas, settings, load=ctx.load, pairs=pairs,
                                tree_depth=tree_depth, should_stop=ctx.should_stop,
                                on_point=lambda *point: ctx.emit(("point", *point)))
    ctx.ran(draft)
    return len(points)


def compare_drafts(ctx: Context, target: str, drafts: list[str], prompts: list[str], settings: Decoding,
                   pairs: int) -> int:
    """Compare drafts: ("parameters", {label: count}) first, then every point as in `gamma_sweep`."""
    model = ctx.load(target)
    ctx.emit(("parameters", {label: sweeps.draft_parameters(spec, model, ctx.load)
                             for label, spec, _ in sweeps.variants(drafts, settings)}))
    points = sweeps.compare_drafts(model, drafts, prompts, settings, load=ctx.load, pairs=pairs,
                                   should_stop=ctx.should_stop, on_point=lambda *point: ctx.emit(("point", *point)))
    ctx.ran(*drafts)
    return len(points)


def tolerance_sweep(ctx: Context, target: str, draft: str, prompts: list[str], settings: Decoding,
                    values: list[float], top_k: int, pairs: int) -> quality.Sweep:
    """Verification tolerance: the sweep is sent as ("sweep", sweep, done, total) after every point."""
    model = ctx.load(target)
    make = lambda: build_drafter(draft, model, ctx.load)  # noqa: E731 — a fresh drafter per run
    make()
    sweep = quality.tolerance_sweep(model, make, prompts, settings, values, top_k=top_k, pairs=pairs,
                                    should_stop=ctx.should_stop, on_point=lambda *point: ctx.emit(("sweep", *point)))
    ctx.ran(draft)
    return sweep


def record_lab(ctx: Context, target: str, setup) -> Any:
    """The lesson's sampling lab, live: ("progress", i, n) after each run."""
    from ..lesson import recordings

    return recordings.record_lab(ctx.load(target), setup, ctx.load, on_run=lambda i, n: ctx.emit(("progress", i, n)))


def distil_head(ctx: Context, cfg, per_category: int, rivals: list[str] | None = None, *, race_tokens: int,
                fused: bool = False) -> dict:
    """The Distil page's small head: ("say", text) and ("step", row) while it trains, then its race. `fused`: it reads
    three of the target's hidden states (`train_head.three_depths`), as EAGLE-3 does."""
    from dataclasses import replace

    from ..training import quick, train_head

    target = ctx.load(cfg.target)
    if fused:
        cfg = replace(cfg, feature_layers=train_head.three_depths(target.model.config.num_hidden_layers))
    folder = train_head.train_head(cfg, target, progress=False, say=lambda text: ctx.emit(("say", text)),
                                   on_step=lambda row: ctx.emit(("step", row)))
    if per_category > 0:
        ctx.emit(("say", "Racing the new head against its rivals on evaluation prompts…"))
    return quick.race_head(folder, target, per_category, rivals, race_tokens)


def distil_draft(ctx: Context, cfg, per_category: int, rivals: list[str] | None = None, *, race_tokens: int) -> dict:
    """The Distil page's small draft: ("say", text) and ("step", row) while it trains, then its race."""
    from ..training import quick

    target = ctx.load(cfg.target)
    ctx.emit(("say", "The target answers the training prompts…"))
    data = quick.draft_data(cfg, target)
    ctx.emit(("say", f"Data: {len(data.sequences)} answers, {data.answer_tokens:,} tokens"))
    folder = quick.train_draft(cfg, target, data, lambda row: ctx.emit(("step", row)))
    if per_category > 0:
        ctx.emit(("say", "Racing the new draft against its rivals on evaluation prompts…"))
    return quick.race_draft(folder, target, per_category, rivals, race_tokens)


JOBS: dict[str, Callable[..., Any]] = {
    "load": load,
    "compare": compare,
    "gamma_sweep": gamma_sweep,
    "compare_drafts": compare_drafts,
    "tolerance_sweep": tolerance_sweep,
    "record_lab": record_lab,
    "distil_head": distil_head,
    "distil_draft": distil_draft,
}


def unexpected(exc: BaseException) -> str:
    """One line for an error no job expected (the worker's log keeps the traceback)."""
    if isinstance(exc, torch.OutOfMemoryError):
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return f"{OUT_OF_MEMORY}, or run SpecViz on a machine with more GPU memory"
    return f"unexpected {exc.__class__.__name__}: {str(exc)[:200]} (details in the server log)"
