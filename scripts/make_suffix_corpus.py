"""Make the suffix drafter's shipped corpus: the target's own answers to the training prompts.

The suffix drafter (specviz.drafters.suffix) continues what followed the same words in earlier
answers of the target; this file is where it starts before the server has completed any run.
Only the TRAIN split of assets/prompts is used (never the evaluation prompts, never a public
benchmark). Answers are greedy plus sampled ones, decoded in batches, in bf16 where the CPU has
it (faster; the text is then the bf16 target's, close to the fp32 one's).

    python scripts/make_suffix_corpus.py --out assets/suffix/answers.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import date
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.drafters.suffix import tokenizer_fingerprint
from specviz.measure import machine
from specviz.models import load_model
from specviz.prompts import encode
from specviz.training.answers import bf16_ok, target_answers, train_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--samples", type=int, default=1, help="sampled answers per prompt beside the greedy one")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--out", default="assets/suffix/answers.jsonl")
    args = parser.parse_args()
    target = load_model(args.target)
    prompts = train_prompts()
    jobs = [(p, s) for p in prompts for s in range(1 + args.samples)]
    generator = torch.Generator().manual_seed(0)
    rows, start = [], time.perf_counter()
    for i in range(0, len(jobs), args.batch):
        batch = jobs[i : i + args.batch]
        ids = [encode(target.tokenizer, p["prompt"]) for p, _ in batch]
        answers = target_answers(target, ids, [s == 0 for _, s in batch], args.max_new_tokens, 0.7, 1, generator,
                                 fast=True)
        rows += [{"id": p["id"], "sample": s, "ids": answer.tolist()} for (p, s), (answer, _, _) in zip(batch, answers)]
        print(f"{len(rows)}/{len(jobs)} answers, {sum(len(r['ids']) for r in rows)} tokens", file=sys.stderr)
    seconds = time.perf_counter() - start
    tokens = sum(len(r["ids"]) for r in rows)
    header = {"made": date.today().isoformat(), "command": f"python scripts/make_suffix_corpus.py --samples "
              f"{args.samples} --max-new-tokens {args.max_new_tokens} --out {args.out}",
              "target": args.target, "tokenizer": tokenizer_fingerprint(target.tokenizer), "prompts": "train split",
              "dtype": "bf16" if bf16_ok(target.device) else str(target.dtype).replace("torch.", ""),
              "machine": machine(target.device), "answers": len(rows), "tokens": tokens,
              "tokens_per_second": round(tokens / seconds, 1)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(json.dumps(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    print(f"{len(rows)} answers, {tokens} tokens in {seconds:.0f} s ({tokens / seconds:.0f} tokens/s) -> {out}")


if __name__ == "__main__":
    main()
