"""vLLM's counters and per-request metrics, parsed from text captured from a real vLLM 0.32 server, and the
definitions engine-bench applies to them: the same numbers SpecViz's own records give for the same rounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specviz.engine import metrics
from specviz.errors import SpecVizError
from specviz.records import BONUS, RESAMPLED, Round, Run

DATA = Path(__file__).parent / "data"
CAPTURED = (DATA / "vllm_0.32.0_cpu_metrics.txt").read_text()


def test_counters_of_a_real_vllm_capture():
    snap = metrics.parse(CAPTURED)
    assert snap.is_vllm
    assert snap.spec == metrics.SpecCounters(drafts=8, draft_tokens=32, accepted=19, per_position=[5, 5, 5, 4])


def test_per_request_metrics_of_the_same_request_agree_with_the_counters():
    """The streamed per-request arrays and /metrics describe the same 8 steps: check one against the other."""
    last = [
        line
        for line in (DATA / "vllm_0.32.0_cpu_stream_tail.txt").read_text().splitlines()
        if line.startswith("data: {")
    ]
    spec = json.loads(last[-1][len("data: ") :])["metrics"]["speculative_decoding"]
    reached, kept = metrics.by_position_from_steps(spec["per_step_accepted"], spec["per_step_drafted"])
    counters = metrics.parse(CAPTURED).spec
    assert reached == [8, 8, 8, 8] and kept == counters.per_position
    assert sum(spec["per_step_accepted"]) == counters.accepted == spec["num_accepted_draft_tokens"]
    assert metrics.acceptance_rate(counters.accepted, counters.draft_tokens) == pytest.approx(
        spec["draft_acceptance_rate"]
    )
    assert metrics.mean_acceptance_length(counters.accepted, counters.drafts) == pytest.approx(
        spec["mean_acceptance_length"]
    )
    # 32 tokens with 19 accepted drafts took 13 forwards: the prefill, 8 drafting steps, 4 steps with no n-gram match.
    assert metrics.mean_accepted_tokens(32, counters.accepted) == pytest.approx(32 / 13)


def test_a_server_without_speculation_has_no_spec_counters():
    plain = "\n".join(line for line in CAPTURED.splitlines() if "spec_decode" not in line) + "\n"
    snap = metrics.parse(plain)
    assert snap.is_vllm and snap.spec is None


def test_not_vllm_and_not_prometheus():
    assert not metrics.parse('# TYPE http_requests_total counter\nhttp_requests_total{code="200"} 3\n').is_vllm
    with pytest.raises(SpecVizError, match="not Prometheus exposition format"):
        metrics.parse("<html><body>Welcome to nginx</body></html>")


def test_counters_are_summed_over_engines_and_differences_are_per_position():
    def text(values):
        out = [
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
            "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        ]
        for engine, (drafts, tokens, accepted, per_pos) in enumerate(values):
            labels = f'engine="{engine}",model_name="m"'
            out += [
                f"vllm:spec_decode_num_drafts_total{{{labels}}} {drafts}",
                f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {tokens}",
                f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {accepted}",
            ]
            out += [
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {v}'
                for i, v in enumerate(per_pos)
            ]
        return "\n".join(out) + "\n"

    before = metrics.parse(text([(10, 30, 12, [7, 4, 1]), (5, 15, 6, [3, 2, 1])])).spec
    assert before == metrics.SpecCounters(15, 45, 18, [10, 6, 2])
    after = metrics.parse(text([(14, 42, 20, [10, 7, 3]), (9, 27, 9, [5, 3, 1])])).spec
    delta = after - before
    assert delta == metrics.SpecCounters(8, 24, 11, [5, 4, 2])
    assert metrics.acceptance_by_position(delta.per_position, delta.drafts) == [5 / 8, 4 / 8, 2 / 8]


def _run(steps: list[tuple[int, int]]) -> Run:
    """A lab Run whose rounds draft and accept as given (what SpecViz records), for comparing definitions."""
    rounds, out = [], []
    for i, (drafted, accepted) in enumerate(steps):
        kind = BONUS if accepted == drafted and drafted else RESAMPLED
        rounds.append(
            Round(
                i,
                max(drafted, 1),
                list(range(drafted)),
                [1.0] * drafted,
                [1.0] * drafted,
                accepted,
                0,
                kind,
                1.0,
                accepted + 1,
                [],
                0.0,
                0.0,
            )
        )
        out += [0] * (accepted + 1)
    return Run("t", "ngram", "p", [1], {}, "cpu", "float32", rounds, out, "", 0.0, 1.0)


STEPS = [(4, 4), (4, 1), (0, 0), (2, 2), (4, 0), (3, 2), (0, 0), (4, 3)]


def test_engine_definitions_equal_specviz_records_for_the_same_rounds():
    run = _run(STEPS)
    drafting = [s for s in STEPS if s[0]]
    accepted, drafted = sum(a for _, a in STEPS), sum(d for d, _ in STEPS)
    assert metrics.acceptance_rate(accepted, drafted) == run.acceptance_rate
    assert metrics.mean_accepted_tokens(run.new_tokens, accepted) == pytest.approx(run.mean_accepted_tokens)
    reached, kept = metrics.by_position_from_steps([a for _, a in drafting], [d for d, _ in drafting])
    assert metrics.rates(kept, reached) == pytest.approx(run.acceptance_by_position())
    assert (reached, kept) == run.position_counts()
    # vLLM's acceptance length leaves out the two steps that drafted nothing; SpecViz's tokens per round does not.
    assert metrics.mean_acceptance_length(accepted, len(drafting)) == pytest.approx(1 + 12 / 6)
    assert run.mean_accepted_tokens == pytest.approx(20 / 8)
    assert run.drafting_rounds == 6


def test_counter_positions_use_all_drafts_and_equal_specviz_when_every_draft_is_full():
    full = [(4, a) for a in (4, 1, 0, 2, 3)]
    per_position = [sum(a > i for _, a in full) for i in range(4)]
    assert metrics.acceptance_by_position(per_position, len(full)) == pytest.approx(_run(full).acceptance_by_position())
