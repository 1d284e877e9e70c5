"""The lab bench (`python -m specviz bench`): each draft on each prompt beside the target alone, a row a run.

Every run is a `measure.compare` (same prompt and settings, timed by the same loop after a warm-up, in pairs
with the target alone: each draft's speedup comes from its own baseline runs, timed beside it);
with `compare_hf` the same drafter, γ and prompt also run through transformers' own `generate`
(specviz.lab.peer) and the row carries the ratios. Rows of math prompts also carry the final answer's exact
match against the target alone's (`answer_fields`). Rows are plain dicts, `BENCH_FIELDS` first: the
CLI writes them as JSONL, `benchmarks/report.py` and the tests read them.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterator
from dataclasses import replace

from ..comparison import Comparison
from ..config import Decoding
from ..drafters import Drafter
from ..models import LoadedModel
from ..race import latency_fields
from .measure import WARMUP_TOKENS, compare, machine, warm_up
from .peer import hf_generate
from .quality import CHECKABLE, final_answer_match, final_number

BENCH_FIELDS = (
    "id", "draft", "gamma", "new_tokens", "rounds", "drafted", "accepted", "acceptance_rate",
    "mean_accepted_tokens", "spec_seconds", "baseline_seconds", "speedup", "identical", "text", "baseline_text",
)


def bench_rows(target: LoadedModel, makers: dict[str, Callable[[], Drafter]], prompts: list[dict],
               variants: list[Decoding], pairs: int = 1, compare_hf: bool = False,
               on_run: Callable[[str], None] | None = None, warm: bool = True) -> Iterator[dict]:
    """One row per prompt, draft and variant (a tree and the chain beside it), as each run ends.

    makers: draft spec -> a fresh drafter; prompts: {"id", "prompt", "category"?}; every run is timed in `pairs`
    pairs with the target alone. `on_run` hears "<prompt id> <draft>" before each run.
    warm=False: `warm_up_bench` has run already.
    """
    settings = variants[0]
    if warm:
        warm_up_bench(target, makers, prompts, variants, compare_hf)
    where = machine(target.device, target.model)
    for item in prompts:
        hf_base = _hf_timed(target, None, item["prompt"], settings, pairs) if compare_hf else None
        for (spec, make), variant in itertools.product(makers.items(), variants):
            if on_run:
                on_run(f"{item['id']} {spec}")
            c = compare(target, make, item["prompt"], variant, pairs=pairs, warm=False)
            row = {"id": item["id"], "category": item.get("category"), **c.summary()}
            reached, accepted = c.spec.position_counts()
            row.update(
                draft=spec,
                gamma=variant.gamma,
                text=c.spec.text,
                baseline_text=c.baseline.text,
                max_new_tokens=variant.max_new_tokens,
                repeats=pairs,
                machine=where,
                pair_ratios=c.pair_ratios,
                position_reached=reached,
                position_accepted=accepted,
                drafting_rounds=c.spec.drafting_rounds,
                chat=variant.chat,
                shape=tree_label(variant),
                tree_budget=variant.tree.budget,
                tree_branching=variant.tree.branching,
                tree_mode=variant.tree.mode,
                verified_per_round=c.spec.mean_verified,
                **latency_fields(c.spec, c.baseline),
            )
            if item.get("category") in CHECKABLE:
                row.update(answer_fields(c))
            if compare_hf:
                row.update(_hf_fields(c, hf_base, _hf_timed(target, make(), item["prompt"], variant, pairs)))
            yield {**{k: row[k] for k in BENCH_FIELDS}, **{k: v for k, v in row.items() if k not in BENCH_FIELDS}}


def answer_fields(c: Comparison) -> dict:
    """Task quality of a math prompt: the final number of the run and of the target alone, and whether they match
    (the prompts carry no reference answers: the target alone's final number is the reference)."""
    return {
        "final_answer": final_number(c.spec.text),
        "baseline_final_answer": final_number(c.baseline.text),
        "final_answer_match": final_answer_match(c.spec.text, c.baseline.text),
        "final_answer_reference": "target alone",
    }


def warm_up_bench(
    target: LoadedModel,
    makers: dict[str, Callable[[], Drafter]],
    prompts: list[dict],
    variants: list[Decoding],
    compare_hf: bool = False,
) -> None:
    """Every drafter and variant (and transformers' generate) once on the first prompt, so no timed run is a first."""
    settings = variants[0]
    first = prompts[0]["prompt"]
    warm_up(target, None, first, settings)
    for make, variant in itertools.product(makers.values(), variants):
        warm_up(target, make, first, variant)
    if compare_hf:
        short = replace(settings, max_new_tokens=WARMUP_TOKENS)
        hf_generate(target, None, first, short)
        for make in makers.values():
            hf_generate(target, make(), first, short)


def tree_label(settings: Decoding) -> str:
    t = settings.tree
    return f"tree {t.mode} {t.budget}x{t.branching}, depth {settings.gamma}" if t.on else f"chain γ={settings.gamma}"


def _hf_timed(target, drafter, prompt, settings, repeats) -> tuple[list[int], float]:
    """transformers' output and the median of its wall times."""
    runs = [hf_generate(target, drafter, prompt, settings) for _ in range(max(1, repeats))]
    return runs[0][0], statistics.median(seconds for _, seconds in runs)


def _hf_fields(c: Comparison, hf_base, hf_spec) -> dict:
    """Ratios to transformers: tokens/s of ours ÷ theirs, same drafter and γ (and for the baseline)."""
    (base_ids, base_s), (spec_ids, spec_s) = hf_base, hf_spec
    ours_spec, ours_base = c.spec.new_tokens / c.spec_seconds, c.baseline.new_tokens / c.baseline_seconds
    return {
        "hf_seconds": spec_s,
        "hf_identical": spec_ids == c.spec.output_ids,
        "hf_speedup": base_s / spec_s if spec_s else 0.0,
        "hf_baseline_seconds": base_s,
        "hf_baseline_identical": base_ids == c.baseline.output_ids,
        "ratio_vs_hf": ours_spec / (len(spec_ids) / spec_s) if spec_ids else 0.0,
        "baseline_ratio_vs_hf": ours_base / (len(base_ids) / base_s) if base_ids else 0.0,
    }
