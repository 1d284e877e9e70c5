"""Bad command lines exit 2 with one clear line, never a traceback (no model is loaded)."""

import json

import pytest

from specviz.cli import main


def _error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        code = main(argv)
        raise SystemExit(code)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    return err


def test_unknown_option(capsys):
    assert "unrecognized" in _error(capsys, ["run", "--prompt", "x", "--bogus"])


def test_gamma_zero(capsys):
    assert "gamma" in _error(capsys, ["run", "--prompt", "hi", "--gamma", "0"])


def test_top_p_out_of_range(capsys):
    assert "top-p" in _error(capsys, ["run", "--prompt", "hi", "--top-p", "1.5"])


def test_lenience_out_of_range(capsys):
    assert "lenience" in _error(capsys, ["run", "--prompt", "hi", "--verify", "relaxed", "--lenience", "0"])


def test_missing_prompts_file(capsys, tmp_path):
    assert "does not exist" in _error(capsys, ["bench", "--draft", "ngram", "--prompts", str(tmp_path / "none.jsonl"),
                                               "--out", str(tmp_path / "o.jsonl")])


def test_prompts_file_not_json(capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert "not valid JSON" in _error(
        capsys, ["bench", "--draft", "ngram", "--prompts", str(bad), "--out", str(tmp_path / "o")]
    )


def test_prompts_file_lacks_keys(capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": 1, "text": "x"}) + "\n")
    assert "lacks prompt" in _error(
        capsys, ["bench", "--draft", "ngram", "--prompts", str(bad), "--out", str(tmp_path / "o")]
    )


def test_empty_prompts_file(capsys, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert "no prompts" in _error(
        capsys, ["bench", "--draft", "ngram", "--prompts", str(empty), "--out", str(tmp_path / "o")]
    )


def test_missing_local_model_folder(capsys, tmp_path):
    assert "does not exist" in _error(capsys, ["run", "--target", str(tmp_path / "nope"), "--prompt", "hi"])


def test_folder_without_config(capsys, tmp_path):
    assert "config.json" in _error(capsys, ["run", "--target", str(tmp_path), "--prompt", "hi"])


def test_tree_budget_out_of_range(capsys):
    assert "tree budget" in _error(capsys, ["run", "--prompt", "hi", "--tree-budget", "999"])


def test_tree_branching_zero(capsys):
    assert "branching" in _error(capsys, ["run", "--prompt", "hi", "--tree-budget", "4", "--tree-branching", "0"])


def test_tree_vs_chain_needs_a_tree(capsys, tmp_path):
    assert "--tree-budget" in _error(
        capsys,
        ["bench", "--draft", "ngram", "--prompts", "eval", "--tree-vs-chain", "--out", str(tmp_path / "o.jsonl")],
    )


def test_tree_with_relaxed_sampling_is_refused(capsys):
    assert "exactly" in _error(
        capsys,
        [
            "run",
            "--prompt",
            "hi",
            "--tree-budget",
            "4",
            "--temperature",
            "1",
            "--verify",
            "relaxed",
            "--lenience",
            "0.5",
        ],
    )
