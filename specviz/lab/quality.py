"""What relaxed verification costs in quality, measured against the exact (lossless) output.

Notation as everywhere in SpecViz: p = target distribution, q = draft distribution, γ (`gamma`)
= draft length, α (`alpha`) = acceptance rate, c = draft/target cost ratio.

Relaxed verification accepts near-misses (greedy: drafts within τ nats of the target's best token
and inside its top-k; sampling: min(1, p / (l·q)) with lenience l < 1), so α and the speedup rise
while the output drifts from the target's own. A sweep runs the exact rule once as the reference
and then each tolerance value with the same seed, and records for every point the measured speedup
(each timed in pairs with the target alone) and four views of the drift: token agreement, BLEU (sacrebleu),
ROUGE-L F1 (rouge-score) and the target's own mean log-likelihood of what was produced.

Task quality, where a prompt set has checkable answers: for math prompts the final number of an answer
is compared exactly (`final_number`, `answer_match`). The shipped math prompts carry no reference
answers, so the reference is the target alone's final number on the same prompt: what relaxed
verification is checked against is "does it still reach the answer the target reaches", labelled so.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Callable, Sequence

import pandas as pd
import sacrebleu
import torch

from ..comparison import Comparison
from ..config import Decoding, Verification
from ..drafters import Drafter
from ..errors import ConfigError
from ..models import LoadedModel
from ..records import Run, token_agreement
from . import measure

TAU, LENIENCE = "tau", "lenience"


# --- metrics ---------------------------------------------------------------------------------
def _both_empty(output: str, reference: str) -> bool:
    """Two outputs with no words are the same output; the libraries score them 0, so this is checked first."""
    return not output.split() and not reference.split()


def bleu(output: str, reference: str) -> float:
    """Sentence BLEU (sacrebleu, 0-100) of an output against one reference text."""
    if _both_empty(output, reference):
        return 100.0
    return float(sacrebleu.sentence_bleu(output, [reference]).score)


class _WhitespaceTokenizer:
    """rouge-score's default tokenizer keeps only [a-z0-9], which erases code symbols and non-Latin
    scripts (translation prompts); splitting on whitespace keeps every word of every language."""

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return text.split()


@functools.cache
def _rouge():
    """rouge-score's scorer, made on first use: commands that score nothing (distil, serve) never import it."""
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], tokenizer=_WhitespaceTokenizer())


def rouge_l(output: str, reference: str) -> float:
    """ROUGE-L F1 (rouge-score, 0-1): longest common word subsequence of output and reference."""
    if _both_empty(output, reference):
        return 1.0
    return float(_rouge().score(reference, output)["rougeL"].fmeasure)


