"""Reproducibility where users meet it: the Rounds page and the CLI, sampling with a seed.

The loop's own reproducibility is tested in test_loop.py; here the same seed and settings must give
the same tokens and rounds through the app (two browser sessions, i.e. two AppTests) and through
two separate CLI processes, and another seed must give another sample.
"""

import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz import cli
from specviz.records import Round

from tiny import VOCAB, WORDS, make_tokenizer, tiny_llama

ROOT = Path(__file__).resolve().parents[2]
ROUNDS_PAGE = str(ROOT / "pages" / "1_Rounds.py")
TIMING = {"draft_seconds", "verify_seconds"}


def rounds_of(rounds: list) -> list[dict]:
    """Every recorded field of each round but its timings (Round objects or their JSON dicts)."""
    names = [f.name for f in fields(Round) if f.name not in TIMING]
    return [{n: (r[n] if isinstance(r, dict) else getattr(r, n)) for n in names} for r in rounds]


# --- the CLI, on tiny model folders ----------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny target and draft saved as transformers folders, as `--target` and `--draft` take them."""
    root = tmp_path_factory.mktemp("tiny-models")
    tokenizer = make_tokenizer(WORDS)
    folders = []
    for name, model in (("target", tiny_llama(0, VOCAB, 64, 4, 4, 2)), ("draft", tiny_llama(1, VOCAB, 32, 2, 2, 1))):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        folders.append(root / name)
    return folders[0], folders[1]


def cli_command(target: Path, draft: Path, seed: int) -> list[str]:
    return ["run", "--target", str(target), "--draft", str(draft), "--raw", "--prompt", "w1 w2 w3 w4 w5",
            "--gamma", "3", "--max-new-tokens", "16", "--temperature", "0.8", "--seed", str(seed), "--no-baseline",
            "--json"]


def test_cli_same_seed_same_run_in_separate_processes(tiny_folders, capsys):
    target, draft = tiny_folders
    command = [sys.executable, "-m", "specviz", *cli_command(target, draft, seed=3)]
    processes = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]  # two processes at once: nothing shared but the files
    outputs = [p.communicate(timeout=300) for p in processes]
    assert all(p.returncode == 0 for p in processes), [err[-2000:] for _, err in outputs]
    first, again = (json.loads(out) for out, _ in outputs)
    assert first["settings"]["seed"] == 3 and first["settings"]["sampling"]["temperature"] == 0.8
    assert first["output_ids"] and first["output_ids"] == again["output_ids"]
    assert rounds_of(first["rounds"]) == rounds_of(again["rounds"])
    assert any(r["n_accepted"] < len(r["drafted"]) for r in first["rounds"]), "precondition: some drafts rejected"

    assert cli.main(cli_command(target, draft, seed=4)) == 0  # in this process: only the seed differs
    other = json.loads(capsys.readouterr().out)
    assert other["output_ids"] != first["output_ids"], "another seed should give another sample"


# --- the Rounds page, on the embedded target -----------------------------------------------------
def rounds_page_run(seed: int, at: AppTest | None = None):
    """Press Run on a fresh Rounds page (a new session), or change the seed of a live one."""
    if at is None:
        at = AppTest.from_file(ROUNDS_PAGE, default_timeout=300).run()
        at.selectbox(key="rounds-draft").set_value("ngram")
        at.slider(key="rounds-gamma").set_value(3)
        at.slider(key="rounds-temp").set_value(1.0)
        at.slider(key="rounds-maxnew").set_value(16)
        at.number_input(key="rounds-seed").set_value(seed)
        at.button(key="rounds-run").click().run()
    else:
        at.number_input(key="rounds-seed").set_value(seed).run()  # the page re-runs live on a change
    assert not at.exception and not at.error, [e.value for e in at.error]
    run = at.session_state["rounds-result"].spec
    assert run.settings["seed"] == seed and run.settings["sampling"]["temperature"] == 1.0
    return at, run


@pytest.mark.slow
def test_rounds_page_same_seed_same_tokens_and_rounds(one_pair):
    at, first = rounds_page_run(seed=3)
    _, again = rounds_page_run(seed=3)  # another session, same settings
    assert first.output_ids == again.output_ids and first.text == again.text
    assert rounds_of(first.rounds) == rounds_of(again.rounds)
    others = [rounds_page_run(seed, at)[1].output_ids for seed in (4, 5)]
    assert any(o != first.output_ids for o in others), "other seeds should give other samples"
