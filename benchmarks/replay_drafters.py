"""Tokens per round of the token-only drafters, replayed from the target's greedy answers (no model runs).

In greedy decoding the output is the target's own answer whatever is drafted, so each round of a
drafter that reads only tokens can be replayed from that answer (specviz.lab.replay). This compares
the n-gram drafter and the suffix drafter over several corpora, as a chain and as a tree, by
workload: tokens per round, and tokens per target step with each round priced by a measured v(n)
(`--verify-cost`, a file written by `python -m specviz verify-cost`; the suffix drafter cuts its
drafts by the same v(n), as it does by the v(n) it times in a real run):

- TRAIN prompts: the greedy answers of the head's data (artifacts/heads). A prompt's own answers
  never serve it: the corpus there is built in folds that leave the prompt's fold out.
- EVAL prompts: the target's greedy fp32 answers (made and cached by specviz.training.agreement);
  the corpus holds every answer of the data, none of them to an EVAL prompt.

Settings are chosen on TRAIN; EVAL is the check. The corpora stay fixed here (a server's corpus also
learns from every run it completes, which `bench` includes and this leaves out). Run after
`scripts/make_suffix_corpus.py`:

    python -m specviz verify-cost --max-nodes 16 --context 128,384 --out artifacts/verify-cost.json
    python benchmarks/replay_drafters.py --samples 3 --written 70 --gamma 6 --max-new-tokens 128 \
        --verify-cost artifacts/verify-cost.json
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.config import Decoding, TreeShape  # noqa: E402
from specviz.drafters.ngram import NgramDrafter  # noqa: E402
from specviz.drafters.suffix import CORPUS_DEPTH, SHIPPED_CORPUS, SuffixDrafter, read_corpus, template_tokens  # noqa: E402
from specviz.drafters.suffix_index import SuffixCorpus  # noqa: E402
from specviz.lab.replay import Replay, replay  # noqa: E402
from specviz.lab.verify_cost import VERIFY_COST_FILE, cost_curve, load_verify_cost  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.training.agreement import eval_answers  # noqa: E402
from specviz.training.train_head import HeadConfig, own_answers  # noqa: E402

FOLDS = 4


def corpus_of(documents: list[list[int]]) -> SuffixCorpus:
    corpus = SuffixCorpus(max_tokens=10**9, max_depth=CORPUS_DEPTH)
    for document in documents:
        corpus.add(document)
    corpus.refresh()
    return corpus


def train_folds(answers, own) -> tuple[list, list, dict]:
    """Every answer of the data (TRAIN prompts' and written prompts'), the TRAIN prompts' greedy answers, and each
    TRAIN prompt's fold: a prompt is replayed against a corpus built without its fold."""
    sequences = answers.sequences + (own.sequences if own else [])
    train = [s for s in answers.sequences if s.sample == 0]
    fold_of = {p: i % FOLDS for i, p in enumerate(sorted({s.prompt_id for s in train}))}
    return sequences, train, fold_of


