"""The real runs behind the lesson: what each step shows, how it is recorded, where it is shipped.

Every step of the lesson reads named comparisons (a speculative run beside the target alone, made by
`measure.compare`) and one distribution-lab record. `recipes()` says which runs, with which draft,
prompt and settings; `scripts/record_lesson.py` measures them all on this machine and writes
`assets/lesson/` (runs.json, lab.json and manifest.json, which says how and where they were made).
The app's "run it live" buttons repeat the same recipes through `service.measured_run`.

Sizes: runs shown token by token keep their full records; sweep points drop the target's top
alternatives and round probabilities and times to 4 significant digits (what the pages display),
so the whole lesson ships in a few hundred KB.
"""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..comparison import Comparison, load_comparisons
from ..config import Decoding, Sampling, TreeShape, Verification
from ..drafters import Loader, build_drafter
from ..errors import SpecVizError
from ..lab import measure
from ..lab.same_distribution import LabRecord, LabSetup, sample_first_tokens
from ..models import LoadedModel
from ..prompts import load_prompt_set
from ..records import Run

LESSON_DIR = Path(__file__).resolve().parents[2] / "assets" / "lesson"
RUNS, LAB, MANIFEST = "runs.json", "lab.json", "manifest.json"
DEFAULT_DRAFTS = ("ngram", "suffix", "ngram+smol-head-8k", "smol-head-8k", "layerskip:8", "smol-draft-2l256")
GAMMAS = (1, 2, 3, 4, 6, 8)
TOLERANCES = (0.0, 1.0, 2.0, 4.0)  # τ in nats; 0 with top-k 1 is exact verification
RELAXED_TOP_K = 3
SAMPLE_DRAFT = "smol-draft-1l128"  # distilled from the target's own answers: its q is a real distribution
TREE_DRAFT = "ngram+smol-head-8k"  # copied branches beside the head's guesses: the drafter a tree helps most here
TREE = TreeShape(budget=8, branching=2)  # 8 nodes, at most γ = 4 deep; its chain is γ = 8 (8 drafts verified too)
HEAD = "smol-head-8k"  # a draft head over the target's last hidden state (assets/drafts/smol-head-8k)

# Groups: the steps that read them. One measured run per recipe.
MAIN, SAMPLED, DRAFTS, GAMMA, RELAXED, FASTER = "main", "sampled", "drafts", "gamma", "relaxed", "faster"
TREES, HEADS = "trees", "heads"
GROUPS = (MAIN, SAMPLED, DRAFTS, GAMMA, RELAXED, FASTER, TREES, HEADS)


@dataclass(frozen=True)
class Recipe:
    name: str  # key in runs.json, e.g. "main", "drafts:ngram", "gamma:3"
    group: str  # which steps read it
    draft: str
    prompt_id: str  # an evaluation prompt of assets/prompts
    settings: Decoding
    full: bool = False  # keep every detail (runs shown token by token)

    @property
    def prompt(self) -> str:
        return prompt_text(self.prompt_id)


def prompt_text(prompt_id: str) -> str:
    category = prompt_id.rsplit("-", 1)[0]
    for row in load_prompt_set(category, "eval"):
        if row["id"] == prompt_id:
            return row["prompt"]
    raise SpecVizError(f"no evaluation prompt {prompt_id!r} in assets/prompts")


def _eval_id(category: str, index: int = 0) -> str:
    return load_prompt_set(category, "eval")[index]["id"]


