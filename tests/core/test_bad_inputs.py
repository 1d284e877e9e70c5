"""Issue #6, bad input: every case gets one clear message that says what is wrong and what to do.

CLI (`specviz.cli.main`): exit status 2 and one line on stderr, never a traceback.
App (the Rounds page under AppTest): one error box, the page still drawn, the earlier result kept.

Models are tiny random Llamas (tests/tiny.py) saved to folders, so the real loader reads them in
milliseconds; the damaged, empty, foreign-vocabulary, padded and BERT folders are made from them.
docs/bad-inputs.md lists every message; the case numbers below are the issue's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest
from transformers import BertConfig, BertForMaskedLM, LlamaModel

from specviz import config
from specviz.app import controls, service
from specviz.cli import main
from specviz.worker.process import Worker

from tiny import (
    FOREIGN_WORDS,
    PADDED_ROWS,
    VOCAB,
    WORDS,
    make_tokenizer,
    padded_copy,
    tiny_llama,
)
from worker_models import OOM_FLAG

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Rounds.py")
PROMPT = "w1 w2 w3 w1 w2 w3 w4"
TOO_LONG = " ".join(["w5"] * 300)  # the tiny target's context is 256 positions

pytestmark = pytest.mark.usefixtures("one_thread")


# --- tiny model folders ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    """name -> folder: a tiny target, drafts for it, and folders that must be refused."""
    root = tmp_path_factory.mktemp("models")
    words = make_tokenizer(WORDS)

    def save(name: str, model, tokenizer) -> Path:
        folder = root / name
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return folder

    target = tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=4, heads=4, kv_heads=2)
    made = {
        "target": save("target", target, words),
        # Embedding and lm_head padded to 128 rows for the same 96-token vocabulary: must work, losslessly.
        "padded": save("padded", padded_copy(target, layers=2, rows=PADDED_ROWS), words),
        # Same sizes, other strings: must be refused.
        "foreign": save("foreign", tiny_llama(seed=1, vocab_size=VOCAB, hidden=32, layers=2, heads=2, kv_heads=1),
                        make_tokenizer(FOREIGN_WORDS)),
        "bert": save("bert", BertForMaskedLM(BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                                                        num_attention_heads=2, intermediate_size=64)), words),
    }
    made["empty"] = root / "empty"
    made["empty"].mkdir()
    made["bad-config"] = root / "bad-config"
    shutil.copytree(made["target"], made["bad-config"])
    (made["bad-config"] / "config.json").write_text("{garbage")
    made["truncated"] = root / "truncated"
    shutil.copytree(made["target"], made["truncated"])
    weights = made["truncated"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    made["missing"] = root / "no-such-folder"
    return {name: str(path) for name, path in made.items()}


@pytest.fixture
def offline(monkeypatch):
    """The hub is unreachable here anyway; say so, so the case does not depend on the network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


# --- CLI -------------------------------------------------------------------------------------
def cli_error(capsys, argv: list[str]) -> str:
    """Run the CLI and return its one stderr line, after checking exit 2 and no traceback."""
    try:
        code = main(argv)
    except SystemExit as exit_info:  # argparse refusals
        code = exit_info.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("specviz: error: ")
    return err


def run_args(*extra: str, prompt: str = PROMPT) -> list[str]:
    return ["run", "--prompt", prompt, "--max-new-tokens", "8", *extra]


