"""Recording overhead: the full per-round records (p, q, the target's top tokens) against the bare loop.

Both variants run the same loop (`decode.generate`, detail=True / False) on the same prompts, interleaved
so that machine noise hits both alike; the figure is the median over prompts of full ÷ bare seconds
(each the median of --repeats runs).

    python benchmarks/overhead.py --draft ngram --prompts eval --per-category 1 --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.config import Decoding
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.lab.measure import warm_up
from specviz.models import load_model
from specviz.prompts import first_per_category, load_prompt_set, read_jsonl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="default")
    ap.add_argument("--draft", action="append", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--per-category", type=int, default=0, help="the first N prompts of each category (0 = all)")
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", help="JSONL of per-prompt rows")
    args = ap.parse_args()

    target = load_model(args.target)
    settings = Decoding(gamma=args.gamma, max_new_tokens=args.max_new_tokens)
    prompts = load_prompt_set(split=args.prompts) if args.prompts in ("eval", "train") else read_jsonl(args.prompts)
    prompts = first_per_category(prompts, args.per_category) if args.per_category else prompts
    load = functools.cache(load_model)  # each draft model once
    rows = []
    for spec in args.draft:
        make = functools.partial(build_drafter, spec, target, load)
        warm_up(target, make, prompts[0]["prompt"], settings)
        for item in prompts:
            times = {True: [], False: []}
            for _ in range(args.repeats):
                for detail in (True, False):
                    run = generate(target, make(), item["prompt"], settings, detail=detail)
                    times[detail].append(run.seconds)
            full, bare = statistics.median(times[True]), statistics.median(times[False])
            rows.append({"draft": spec, "id": item["id"], "full_seconds": full, "bare_seconds": bare,
                         "overhead": full / bare - 1, "tokens": len(run.output_ids), "rounds": len(run.rounds)})
            print(f"{spec:<20} {item['id']:<22} full {full:6.2f}s bare {bare:6.2f}s overhead {full / bare - 1:+.1%}",
                  flush=True)
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for spec in args.draft:
        mine = [r["overhead"] for r in rows if r["draft"] == spec]
        print(f"{spec}: recording overhead, median over {len(mine)} prompts: {statistics.median(mine):+.2%} "
              f"(mean {statistics.fmean(mine):+.2%})")


if __name__ == "__main__":
    main()
