"""Make the suffix drafter's shipped corpus: the target's own answers, the same ones a head trains on.

The suffix drafter (specviz.drafters.suffix) continues what followed the same words in earlier
answers of the target; this file is where it starts before the server has completed any run.
The answers are the head's training data (specviz.training.train_head.own_answers, cached in
artifacts/heads, so whichever of this script and `distill --kind head` runs second generates
nothing): the TRAIN split of assets/prompts and the prompts the target wrote for itself, greedy
plus sampled answers. Never an evaluation prompt, never a public benchmark. They are decoded in
batches in bf16 where the CPU has it (faster; the text is then the bf16 target's, close to the
fp32 one's).

    python scripts/make_suffix_corpus.py --samples 3 --max-new-tokens 256 --written 70 --data-minutes 24
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.drafters.suffix import SHIPPED_CORPUS, save_corpus, tokenizer_fingerprint  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.training.answers import bf16_ok  # noqa: E402
from specviz.training.train_head import HeadConfig, own_answers  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = HeadConfig()
    parser.add_argument("--target", default="default")
    parser.add_argument("--samples", type=int, default=3, help="sampled answers per prompt beside the greedy one")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--written", type=int, default=70, help="prompts per category the target writes for itself")
    parser.add_argument("--max-tokens", type=int, default=0, help="keep at most this many tokens (0 = all)")
    parser.add_argument("--data-minutes", type=float, default=0.0,
                        help="generation budget for each set of answers (0 = none): what is cached past it is used")
    parser.add_argument("--work", default="", help="where the answers are cached (default artifacts/heads)")
    parser.add_argument("--out", default=str(SHIPPED_CORPUS))
    args = parser.parse_args()
    target = load_model(args.target)
    cfg = HeadConfig(target=args.target, samples=args.samples, max_new_tokens=args.max_new_tokens,
                     written=args.written, work=args.work, temperature=d.temperature, answer_minutes=args.data_minutes)
    answers, own = own_answers(cfg, target)
    datasets = [answers] + ([own] if own is not None else [])
    documents = [s.answer.tolist() for data in datasets for s in data.sequences]
    if args.max_tokens:
        kept, total = [], 0
        for doc in documents:
            if total + len(doc) > args.max_tokens:
                break
            kept.append(doc)
            total += len(doc)
        documents = kept
    tokens = sum(len(doc) for doc in documents)
    seconds = sum(data.seconds for data in datasets)
    generated = sum(data.answer_tokens for data in datasets)
    header = {"made": date.today().isoformat(),
              "command": " ".join(["python scripts/make_suffix_corpus.py", *sys.argv[1:]]),
              "target": args.target, "tokenizer": tokenizer_fingerprint(target.tokenizer),
              "prompts": "the TRAIN split and prompts the target wrote for itself",
              "samples": args.samples, "temperature": cfg.temperature, "max_new_tokens": args.max_new_tokens,
              "dtype": "bf16" if bf16_ok(target.device) else str(target.dtype).replace("torch.", ""),
              "machine": machine(target.device), "answers": len(documents), "tokens": tokens,
              "tokens_per_second": round(generated / max(seconds, 1e-9), 1)}
    save_corpus(Path(args.out), documents, header)
    print(f"{len(documents)} answers, {tokens:,} tokens ({header['tokens_per_second']} tokens/s when written) "
          f"-> {args.out}")


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
