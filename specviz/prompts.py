"""Prompts: wrapping a user message in the chat template, and the project's prompt sets.

assets/prompts/<category>.jsonl holds prompts written for SpecViz, one JSON object per line with
id, category, split ("train" for distillation, "eval" never seen by it) and prompt.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import SpecVizError

PROMPT_DIR = Path(__file__).resolve().parent.parent / "assets" / "prompts"
CATEGORIES = ("chat", "code", "summarisation", "translation", "qa", "math", "retrieval")


def check_prompt(prompt) -> str:
    """The prompt, refused when empty; the CLI and the app call this before loading any model."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise SpecVizError("the prompt is empty; give it some text (a question, or text to continue)")
    return prompt


def encode(tokenizer, prompt: str, chat: bool = True, max_tokens: int | None = None) -> list[int]:
    """Token ids of a prompt: the user message in the tokenizer's chat template when it has one.

    A prompt longer than `max_tokens` is refused, never cut: a cut prompt would silently change
    what the target is asked (the CLI and the app both go through here).
    """
    check_prompt(prompt)
    if max_tokens is not None and max_tokens < 1:
        raise SpecVizError(
            "max new tokens (plus γ) fills the target's whole context and leaves no room for the prompt; "
            "lower max new tokens"
        )
    if chat and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer(prompt)["input_ids"]
    if max_tokens is not None and len(ids) > max_tokens:
        raise SpecVizError(
            f"the prompt is {len(ids)} tokens but this run has room for {max_tokens} "
            "(the target's context minus max new tokens and γ); shorten it or lower max new tokens"
        )
    return ids


def load_prompt_set(category: str | None = None, split: str | None = None) -> list[dict]:
    """The project's prompts, optionally of one category and one split."""
    names = [category] if category else list(CATEGORIES)
    rows = []
    for name in names:
        if name not in CATEGORIES:
            raise SpecVizError(f"unknown prompt category {name!r}; choose from {', '.join(CATEGORIES)}")
        rows += read_jsonl(PROMPT_DIR / f"{name}.jsonl")
    return [r for r in rows if split is None or r.get("split") == split]


def first_per_category(rows: list[dict], n: int) -> list[dict]:
    """The first n rows of each category, in their order."""
    taken: dict[str | None, int] = {}
    kept = []
    for r in rows:
        category = r.get("category")
        if taken.get(category, 0) < n:
            taken[category] = taken.get(category, 0) + 1
            kept.append(r)
    return kept


def read_jsonl(path: str | Path, required: tuple[str, ...] = ("id", "prompt")) -> list[dict]:
    """Rows of a JSONL prompts file, each checked for the required keys."""
    path = Path(path)
    if not path.is_file():
        raise SpecVizError(f"prompts file {path} does not exist; check the path (a JSONL file, one object per line)")
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise SpecVizError(f"prompts file {path} is not UTF-8 text; save it as UTF-8") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise SpecVizError(
                f"{path}:{number} is not valid JSON; write one JSON object per line with id and prompt"
            ) from None
        if not isinstance(row, dict):
            raise SpecVizError(
                f"{path}:{number} is not a JSON object; write one JSON object per line with id and prompt"
            )
        missing = [k for k in required if k not in row]
        if missing:
            raise SpecVizError(f"{path}:{number} lacks {', '.join(missing)}; each line needs id and prompt")
        if not isinstance(row["prompt"], str) or not row["prompt"].strip():
            raise SpecVizError(f"{path}:{number} has an empty prompt; give it some text or remove the line")
        rows.append(row)
    if not rows:
        raise SpecVizError(f"prompts file {path} has no prompts; write one JSON object per line with id and prompt")
    return rows
