"""End to end on the embedded SmolLM2-135M-Instruct (fp32, CPU): the product's own promises."""

import json
import re

import pytest
import torch

from specviz import Decoding, build_drafter, generate, load_model
from specviz.cli import main
from specviz.lab.bench import BENCH_FIELDS
from specviz.prompts import encode, load_prompt_set

pytestmark = pytest.mark.slow
# New tokens of each identity check, chains and trees alike: one target-alone run per prompt serves every draft
# (`baseline`); 24 tokens take at least 5 rounds of γ = 4 on every prompt. Layer-skip (bench's check) keeps 2 of the
# 30 layers: the same code path as any K, at the least cost (few of its drafts are accepted at K = 2, 4 or 8 here).
NEW_TOKENS = 24


@pytest.fixture(scope="module")
def smol():
    return load_model("default")


@pytest.fixture(scope="module")
def baseline(smol):
    """baseline(prompt, max_new_tokens) -> the target's greedy run alone, made once per module (every draft
    is checked against the same target output; re-running the target for each draft only cost time)."""
    runs = {}

    def run(prompt: str, max_new_tokens: int):
        if (prompt, max_new_tokens) not in runs:
            runs[prompt, max_new_tokens] = generate(smol, None, prompt, Decoding(max_new_tokens=max_new_tokens))
        return runs[prompt, max_new_tokens]

    return run


@pytest.fixture(scope="module")
def prompts():
    rows = load_prompt_set(split="eval")
    return [next(r["prompt"] for r in rows if r["category"] == c) for c in ("chat", "code", "retrieval")]


def test_baseline_is_the_targets_own_greedy_output(smol, prompts):
    """Our target-alone loop gives exactly what transformers' greedy generate gives (one prompt: the loop's
    prompt handling is the same for all; every draft below is checked against this loop on three)."""
    settings = Decoding(max_new_tokens=24)
    for prompt in prompts[1:2]:
        ours = generate(smol, None, prompt, settings)
        ids = torch.tensor([encode(smol.tokenizer, prompt)])
        theirs = smol.model.generate(ids, max_new_tokens=24, do_sample=False)[0, ids.shape[1]:].tolist()
        assert ours.output_ids == theirs


# The target as its own draft ("target", every draft kept) is checked on the tiny pair (tests/core/test_loop.py): its
# widest verification is no wider than these drafts' (γ + 1), and here it took 7 s of the module's 70. Layer-skip's
# chains are checked on the tiny pair too, and on this one through bench (`identical`, below): here 10 s.
@pytest.mark.parametrize("draft", ["ngram", "smol-head-v5"])
def test_greedy_speculative_output_is_identical(smol, prompts, baseline, draft):
    settings = Decoding(gamma=4, max_new_tokens=NEW_TOKENS)
    for prompt in prompts:
        base = baseline(prompt, NEW_TOKENS)
        spec = generate(smol, build_drafter(draft, smol), prompt, settings)
        assert spec.output_ids == base.output_ids, f"{draft} changed the output on {prompt[:40]!r}"
        assert spec.drafted > 0 and len(spec.rounds) <= len(base.rounds)


def test_layerskip_leaves_the_shared_target_untouched(smol, prompts):
    layers = len(smol.model.model.layers)
    before = generate(smol, None, prompts[0], Decoding(max_new_tokens=8)).output_ids
    generate(smol, build_drafter("layerskip:4", smol), prompts[0], Decoding(max_new_tokens=8))
    assert len(smol.model.model.layers) == layers
    assert generate(smol, None, prompts[0], Decoding(max_new_tokens=8)).output_ids == before


def test_cli_bench_writes_every_field(tmp_path, prompts, capsys):
    source = tmp_path / "prompts.jsonl"
    source.write_text(json.dumps({"id": "p0", "prompt": prompts[0]}) + "\n")  # several: tests/core/test_bench_rows.py
    out = tmp_path / "out.jsonl"
    code = main(["bench", "--draft", "ngram", "--draft", "layerskip:2", "--prompts", str(source),
                 "--max-new-tokens", "12", "--out", str(out)])
    assert code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and {r["draft"] for r in rows} == {"ngram", "layerskip:2"}
    for row in rows:
        assert set(BENCH_FIELDS) <= set(row)
        assert row["identical"] is True and row["text"] == row["baseline_text"]
        assert row["new_tokens"] == 12 or row["text"]
        assert row["speedup"] == pytest.approx(row["baseline_seconds"] / row["spec_seconds"])
    assert "speedup" in capsys.readouterr().out


def test_cli_run_prints_rounds_and_figures(capsys):
    assert main(["run", "--draft", "ngram", "--prompt", "Say hello twice.", "--max-new-tokens", "8",
                 "--pairs", "2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"over \d pairs", out), out  # 2, or more on a busy machine
    assert "measured speedup" in out and "identical to target alone" in out and "|" in out


# Layer-skip's trees are checked on the tiny pair (tests/core/test_trees.py) and its chains on this one: here its tree
# took 32 s of the suite, as long as the two heads' together.
@pytest.mark.parametrize("draft", ["smol-head-8k", "blend:smol-head-v5"])
def test_greedy_token_tree_output_is_identical_on_the_real_pair(smol, prompts, baseline, draft):
    from specviz.config import TreeShape

    settings = Decoding(gamma=4, max_new_tokens=NEW_TOKENS, tree=TreeShape(budget=6, branching=2))
    rounds = base_rounds = 0
    for prompt in prompts:
        base = baseline(prompt, NEW_TOKENS)
        spec = generate(smol, build_drafter(draft, smol), prompt, settings)
        assert spec.output_ids == base.output_ids, f"{draft} tree changed the output on {prompt[:40]!r}"
        assert spec.is_tree and len(spec.rounds) <= len(base.rounds)
        rounds, base_rounds = rounds + len(spec.rounds), base_rounds + len(base.rounds)
    assert rounds < base_rounds, f"{draft}: no round kept a drafted token"  # the tree's drafts were used


def test_cli_bench_tree_vs_chain_pairs_each_tree_with_its_chain(tmp_path, prompts):
    source = tmp_path / "prompts.jsonl"
    source.write_text(json.dumps({"id": "p0", "prompt": prompts[0]}) + "\n")
    out = tmp_path / "out.jsonl"
    code = main(["bench", "--draft", "smol-head-8k", "--prompts", str(source), "--max-new-tokens", "12",
                 "--gamma", "3", "--tree-budget", "4", "--tree-vs-chain", "--out", str(out)])
    assert code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["gamma"], r["tree_budget"]) for r in rows] == [(3, 4), (4, 0)]
    assert all(set(BENCH_FIELDS) <= set(r) and r["identical"] for r in rows)
    assert rows[0]["verified_per_round"] <= 4 and rows[1]["verified_per_round"] <= 4
