"""The lab bench's rows on the tiny pair: one per prompt, draft and variant, with the fields the JSONL promises."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specviz.config import Decoding, TreeShape
from specviz.lab.bench import BENCH_FIELDS, bench_rows

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPTS = [{"id": "a", "prompt": "w1 w2 w3 w4 w5", "category": "chat"}, {"id": "b", "prompt": "w40 w41 w7"}]


def test_bench_rows_one_per_prompt_draft_and_variant(target, make_drafter):
    tree = Decoding(gamma=3, max_new_tokens=8, chat=False, tree=TreeShape(budget=4))
    variants = [tree, replace(tree, gamma=4, tree=TreeShape())]  # the tree, and the chain of as many nodes
    makers = {spec: (lambda s=spec: make_drafter(s)) for spec in ("ngram", "tiny-draft")}
    heard = []
    rows = list(bench_rows(target, makers, PROMPTS, variants, on_run=heard.append))
    assert [(r["id"], r["draft"], r["gamma"]) for r in rows] == [
        (p, d, g) for p in ("a", "b") for d in ("ngram", "tiny-draft") for g in (3, 4)]
    assert heard == [f"{r['id']} {r['draft']}" for r in rows]
    for row in rows:
        assert list(row)[: len(BENCH_FIELDS)] == list(BENCH_FIELDS)
        assert row["identical"] and row["text"] == row["baseline_text"]  # greedy: the target's own output
        assert 0 < row["new_tokens"] <= 8
    assert [r["shape"] for r in rows[:2]] == ["tree dynamic 4x2, depth 3", "chain γ=4"]
    assert rows[0]["category"] == "chat" and rows[-1]["category"] is None


def test_math_rows_carry_the_final_answer_match_against_the_target_alone(target, make_drafter, monkeypatch):
    from specviz.lab import bench
    math_prompts = [{"id": "m", "prompt": "w1 w2 w3 w4 w5", "category": "math"}]
    settings = Decoding(gamma=3, max_new_tokens=8, chat=False)
    rows = list(bench_rows(target, {"ngram": lambda: make_drafter("ngram")}, math_prompts + PROMPTS[:1], [settings]))
    math_row, chat_row = rows
    assert math_row["final_answer_reference"] == "target alone"
    assert {"final_answer", "baseline_final_answer", "final_answer_match"} <= set(math_row)
    assert "final_answer_match" not in chat_row  # only where answers can be checked
    assert list(math_row)[: len(BENCH_FIELDS)] == list(BENCH_FIELDS)  # the existing fields first, unchanged
    # the tiny words hold no numbers: nothing to check, which is not a match
    assert math_row["baseline_final_answer"] is None and math_row["final_answer_match"] is None
    c = type("C", (), {})()
    c.spec, c.baseline = type("R", (), {"text": "so 42 - 29 = 13."})(), type("R", (), {"text": "He has 13 left."})()
    assert bench.answer_fields(c) == {"final_answer": "13", "baseline_final_answer": "13", "final_answer_match": True,
                                      "final_answer_reference": "target alone"}
    c.spec.text = "The answer is 14."
    assert bench.answer_fields(c)["final_answer_match"] is False