def recipes(drafts: list[str] | tuple[str, ...] = DEFAULT_DRAFTS, sample_draft: str = SAMPLE_DRAFT, tokens: int = 48,
            sweep_tokens: int = 32) -> list[Recipe]:
    """Every run the lesson shows. drafts[0] drafts the main run, the γ sweep, the relaxed sweep and the prompts
    of "is it really faster?"; every draft is compared; `sample_draft` (a model, with a real q) shows sampling."""
    drafts = list(drafts)
    if not drafts:
        raise SpecVizError("the lesson needs at least one draft; ngram is the one that pays off on a CPU")
    main_prompt = _eval_id("retrieval")  # copying from a context: the n-gram drafter's best case
    greedy = Decoding(gamma=4, max_new_tokens=tokens)
    sweep = replace(greedy, max_new_tokens=sweep_tokens)
    out = [
        Recipe("main", MAIN, drafts[0], main_prompt, greedy, full=True),
        Recipe("sampled", SAMPLED, sample_draft, _eval_id("chat"),
               replace(greedy, max_new_tokens=sweep_tokens, seed=1, sampling=Sampling(temperature=1.0)), full=True),
    ]
    out += [Recipe(f"drafts:{d}", DRAFTS, d, main_prompt, sweep) for d in ["target", *drafts]]
    out += [Recipe(f"gamma:{g}", GAMMA, drafts[0], main_prompt, replace(sweep, gamma=g)) for g in GAMMAS]
    for tau in TOLERANCES:
        rule = Verification("relaxed", tolerance=tau, top_k=RELAXED_TOP_K) if tau else Verification()
        out.append(Recipe(f"relaxed:{tau:g}", RELAXED, drafts[0], main_prompt, replace(sweep, verification=rule)))
    for category in ("summarisation", "code", "chat", "qa"):
        out.append(Recipe(f"faster:{category}", FASTER, drafts[0], _eval_id(category), greedy))
    # Token trees: one drafter as a tree of 8 nodes (γ = 4 deep) and as the chain that verifies as many (γ = 8).
    out.append(Recipe("trees:tree", TREES, TREE_DRAFT, main_prompt, replace(greedy, tree=TREE)))
    out.append(Recipe("trees:chain", TREES, TREE_DRAFT, main_prompt, replace(greedy, gamma=TREE.budget)))
    # Feature heads: the head alone and beside n-gram lookup, at γ = 2 (the head's best), on an open chat prompt.
    for draft in (HEAD, f"ngram+{HEAD}"):
        out.append(Recipe(f"heads:{draft}", HEADS, draft, _eval_id("chat"), replace(greedy, gamma=2)))
    return out


def by_group(all_recipes: list[Recipe], group: str) -> list[Recipe]:
    return [r for r in all_recipes if r.group == group]


def _round4(x):
    return float(f"{x:.4g}") if isinstance(x, float) and math.isfinite(x) else x


def slim(run: Run, full: bool) -> Run:
    """Probabilities and times to 4 significant digits; without the top alternatives unless `full`."""
    run = replace(run, prefill_seconds=_round4(run.prefill_seconds), seconds=_round4(run.seconds))
    rounds = []
    for r in run.rounds:
        alternatives = (
            [[replace(a, p=_round4(a.p), q=_round4(a.q)) for a in pos] for pos in r.alternatives] if full else []
        )
        rounds.append(
            replace(
                r,
                q=[_round4(v) for v in r.q],
                p=[_round4(v) if v is not None else None for v in r.p],
                next_p=_round4(r.next_p),
                draft_seconds=_round4(r.draft_seconds),
                verify_seconds=_round4(r.verify_seconds),
                alternatives=alternatives,
            )
        )
    run.rounds = rounds
    return run


def slim_comparison(c: Comparison, full: bool) -> Comparison:
    return Comparison(
        slim(c.spec, full),
        slim(c.baseline, False),
        [_round4(t) for t in c.spec_times],
        [_round4(t) for t in c.baseline_times],
        c.paired,
    )


def record_runs(
    target: LoadedModel,
    all_recipes: list[Recipe],
    load: Loader,
    repeats: int = 1,
    on_run: Callable[[Recipe, int, int], None] | None = None,
) -> dict[str, Comparison]:
    """Measure every recipe, each timed in `repeats` pairs with the target alone (`measure.compare`)."""
    out = {}
    for i, recipe in enumerate(all_recipes):
        make = lambda r=recipe: build_drafter(r.draft, target, load)  # noqa: E731 — a fresh drafter per run
        comparison = measure.compare(target, make, recipe.prompt, recipe.settings, pairs=repeats)
        out[recipe.name] = slim_comparison(comparison, recipe.full)
        if on_run:
            on_run(recipe, i + 1, len(all_recipes))
    return out


def record_lab(target: LoadedModel, setup: LabSetup, load: Loader, on_run=None) -> LabRecord:
    build_drafter(setup.draft, target, load)  # an unknown or incompatible draft is refused before any run
    return sample_first_tokens(target, lambda: build_drafter(setup.draft, target, load), setup, on_run)


