"""v(N) at several contexts: `verify-cost --context 128,512,…`, the shipped file, and the context a reader picks."""

from __future__ import annotations

import argparse
import json

import pytest

from specviz.cli_args import context_list
from specviz.lab.verify_cost import (
    VERIFY_COST_FILE,
    at_context,
    contexts,
    load_verify_cost,
    measure_verify_cost,
    save_verify_cost,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_each_context_gets_its_own_step_and_v(target, tmp_path):
    cost = measure_verify_cost(target, max_nodes=3, contexts=(8, 24), repeats=2)
    assert contexts(cost) == [8, 24] and cost["nodes"] == [1, 2, 3]
    for m in cost["by_context"]:
        assert m["step_seconds"] > 0 and len(m["steps"]) == 3
        assert m["steps"] == pytest.approx([s / m["step_seconds"] for s in m["seconds"]])
    assert cost["context"] == 8 and cost["steps"] == cost["by_context"][0]["steps"]  # one-context readers
    save_verify_cost(cost, tmp_path / "v.json")
    saved = json.loads((tmp_path / "v.json").read_text())
    assert "--context 8,24 " in saved["command"] and contexts(saved) == [8, 24]


def test_a_reader_gets_the_nearest_measured_context():
    cost = {"nodes": [1], "context": 128, "steps": [1.1], "step_seconds": 0.02,
            "by_context": [{"context": 128, "steps": [1.1], "step_seconds": 0.02},
                           {"context": 1024, "steps": [1.3], "step_seconds": 0.025}]}
    assert at_context(cost, 900)["steps"] == [1.3] and at_context(cost, 900)["context"] == 1024
    assert at_context(cost, 200)["steps"] == [1.1]
    old = {"nodes": [1], "context": 160, "steps": [1.09], "step_seconds": 0.033}  # a file of one context
    assert at_context(old, 2048) == old and contexts(old) == [160]


def test_the_shipped_measurement_covers_several_contexts():
    shipped = load_verify_cost(VERIFY_COST_FILE)
    assert len(contexts(shipped)) >= 3 and "verify-cost" in shipped["command"]


@pytest.mark.parametrize("text", ["", "12,abc", "128,1"])
def test_bad_context_lists_are_refused_in_one_line(text):
    with pytest.raises(argparse.ArgumentTypeError):
        context_list(text)
