"""vLLM's speculative-decoding counters, read from its Prometheus text, and SpecViz's figures from them.

vLLM (v1 engine) exports four counters when it serves with `--speculative-config`
(vllm/v1/spec_decode/metrics.py, class SpecDecodingProm), with labels `model_name` and `engine`:

    vllm:spec_decode_num_drafts_total                   verification steps that had a draft
    vllm:spec_decode_num_draft_tokens_total             drafted tokens
    vllm:spec_decode_num_accepted_tokens_total          accepted drafted tokens (bonus token excluded)
    vllm:spec_decode_num_accepted_tokens_per_pos_total  the same by draft position, label position="0".."γ-1"

A server without speculation does not export them. The figures below use SpecViz's definitions
(`specviz/records.py`): α = accepted ÷ drafted; mean accepted tokens per round = new tokens per
target forward; acceptance by position = P(draft i accepted | draft i was proposed). vLLM's own
"mean acceptance length" (1 + accepted ÷ drafts) counts only the steps that drafted; it is kept
beside ours, under its own name, because the two differ when an n-gram drafter finds no match.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from ..errors import SpecVizError

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"
GENERATION_TOKENS = "vllm:generation_tokens"


@dataclass
class SpecCounters:
    """Cumulative speculative counters of one server (summed over its engines), or a difference of two."""

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_position: list[float] = field(default_factory=list)  # accepted tokens at draft position 0 .. γ-1

    def __sub__(self, before: SpecCounters) -> SpecCounters:
        width = max(len(self.per_position), len(before.per_position))
        pad = lambda v: v + [0.0] * (width - len(v))  # noqa: E731
        return SpecCounters(
            self.drafts - before.drafts,
            self.draft_tokens - before.draft_tokens,
            self.accepted - before.accepted,
            [a - b for a, b in zip(pad(self.per_position), pad(before.per_position))],
        )


@dataclass
class Snapshot:
    """What one read of /metrics says: is it vLLM, and its counters (spec None without speculation)."""

    is_vllm: bool
    spec: SpecCounters | None
    generation_tokens: float = 0.0


def parse(text: str) -> Snapshot:
    """Parse Prometheus exposition text (prometheus_client's parser); SpecVizError if it is not that."""
    totals: dict[str, float] = {}
    per_position: dict[int, float] = {}
    is_vllm = False
    try:
        for family in text_string_to_metric_families(text):
            is_vllm = is_vllm or family.name.startswith("vllm:")
            for sample in family.samples:
                if sample.name == PER_POSITION + "_total":
                    pos = int(sample.labels.get("position", "-1"))
                    if pos < 0:
                        raise ValueError(f"{PER_POSITION} without a position label")
                    per_position[pos] = per_position.get(pos, 0.0) + sample.value
                elif sample.name.endswith("_total"):
                    totals[sample.name[: -len("_total")]] = (
                        totals.get(sample.name[: -len("_total")], 0.0) + sample.value
                    )
    except ValueError as exc:
        raise SpecVizError(f"the /metrics text is not Prometheus exposition format ({str(exc)[:120]})") from None
    spec = None
    if DRAFTS in totals and DRAFT_TOKENS in totals and ACCEPTED in totals:
        width = max(per_position, default=-1) + 1
        spec = SpecCounters(
            totals[DRAFTS], totals[DRAFT_TOKENS], totals[ACCEPTED], [per_position.get(i, 0.0) for i in range(width)]
        )
    return Snapshot(is_vllm, spec, totals.get(GENERATION_TOKENS, 0.0))


# --- SpecViz's definitions over engine counts ------------------------------------------------------


def acceptance_rate(accepted: float, draft_tokens: float) -> float:
    """α = accepted ÷ drafted (0 when nothing was drafted), as `Run.acceptance_rate`."""
    return accepted / draft_tokens if draft_tokens else 0.0


def mean_accepted_tokens(new_tokens: float, accepted: float) -> float:
    """New tokens per target forward, as `Run.mean_accepted_tokens` (tokens ÷ rounds).

    Every target forward yields its accepted drafts plus one token (resampled, bonus, or the
    prefill's first token), so a request of n new tokens with a accepted drafts took n − a
    forwards, steps that found nothing to draft included."""
    forwards = new_tokens - accepted
    return new_tokens / forwards if forwards > 0 else 0.0


def mean_acceptance_length(accepted: float, drafts: float) -> float:
    """vLLM's convention: 1 + accepted ÷ drafts, over the steps that had a draft only."""
    return 1.0 + accepted / drafts if drafts else 0.0


def acceptance_by_position(per_position: list[float], drafts: float) -> list[float]:
    """P(draft i accepted) from the counters: accepted at i ÷ drafts.

    vLLM's drafters propose γ tokens on every drafting step, so every draft reaches every position and
    this equals SpecViz's P(accepted | drafted); `by_position_from_steps` computes that exactly."""
    return [a / drafts for a in per_position] if drafts else []


def by_position_from_steps(accepted: list[int], drafted: list[int]) -> tuple[list[int], list[int]]:
    """(reached, accepted) counts per position from per-step arrays (vLLM's detailed per-request metrics)."""
    width = max(drafted, default=0)
    reached, kept = [0] * width, [0] * width
    for n_acc, n_drafted in zip(accepted, drafted):
        for i in range(n_drafted):
            reached[i] += 1
            kept[i] += n_acc > i
    return reached, kept


def rates(kept: list[int], reached: list[int]) -> list[float]:
    return [k / r if r else 0.0 for k, r in zip(kept, reached)]
