"""The Serving page (AppTest, no browser, no server): the shipped real-vLLM example and lab run, figure for figure."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.engine import results

from app_helpers import figure

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "7_Serving.py")


def metric(at: AppTest, label: str) -> str:
    values = [m.value for m in at.metric if m.label == label]
    assert len(values) == 1, [m.label for m in at.metric]
    return values[0]


def test_shipped_example_beside_the_lab_run():
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception and not at.error
    engine_rows = results.load_engine(results.EXAMPLE_ENGINE.read_bytes())
    lab_rows = results.load_lab(results.EXAMPLE_LAB.read_bytes())
    engine = results.engine_acceptance(engine_rows)
    lab = results.lab_acceptance(lab_rows, "ngram", engine_rows[0]["prompt_ids"])
    assert engine.draft == "ngram" and lab.prompts == len(engine_rows[0]["prompt_ids"])

    assert metric(at, "Engine α") == f"{engine.alpha:.3f}"
    assert metric(at, "Engine tokens / round") == f"{engine.tokens_per_forward:.2f}"
    assert metric(at, "Engine acceptance length") == f"{engine.acceptance_length:.2f}"
    assert metric(at, "Lab α") == f"{lab.alpha:.3f}"
    assert metric(at, "Lab tokens / round") == f"{lab.tokens_per_forward:.2f}"
    assert any("vLLM 0.32.0" in c.value and "Shipped example" in c.value for c in at.caption)

    positions = figure(at, "Acceptance by draft position")
    engine_line, lab_line = positions["data"]
    assert engine_line["y"] == pytest.approx(engine.by_position) and len(engine.by_position) == 4
    assert lab_line["y"] == pytest.approx(lab.by_position)

    speedups = [r["speedup"] for r in sorted(engine_rows, key=lambda r: r["concurrency"]) if r["role"] == "speculative"]
    curve = figure(at, "Speedup from speculation vs concurrency")["data"][0]
    assert curve["x"] == [1, 4, 16] and curve["y"] == pytest.approx(speedups)
    sentence = next(m.value for m in at.markdown if m.value.startswith("At 1 request"))
    assert f"**{speedups[0]:.2f}×**" in sentence and f"at 16 it gives **{speedups[-1]:.2f}×**" in sentence
    assert figure(at, "Output throughput vs concurrency")
    assert len(at.dataframe[0].value) == len(engine_rows)

