"""Record the race shipped on Home and at the top of the lesson, and Home's recorded run, on this machine.

    flock /work/cpu.lock python scripts/record_race.py [--lanes suffix suffix@tree8x3] [--prompt-id retrieval-…]
                                  [--gamma 6] [--max-new-tokens 64] [--pairs 3] [--demo LANE] [--threads N]

One prompt, the target alone and each lane, greedy. A lane is a drafter, alone (a chain of γ) or as a token tree
(`DRAFTER@treeNxB`: N nodes, B children per node, γ deep). Every lane is `specviz.lab.measure.compare`: after a
warm-up, timed in pairs with the target alone, so each token's arrival time is the loop's own. The race goes to
assets/race/race.json; the `--demo` lane (default: the last) also goes to assets/demo/rounds.json, the run Home
shows first. Both say which command made them, on which machine and when. About a minute.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from specviz import race  # noqa: E402
from specviz.app.controls import DEMO_RUN  # noqa: E402
from specviz.config import Decoding, TreeShape  # noqa: E402
from specviz.drafters import build_drafter  # noqa: E402
from specviz.errors import ConfigError, SpecVizError  # noqa: E402
from specviz.lab import measure  # noqa: E402
from specviz.lesson.recordings import prompt_text  # noqa: E402
from specviz.models import DEFAULT_TARGET, load_model  # noqa: E402
from specviz.prompts import load_prompt_set  # noqa: E402

LANE = re.compile(r"^(?P<draft>[^@]+)(@tree(?P<budget>\d+)x(?P<branching>\d+))?$")


def lane_settings(lane: str, settings: Decoding) -> tuple[str, Decoding]:
    """'suffix' -> ('suffix', a chain of γ); 'suffix@tree8x3' -> ('suffix', a tree of 8 nodes, 3 per node)."""
    match = LANE.match(lane)
    if match is None:
        raise ConfigError(f"a lane is DRAFTER or DRAFTER@treeNxB, got {lane!r}")
    if match["budget"] is None:
        return match["draft"], settings
    return match["draft"], replace(
        settings, tree=TreeShape(budget=int(match["budget"]), branching=int(match["branching"]))
    )


def label(lane: str) -> str:
    """The lane's name in the race: 'suffix' for a chain, 'suffix · tree of 8' for a tree."""
    draft, settings = lane_settings(lane, Decoding())
    return f"{draft} · tree of {settings.tree.budget}" if settings.tree.on else draft


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lanes",
        nargs="+",
        default=["suffix", "suffix@tree8x3"],
        help="drafters, each alone (a chain) or DRAFTER@treeNxB (default: the best chain and tree)",
    )
    parser.add_argument(
        "--prompt-id",
        default=load_prompt_set("retrieval", "eval")[0]["id"],
        help="an evaluation prompt of assets/prompts (default: the first retrieval one)",
    )
    parser.add_argument("--gamma", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=3, help="timed pairs per lane (the median pair is kept)")
    parser.add_argument("--demo", help="the lane Home shows as its recorded run (default: the last lane)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--out", type=Path, default=race.RACE_FILE)
    parser.add_argument("--demo-out", type=Path, default=DEMO_RUN)
    args = parser.parse_args(argv)
    try:
        if args.threads:
            torch.set_num_threads(args.threads)
        base = Decoding(gamma=args.gamma, max_new_tokens=args.max_new_tokens)
        lanes = {label(lane): lane_settings(lane, base) for lane in args.lanes}
        demo = label(args.demo or args.lanes[-1])
        if demo not in lanes:
            raise ConfigError(f"--demo {args.demo} is not one of the lanes")
        prompt = prompt_text(args.prompt_id)
        load = functools.lru_cache(maxsize=None)(load_model)
        target = load(DEFAULT_TARGET)
        makers = {name: functools.partial(build_drafter, draft, target, load) for name, (draft, _) in lanes.items()}
        for make in makers.values():
            make()  # refuse a bad draft before timing anything
        runs = {
            name: measure.compare(target, makers[name], prompt, settings, pairs=args.pairs)
            for name, (_, settings) in lanes.items()
        }
    except SpecVizError as exc:
        print(f"record_race: error: {exc}", file=sys.stderr)
        return 2
    info = {
        "made_by": "python scripts/record_race.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "made_on": measure.machine(target.device),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "prompt_id": args.prompt_id,
        "how": f"specviz.lab.measure.compare for each lane: after a warm-up, the lane and the target alone timed in "
        f"turn, {args.pairs} pairs, the median pair kept; the race's target-alone lane is the first lane's. Each "
        "token's arrival time is Run.arrival_seconds. Saved with specviz.race.save_recording.",
    }
    race.save_recording(args.out, race.Recording(runs, info))
    args.demo_out.parent.mkdir(parents=True, exist_ok=True)
    args.demo_out.write_text(json.dumps({**runs[demo].to_dict(), "info": {**info, "lane": demo}}), encoding="utf-8")
    for name, c in runs.items():
        mine, alone = race.latency(c.spec), race.latency(c.baseline)
        print(
            f"{name}: {c.spec.new_tokens} tokens in {c.spec.seconds:.2f} s (target alone {c.baseline.seconds:.2f} s), "
            f"speedup {measure.speedup_text(c)}, TTFT {mine.ttft * 1000:.0f} ms (alone {alone.ttft * 1000:.0f} ms), "
            f"median gap {mine.gap_median * 1000:.1f} ms, p90 {mine.gap_p90 * 1000:.1f} ms "
            f"(alone {alone.gap_median * 1000:.1f} / {alone.gap_p90 * 1000:.1f} ms), identical {c.identical}"
        )
    print(f"written to {args.out} and {args.demo_out} (the {demo} lane)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
