"""Where a drafter's time goes in real runs: the pieces of `auto`'s drafting (the head's catch-up and reads, its
guesses, the copied and recycled offers, the recycle table's update), timed by wrapping each piece, per round.

The default target, `auto`, the first 8 chat and QA prompts of the evaluation split, 128 new tokens, γ 6, a tree of 8
(branching 3), after a warm-up. The pieces overlap (a catch-up contains a head step); the drafting total is the loop's
own timing.

    python benchmarks/draft_parts.py > benchmarks/results/draft-parts-CPU.txt
"""

from __future__ import annotations

import collections
import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.config import Decoding, TreeShape  # noqa: E402
from specviz.decode import generate  # noqa: E402
from specviz.drafters import base, blend_head, build_drafter, head, recycle  # noqa: E402
from specviz.lab.measure import machine, warm_up  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.prompts import load_prompt_set  # noqa: E402

SECONDS: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()
PIECES = [  # (owner, attribute, label)
    (base.Drafter, "propose", "drafting's proposal, all of it"),
    (head.HeadDrafter, "catch_up", "head: catch-up on the kept tokens"),
    (head.HeadDrafter, "step", "head: a forward (catch-up or a node)"),
    (blend_head.HeadBlendDrafter, "read", "head: a read at a node (asked)"),
    (blend_head.HeadBlendDrafter, "guesses", "head: guesses (output rows)"),
    (blend_head.HeadBlendDrafter, "offers", "copied and recycled offers"),
    (blend_head.HeadBlendDrafter, "feedback", "feedback, all of it"),
    (recycle, "learn_from", "recycle table update"),
]


def timed(owner, attribute: str, label: str) -> None:
    original = getattr(owner, attribute)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            SECONDS[label] += time.perf_counter() - start
            CALLS[label] += 1

    setattr(owner, attribute, wrapper)


def main() -> None:
    for piece in PIECES:
        timed(*piece)
    target = load_model("default", "cpu", "fp32")
    prompts = [r["prompt"] for r in load_prompt_set(split="eval") if r["category"] in ("chat", "qa")][:8]
    settings = Decoding(gamma=6, max_new_tokens=128, tree=TreeShape(budget=8, branching=3))
    make = functools.partial(build_drafter, "auto", target, load_model)
    warm_up(target, make, prompts[0], settings)
    SECONDS.clear()
    CALLS.clear()
    rounds = drafting = 0
    for prompt in prompts:
        run = generate(target, make(), prompt, settings)
        rounds += len(run.rounds)
        drafting += sum(r.draft_seconds for r in run.rounds)
    print(f"# {machine('cpu', target.model)}; `auto`, {len(prompts)} chat and QA prompts, {rounds} rounds\n")
    print(f"drafting (the loop's timing): {drafting / rounds * 1e3:.2f} ms a round\n")
    print("| piece | ms a round | calls a round | ms a call |")
    print("| --- | ---: | ---: | ---: |")
    for _, _, label in PIECES:
        if CALLS[label]:
            print(f"| {label} | {SECONDS[label] / rounds * 1e3:.2f} | {CALLS[label] / rounds:.2f} | "
                  f"{SECONDS[label] / CALLS[label] * 1e3:.3f} |")


if __name__ == "__main__":
    main()