# (case id, argv, words the message must hold). Settings are refused before any model is loaded,
# so these use the default target without touching it.
SETTINGS_CASES = [
    ("01-empty-prompt", run_args(prompt=""), ["the prompt is empty", "give it some text"]),
    ("02-whitespace-prompt", run_args(prompt="  \n\t "), ["the prompt is empty"]),
    ("04-gamma-0", run_args("--gamma", "0"), ["gamma (draft length) must be between 1 and 64, got 0"]),
    ("05-gamma-negative", run_args("--gamma", "-3"), ["gamma (draft length) must be between 1 and 64, got -3"]),
    ("06-gamma-10000", run_args("--gamma", "10000"), ["gamma (draft length) must be between 1 and 64, got 10000"]),
    ("07-max-new-tokens-0", run_args("--max-new-tokens", "0"), ["max new tokens must be between 1 and 4096, got 0"]),
    (
        "08-max-new-tokens-huge",
        run_args("--max-new-tokens", str(10**7)),
        ["max new tokens must be between 1 and 4096, got 10000000"],
    ),
    (
        "09-temperature-negative",
        run_args("--temperature", "-0.5"),
        ["temperature must be between 0 (greedy) and 100, got -0.5"],
    ),
    (
        "10-temperature-over-100",
        run_args("--temperature", "1000"),
        ["temperature must be between 0 (greedy) and 100, got 1000"],
    ),
    ("10-temperature-nan", run_args("--temperature", "nan"), ["temperature must be a finite number"]),
    (
        "12-top-p-0",
        run_args("--temperature", "1", "--top-p", "0"),
        ["top-p must be above 0 and at most 1 (1 = off), got 0"],
    ),
    ("12-top-p-negative", run_args("--top-p", "-0.2"), ["top-p must be above 0 and at most 1", "got -0.2"]),
    ("13-top-p-over-1", run_args("--top-p", "1.5"), ["top-p must be above 0 and at most 1", "got 1.5"]),
    (
        "14-tolerance-negative",
        run_args("--verify", "relaxed", "--tolerance", "-1"),
        ["tolerance τ must be between 0 and 50 (nats), got -1"],
    ),
    (
        "14-tolerance-over-50",
        run_args("--verify", "relaxed", "--tolerance", "51"),
        ["tolerance τ must be between 0 and 50 (nats), got 51"],
    ),
    (
        "15-lenience-0",
        run_args("--verify", "relaxed", "--lenience", "0"),
        ["lenience must be above 0 and at most 1 (1 = exact), got 0"],
    ),
    (
        "15-lenience-over-1",
        run_args("--verify", "relaxed", "--lenience", "1.5"),
        ["lenience must be above 0 and at most 1 (1 = exact), got 1.5"],
    ),
    ("31-unknown-device", run_args("--device", "tpu"), ["unknown device 'tpu'; use auto, cpu, cuda or mps"]),
    ("31-unknown-dtype", run_args("--dtype", "fp8"), ["unknown dtype 'fp8'; use auto, fp32, bf16 or fp16"]),
    ("32-repeats-0", run_args("--repeats", "0"),
     ["argument --pairs/--repeats: pairs must be a whole number from 1 to 9, got '0'"]),
    (
        "32-repeats-not-a-number",
        run_args("--repeats", "two"),
        ["argument --pairs/--repeats: pairs must be a whole number from 1 to 9, got 'two'"],
    ),
    ("32-pairs-too-many", run_args("--pairs", "10"),
     ["argument --pairs/--repeats: pairs must be a whole number from 1 to 9, got '10'"]),
]


