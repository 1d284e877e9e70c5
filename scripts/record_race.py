"""Record the race shipped on Home and at the top of the lesson, on this machine, into assets/race/race.json.

    flock /work/cpu.lock python scripts/record_race.py [--drafts ngram smol-head-8k] [--prompt-id retrieval-…]
                                                      [--gamma 4] [--max-new-tokens 64] [--threads N] [--out FILE]

One prompt, the target alone and each draft, greedy: every run is `specviz.lab.measure.compare` (after a
warm-up, timed by the same loop, every drafter against the one target-alone run), so each token's arrival
time is the loop's own. The file says which command made it, on which machine and when. About 20 s.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from specviz import race  # noqa: E402
from specviz.config import Decoding  # noqa: E402
from specviz.drafters import build_drafter  # noqa: E402
from specviz.errors import SpecVizError  # noqa: E402
from specviz.lab import measure  # noqa: E402
from specviz.lesson.recordings import prompt_text  # noqa: E402
from specviz.models import DEFAULT_TARGET, load_model  # noqa: E402
from specviz.prompts import load_prompt_set  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drafts", nargs="+", default=["ngram", "smol-head-8k"])
    parser.add_argument("--prompt-id", default=load_prompt_set("retrieval", "eval")[0]["id"],
                        help="an evaluation prompt of assets/prompts (default: the first retrieval one)")
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--out", type=Path, default=race.RACE_FILE)
    args = parser.parse_args(argv)
    try:
        if args.threads:
            torch.set_num_threads(args.threads)
        settings = Decoding(gamma=args.gamma, max_new_tokens=args.max_new_tokens)
        prompt = prompt_text(args.prompt_id)
        load = functools.lru_cache(maxsize=None)(load_model)
        target = load(DEFAULT_TARGET)
        makers = {d: functools.partial(build_drafter, d, target, load) for d in args.drafts}
        for make in makers.values():
            make()  # refuse a bad draft before timing anything
        measure.warm_up(target, None, prompt, settings)
        baseline = measure.timed(target, None, prompt, settings)
        runs = {d: measure.compare(target, make, prompt, settings, baseline=baseline) for d, make in makers.items()}
    except SpecVizError as exc:
        print(f"record_race: error: {exc}", file=sys.stderr)
        return 2
    info = {
        "made_by": "python scripts/record_race.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "made_on": measure.machine(target.device),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "prompt_id": args.prompt_id,
        "how": "specviz.lab.measure.compare for each draft against one target-alone run (same prompt and settings, "
               "after a warm-up, timed by the same loop); each token's arrival time is Run.arrival_seconds. "
               "Saved with specviz.race.save_recording.",
    }
    race.save_recording(args.out, race.Recording(runs, info))
    for name, c in runs.items():
        mine, alone = race.latency(c.spec), race.latency(c.baseline)
        print(f"{name}: {c.spec.new_tokens} tokens in {c.spec.seconds:.2f} s (target alone {c.baseline.seconds:.2f} s), "
              f"speedup {c.speedup:.2f}x, TTFT {mine.ttft * 1000:.0f} ms (alone {alone.ttft * 1000:.0f} ms), "
              f"median gap {mine.gap_median * 1000:.1f} ms, p90 {mine.gap_p90 * 1000:.1f} ms "
              f"(alone {alone.gap_median * 1000:.1f} / {alone.gap_p90 * 1000:.1f} ms), identical {c.identical}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
