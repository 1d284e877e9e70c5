"""What rows by pair would add to the recycle table: how often the target's next token is the first (or among the
top 3) of the table's row for the last token, and of a row for the last two tokens where that pair was read before.

The evaluation prompts' greedy answers in order (as `bench` runs them), the table warm-started from the shipped file
and learning the target's top-8 after every answer token (the teacher's rows: no refused nodes), rows by pair kept
the same way (latest first, carried from answer to answer). Pair rows were built, tested and measured in 0c5bec0
(replayed and live, `python benchmarks/recycle_pairs.py --runs` at 8e9a53c) and not kept: `auto` made no more tokens a
round with them (docs/performance.md). This part needs no drafter.

Needs the answers: `python benchmarks/greedy_answers.py --split eval --max-new-tokens 128` (about 5 minutes).

    python benchmarks/recycle_pairs.py
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from greedy_answers import load_answers  # noqa: E402

from specviz.drafters.recycle_table import SHIPPED_TABLE, read_table  # noqa: E402

CATEGORIES = ("chat", "qa", "code", "summarisation", "translation", "math", "retrieval")


def guesses(answers) -> dict[str, collections.Counter]:
    _, tokens, ids, probs = read_table(SHIPPED_TABLE)
    by_token = {int(t): [int(i) for i in row if i >= 0] for t, row in zip(tokens, ids)}
    by_pair: dict[tuple[int, int], list[int]] = {}
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for answer in answers:
        text = list(answer.prompt_ids)
        for j, token in enumerate(answer.answer):
            own = by_token.get(text[-1], [])
            pair = by_pair.get((text[-2], text[-1]))
            either = pair if pair is not None else own
            c = counts[answer.category]
            c["tokens"] += 1
            c["token row, first"] += bool(own) and own[0] == token
            c["token row, top 3"] += token in own[:3]
            c["pair row where read, first"] += bool(either) and either[0] == token
            c["pair row where read, top 3"] += token in either[:3]
            c["pair read before"] += pair is not None
            row = [int(i) for i in answer.top_ids[j, :8].tolist()]
            by_token[text[-1]] = by_pair[(text[-2], text[-1])] = row
            text.append(token)
    return counts


def main() -> None:
    answers = load_answers("eval", 128)
    print(f"# {len(answers)} evaluation answers (128 tokens, greedy fp32), in order; the table warm-started from "
          f"{SHIPPED_TABLE.name}\n")
    counts = guesses(answers)
    names = [k for k in next(iter(counts.values())) if k != "tokens"]
    print("| workload | " + " | ".join(names) + " |")
    print("| --- |" + " ---: |" * len(names))
    every = sum(counts.values(), collections.Counter())
    for category, c in [(cat, counts[cat]) for cat in CATEGORIES if cat in counts] + [("all", every)]:
        print(f"| {category} | " + " | ".join(f"{c[n] / c['tokens']:.3f}" for n in names) + " |")


if __name__ == "__main__":
    main()