@pytest.mark.parametrize("argv, words", [c[1:] for c in SETTINGS_CASES], ids=[c[0] for c in SETTINGS_CASES])
def test_cli_refuses_bad_settings(capsys, argv, words):
    err = cli_error(capsys, argv)
    for word in words:
        assert word in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_cli_31_cuda_without_a_gpu(capsys):
    assert "no CUDA GPU is available; use --device cpu" in cli_error(capsys, run_args("--device", "cuda"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_cli_31_fp16_on_the_cpu(capsys):
    err = cli_error(capsys, run_args("--dtype", "fp16"))
    assert "fp16 is for GPUs; on the CPU SpecViz runs fp32 (use --dtype auto or fp32)" in err


# Model cases: a tiny target (or draft) from a folder. {name} is replaced by that folder.
MODEL_CASES = [
    (
        "03-prompt-longer-than-context",
        ["--target", "{target}"],
        TOO_LONG,
        ["the prompt is 300 tokens but this run has room for 243", "shorten it or lower max new tokens"],
    ),
    (
        "16-unknown-hub-id-offline",
        ["--target", "nobody/no-such-model-xyz"],
        PROMPT,
        [
            "'nobody/no-such-model-xyz' is not a local folder or a built-in name",
            "cannot be reached (offline)",
            "use 'default', a shipped draft, or a local model folder",
        ],
    ),
    (
        "16-unknown-draft-offline",
        ["--target", "{target}", "--draft", "nobody/no-such-draft"],
        PROMPT,
        ["'nobody/no-such-draft' is not a local folder", "cannot be reached (offline)"],
    ),
    ("17-target-folder-missing", ["--target", "{missing}"], PROMPT, ["does not exist; check the path"]),
    (
        "17-draft-folder-missing",
        ["--target", "{target}", "--draft", "{missing}"],
        PROMPT,
        ["does not exist; check the path"],
    ),
    ("18-folder-empty", ["--target", "{empty}"], PROMPT, ["has no config.json, so it holds no saved model"]),
    (
        "19-config-json-garbage",
        ["--target", "{bad-config}"],
        PROMPT,
        ["could not load", "not a valid JSON file", "damaged or incomplete: save or download them again"],
    ),
    (
        "19-safetensors-truncated",
        ["--target", "{target}", "--draft", "{truncated}"],
        PROMPT,
        ["could not load", "incomplete metadata", "damaged or incomplete: save or download them again"],
    ),
    (
        "20-draft-with-another-vocabulary",
        ["--target", "{target}", "--draft", "{foreign}"],
        PROMPT,
        ["cannot draft for", "their tokenizers differ", "pick a draft of the target's model family, or ngram"],
    ),
    (
        "22-bert-as-target",
        ["--target", "{bert}"],
        PROMPT,
        ["is a BertForMaskedLM, not a causal language model", "pick a decoder-only model"],
    ),
    (
        "22-bert-as-draft",
        ["--target", "{target}", "--draft", "{bert}"],
        PROMPT,
        ["is a BertForMaskedLM, not a causal language model"],
    ),
    (
        "30-ngram-0",
        ["--target", "{target}", "--draft", "ngram:0"],
        PROMPT,
        ["ngram:N (longest n-gram matched) must be a positive whole number, got '0'"],
    ),
    (
        "30-layerskip-999",
        ["--target", "{target}", "--draft", "layerskip:999"],
        PROMPT,
        ["layerskip:999 keeps too many layers: this target has 4, so use layerskip:1 … layerskip:3"],
    ),
    (
        "30-layerskip-abc",
        ["--target", "{target}", "--draft", "layerskip:abc"],
        PROMPT,
        ["layerskip:K (number of target layers to keep) must be a positive whole number, got 'abc'"],
    ),
]


@pytest.mark.parametrize("options, prompt, words", [c[1:] for c in MODEL_CASES], ids=[c[0] for c in MODEL_CASES])
def test_cli_refuses_bad_models(capsys, folders, offline, options, prompt, words):
    err = cli_error(capsys, run_args(*[o.format(**folders) for o in options], "--no-baseline", prompt=prompt))
    for word in words:
        assert word in err


def test_cli_03_max_new_tokens_past_the_context(capsys, folders):
    err = cli_error(capsys, ["run", "--target", folders["target"], "--prompt", PROMPT, "--max-new-tokens", "300"])
    assert "leaves no room for the prompt; lower max new tokens" in err


def run_json(capsys, *options: str) -> dict:
    assert main(["run", "--prompt", PROMPT, "--max-new-tokens", "12", "--json", *options]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_11_temperature_0_is_greedy_and_works(capsys, folders):
    record = run_json(capsys, "--target", folders["target"], "--temperature", "0")
    assert record["summary"]["identical"] and record["summary"]["new_tokens"] > 0


def test_cli_10_temperature_100_is_allowed(capsys, folders):
    record = run_json(capsys, "--target", folders["target"], "--temperature", "100", "--top-p", "0.9")
    assert record["spec"]["settings"]["sampling"]["temperature"] == 100 and record["summary"]["new_tokens"] > 0


def test_cli_21_draft_with_padded_embeddings_works_losslessly(capsys, folders):
    record = run_json(capsys, "--target", folders["target"], "--draft", folders["padded"], "--gamma", "3")
    assert record["summary"]["identical"]  # greedy: the target's own output, token for token
    assert record["summary"]["accepted"] > 0  # the draft really drafted
    assert max(record["spec"]["output_ids"]) < VOCAB  # no padding id ever came out


def write(tmp_path, text: str) -> str:
    path = tmp_path / "prompts.jsonl"
    path.write_text(text, encoding="utf-8")
    return str(path)


PROMPTS_FILE_CASES = [
    ("23-prompts-file-missing", None, ["does not exist; check the path"]),
    ("24-prompts-file-empty", "\n\n", ["has no prompts; write one JSON object per line with id and prompt"]),
    ("25-prompts-file-not-json", "id,prompt\n1,hello\n", [":1 is not valid JSON; write one JSON object per line"]),
    ("25-prompts-file-json-array", '["a", "b"]\n', [":1 is not a JSON object; write one JSON object per line"]),
    ("26-prompts-line-lacks-prompt", '{"id": "a", "text": "hi"}\n', [":1 lacks prompt; each line needs id and prompt"]),
    ("26-prompts-line-lacks-id", '{"id": "a", "prompt": "hi"}\n{"prompt": "hi"}\n', [":2 lacks id; each line needs"]),
    ("26-prompts-line-empty-prompt", '{"id": "a", "prompt": "  "}\n', [":1 has an empty prompt; give it some text"]),
]


@pytest.mark.parametrize("text, words", [c[1:] for c in PROMPTS_FILE_CASES], ids=[c[0] for c in PROMPTS_FILE_CASES])
def test_cli_refuses_bad_prompts_files(capsys, tmp_path, text, words):
    prompts = str(tmp_path / "missing.jsonl") if text is None else write(tmp_path, text)
    err = cli_error(capsys, ["bench", "--draft", "ngram", "--prompts", prompts, "--out", str(tmp_path / "out.jsonl")])
    for word in words:
        assert word in err
    assert not (tmp_path / "out.jsonl").exists()  # refused before any model was loaded or file written


def out_of_memory(*args, **kwargs):
    """Stands in for the target's forward on a GPU that is full."""
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_cli_29_out_of_memory(capsys, folders, monkeypatch):
    monkeypatch.setattr(LlamaModel, "forward", out_of_memory)  # every target forward runs the base model
    err = cli_error(capsys, run_args("--target", folders["target"]))
    assert err.endswith(
        "the GPU ran out of memory; pick a smaller target or draft, lower max new tokens, "
        "load in fp16 (--dtype fp16), or run on the CPU (--device cpu)"
    )


# --- app: the Rounds page --------------------------------------------------------------------
@pytest.fixture(scope="module")
def oom_flag(tmp_path_factory) -> Path:
    """While this file exists, the worker's target runs out of memory (tests/worker_models.py)."""
    return tmp_path_factory.mktemp("oom") / "full"


@pytest.fixture(scope="module")
def app_worker(folders, oom_flag):
    """The measurement worker of this module's pages: `default` is the tiny target folder; offline, like the app."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv(OOM_FLAG, str(oom_flag))
        worker = Worker(loader="worker_models:load_folder", aliases={"default": folders["target"]})
        worker.start()  # it reads the environment as it starts
    yield worker
    worker.stop()
    service.service.clear()  # later modules get the app's own service again


@pytest.fixture
def page(folders, monkeypatch, offline, app_worker) -> AppTest:
    """The Rounds page on the tiny target, after one good run (whose result every case checks is kept).

    `default` loads the tiny target folder; the pickers also offer the bad folders, as if typed in.
    """
    monkeypatch.setattr(service, "new_service", lambda: service.RunService(app_worker))
    service.service.clear()
    monkeypatch.setattr(
        controls,
        "target_options",
        lambda: [
            "default",
            "nobody/no-such-model-xyz",
            folders["missing"],
            folders["empty"],
            folders["bad-config"],
            folders["bert"],
        ],
    )
    monkeypatch.setattr(
        controls,
        "draft_options",
        lambda: [
            "ngram",
            folders["padded"],
            folders["foreign"],
            folders["truncated"],
            folders["bert"],
            "layerskip:4",
            "ngram:0",
        ],
    )
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    prompt_box(at).set_value(PROMPT)
    at.slider(key="rounds-maxnew").set_value(16)
    at.button(key="rounds-run").click().run()
    assert not at.exception and not at.error
    assert at.session_state["rounds-result"].identical
    return at


def prompt_box(at: AppTest):
    return at.text_area(key=next(t.key for t in at.text_area))


def assert_refused(at: AppTest, kept, *words: str) -> None:
    """One error box with the words; no exception; the earlier result still stored and shown."""
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert errors[0].startswith("Could not ")
    for word in words:
        assert word in errors[0]
    assert at.session_state["rounds-result"] is kept
    assert {m.label for m in at.metric} >= {"α", "speedup"}
    assert not any("recorded by the project" in i.value for i in at.info)  # not fallen back to the demo


APP_PROMPT_CASES = [
    ("01-empty-prompt", "", ["the prompt is empty"]),
    ("02-whitespace-prompt", "   \n  ", ["the prompt is empty"]),
    (
        "03-prompt-longer-than-context",
        TOO_LONG,
        ["the prompt is 300 tokens but this run has room for", "shorten it or lower max new tokens"],
    ),
]


@pytest.mark.parametrize("text, words", [c[1:] for c in APP_PROMPT_CASES], ids=[c[0] for c in APP_PROMPT_CASES])
def test_app_refuses_bad_prompts_and_keeps_the_result(page, text, words):
    kept = page.session_state["rounds-result"]
    prompt_box(page).set_value(text).run()
    assert_refused(page, kept, *words)


def test_app_03_prompt_too_long_names_the_room_of_the_run(page):
    prompt_box(page).set_value(TOO_LONG).run()
    assert "room for 235" in page.error[0].value  # 256 positions - 16 new tokens - γ 4 - 1


APP_MODEL_CASES = [
    ("16-unknown-hub-id-offline", "rounds-target", "nobody/no-such-model-xyz", ["cannot be reached (offline)"]),
    ("17-folder-missing", "rounds-target", "{missing}", ["does not exist; check the path"]),
    ("18-folder-empty", "rounds-target", "{empty}", ["has no config.json"]),
    (
        "19-config-json-garbage",
        "rounds-target",
        "{bad-config}",
        ["not a valid JSON file", "save or download them again"],
    ),
    ("19-safetensors-truncated", "rounds-draft", "{truncated}", ["incomplete metadata", "save or download them again"]),
    ("20-draft-with-another-vocabulary", "rounds-draft", "{foreign}", ["their tokenizers differ"]),
    ("22-bert-as-target", "rounds-target", "{bert}", ["is a BertForMaskedLM, not a causal language model"]),
    ("22-bert-as-draft", "rounds-draft", "{bert}", ["is a BertForMaskedLM, not a causal language model"]),
    ("30-layerskip-4-of-4", "rounds-draft", "layerskip:4", ["use layerskip:1 … layerskip:3"]),
    ("30-ngram-0", "rounds-draft", "ngram:0", ["must be a positive whole number, got '0'"]),
]


@pytest.mark.parametrize("picker, choice, words", [c[1:] for c in APP_MODEL_CASES], ids=[c[0] for c in APP_MODEL_CASES])
def test_app_refuses_bad_models_and_keeps_the_result(page, folders, picker, choice, words):
    kept = page.session_state["rounds-result"]
    page.selectbox(key=picker).set_value(choice.format(**folders)).run()
    assert_refused(page, kept, *words)


def test_app_21_draft_with_padded_embeddings_works_losslessly(page, folders):
    page.selectbox(key="rounds-draft").set_value(folders["padded"]).run()
    assert not page.exception and not page.error
    result = page.session_state["rounds-result"]
    assert result.spec.draft == folders["padded"] and result.identical and result.spec.accepted > 0
    assert any("Identical to the target alone" in s.value for s in page.success)


def test_app_29_out_of_memory_then_keeps_working(page, oom_flag):
    kept = page.session_state["rounds-result"]
    oom_flag.touch()  # the worker's GPU is full
    try:
        page.slider(key="rounds-gamma").set_value(2).run()
        assert_refused(
            page,
            kept,
            "the GPU ran out of memory; pick a smaller target or draft, lower max new tokens, "
            "or run SpecViz on a machine with more GPU memory",
        )
    finally:
        oom_flag.unlink()
    page.slider(key="rounds-gamma").set_value(3).run()  # memory back: the next run works
    assert not page.exception and not page.error
    assert page.session_state["rounds-result"] is not kept and page.session_state["rounds-result"].identical


def upload(at: AppTest, data: bytes) -> None:
    at.file_uploader(key="rounds-upload").set_value(("run.json", data, "application/json")).run()


EXPORT_CASES = [
    (
        "27-export-truncated",
        lambda text: text[: len(text) // 2],
        ["the file is not valid JSON", "export the run again"],
    ),
    ("27-export-empty", lambda text: "", ["the file is not valid JSON"]),
    ("27-export-not-an-export", lambda text: "[1, 2, 3]", ["not a SpecViz export; load a file saved by"]),
    (
        "28-export-other-schema",
        lambda text: text.replace("specviz.run/1", "specviz.run/0"),
        [
            "not a SpecViz run of this version (expected schema 'specviz.run/1', found 'specviz.run/0')",
            "export it again with this version of SpecViz",
        ],
    ),
]


@pytest.mark.parametrize("damage, words", [c[1:] for c in EXPORT_CASES], ids=[c[0] for c in EXPORT_CASES])
def test_app_refuses_damaged_exports_and_keeps_the_result(page, damage, words):
    kept = page.session_state["rounds-result"]
    exported = json.dumps(kept.to_dict())
    upload(page, damage(exported).encode())
    assert_refused(page, kept, "Could not load that file", *words)


def test_app_loads_a_good_export(page):
    """The counterpart of cases 27/28: the same export, undamaged, replays."""
    kept = page.session_state["rounds-result"]
    upload(page, json.dumps(kept.to_dict()).encode())
    assert not page.exception and not page.error
    assert page.session_state["rounds-result"].spec.output_ids == kept.spec.output_ids


def test_app_settings_cannot_leave_the_config_ranges():
    """Cases 4-15 in the app: the sliders only offer values the config accepts, so nothing can be typed wrong."""
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    bounds = {s.key: (s.min, s.max) for s in at.slider}
    assert config.MAX_GAMMA >= bounds["rounds-gamma"][1] and bounds["rounds-gamma"][0] >= 1
    assert 1 <= bounds["rounds-maxnew"][0] and bounds["rounds-maxnew"][1] <= config.MAX_NEW_TOKENS
    assert 0 <= bounds["rounds-temp"][0] and bounds["rounds-temp"][1] <= config.MAX_TEMPERATURE
    assert 0 < bounds["rounds-topp"][0] and bounds["rounds-topp"][1] <= 1
    at.radio(key="rounds-mode").set_value("relaxed").run()
    assert 0 <= at.slider(key="rounds-tol").min and at.slider(key="rounds-tol").max <= 50
    at.slider(key="rounds-temp").set_value(0.8).run()
    assert 0 < at.slider(key="rounds-len").min and at.slider(key="rounds-len").max <= 1
    assert not at.exception and not at.error
