"""engine-bench: the same prompts on a speculative vLLM server (and a baseline), at several concurrencies.

For each concurrency level c the prompts are sent with at most c requests in flight (cycled until
at least c requests, so every slot fills), first to the speculative server, then to the baseline.
/metrics is read before and after each level and the counters' differences give that level's
acceptance. One JSON line per server and level (schema `specviz.engine/1`): the record every
table, chart and test reads.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass
from itertools import cycle, islice

import httpx

from ..errors import SpecVizError
from . import client, metrics

SCHEMA = "specviz.engine/1"
SPECULATIVE, BASELINE = "speculative", "baseline"
WARMUP_TOKENS = 8


@dataclass
class EngineBench:
    url: str
    baseline_url: str | None
    prompts: list[dict]  # {"id", "prompt"}, as `bench` reads them
    prompt_source: str  # what --prompts said, recorded
    concurrency: list[int]
    max_new_tokens: int
    draft: str = ""  # the drafter the server runs, as SpecViz names it (pairs engine and lab runs)
    chat: bool = True  # the chat endpoint (the prompt as a user message, as SpecViz's default)


def parse_concurrency(text: str) -> list[int]:
    """"1,4,16" -> [1, 4, 16]; ValueError with the reason otherwise."""
    levels = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"concurrency levels are whole numbers ≥ 1 separated by commas, e.g. 1,4,16; got {text!r}")
        levels.append(int(part))
    if len(set(levels)) != len(levels):
        raise ValueError(f"concurrency levels repeat in {text!r}")
    return sorted(levels)


def _requests(prompts: list[dict], concurrency: int) -> list[dict]:
    return list(islice(cycle(prompts), max(len(prompts), concurrency)))


def _add(a: list[int], b: list[int]) -> list[int]:
    width = max(len(a), len(b))
    return [x + y for x, y in zip(a + [0] * (width - len(a)), b + [0] * (width - len(b)))]


def _mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def level_record(role: str, info: client.ServerInfo, setup: EngineBench, concurrency: int,
                 results: list[client.RequestResult], wall: float, delta: metrics.SpecCounters | None) -> dict:
    """One server at one concurrency: timings from this side, acceptance from the counters' difference."""
    tokens = sum(r.tokens for r in results)
    record = {
        "schema": SCHEMA,
        "role": role,
        "url": info.url,
        "model": info.model,
        "server_version": info.version,
        "draft": setup.draft if role == SPECULATIVE else None,
        "concurrency": concurrency,
        "requests": len(results),
        "max_new_tokens": setup.max_new_tokens,
        "prompts": setup.prompt_source,
        "prompt_ids": sorted({r.prompt_id for r in results}),
        "chat": setup.chat,
        "new_tokens": tokens,
        "fixed_length": all(r.tokens == setup.max_new_tokens for r in results),
        "seconds": wall,
        "throughput": tokens / wall if wall > 0 else 0.0,
        "ttft_s": _mean(r.ttft_s for r in results),
        "ttft_p50_s": statistics.median(r.ttft_s for r in results),
        "itl_s": _mean(r.itl_s for r in results),
        "chunk_gap_s": _mean(r.chunk_gap_s for r in results),
        "e2e_s": _mean(r.e2e_s for r in results),
        "e2e_p50_s": statistics.median(r.e2e_s for r in results),
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if delta is not None:
        record.update(
            gamma=len(delta.per_position),
            drafts=delta.drafts,
            draft_tokens=delta.draft_tokens,
            accepted=delta.accepted,
            accepted_per_position=delta.per_position,
            acceptance_rate=metrics.acceptance_rate(delta.accepted, delta.draft_tokens),
            mean_accepted_tokens=metrics.mean_accepted_tokens(tokens, delta.accepted),
            mean_acceptance_length=metrics.mean_acceptance_length(delta.accepted, delta.drafts),
            acceptance_by_position=metrics.acceptance_by_position(delta.per_position, delta.drafts),
        )
        specs = [r.spec for r in results if r.spec]
        record["per_request_spec"] = len(specs) == len(results)
        steps = [s for s in specs if s.get("per_step_accepted") is not None and s.get("per_step_drafted") is not None]
        if steps and len(steps) == len(results):  # vLLM --per-request-spec-decode-metrics detailed
            reached, kept = [], []
            for s in steps:
                r, k = metrics.by_position_from_steps(s["per_step_accepted"], s["per_step_drafted"])
                reached, kept = _add(reached, r), _add(kept, k)
            record["position_reached"], record["position_accepted"] = reached, kept
            record["acceptance_by_position_reached"] = metrics.rates(kept, reached)
    record["per_request"] = [
        {
            "id": r.prompt_id,
            "tokens": r.tokens,
            "ttft_s": r.ttft_s,
            "itl_s": r.itl_s,
            "e2e_s": r.e2e_s,
            **({"spec": r.spec} if r.spec else {}),
        }
        for r in results
    ]
    return record


def add_speedups(rows: list[dict]) -> None:
    """Speculative ÷ baseline at the same concurrency: output throughput, and mean end-to-end latency."""
    base = {r["concurrency"]: r for r in rows if r["role"] == BASELINE}
    for row in rows:
        other = base.get(row["concurrency"])
        if row["role"] == SPECULATIVE and other:
            row["speedup"] = row["throughput"] / other["throughput"] if other["throughput"] else 0.0
            row["latency_speedup"] = other["e2e_s"] / row["e2e_s"] if row["e2e_s"] else 0.0


def run(setup: EngineBench, out, progress=lambda message: print(message, file=sys.stderr)) -> list[dict]:
    """Check both servers, warm them up, measure every level; write and return the records."""
    urls = {SPECULATIVE: client.base_url(setup.url)}
    if setup.baseline_url:
        urls[BASELINE] = client.base_url(setup.baseline_url)
    with httpx.Client(timeout=client.TIMEOUT) as http:
        infos = {role: client.inspect(http, url) for role, url in urls.items()}
        if infos[SPECULATIVE].snapshot.spec is None:
            raise SpecVizError(
                f"{urls[SPECULATIVE]} is a vLLM server without speculative decoding metrics "
                "(vllm:spec_decode_*): start it with --speculative-config, or give it as --baseline-url"
            )
        if BASELINE in infos and infos[BASELINE].snapshot.spec is not None:
            raise SpecVizError(
                f"the --baseline-url {urls[BASELINE]} runs speculative decoding (it exports "
                "vllm:spec_decode_* counters); start the baseline without --speculative-config"
            )
        for role, info in infos.items():
            progress(f"{role}: {info.url} serves {info.model} (vLLM {info.version or 'version unknown'})")
            client.run_level(info.url, info.model, setup.prompts[:1], 1, WARMUP_TOKENS, setup.chat)
        rows = []
        for level in setup.concurrency:
            items = _requests(setup.prompts, level)
            for role, info in infos.items():
                before = client.read_metrics(http, info.url).spec
                results, wall = client.run_level(info.url, info.model, items, level, setup.max_new_tokens, setup.chat)
                after = client.read_metrics(http, info.url).spec
                delta = after - before if role == SPECULATIVE and after and before else None
                row = level_record(role, info, setup, level, results, wall, delta)
                if not row["fixed_length"]:
                    progress(
                        f"warning: {info.url} returned other than {setup.max_new_tokens} tokens for some requests "
                        "(min_tokens / ignore_eos not honoured?)"
                    )
                rows.append(row)
                progress(
                    f"{role:<11} concurrency {level:>3}: {row['throughput']:8.1f} tokens/s"
                    + (f", α {row['acceptance_rate']:.3f}" if delta is not None else "")
                )
    add_speedups(rows)
    for row in rows:
        out.write(json.dumps(row) + "\n")
    return rows


def summary_lines(rows: list[dict]) -> list[str]:
    """The terminal table: one line per server and concurrency."""
    lines = [
        f"{'server':<11} {'conc':>4} {'req':>4} {'tok/s':>8} {'TTFT ms':>8} {'ITL ms':>7} {'E2E s':>7} "
        f"{'α':>6} {'tok/fwd':>7} {'vLLM AL':>7} {'speedup':>7}  acceptance by position"
    ]
    for r in rows:
        spec = r["role"] == SPECULATIVE
        lines.append(
            f"{r['role']:<11} {r['concurrency']:>4} {r['requests']:>4} {r['throughput']:>8.1f} "
            f"{r['ttft_s'] * 1e3:>8.1f} "
            f"{r['itl_s'] * 1e3:>7.2f} {r['e2e_s']:>7.2f} "
            + (
                f"{r['acceptance_rate']:>6.3f} {r['mean_accepted_tokens']:>7.2f} {r['mean_acceptance_length']:>7.2f} "
                if spec
                else f"{'':>6} {'':>7} {'':>7} "
            )
            + (f"{r['speedup']:>6.2f}x" if "speedup" in r else f"{'':>7}")
            + (
                "  "
                + " ".join(f"{p:.2f}" for p in r.get("acceptance_by_position_reached") or r["acceptance_by_position"])
                if spec
                else ""
            )
        )
    lines.append(
        "(α = accepted ÷ drafted; tok/fwd = new tokens per target forward, SpecViz's mean accepted tokens per "
        "round; vLLM AL = vLLM's mean acceptance length, 1 + accepted ÷ drafts; speedup = output tokens/s ÷ "
        "the baseline's at the same concurrency)"
    )
    return lines
