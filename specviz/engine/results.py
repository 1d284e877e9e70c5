"""engine-bench records beside lab `bench` records: loaded, checked, pooled with one set of definitions.

Pooling sums counts before dividing (α = Σ accepted ÷ Σ drafted, tokens per forward = Σ tokens ÷
Σ forwards), the way vLLM's counters pool every request, so an engine run and a lab run over the same
prompts are compared figure for figure.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..errors import SpecVizError
from . import metrics
from .bench import BASELINE, SCHEMA, SPECULATIVE

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets" / "serving"
EXAMPLE_ENGINE = ASSETS / "vllm_cpu_ngram.jsonl"
EXAMPLE_LAB = ASSETS / "lab_ngram.jsonl"


@dataclass
class Acceptance:
    """Pooled acceptance of a run set, in SpecViz's definitions (and vLLM's acceptance length beside them)."""

    source: str
    draft: str
    prompts: int
    drafted: float
    accepted: float
    alpha: float  # accepted ÷ drafted
    tokens_per_forward: float  # SpecViz's mean accepted tokens per round
    acceptance_length: float  # vLLM's: 1 + accepted ÷ steps that drafted
    by_position: list[float]  # P(accepted | drafted) at draft position 0 ..


def _lines(text: str | bytes, what: str) -> list[dict]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise SpecVizError(f"line {number} of the {what} file is not JSON; is it a JSONL file?") from None
        if not isinstance(row, dict):
            raise SpecVizError(f"line {number} of the {what} file is not a JSON object")
        rows.append(row)
    if not rows:
        raise SpecVizError(f"the {what} file is empty")
    return rows


ENGINE_FIELDS = ("role", "concurrency", "throughput", "ttft_s", "itl_s", "e2e_s", "new_tokens", "model")
LAB_FIELDS = ("draft", "new_tokens", "rounds", "drafted", "accepted", "speedup")


def load_engine(text: str | bytes) -> list[dict]:
    """Records of `python -m specviz engine-bench --out`; SpecVizError if it is something else."""
    rows = _lines(text, "engine-bench")
    for row in rows:
        if row.get("schema") != SCHEMA:
            raise SpecVizError(f"not an engine-bench result (expected schema {SCHEMA!r}, found {row.get('schema')!r}); "
                               "make one with python -m specviz engine-bench --out FILE")
        missing = [f for f in ENGINE_FIELDS if f not in row]
        if missing or (row["role"] == SPECULATIVE and "accepted" not in row):
            raise SpecVizError(f"the engine-bench result is damaged (missing {', '.join(missing) or 'accepted'})")
    return rows


def load_lab(text: str | bytes) -> list[dict]:
    """Records of `python -m specviz bench --out` (one line per prompt and draft)."""
    rows = _lines(text, "bench")
    for row in rows:
        if row.get("schema") == SCHEMA:
            raise SpecVizError(
                "this is an engine-bench result; load it as the engine run, and a `bench` file as the lab run"
            )
        missing = [f for f in LAB_FIELDS if f not in row]
        if missing:
            raise SpecVizError(
                f"not a SpecViz bench result (missing {', '.join(missing)}); "
                "make one with python -m specviz bench --draft ngram --prompts eval --out FILE"
            )
    return rows


def engine_acceptance(rows: list[dict]) -> Acceptance:
    """The speculative server's acceptance pooled over every concurrency level."""
    spec = [r for r in rows if r["role"] == SPECULATIVE]
    if not spec:
        raise SpecVizError("the engine-bench result has no speculative server records")
    drafted, accepted = sum(r["draft_tokens"] for r in spec), sum(r["accepted"] for r in spec)
    tokens, drafts = sum(r["new_tokens"] for r in spec), sum(r["drafts"] for r in spec)
    if all("position_reached" in r for r in spec):  # per-request step arrays: exactly SpecViz's definition
        reached = _sum_lists(r["position_reached"] for r in spec)
        by_position = metrics.rates(_sum_lists(r["position_accepted"] for r in spec), reached)
    else:
        by_position = metrics.acceptance_by_position(_sum_lists(r["accepted_per_position"] for r in spec), drafts)
    return Acceptance(
        f"vLLM {spec[0].get('server_version', '')}".strip(),
        spec[0].get("draft") or "?",
        len({i for r in spec for i in r.get("prompt_ids", [])}),
        drafted,
        accepted,
        metrics.acceptance_rate(accepted, drafted),
        metrics.mean_accepted_tokens(tokens, accepted),
        metrics.mean_acceptance_length(accepted, drafts),
        by_position,
    )


