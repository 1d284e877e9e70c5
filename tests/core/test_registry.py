"""A drafter kind is one module and one registry entry: a toy kind registered here, in this test file only, is
listed by `models`, offered by the app's pickers and measured by `bench`, with nothing else touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from specviz.cli import main
from specviz.drafters import DRAFTERS, Drafter, Kind, Proposal, learns_across_runs, offered, register
from specviz.errors import ConfigError

from tiny import VOCAB, WORDS, make_tokenizer, tiny_llama

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Rounds.py")


class RepeatDrafter(Drafter):
    """Drafts the last token again, k times: certain (one-hot q), so exact verification keeps the output."""

    kind = "repeat"

    def draft(self, context, k, sampling, generator) -> Proposal:
        return Proposal(context[0, -1:].repeat(k), None)


@pytest.fixture
def toy_kind():
    register("repeat", Kind(lambda spec, target, load: RepeatDrafter("repeat"), "drafts the last token again (a toy)",
                            "repeat", lambda: ["repeat"]))
    yield
    del DRAFTERS["repeat"]


@pytest.fixture(scope="module")
def target_folder(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("toy") / "target"
    tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=4, heads=4, kv_heads=2).save_pretrained(folder)
    make_tokenizer(WORDS).save_pretrained(folder)
    return str(folder)


def test_a_registered_kind_is_listed_by_models(toy_kind, capsys):
    assert main(["models", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["repeat"]["title"] == "drafts the last token again (a toy)" and rows["repeat"]["role"] == "draft"
    assert {"ngram", "suffix", "auto", "layerskip", "target", "head", "ngram+head"} <= set(rows), "every kind is listed"


def test_a_registered_kind_is_offered_by_the_pickers(toy_kind):
    assert offered()[-1] == "repeat" and not learns_across_runs("repeat")
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    assert "repeat" in at.selectbox(key="rounds-draft").options


def test_a_registered_kind_is_measured_by_bench_and_keeps_the_output(toy_kind, target_folder, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "p1", "prompt": "w1 w2 w3 w4"}) + "\n")
    out = tmp_path / "bench.jsonl"
    torch.set_num_threads(1)
    assert main(["bench", "--target", target_folder, "--draft", "repeat", "--prompts", str(prompts), "--raw",
                 "--max-new-tokens", "8", "--gamma", "2", "--out", str(out)]) == 0
    row = json.loads(out.read_text().splitlines()[0])
    assert row["draft"] == "repeat" and row["identical"] and row["pairs"] == 1 and len(row["pair_ratios"]) == 1
    assert "repeat" in capsys.readouterr().out  # the summary table


def test_a_kind_name_must_be_one_word():
    with pytest.raises(ConfigError, match="one word"):
        register("ngram+x", DRAFTERS["ngram"])
