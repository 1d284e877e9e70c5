"""benchmarks/report.py's line on what the time to the first token leaves a drafter."""

import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "report", Path(__file__).resolve().parents[2] / "benchmarks" / "report.py")
report = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(report)


def row(alone, alone_first, spec, spec_first):
    return {"baseline_seconds": alone, "baseline_ttft_seconds": alone_first, "spec_seconds": spec,
            "ttft_seconds": spec_first}


def test_the_rest_after_the_first_token_is_pooled_and_priced_for_twice_the_pace():
    # pooled: the target alone 8 s, 2 s to the first token; drafted 4 s, 2 s to the first token
    line = report.first_token_line([row(3.0, 1.0, 1.5, 1.0), row(5.0, 1.0, 2.5, 1.0)])[0]
    assert "After the first token (the prompts' seconds pooled): 3.00×" in line
    assert "the target alone 4.00 s on average, 1.00 s of it to the first token" in line
    assert "the drafted run 2.00 s, 1.00 s to the first token" in line
    assert "would need the rest 3.0× as fast" in line  # 4 s pooled, 2 of them to first tokens: 6 s of rest in 2


def test_runs_of_one_token_get_no_line():
    assert report.first_token_line([row(1.0, 1.0, 1.0, 1.0)]) == []


def test_a_first_token_past_half_the_target_alone_leaves_no_pace_that_doubles():
    line = report.first_token_line([row(4.0, 2.0, 3.0, 2.5)])[0]
    assert "faster than instant" in line


def test_rows_without_the_first_token_times_get_no_line():
    assert report.first_token_line([{"baseline_seconds": 2.0, "spec_seconds": 1.0}]) == []