def lab_drafts(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["draft"] for r in rows))


def lab_acceptance(rows: list[dict], draft: str, prompt_ids: list[str] | None = None) -> Acceptance:
    """One drafter's lab runs pooled over prompts (only those in prompt_ids, when given and any match)."""
    mine = [r for r in rows if r["draft"] == draft]
    if prompt_ids:
        common = [r for r in mine if r.get("id") in set(prompt_ids)]
        mine = common or mine
    if not mine:
        raise SpecVizError(f"the bench file has no runs of draft {draft!r}")
    drafted, accepted = sum(r["drafted"] for r in mine), sum(r["accepted"] for r in mine)
    tokens, rounds = sum(r["new_tokens"] for r in mine), sum(r["rounds"] for r in mine)
    by_position: list[float] = []
    if all("position_reached" in r for r in mine):
        by_position = metrics.rates(
            _sum_lists(r["position_accepted"] for r in mine), _sum_lists(r["position_reached"] for r in mine)
        )
    drafting = sum(r["drafting_rounds"] for r in mine) if all("drafting_rounds" in r for r in mine) else 0
    return Acceptance(
        "SpecViz lab",
        draft,
        len(mine),
        drafted,
        accepted,
        metrics.acceptance_rate(accepted, drafted),
        tokens / rounds if rounds else 0.0,
        metrics.mean_acceptance_length(accepted, drafting) if drafting else 0.0,
        by_position,
    )


def lab_speedup(rows: list[dict], draft: str) -> float:
    """Median single-stream speedup of the lab runs (target alone ÷ speculative, same machine)."""
    return statistics.median(r["speedup"] for r in rows if r["draft"] == draft)


def levels_frame(rows: list[dict]) -> pd.DataFrame:
    """One row per server and concurrency: what engine-bench measured there."""
    cols = [
        "role",
        "concurrency",
        "requests",
        "throughput",
        "ttft_s",
        "itl_s",
        "e2e_s",
        "acceptance_rate",
        "mean_accepted_tokens",
        "speedup",
        "latency_speedup",
    ]
    frame = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows])
    frame["ttft_ms"], frame["itl_ms"] = frame.pop("ttft_s") * 1e3, frame.pop("itl_s") * 1e3
    return frame.sort_values(["concurrency", "role"], ascending=[True, False], ignore_index=True)


def speedup_frame(rows: list[dict]) -> pd.DataFrame:
    """Speedup per concurrency (speculative rows that have a baseline), in concurrency order."""
    spec = sorted((r for r in rows if r["role"] == SPECULATIVE and "speedup" in r), key=lambda r: r["concurrency"])
    base = {r["concurrency"]: r for r in rows if r["role"] == BASELINE}
    return pd.DataFrame(
        {
            "concurrency": [r["concurrency"] for r in spec],
            "speedup": [r["speedup"] for r in spec],
            "latency_speedup": [r["latency_speedup"] for r in spec],
            "throughput": [r["throughput"] for r in spec],
            "baseline_throughput": [base[r["concurrency"]]["throughput"] for r in spec],
        }
    )


def run_caption(rows: list[dict]) -> str:
    """What the engine run was made against, in one line."""
    r = rows[0]
    spec = next((x for x in rows if x["role"] == SPECULATIVE), r)
    servers = "speculative and baseline servers" if any(x["role"] == BASELINE for x in rows) else "a speculative server"
    return (
        f"{spec.get('draft') or 'unnamed drafter'} (γ={spec.get('gamma', '?')}) on vLLM "
        f"{r.get('server_version') or '?'} "
        f"serving {r['model']}: {servers} · prompts {r.get('prompts', '?')} ({len(spec.get('prompt_ids', []))}) · "
        f"{r.get('max_new_tokens', '?')} tokens per request · concurrency "
        f"{', '.join(str(c) for c in sorted({x['concurrency'] for x in rows}))} · recorded {r.get('recorded_at', '?')}"
    )


def _sum_lists(lists) -> list[float]:
    out: list[float] = []
    for values in lists:
        out = [
            a + b for a, b in zip(out + [0] * (len(values) - len(out)), list(values) + [0] * (len(out) - len(values)))
        ]
    return out
