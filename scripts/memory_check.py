"""RSS over 50 consecutive runs on the real embedded pair, in one process (issue #6, memory).

Alternates the distilled draft smol-draft-1l128 and n-gram lookup on the default target
(SmolLM2-135M), 32 new tokens each, greedy and sampled, and prints the resident set size after
run 5 (models loaded, warm) and after run 50. Flat means no per-run state survives a run.

    python scripts/memory_check.py [--runs 50] [--tokens 32] [--threads 1]
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere, without installing

from specviz.config import Decoding, Sampling
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.lab.measure import rss_mb
from specviz.models import load_model

PROMPT = "Explain in two sentences why the sky is blue."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    models = {}

    def load(name: str):
        if name not in models:
            models[name] = load_model(name)
        return models[name]

    target = load("default")
    print(f"loaded: RSS {rss_mb():.1f} MB", flush=True)
    for i in range(1, args.runs + 1):
        spec = "smol-draft-1l128" if i % 2 else "ngram"
        sampling = Sampling(temperature=0.8) if i % 4 in (2, 3) else Sampling()
        run = generate(target, build_drafter(spec, target, load), PROMPT,
                       Decoding(gamma=4, max_new_tokens=args.tokens, seed=i, sampling=sampling))
        del run
        gc.collect()
        if i in (5, args.runs) or i % 10 == 0:
            print(f"run {i:3d} ({spec:>16}): RSS {rss_mb():.1f} MB", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