def table(title: str, results: dict[str, dict[str, Replay]], v) -> str:
    """Per workload: tokens per target step under v(n) (tokens per round after the slash)."""
    workloads = sorted({w for by in results.values() for w in by})
    lines = [
        f"**{title}** (tokens per target step under v(n) / tokens per round; α at positions 1 · 2 · 3 over all)",
        "",
        "| drafter | " + " | ".join(workloads) + " | all | α 1 · 2 · 3 |",
        "| --- | " + " | ".join("---:" for _ in workloads) + " | ---: | --- |",
    ]
    for name, by in results.items():
        total = Replay()
        for r in by.values():
            total = total.add(r)
        alphas = " · ".join(f"{total.alpha_at(i):.2f}" for i in range(3))
        lines.append(
            f"| {name} | "
            + " | ".join(f"{by[w].tokens_per_step(v):.2f} / {by[w].tokens_per_round:.2f}" for w in workloads)
            + f" | **{total.tokens_per_step(v):.2f}** / {total.tokens_per_round:.2f} | {alphas} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--written", type=int, default=70)
    parser.add_argument("--answer-tokens", type=int, default=256, help="max new tokens of the data's answers")
    parser.add_argument("--data-minutes", type=float, default=0.0, help="as make_suffix_corpus.py's")
    parser.add_argument("--gamma", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--tree-budget", type=int, default=8, help="the tree rows' budget (branching 3)")
    parser.add_argument("--verify-cost", default=str(VERIFY_COST_FILE), help="v(n), as `specviz verify-cost` writes it")
    parser.add_argument("--context", type=int, default=128, help="the verify-cost context to read v(n) at")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    target = load_model("default")
    never = template_tokens(target.tokenizer)
    cfg = HeadConfig(
        samples=args.samples, written=args.written, max_new_tokens=args.answer_tokens, answer_minutes=args.data_minutes
    )
    sequences, train, fold_of = train_folds(*own_answers(cfg, target, progress=False))
    chain = Decoding(gamma=args.gamma, max_new_tokens=args.max_new_tokens)
    tree = Decoding(
        gamma=args.gamma, max_new_tokens=args.max_new_tokens, tree=TreeShape(budget=args.tree_budget, branching=3)
    )
    measured = load_verify_cost(Path(args.verify_cost))
    if measured is None:
        sys.exit(
            f"no v(n) measurement at {args.verify_cost}: run `python -m specviz verify-cost --out {args.verify_cost}`"
        )
    v = cost_curve(measured, args.context)
    _, shipped = read_corpus(SHIPPED_CORPUS)

    # TRAIN: greedy answers of TRAIN prompts, each replayed against a corpus without its own fold.
    train_results: dict[str, dict[str, Replay]] = defaultdict(lambda: defaultdict(Replay))
    for fold in range(FOLDS):
        corpus = corpus_of([s.answer.tolist() for s in sequences if fold_of.get(s.prompt_id, -1) != fold])
        for s in (s for s in train if fold_of[s.prompt_id] == fold):
            answer = s.answer.tolist()[: args.max_new_tokens]
            runs = {
                "ngram": (NgramDrafter("ngram"), chain),
                "suffix, no corpus": (SuffixDrafter(corpus=None, never=never, verify_cost=v), chain),
                "suffix, data corpus": (SuffixDrafter(corpus=corpus, never=never, verify_cost=v), chain),
                f"suffix, data corpus, tree of {args.tree_budget}": (
                    SuffixDrafter(corpus=corpus, never=never, verify_cost=v),
                    tree,
                ),
            }
            for name, (drafter, settings) in runs.items():
                r = replay(drafter, s.prompt_ids, answer, settings, learn=False)
                train_results[name][s.category] = train_results[name][s.category].add(r)
    report = [
        f"v(n) from {args.verify_cost} at context {args.context} ({measured.get('machine', '?')}): "
        + ", ".join(f"v({n}) = {v(n):.2f}" for n in (1, 2, 4, 8)),
        table(
            f"TRAIN prompts ({len(train)} greedy answers, {FOLDS} folds), γ={args.gamma}, {args.max_new_tokens} tokens",
            train_results,
            v,
        ),
    ]

    # EVAL: the target's greedy fp32 answers, against the whole data corpus and the shipped one.
    held = eval_answers(
        target,
        cfg.work_dir,
        cfg.slug(target.name),
        max_new_tokens=args.max_new_tokens,
        progress=False,
        say=lambda m: None,
    )
    data_corpus = corpus_of([s.answer.tolist() for s in sequences])
    shipped_corpus = corpus_of(shipped)
    eval_results: dict[str, dict[str, Replay]] = defaultdict(lambda: defaultdict(Replay))
    shipped_label = f"suffix, shipped corpus ({sum(map(len, shipped)):,} tokens)"
    data_label = f"suffix, data corpus ({data_corpus.size:,} tokens)"
    for tokens, start, category in zip(held.features.tokens, held.features.answer_from, held.categories):
        prompt, answer = tokens[:start].tolist(), tokens[start:].tolist()
        runs = {
            "ngram": (NgramDrafter("ngram"), chain),
            shipped_label: (SuffixDrafter(corpus=shipped_corpus, never=never, verify_cost=v), chain),
            data_label: (SuffixDrafter(corpus=data_corpus, never=never, verify_cost=v), chain),
            f"{shipped_label}, tree of {args.tree_budget}": (
                SuffixDrafter(corpus=shipped_corpus, never=never, verify_cost=v),
                tree,
            ),
        }
        for name, (drafter, settings) in runs.items():
            eval_results[name][category] = eval_results[name][category].add(
                replay(drafter, prompt, answer, settings, learn=False)
            )
    report.append(
        table(
            f"EVAL prompts ({len(held.features.tokens)} greedy fp32 answers), γ={args.gamma}, "
            f"{args.max_new_tokens} tokens",
            eval_results,
            v,
        )
    )
    text = "\n\n".join(report)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
