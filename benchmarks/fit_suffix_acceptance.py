"""Fit the suffix drafter's acceptance model (specviz.drafters.suffix.ACCEPTANCE) on the TRAIN prompts' answers.

At every position of the target's greedy answers to the TRAIN prompts, both matches (the prompt and
answer so far; the corpus of the other folds' answers, as in benchmarks/replay_drafters.py) are
walked up to DEPTH tokens deep with the BRANCHING most frequent continuations at each step. Every
candidate whose parent is the answer's own token is a sample: its features (source, the pattern's
length, the continuation's share of what followed, how often the pattern was seen, the other
source's share for the same token) and whether it is the answer's next token. A logistic regression per source
(Newton's method, a little L2) gives
the weights; the report compares the raw share with the fitted chance, bin by bin, on the samples.
EVAL prompts are never read. Run after `scripts/make_suffix_corpus.py`:

    python benchmarks/fit_suffix_acceptance.py --out benchmarks/results/suffix-acceptance-fit.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_drafters import FOLDS, corpus_of, train_folds  # noqa: E402

from specviz.drafters.suffix import CORPUS, LOCAL, LOCAL_DEPTH, continuations, features, template_tokens  # noqa: E402
from specviz.drafters.suffix_index import LocalIndex  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.training.train_head import HeadConfig, own_answers  # noqa: E402

DEPTH = 6
BRANCHING = 3


def samples(matches: list, truth: list[int], never, rows: dict) -> None:
    """Walk both matches along `truth`: at each step every top continuation of each is a sample (as the drafter
    offers them, `continuations`); then both follow the true token."""
    for step in range(min(DEPTH, len(truth))):
        for source, depth, token, count, seen, other_share in continuations(matches, BRANCHING, never):
            rows[source][0].append(features(depth, count, seen, other_share))
            rows[source][1].append(float(token == truth[step]))
        matches = [m.follow(truth[step]) if m is not None else None for m in matches]


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-3, iterations: int = 30) -> np.ndarray:
    w = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-x @ w))
        gradient = x.T @ (p - y) + l2 * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + l2 * np.eye(len(w))
        w -= np.linalg.solve(hessian, gradient)
    return w


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--written", type=int, default=70)
    parser.add_argument("--answer-tokens", type=int, default=256)
    parser.add_argument("--max-new-tokens", type=int, default=128, help="positions read per answer")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    target = load_model("default")
    never = template_tokens(target.tokenizer)
    cfg = HeadConfig(samples=args.samples, written=args.written, max_new_tokens=args.answer_tokens)
    sequences, train, fold_of = train_folds(*own_answers(cfg, target, progress=False))
    rows: dict[str, tuple[list, list]] = {LOCAL: ([], []), CORPUS: ([], [])}
    for fold in range(FOLDS):
        corpus = corpus_of([s.answer.tolist() for s in sequences if fold_of.get(s.prompt_id, -1) != fold])
        for s in (s for s in train if fold_of[s.prompt_id] == fold):
            answer = s.answer.tolist()[: args.max_new_tokens]
            local = LocalIndex(LOCAL_DEPTH)
            local.extend(list(s.prompt_ids))
            for i in range(len(answer)):
                context = local.tokens
                samples([local.longest_match(context), corpus.longest_match(context)], answer[i:], never, rows)
                local.extend([answer[i]])
    lines = [
        f"Suffix acceptance fit: {len(train)} TRAIN greedy answers, {args.max_new_tokens} positions each, "
        f"{FOLDS} folds, walks {DEPTH} deep with {BRANCHING} continuations per step",
        "",
    ]
    for source, (x, y) in rows.items():
        x, y = np.array(x), np.array(y)
        w = fit(x, y)
        p = 1 / (1 + np.exp(-x @ w))
        loss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
        lines += [
            f"**{source}**: {len(y):,} samples, kept {y.mean():.3f}, log loss {loss:.3f}; weights "
            f"(1, ln depth, share, ln seen, share·ln depth, other's share, other has no match) = "
            f"({', '.join(f'{v:.3f}' for v in w)})",
            "",
            "| chance | samples | raw share (mean) | fitted (mean) | kept |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        edges = [0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0001]
        for lo, hi in zip(edges[:-1], edges[1:]):
            m = (p >= lo) & (p < hi)
            if m.sum():
                lines.append(
                    f"| {lo:.2f}–{min(hi, 1):.2f} | {m.sum():,} | {x[m, 2].mean():.3f} | {p[m].mean():.3f} | "
                    f"{y[m].mean():.3f} |"
                )
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
