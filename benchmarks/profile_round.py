"""Where the time of a speculative run goes, and why a verification forward costs more than a step.

1. From the run records: prefill, drafting, verification and the rest of the loop (rollback,
   bookkeeping, recording), as shares of the wall time of one run per drafter.
2. torch.profiler: the target's operators in a 1-token forward (a decoding step) and in a
   (γ+1)-token forward (a verification), on the same cache length.

    python benchmarks/profile_round.py --draft ngram --draft smol-draft-1l128 > benchmarks/profile-cpu.txt
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import DynamicCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.config import Decoding
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.lab.measure import warm_up
from specviz.models import load_model
from specviz.prompts import read_jsonl


def phases(target, spec, prompt, settings, load) -> None:
    make = functools.partial(build_drafter, spec, target, load)
    warm_up(target, make, prompt, settings)
    run = generate(target, make(), prompt, settings)
    draft = sum(r.draft_seconds for r in run.rounds)
    verify = sum(r.verify_seconds for r in run.rounds)
    rest = run.seconds - run.prefill_seconds - draft - verify
    print(f"{spec}: {len(run.output_ids)} tokens in {len(run.rounds)} rounds, {run.seconds:.2f} s")
    for name, seconds in (
        ("prefill", run.prefill_seconds),
        ("draft", draft),
        ("verify", verify),
        ("rest of loop", rest),
    ):
        print(
            f"  {name:<14} {seconds:6.3f} s  {seconds / run.seconds:6.1%}  {seconds / len(run.rounds) * 1e3:7.2f} "
            f"ms/round"
        )


def forward_profile(target, n_tokens: int, context: int = 96, repeats: int = 10) -> None:
    model = target.model
    ids = torch.randint(0, target.vocab_size, (1, context))

    def fresh():  # a cache of `context` positions, then n_tokens more through the model
        cache = DynamicCache(config=model.config)
        model(ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        x = torch.randint(0, target.vocab_size, (1, n_tokens))
        return lambda: model(x, past_key_values=cache, use_cache=True)

    for _ in range(3):
        fresh()()
    calls = [fresh() for _ in range(repeats)]
    seconds = []
    for call in calls[: repeats // 2]:
        t0 = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - t0)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for call in calls[repeats // 2 :]:
            call()
    print(
        f"\n=== {n_tokens}-token forward after {context} cached positions: "
        f"median {statistics.median(seconds) * 1e3:.1f} ms "
        f"(unprofiled); top operators, profiled ==="
    )
    print(
        prof.key_averages(group_by_input_shape=True).table(
            sort_by="self_cpu_time_total", row_limit=10, max_name_column_width=48, max_shapes_column_width=60
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="default")
    ap.add_argument("--draft", action="append", required=True)
    ap.add_argument("--prompts", default="benchmarks/eval14-prompts.jsonl")
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    args = ap.parse_args()
    target = load_model(args.target)
    settings = Decoding(gamma=args.gamma, max_new_tokens=args.max_new_tokens)
    prompt = read_jsonl(args.prompts)[0]["prompt"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, target {target.name} ({target.dtype})\n")
    load = functools.cache(load_model)
    with torch.inference_mode():
        for spec in args.draft:
            phases(target, spec, prompt, settings, load)
        forward_profile(target, 1)
        forward_profile(target, args.gamma + 1)


if __name__ == "__main__":
    main()