def kept_lab(folder: Path, setup: LabSetup) -> LabRecord | None:
    """The lab already recorded in `folder`, if it was made with exactly `setup` (else None: record it again)."""
    try:
        lab = LabRecord.from_dict(json.loads((folder / LAB).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError):
        return None
    return lab if lab.setup == asdict(setup) else None


def lab_made(folder: Path) -> dict:
    """When and how the kept lab was recorded, from the manifest it came with."""
    info = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    return info.get("lab_made") or {"made_by": info["made_by"], "made_on": info["made_on"], "date": info["date"]}


def manifest(
    all_recipes: list[Recipe],
    lab: LabSetup,
    command: str,
    drafts: list[str],
    repeats: int,
    seconds: float,
    lab_made: dict | None = None,
) -> dict:
    """How the recordings were made: the command, the machine, and every run's draft, prompt and settings.
    `lab_made`: where the lab was kept from an earlier recording (--keep-lab), that recording's command, machine
    and date. Each run's entry also says when and by which command it was made (see `merge`)."""
    now = {"made_by": command, "made_on": measure.machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    return {
        **now,
        "python": platform.python_version(),
        "recording_seconds": round(seconds, 1),
        "drafts": drafts,
        "repeats": repeats,
        "runs": {
            r.name: {
                "group": r.group,
                "draft": r.draft,
                "prompt_id": r.prompt_id,
                "settings": r.settings.to_dict(),
                "full_record": r.full,
                **now,
            }
            for r in all_recipes
        },
        "lab": asdict(lab),
        "lab_made": lab_made or now,
        "how": "every run: specviz.lab.measure.compare (the speculative run and the target alone, same prompt and "
               "settings, "
        "after a warm-up, timed by the same loop in pairs, alternating which goes first; the speedup is the "
        "median of the pairs' ratios). "
        "lab: specviz.lab.same_distribution.sample_first_tokens (seeded runs of specviz.decode.generate). "
        "Saved with specviz.comparison.dumps.",
    }


def merge(old: Recording, runs: dict[str, Comparison], info: dict) -> tuple[dict[str, Comparison], dict]:
    """An earlier recording with some runs made again (record_lesson.py --only GROUP): the new runs and their
    manifest entries replace the old ones; everything else, the lab included, keeps its own provenance."""
    merged_runs = {**old.runs, **runs}
    entries = {**old.manifest["runs"], **{n: info["runs"][n] for n in runs}}
    drafts = info["drafts"] if any(info["runs"][n]["group"] == DRAFTS for n in runs) else old.manifest["drafts"]
    merged = {
        **old.manifest,
        "drafts": drafts,
        "runs": {n: entries[n] for n in merged_runs},
        "updated": {"made_by": info["made_by"], "made_on": info["made_on"], "date": info["date"], "runs": sorted(runs)},
    }
    return merged_runs, merged


def _without_empty_notes(comparison: dict) -> dict:
    """A comparison's runs without the rounds' empty `source` and `why` (most drafters leave them empty, and a
    loaded round defaults to ""): the lesson's runs stay in a few hundred KB."""
    for run in (comparison["spec"], comparison["baseline"]):
        for r in run["rounds"]:
            for key in ("source", "why"):
                if not r.get(key, True):
                    del r[key]
    return comparison


def save(folder: Path, runs: dict[str, Comparison], lab: LabRecord, info: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    compact = {"separators": (",", ":"), "ensure_ascii": False}  # the lesson ships in a few hundred KB
    (folder / RUNS).write_text(
        "{"
        + ",".join(
            f"{json.dumps(k)}:{json.dumps(_without_empty_notes(v.to_dict()), **compact)}" for k, v in runs.items()
        )
        + "}",
        encoding="utf-8",
    )
    (folder / LAB).write_text(json.dumps(lab.to_dict()), encoding="utf-8")
    (folder / MANIFEST).write_text(json.dumps(info, indent=1, ensure_ascii=False), encoding="utf-8")


@dataclass
class Recording:
    """The lesson's shipped recordings, loaded: runs by name, the lab, and how they were made."""

    runs: dict[str, Comparison]
    lab: LabRecord
    manifest: dict

    def group(self, group: str) -> dict[str, Comparison]:
        names = [n for n, info in self.manifest["runs"].items() if info["group"] == group]
        return {n: self.runs[n] for n in names if n in self.runs}


def load(folder: Path = LESSON_DIR) -> Recording:
    """The recordings in `folder`; SpecVizError with the command to make them if missing or damaged."""
    try:
        runs = load_comparisons((folder / RUNS).read_bytes())
        lab = LabRecord.from_dict(json.loads((folder / LAB).read_text(encoding="utf-8")))
        info = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError) as exc:
        raise SpecVizError(
            f"the lesson's recordings in {folder} are missing or damaged ({exc.__class__.__name__}); "
            "make them with: python scripts/record_lesson.py"
        ) from None
    return Recording(runs, lab, info)