def log_likelihood(target: LoadedModel, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> tuple[float, int]:
    """(sum of log p(token | everything before it), token count) of a continuation under the target.

    One forward of the target over prompt + output, with no cache (nothing of a run is reused).
    The logits at position i predict token i+1, so the last len(output) + 1 positions are kept and
    the very last (which predicts past the end) is dropped. p is the plain softmax over the
    tokenizer's vocabulary, as the target scores it at temperature 1.
    """
    if not output_ids:
        return 0.0, 0
    if not prompt_ids:
        raise ConfigError("the log-likelihood needs at least one prompt token to condition on")
    ids = torch.tensor([list(prompt_ids) + list(output_ids)], device=target.device)
    n = len(output_ids)
    with torch.inference_mode():
        logits = target.model(ids, use_cache=False, logits_to_keep=n + 1).logits[0, :-1, : target.vocab_size]
        logp = logits.float().log_softmax(-1)
        picked = logp.gather(-1, ids[0, -n:, None]).squeeze(-1)
    return float(picked.sum()), n


def mean_log_likelihood(target: LoadedModel, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> float:
    """Mean log-prob per produced token under the target (nan for an empty output)."""
    total, n = log_likelihood(target, prompt_ids, output_ids)
    return total / n if n else math.nan


@dataclass
class Quality:
    """Drift of outputs from reference outputs (averaged over prompts), and their likelihood under p."""

    agreement: float  # token agreement, 0-1
    bleu: float  # sacrebleu sentence BLEU, 0-100
    rouge_l: float  # ROUGE-L F1, 0-1
    log_likelihood: float  # the target's mean log-prob per token (token-weighted over prompts)


def quality(target: LoadedModel, runs: Sequence[Run], references: Sequence[Run]) -> Quality:
    """Quality of runs (one per prompt) against reference runs of the same prompts."""
    if len(runs) != len(references) or not runs:
        raise ConfigError("quality needs one reference run per run")
    total, count = 0.0, 0
    for run in runs:
        s, n = log_likelihood(target, run.prompt_ids, run.output_ids)
        total, count = total + s, count + n
    pairs = list(zip(runs, references))
    return Quality(
        agreement=sum(token_agreement(r.output_ids, ref.output_ids) for r, ref in pairs) / len(pairs),
        bleu=sum(bleu(r.text, ref.text) for r, ref in pairs) / len(pairs),
        rouge_l=sum(rouge_l(r.text, ref.text) for r, ref in pairs) / len(pairs),
        log_likelihood=total / count if count else math.nan,
    )


# --- task quality: the final answer of a math prompt -----------------------------------------
CHECKABLE = ("math",)  # prompt categories whose answers end in a number that can be compared exactly
ANSWER_REFERENCE = "the target alone's final number on the same prompt (the math prompts carry no reference answers)"
_NUM = r"(?<![\w.])-?\$?\d[\d,]*(?:\.\d+)?"  # not inside a word ("w62", "H2O") or after a decimal point
_MARKED = re.compile(r"(?:final answer|the answer|answer)\s*(?:is|:|=)?\s*(?:\*\*)?\s*(" + _NUM + ")"
                     r"|\\boxed\{\s*(" + _NUM + r")\s*\}|####\s*(" + _NUM + ")", re.IGNORECASE)
_ANY = re.compile(_NUM)


def _normal(number: str) -> str | None:
    """"$1,250.50" -> "1250.5", "12.0" -> "12": the same value written two ways compares equal."""
    try:
        value = Decimal(number.replace("$", "").replace(",", ""))
    except InvalidOperation:
        return None
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "") else text


def final_number(text: str) -> str | None:
    """The final answer of a worked answer: the last number marked as the answer ("the answer is 13",
    "\\boxed{13}", "#### 13"), else the last number in the text; None when there is none."""
    marked = [next(g for g in m.groups() if g) for m in _MARKED.finditer(text)]
    found = marked or _ANY.findall(text)
    return _normal(found[-1]) if found else None


def final_answer_match(output: str, reference: str) -> bool | None:
    """Whether `output` ends on the same final number as `reference`; None when the reference has none
    (nothing to check)."""
    expected = final_number(reference)
    return None if expected is None else final_number(output) == expected


@dataclass(frozen=True)
class AnswerMatch:
    """Exact match of final answers over prompts: `matched` of the `checked` ones (those with a reference number)."""

    matched: int
    checked: int
    prompts: int

    @property
    def rate(self) -> float | None:
        return self.matched / self.checked if self.checked else None

    def text(self) -> str:
        if not self.checked:
            return f"no final number to check in the target alone's answers ({self.prompts} prompt(s))"
        return f"{self.matched} of {self.checked} final answers match ({self.rate:.0%})"


def answer_match(outputs: Sequence[str], references: Sequence[str]) -> AnswerMatch:
    """Exact match of each output's final number against its reference's (one reference per output)."""
    if len(outputs) != len(references):
        raise ConfigError("answer_match needs one reference per output")
    results = [final_answer_match(o, r) for o, r in zip(outputs, references)]
    return AnswerMatch(sum(r is True for r in results), sum(r is not None for r in results), len(results))


def answer_rows(sweep: Sweep) -> list[dict]:
    """Per verification rule: final-answer exact match of its outputs against the target alone's."""
    rows = []
    for point in [sweep.reference] + sweep.points:
        m = answer_match([c.spec.text for c in point.comparisons], [c.baseline.text for c in point.comparisons])
        rows.append({"rule": point.label, "final answers matching the target alone": m.matched, "checked": m.checked,
                     "exact match": m.rate, "speedup (×)": point.speedup})
    return rows


# --- the sweep -------------------------------------------------------------------------------
@dataclass
class SweepPoint:
    """One verification rule over every prompt: its paired comparisons with the target alone and its quality."""

    label: str  # "exact", "τ=0.5" or "l=0.5"
    value: float | None  # τ (greedy) or lenience l (sampling); None for the exact reference
    verification: Verification
    comparisons: list[Comparison]  # one per prompt, each against that prompt's baseline
    quality: Quality  # against the exact reference's outputs

    @property
    def speedup(self) -> float:
        """Measured over all prompts: total baseline seconds / total speculative seconds."""
        spec = sum(c.spec_seconds for c in self.comparisons)
        return sum(c.baseline_seconds for c in self.comparisons) / spec if spec > 0 else 0.0

    @property
    def alpha(self) -> float:
        """α over all prompts: accepted drafts / drafted tokens."""
        drafted = sum(c.spec.drafted for c in self.comparisons)
        return sum(c.spec.accepted for c in self.comparisons) / drafted if drafted else 0.0

    @property
    def mean_accepted(self) -> float:
        """Tokens gained per target forward (accepted drafts plus the resampled/bonus token)."""
        rounds = sum(len(c.spec.rounds) for c in self.comparisons)
        return sum(c.spec.new_tokens for c in self.comparisons) / rounds if rounds else 0.0

    @property
    def identical_to_baseline(self) -> bool:
        """Every output equals the target alone's (what exact greedy verification promises)."""
        return all(c.identical for c in self.comparisons)

    def row(self) -> dict:
        return {
            "rule": self.label,
            "value": self.value,
            "speedup": self.speedup,
            "alpha": self.alpha,
            "mean_accepted": self.mean_accepted,
            "agreement": self.quality.agreement,
            "bleu": self.quality.bleu,
            "rouge_l": self.quality.rouge_l,
            "log_likelihood": self.quality.log_likelihood,
        }


@dataclass
class Sweep:
    """The exact reference and the relaxed points measured so far (the points grow as the sweep runs)."""

    parameter: str  # TAU (greedy) or LENIENCE (sampling)
    settings: dict  # Decoding.to_dict() of the exact reference
    top_k: int | None  # the fixed top-k of a τ sweep
    reference: SweepPoint
    points: list[SweepPoint] = field(default_factory=list)
    planned: int = 0  # tolerance values asked for
    complete: bool = False  # False while running, and when stopped early

    @property
    def greedy(self) -> bool:
        return self.parameter == TAU

    def loosest(self) -> SweepPoint | None:
        """The point that accepts most: the largest τ, or the smallest lenience."""
        if not self.points:
            return None
        return max(self.points, key=lambda p: p.value if self.greedy else -p.value)

    def frame(self) -> pd.DataFrame:
        """One row for the exact reference, then one per tolerance value, in sweep order."""
        return pd.DataFrame([self.reference.row()] + [p.row() for p in self.points])

    def comparisons(self) -> dict[str, Comparison]:
        """Every comparison by name (rule, and prompt number when there are several), for exports."""
        out = {}
        for point in [self.reference] + self.points:
            for i, c in enumerate(point.comparisons):
                out[point.label if len(point.comparisons) == 1 else f"{point.label} · prompt {i + 1}"] = c
        return out


def relaxed_rule(settings: Decoding, value: float, top_k: int) -> Verification:
    """The relaxed rule for one sweep value: τ with a fixed top-k (greedy), or lenience (sampling)."""
    if settings.sampling.greedy:
        return Verification("relaxed", tolerance=value, top_k=top_k)
    return Verification("relaxed", lenience=value)


def tolerance_sweep(
    target: LoadedModel,
    make_drafter: Callable[[], Drafter],
    prompts: str | Sequence[str],
    settings: Decoding,
    values: Sequence[float],
    top_k: int = 3,
    on_point: Callable[[Sweep, int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    pairs: int = 1,
) -> Sweep:
    """Exact verification once as the reference, then relaxed verification at each value.

    Greedy sweeps τ with a fixed top-k; sampling sweeps the lenience l. Every run uses the same
    seed and is timed in pairs with the target alone on its prompt (`measure.compare`), so the speedups
    are comparable. on_point(sweep, done, total) is called after the reference and after each point;
    should_stop() is asked before each point and, when true, ends the sweep with the points done.
    """
    prompts = [prompts] if isinstance(prompts, str) else list(prompts)
    values = list(values)
    if not prompts:
        raise ConfigError("the sweep needs at least one prompt")
    if not values:
        raise ConfigError("the sweep needs at least one tolerance value")
    exact = replace(settings, verification=Verification())
    rules = [relaxed_rule(settings, v, top_k) for v in values]  # refuses an out-of-range value before any run
    total = len(values) + 1

    def measure_rule(rule: Verification, warm: bool) -> list[Comparison]:
        run_settings = replace(settings, verification=rule)
        return [
            measure.compare(target, make_drafter, prompt, run_settings, pairs=pairs, warm=warm) for prompt in prompts
        ]

    reference_runs = measure_rule(exact.verification, warm=True)
    references = [c.spec for c in reference_runs]
    sweep = Sweep(
        parameter=TAU if settings.sampling.greedy else LENIENCE,
        settings=exact.to_dict(),
        top_k=top_k if settings.sampling.greedy else None,
        reference=SweepPoint(
            "exact", None, exact.verification, reference_runs, quality(target, references, references)
        ),
        planned=len(values),
    )
    if on_point:
        on_point(sweep, 1, total)
    for value, rule in zip(values, rules):
        if should_stop and should_stop():
            return sweep
        comparisons = measure_rule(rule, warm=False)
        runs = [c.spec for c in comparisons]
        label = f"τ={value:g}" if sweep.greedy else f"l={value:g}"
        sweep.points.append(SweepPoint(label, value, rule, comparisons, quality(target, runs, references)))
        if on_point:
            on_point(sweep, len(sweep.points) + 1, total)
    sweep.complete = True
    return sweep
