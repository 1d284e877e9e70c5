"""Step 2: more text for the target to read, beyond its answers to the TRAIN prompts.

A draft head learns from the target's hidden state at every position it reads, and any text the
target reads yields its own features and next-token p. Reading (one teacher-forced forward) is
tens of times faster than writing (one forward per token), so most positions come from text the
target reads; its own answers keep the data close to what the lab decodes. Two sources here:

- prompts the target writes for itself, a few TRAIN prompts of one category shown as examples
  (never an EVAL prompt; a written prompt equal to one is dropped), then answered like the others;
- documents that ship with Python on every machine: the language reference topics (prose) and
  standard-library modules (code), each chunk placed as an assistant answer in the chat template.
"""

from __future__ import annotations

import random
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from ..models import LoadedModel
from ..prompts import encode
from . import store
from .answers import eval_prompts, target_answers, train_prompts

# Standard-library modules read as code: plain, well-commented Python of several styles.
CODE_MODULES = ("textwrap", "fractions", "statistics", "heapq", "bisect", "shlex", "string", "difflib", "calendar",
                "csv", "functools", "dataclasses", "json/encoder", "json/decoder", "pprint", "argparse", "random",
                "queue", "graphlib", "colorsys", "fnmatch", "glob", "zipapp", "tokenize", "netrc", "ipaddress")


ATTEMPTS = "attempts"  # the written-prompts cache's record of prompts tried per category, beside the categories


@dataclass
class Text:
    """A token sequence for the target to read; positions from `answer_from` on are trained on."""

    source: str
    ids: list[int]
    answer_from: int


def written_prompts(target: LoadedModel, per_category: int, cache_path: Path, seed: int = 0, fast: bool = True,
                    progress: bool = True) -> list[dict]:
    """New requests the target writes, `per_category` of each category, cached as JSON (resumable by category)."""
    from tqdm import tqdm

    cached: dict[str, list[dict]] = store.load_json(cache_path, {})
    forbidden = {p["prompt"].strip().lower() for p in eval_prompts()}
    train = train_prompts()
    categories = sorted({p["category"] for p in train})
    bar = tqdm(total=per_category * len(categories), desc="written prompts", unit="prompt", file=sys.stderr,
               disable=not progress)
    for category in categories:
        mine = [p for p in train if p["category"] == category]
        rows = cached.get(category, [])[:per_category]
        bar.update(len(rows))
        # Seeded by what is cached, so a run that resumes draws new prompts rather than the ones it already has.
        rng = random.Random(f"{seed}-{category}-{len(rows)}")
        generator = torch.Generator(device=target.device).manual_seed(seed + len(rows))
        seen = {r["prompt"].lower() for r in rows} | {p["prompt"].strip().lower() for p in mine} | forbidden
        # Attempts are kept with the prompts, so a category whose attempts ran out (most of what the target writes
        # for it is refused, such as summaries with paragraphs) is not tried again by every later run.
        tried = cached.setdefault(ATTEMPTS, {})
        attempts = tried.get(category, 0)
        while len(rows) < per_category and attempts < 4 * per_category:
            batch = min(32, 2 * (per_category - len(rows)))
            asks = [_ask(rng.sample(mine, 3)) for _ in range(batch)]
            ids = [encode(target.tokenizer, a) for a in asks]
            outs = target_answers(target, ids, [False] * batch, 64, 0.9, 1, generator, fast=fast)
            attempts += batch
            for answer, _, _ in outs:
                text = _clean(target.tokenizer.decode(answer.tolist(), skip_special_tokens=True))
                if text and text.lower() not in seen and len(rows) < per_category:
                    seen.add(text.lower())
                    rows.append({"id": f"written-{category}-{len(rows):04d}", "category": category, "prompt": text})
                    bar.update()
            cached[category] = rows
            tried[category] = attempts
            store.save_json(cache_path, cached)
    bar.close()
    return [r for category in categories for r in cached.get(category, [])[:per_category]]


def _ask(examples: list[dict]) -> str:
    shown = "\n".join(f"{i + 1}. {e['prompt']}" for i, e in enumerate(examples))
    return (f"Here are {len(examples)} requests that people sent to an AI assistant:\n{shown}\n\n"
            "Write one new request of the same kind, on a different subject. Reply with the request only.")


def _clean(text: str) -> str:
    text = text.strip().strip('"').strip()
    for prefix in ("Request:", "New request:", "4."):
        if text.startswith(prefix):
            text = text[len(prefix):].strip()
    return text if 15 <= len(text) <= 600 and "\n\n" not in text else ""


def document_texts(tokenizer, max_tokens: int, chunk_tokens: int = 256) -> list[Text]:
    """Python's own documents as chat answers: reference topics (prose) and standard-library code, in chunks."""
    import pydoc_data.topics

    docs = [(f"the Python topic '{name}'", body) for name, body in sorted(pydoc_data.topics.topics.items())]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for module in CODE_MODULES:
        path = stdlib / f"{module}.py"
        if path.is_file():
            docs.append((f"the code of Python's {module.replace('/', '.')} module", path.read_text(encoding="utf-8")))
    # Interleave prose and code so that any prefix of the list (a token budget) has both.
    prose, code = [d for d in docs if "topic" in d[0]], [d for d in docs if "topic" not in d[0]]
    order = [d for pair in zip(prose, code) for d in pair] + prose[len(code):] + code[len(prose):]
    texts, total = [], 0
    for title, body in order:
        ids = tokenizer.encode(body, add_special_tokens=False)
        for start in range(0, len(ids), chunk_tokens):
            piece = ids[start : start + chunk_tokens]
            if len(piece) < 32:
                continue
            prompt = encode(tokenizer, f"Show me a passage from {title}.")
            texts.append(Text("documents", prompt + piece, len(prompt)))
            total += len(piece)
            if total >= max_tokens:
                return texts
    return texts


def answer_texts(sequences, source: str) -> list[Text]:
    """The target's answers (answers.Sequence) as texts: the prompt is context, the answer is trained on."""
    return [Text(source, list(s.prompt_ids) + s.answer.tolist(), len(s.prompt_ids)) for s in sequences]

