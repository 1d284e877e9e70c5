"""Step 4: how a trained draft does on the EVAL prompts (never trained on), against the target alone.

α, mean accepted tokens, c and measured speedup per workload, by `specviz.lab.measure.compare` (warmed
up, the same prompt and settings, device-synchronised), means over prompts as `specviz bench`
reports them; acceptance by draft position, and the share of the target's tokens a draft
vocabulary covers.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

from ..config import Decoding
from ..models import LoadedModel, load_model
from ..prompts import CATEGORIES


def _maker(draft: str | Path, target: LoadedModel):
    """A drafter factory; model folders load once here, heads and model-free drafters are built per run."""
    from ..drafters import build_drafter

    if (Path(draft) / "config.json").is_file():
        loaded = load_model(str(draft), device=str(target.device), dtype=_dtype_name(target.dtype))
        return lambda: build_drafter(str(draft), target, load=lambda _: loaded)
    build_drafter(str(draft), target)  # a bad name fails here, once, with its message
    return lambda: build_drafter(str(draft), target)


def measure_drafts(
    drafts: list[str | Path],
    target: LoadedModel,
    prompts: list[dict],
    settings: Decoding,
    progress: bool = True,
) -> dict[str, dict]:
    """For each draft, prompt by prompt: the draft timed in a pair with the target alone (`measure.compare`).

    Interleaving keeps a slow spell of a shared machine from falling on one draft only. Every comparison times
    its own target-alone run beside the draft's.
    """
    from tqdm import tqdm

    from ..lab.measure import compare, warm_up

    makers = {str(d): _maker(d, target) for d in drafts}
    warm_up(target, None, prompts[0]["prompt"], settings)
    for make in makers.values():
        warm_up(target, make, prompts[0]["prompt"], settings)
    rows: dict[str, list[dict]] = {name: [] for name in makers}
    for item in tqdm(prompts, desc="evaluate", unit="prompt", file=sys.stderr, disable=not progress):
        for name, make in makers.items():
            c = compare(target, make, item["prompt"], settings, warm=False)
            s = c.summary()
            rows[name].append({
                "id": item["id"], "category": item.get("category", ""), "alpha": s["acceptance_rate"],
                "mean_accepted_tokens": s["mean_accepted_tokens"], "c": s["cost_ratio"], "speedup": s["speedup"],
                "verify_cost": s["verify_cost"], "identical": s["identical"],
                "target_step_ms": 1000 * c.baseline.step_seconds,
                "by_position": _by_position(c.spec), "target_tokens": c.baseline.output_ids,
            })
    results = {}
    for name, mine in rows.items():
        categories = [cat for cat in CATEGORIES if any(r["category"] == cat for r in mine)]
        categories += sorted({r["category"] for r in mine} - set(categories))
        results[name] = {
            "settings": settings.to_dict(),
            "device": str(target.device),
            "threads": torch.get_num_threads(),
            "categories": {cat: figures([r for r in mine if r["category"] == cat]) for cat in categories},
            "all": figures(mine),
            "rows": mine,
        }
    return results


def evaluate(draft: str | Path, target: LoadedModel, prompts: list[dict], settings: Decoding,
             progress: bool = True) -> dict:
    """`measure_drafts` for one draft."""
    return measure_drafts([draft], target, prompts, settings, progress)[str(draft)]


def _by_position(run) -> list[tuple[int, int]]:
    """(accepted, reached) per draft position: pooled over prompts into P(accepted | drafted) by position."""
    longest = max((len(r.drafted) for r in run.rounds), default=0)
    return [(sum(r.n_accepted > i for r in run.rounds if len(r.drafted) > i),
             sum(len(r.drafted) > i for r in run.rounds)) for i in range(longest)]


def figures(rows: list[dict]) -> dict:
    mean = lambda key: statistics.fmean(r[key] for r in rows)  # noqa: E731
    width = max((len(r.get("by_position", [])) for r in rows), default=0)
    pooled = [(sum(r["by_position"][i][0] for r in rows if len(r.get("by_position", [])) > i),
               sum(r["by_position"][i][1] for r in rows if len(r.get("by_position", [])) > i)) for i in range(width)]
    return {
        "prompts": len(rows),
        "alpha": mean("alpha"),
        "mean_accepted_tokens": mean("mean_accepted_tokens"),
        "c": mean("c"),
        "speedup": mean("speedup"),
        "median_speedup": statistics.median(r["speedup"] for r in rows),
        "verify_cost": mean("verify_cost"),
        "target_step_ms": mean("target_step_ms"),
        "identical": sum(r["identical"] for r in rows),
        "alpha_by_position": [a / n if n else None for a, n in pooled],
    }


def _dtype_name(dtype: torch.dtype) -> str:
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "auto")
