"""Article-length prompts from Python's own reference documentation, offline: "summarise this passage".

Each prompt is the first WORDS words of one topic of `pydoc_data.topics` (the text of Python's reference manual that
`help()` shows, shipped with every Python), with its whitespace collapsed, after one line of instruction. The first
two rows are the two long prompts the project measured first (`exceptions`, `import`; rebuilt here byte for byte);
`--more N` adds the first N other topics, in alphabetical order, that have at least WORDS words. Nothing here was
picked by how a drafter does on it. The suffix drafter's corpus holds none of this text (it is the target's own
answers); the smol heads read these topics in training (`specviz.training.texts.document_texts`).

    python benchmarks/make_long_prompts.py --more 12 --out benchmarks/long-python-docs-prompts-14.jsonl
"""

from __future__ import annotations

import argparse
import json
import pydoc_data.topics
from pathlib import Path

INSTRUCTION = "Summarise the following passage from Python's documentation in a short paragraph:\n\n"
WORDS = 700
FIRST = ("exceptions", "import")  # benchmarks/long-python-docs-prompts.jsonl: article-0 and article-1


def passage(topic: str, words: int = WORDS) -> str:
    return INSTRUCTION + " ".join(pydoc_data.topics.topics[topic].split()[:words])


def rows(more: int, words: int = WORDS) -> list[dict]:
    topics = pydoc_data.topics.topics
    others = [name for name in sorted(topics) if name not in FIRST and len(topics[name].split()) >= words]
    chosen = list(FIRST) + others[:more]
    return [{"id": f"article-{i}", "category": "long", "topic": name, "prompt": passage(name, words)}
            for i, name in enumerate(chosen)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--more", type=int, default=12, help="topics beyond the first two")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    made = rows(args.more)
    args.out.write_text("".join(json.dumps(row) + "\n" for row in made), encoding="utf-8")
    print(f"{len(made)} prompts -> {args.out}: " + ", ".join(row["topic"] for row in made))


if __name__ == "__main__":
    main()
