"""A trained head's evaluation race on the EVAL prompts, its card (README.md), and the command that trains it again."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ..config import Decoding
from ..models import LoadedModel
from . import store
from .train_head import HeadConfig, coverage

RIVALS = ("ngram",)  # raced beside the head and ngram+head on the EVAL prompts; shipped model drafts join them


def evaluate_head(
    cfg: HeadConfig,
    target: LoadedModel,
    per_category: int = 0,
    settings: Decoding | None = None,
    command: str = "",
    rivals: tuple[str, ...] | None = None,
    progress: bool = True,
) -> dict[str, dict]:
    """The race on the EVAL prompts (head, ngram+head and rivals, each timed in a pair with the target alone); rewrites
    the card."""
    from ..drafters.head_net import read_info
    from ..models import draft_folders
    from .answers import eval_prompts
    from .evaluate import measure_drafts

    settings = settings or Decoding(gamma=3, max_new_tokens=64)
    head = str(cfg.out_dir)
    if rivals is None:
        rivals = RIVALS + tuple(
            f.name for kind, f in draft_folders() if kind == "shipped draft" and (f / "config.json").is_file()
        )
    drafts = [head, f"ngram+head:{head}", *rivals]
    results = measure_drafts(drafts, target, eval_prompts(per_category), settings, progress=progress)
    info = read_info(cfg.out_dir)
    mine = results[head]
    mine["coverage"] = coverage([t for r in mine["rows"] for t in r["target_tokens"]], info.vocab)
    mine["race"] = {
        label(name): {
            k: e["all"][k]
            for k in ("alpha", "mean_accepted_tokens", "c", "speedup", "median_speedup", "identical", "prompts")
        }
        for name, e in results.items()
    }
    store.save_json(cfg.run_dir / "evaluation.json", {k: v for k, v in mine.items() if k != "rows"})
    write_head_card(cfg, command)
    return results


def label(drafter: str) -> str:
    """A drafter spec as people read it: folder paths by their name (ngram+head:/x/h -> ngram+h)."""
    if drafter.startswith("ngram+head:"):
        return "ngram+" + Path(drafter[len("ngram+head:") :]).name
    return Path(drafter).name if "/" in drafter else drafter


def write_head_card(cfg: HeadConfig, command: str = "") -> Path:
    """(Re)write a head's README.md from its head.json and the evaluation.json of its run folder."""
    from ..drafters.head_net import read_info
    from .card import head_card

    info = read_info(cfg.out_dir)
    evaluation = store.load_json(cfg.run_dir / "evaluation.json")
    card = cfg.out_dir / "README.md"
    card.write_text(
        head_card(info, evaluation, command or command_for(info.trained["config"]), cfg.head_name), encoding="utf-8"
    )
    return card


def command_for(config: dict) -> str:
    """The `specviz distill --kind head` command that trains a head with this config (its non-default settings)."""
    flags = {
        "name": "--name",
        "vocab": "--vocab",
        "samples": "--samples",
        "max_new_tokens": "--max-new-tokens",
        "answer_minutes": "--data-minutes",
        "max_prompts": "--max-prompts",
        "written": "--written",
        "document_tokens": "--document-tokens",
        "positions": "--positions",
        "steps": "--steps",
        "batch_size": "--batch-size",
        "lr": "--lr",
        "ttt_steps": "--ttt-steps",
        "feature_weight": "--feature-weight",
        "seed": "--seed",
        "validate_every": "--validate-every",
        "patience": "--patience",
        "seq_len": "--seq-len",
        "feature_layers": "--feature-layers",
        "answer_batch": "--answer-batch",
        "train_minutes": "--train-minutes",
        "device": "--device",
    }
    default = asdict(HeadConfig())
    def value(v) -> str:
        if isinstance(v, (list, tuple)):
            return ",".join(str(i) for i in v)
        return f"{v:g}" if isinstance(v, float) else str(v)

    parts = [f"{flag} {value(config[key])}" for key, flag in flags.items()
             if key in config and value(config[key]) != value(default[key])]
    return " ".join(["python -m specviz distill --kind head", *parts])
