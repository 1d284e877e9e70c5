"""Quick distillation for the Distil page: a small draft or head from a few prompts, raced against the shipped drafts.

The page picks the sizes; this says where the result goes (the user's drafts folder, so it appears in
every picker), how it is trained, and what it races against on the evaluation prompts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..config import Decoding
from ..models import LoadedModel, cache_dir, draft_folders, user_drafts_dir
from .answers import eval_prompts, train_prompts
from .distill import DistillConfig, generate_data, save_draft, train
from .evaluate import measure_drafts
from .train_head import HeadConfig

RACE_TOKENS = (16, 32, 64, 128)  # the new tokens per evaluation prompt a race may run
RACE_DEFAULT = 32


def small_head_config(name: str, steps: int, samples: int, per_category: int, answer_tokens: int,
                documents: int) -> HeadConfig:
    return HeadConfig(name=name, steps=steps, samples=samples, max_prompts=per_category, max_new_tokens=answer_tokens,
                      document_tokens=documents, warmup=min(100, max(1, steps // 10)),
                      out=str(user_drafts_dir() / name), work=str(cache_dir() / "heads"))


def small_draft_config(name: str, layers: int, hidden: int, steps: int, samples: int, per_category: int,
                 answer_tokens: int) -> DistillConfig:
    return DistillConfig(layers=layers, hidden=hidden, steps=steps, samples=samples, max_prompts=per_category,
                         max_new_tokens=answer_tokens, name=name, out=str(user_drafts_dir() / name),
                         work=str(cache_dir() / "distill"))


def draft_data(cfg: DistillConfig, target: LoadedModel):
    """The target's answers to the first `max_prompts` training prompts of each workload."""
    return generate_data(target, cfg, prompts=train_prompts(cfg.max_prompts), progress=False)


def train_draft(cfg: DistillConfig, target: LoadedModel, data, on_step: Callable[[dict], None]) -> Path:
    """Train on the answers and save the draft in the user's drafts folder."""
    training = train(cfg, target, data, progress=False, on_step=on_step)
    return save_draft(training.model, target, cfg.out_dir)


def rival_choices() -> list[str]:
    """What a new draft can race against: prompt lookup and every shipped draft, by name."""
    return ["ngram"] + [f.name for kind, f in draft_folders() if kind == "shipped draft"]


def default_rivals(head: bool) -> list[str]:
    """The race a learner gets unless they pick: the shipped drafts of the same kind (and ngram beside a head).
    Every shipped draft on every evaluation prompt would take minutes more on a CPU."""
    shipped = [f for kind, f in draft_folders() if kind == "shipped draft"]
    same = [f.name for f in shipped if (f / "head.json").is_file() == head]
    return (["ngram"] if head else []) + same


def _rivals(names: list[str] | None, head: bool) -> list[str | Path]:
    """Rival names as the race loads them (shipped drafts by folder); None: the default race."""
    shipped = {f.name: f for kind, f in draft_folders() if kind == "shipped draft"}
    return [shipped.get(name, name) for name in (default_rivals(head) if names is None else names)]


def race_head(folder: Path, target: LoadedModel, per_category: int,
              rivals: list[str] | None = None, tokens: int = RACE_DEFAULT) -> dict[str, dict]:
    """The new head, alone and behind n-gram lookup, against its rivals (greedy, γ=3, `tokens` new tokens)."""
    return _race([folder, f"ngram+head:{folder}", *_rivals(rivals, head=True)], target, per_category, 3, tokens)


def race_draft(folder: Path, target: LoadedModel, per_category: int,
               rivals: list[str] | None = None, tokens: int = RACE_DEFAULT) -> dict[str, dict]:
    """The new draft against its rivals (greedy, γ=4, `tokens` new tokens)."""
    return _race([folder, *_rivals(rivals, head=False)], target, per_category, 4, tokens)


def _race(drafts: list, target: LoadedModel, per_category: int, gamma: int, tokens: int) -> dict[str, dict]:
    """The drafts timed on `per_category` evaluation prompts of each workload; no race (an empty result) for 0."""
    if per_category <= 0:
        return {}
    return measure_drafts(drafts, target, eval_prompts(per_category), Decoding(gamma=gamma, max_new_tokens=tokens),
                          progress=False)
