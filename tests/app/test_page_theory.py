"""The theory page (AppTest, no browser, no model): the figures it shows are the model's figures.

Every shown number is compared with `specviz.theory` for the same slider values, the worksheet
with a hand computation over an edited table, and measured runs saved by other pages must appear
as points on the speedup-vs-γ curve however they were stored.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from specviz import theory
from specviz.comparison import loads

from app_helpers import figure

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "5_Theory.py")
DEMO = ROOT / "assets" / "demo" / "rounds.json"


def open_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    return at


def metric(at: AppTest, label: str) -> str:
    values = [m.value for m in at.metric if m.label == label]
    assert len(values) == 1, f"expected one metric {label!r}, found {[m.label for m in at.metric]}"
    return values[0]


def array(value) -> list:
    """A plotly JSON array as a list: plotly 6 writes numpy arrays as typed base64 ('bdata')."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        return flat.reshape(value["shape"] if "shape" in value else -1).tolist()
    return [array(v) for v in value] if isinstance(value, list) else value


def trace(spec: dict, name_start: str) -> dict:
    matches = [t for t in spec["data"] if t.get("name", "").startswith(name_start)]
    assert len(matches) == 1, f"expected one trace {name_start!r}, found {[t.get('name') for t in spec['data']]}"
    return matches[0]


@pytest.mark.parametrize("alpha, gamma, c, v", [(0.7, 4, 0.1, 1.0), (0.85, 7, 0.25, 1.2), (0.3, 12, 0.6, 1.0),
                                                (0.95, 2, 0.02, 0.5)])
def test_shown_figures_are_the_models_for_the_chosen_values(alpha, gamma, c, v):
    at = open_page()
    at.slider(key="theory-alpha").set_value(alpha)
    at.slider(key="theory-gamma").set_value(gamma)
    at.slider(key="theory-c").set_value(c)
    at.slider(key="theory-v").set_value(v)
    at.run()
    assert not at.exception
    best = theory.optimal_gamma(alpha, c, v, 32)
    assert metric(at, "Expected tokens per round") == f"{theory.expected_tokens(alpha, gamma):.2f}"
    assert metric(at, "Expected speedup") == f"{theory.expected_speedup(alpha, gamma, c, v):.2f}×"
    assert metric(at, "Optimal γ") == str(best)
    assert metric(at, "Speedup at the optimal γ") == f"{theory.expected_speedup(alpha, best, c, v):.2f}×"

    curve = figure(at, "Expected speedup vs draft length γ")
    model = trace(curve, "model:")
    assert array(model["x"]) == list(range(1, 33))
    assert array(model["y"]) == pytest.approx([theory.expected_speedup(alpha, g, c, v) for g in range(1, 33)])
    star = trace(curve, "optimal γ")
    assert star["name"] == f"optimal γ = {best}" and array(star["x"]) == [best]
    assert max(array(model["y"])) == pytest.approx(array(star["y"])[0]), "the star must sit on the top of the curve"
    assert array(trace(curve, "chosen γ")["x"]) == [gamma]

    heat = figure(at, "Expected speedup over α and γ")
    grid = next(t for t in heat["data"] if t["type"] == "heatmap")
    row = [round(a, 2) for a in array(grid["y"])].index(round(alpha, 2))
    assert array(grid["z"])[row][gamma - 1] == pytest.approx(theory.expected_speedup(alpha, gamma, c, v))


def test_high_and_low_acceptance_side_by_side():
    at = open_page()
    at.slider(key="theory-gamma").set_value(5)
    at.slider(key="theory-c").set_value(0.3)
    at.run()
    for example in (0.8, 0.3):
        assert metric(at, f"Tokens per round (α={example})") == f"{theory.expected_tokens(example, 5):.2f}"
        assert metric(at, f"Speedup (α={example})") == f"{theory.expected_speedup(example, 5, 0.3):.2f}×"
    sentences = [m.value for m in at.markdown if m.value.startswith("At α=")]
    assert len(sentences) == 2
    # At c = 0.3, γ = 5: α = 0.8 pays off (1.34×), α = 0.3 does not (0.57×).
    assert "faster than the target alone" in sentences[0]
    assert "slower than the target alone" in sentences[1]


def test_worksheet_computes_alpha_from_the_edited_table():
    at = open_page()
    assert metric(at, "Worksheet α") == f"{10 / 20:.3f}"  # default rounds: 4+2+0+3+1 of 5×4
    # Row 1 now keeps 1 of 4, row 5 is deleted, a round of 6 fully accepted drafts is added:
    # (1 + 2 + 0 + 3 + 6) / (4 + 4 + 4 + 4 + 6) = 12 / 22.
    at.session_state["theory-worksheet"] = {
        "edited_rows": {0: {"accepted": 1}},
        "added_rows": [{"drafted": 6, "accepted": 6}],
        "deleted_rows": [4],
    }
    at.run()
    assert not at.exception
    assert metric(at, "Worksheet α") == f"{12 / 22:.3f}"
    assert metric(at, "Mean accepted per round") == f"{12 / 5:.2f}"
    assert metric(at, "Tokens per round") == f"{12 / 5 + 1:.2f}"
    assert metric(at, "Model's tokens per round") == f"{theory.expected_tokens(12 / 22, 22 / 5):.2f}"


def test_worksheet_leaves_out_impossible_rows():
    at = open_page()
    at.session_state["theory-worksheet"] = {"edited_rows": {1: {"accepted": 9}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    assert any("Row(s) 2 left out" in w.value for w in at.warning)
    assert metric(at, "Worksheet α") == f"{8 / 16:.3f}"  # rows 1, 3, 4, 5: 4+0+3+1 of 16


@dataclass
class Holder:
    """Some other page's result record that keeps comparisons inside it."""

    label: str
    runs: list


def test_measured_runs_of_this_session_are_points_on_the_curve():
    at = open_page()
    assert any("No measured runs in this session yet" in c.value for c in at.caption)
    assert not [t for t in figure(at, "Expected speedup vs")["data"] if t.get("name", "").startswith("measured")]

    one, two = loads(DEMO.read_text()), loads(DEMO.read_text())
    two.spec_times = [one.spec_seconds * 2]  # a second run, half as fast
    at.session_state["rounds-result"] = one
    at.session_state["other-page"] = {"runs": [two], "again": one}  # the same comparison twice counts once
    at.session_state["a-record"] = Holder("x", [("nested", two)])
    at.run()
    assert not at.exception
    points = trace(figure(at, "Expected speedup vs"), "measured runs")
    shown = sorted(zip(array(points["x"]), array(points["y"])))
    expected = sorted([(one.spec.mean_drafted, one.speedup), (two.spec.mean_drafted, two.speedup)])
    assert [x for x, _ in shown] == pytest.approx([x for x, _ in expected])
    assert [y for _, y in shown] == pytest.approx([y for _, y in expected])
    assert any("2 measured run(s)" in c.value for c in at.caption)


def test_tree_section_draws_the_measured_verify_cost_and_chain_against_tree():
    from specviz.lab.verify_cost import load_verify_cost

    at = open_page()
    assert figure(at, "Verification cost v(N)")["data"][0]["y"] == load_verify_cost()["steps"]
    # Raising the second choice's chance raises the tree's curve, never the chain's.
    before = figure(at, "Chain or tree")
    at.slider(key="theory-a1").set_value(0.3).run()
    after = figure(at, "Chain or tree")
    assert after["data"][0]["y"] == before["data"][0]["y"]
    assert all(b > a for a, b in zip(before["data"][1]["y"][1:], after["data"][1]["y"][1:]))
