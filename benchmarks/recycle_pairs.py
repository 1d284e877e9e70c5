"""What the recycle table's pair rows add: the target's next token among the table's guesses, and tokens per round
of `blend` replayed, with the table's rows by pair (the last two tokens) and with its rows by token alone.

1. Guesses along the answers: the evaluation prompts' greedy answers in order (as `bench` runs them), the table
   warm-started from the shipped file and learning the target's top-8 after every answer token (the teacher's rows:
   no refused nodes). At each answer token: is it the first (the top 3) of the token's row, and of the pair's row
   where the pair was read before (else the token's)?
2. `blend` replayed over the same answers (`lab.replay`, the teacher's rows as its verified rows, v(n) = 1 + 0.025 n),
   once with the table's pair learning turned off (so every guess comes from a token's row), then as shipped, each
   from the shipped table and corpus, carrying what each answer taught to the next.

3. With --runs, live: two `auto` drafters, one with the pair rows turned off (its table neither learns nor reads
   them), run in turn on the 14 prompts of benchmarks/eval14-prompts.jsonl, twice (`drafter_runs.in_turn`): tokens
   a round and drafting time, as the same host's drift touches both.

Needs the answers: `python benchmarks/greedy_answers.py --split eval --max-new-tokens 128` (about 5 minutes).

    python benchmarks/recycle_pairs.py --runs > benchmarks/results/recycle-pairs-CPU.txt
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from drafter_runs import in_turn, print_runs  # noqa: E402
from greedy_answers import load_answers  # noqa: E402

from specviz.config import Decoding, TreeShape  # noqa: E402
from specviz.drafters import build_drafter, suffix  # noqa: E402
from specviz.drafters.recycle_table import SHIPPED_TABLE, RecycleTable, read_table, shared_store  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.lab.replay import AnswerTeacher, replay  # noqa: E402
from specviz.models import load_model  # noqa: E402

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


def replayed(answers, target, pairs: bool) -> dict[str, list[float]]:
    settings = Decoding(gamma=6, max_new_tokens=128, tree=TreeShape(budget=8, branching=3))
    v = lambda n: 1 + 0.025 * n if n else 1.0  # noqa: E731
    shared_store.cache_clear()  # each replay starts from the shipped table and corpus, as a fresh process does
    suffix._corpus.cache_clear()
    original = RecycleTable._learn_pairs
    if not pairs:
        RecycleTable._learn_pairs = lambda self, *args: None
    try:
        totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0, 0.0])
        make = functools.partial(build_drafter, "blend", target, load_model)
        for answer in answers:
            drafter = make()
            drafter.verify_cost = v
            teacher = AnswerTeacher(answer.prompt_ids, answer.answer, answer.top_ids, answer.top_probs)
            run = replay(drafter, answer.prompt_ids, answer.answer, settings, teacher=teacher)
            total = totals[answer.category]
            total[0] += run.tokens
            total[1] += run.rounds
            total[2] += run.steps(v)
        return totals
    finally:
        RecycleTable._learn_pairs = original


def without_pairs(drafter):
    """`drafter` with its table's pair rows off: each run's table neither learns pair rows nor reads other runs'."""
    start = drafter.start

    def started(*args, **kwargs):
        start(*args, **kwargs)
        drafter.table.shared = None
        drafter.table._learn_pairs = lambda *rows: None

    drafter.start = started
    return drafter


def live(target) -> None:
    prompts = [json.loads(line)["prompt"] for line in (Path(__file__).parent / "eval14-prompts.jsonl").read_text()
               .splitlines() if line.strip()]
    settings = Decoding(gamma=6, max_new_tokens=128, tree=TreeShape(budget=8, branching=3))
    drafters = {"auto, token rows only": without_pairs(build_drafter("auto", target, load_model)),
                "auto, with pair rows": build_drafter("auto", target, load_model)}
    results = in_turn(target, drafters, prompts, settings)
    print(f"\nLive, {machine('cpu', target.model)}: `auto` on the {len(prompts)} prompts of eval14-prompts.jsonl, "
          "twice, in turn (128 tokens, γ 6, tree of 8):\n")
    print_runs("drafter", results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", action="store_true", help="also run `auto` live with and without pair rows")
    args = parser.parse_args()
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
    target = load_model("default", "cpu", "fp32")
    print("\n`blend` replayed (tree of 8, branching 3, γ 6; v(n) = 1 + 0.025 n): tokens per round, tokens per step\n")
    print("| workload | token rows only | with pair rows |")
    print("| --- | ---: | ---: |")
    runs = [replayed(answers, target, pairs) for pairs in (False, True)]
    for category in [cat for cat in CATEGORIES if cat in runs[0]] + ["all"]:
        cells = []
        for run in runs:
            parts = list(run.values()) if category == "all" else [run[category]]
            tokens, rounds, steps = (sum(p[i] for p in parts) for i in range(3))
            cells.append(f"{tokens / rounds:.3f}, {tokens / steps:.3f}")
        print(f"| {category} | " + " | ".join(cells) + " |")
    if args.runs:
        live(target)


if __name__ == "__main__":
    main()
