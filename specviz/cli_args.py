"""The command line's arguments: one parser for every subcommand, and the decoding settings they give."""

from __future__ import annotations

import argparse
import sys

from .busy import NOTICEABLE_SHARE
from .config import TREE_MODES, ConfigError, Decoding, Sampling, TreeShape, Verification
from .lab.measure import BUSY_PAIRS, MAX_PAIRS, PAIRS, check_pairs
from .models import DEFAULT_TARGET


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints the whole usage otherwise)
        sys.stderr.write(f"specviz: error: {message} (see --help)\n")
        raise SystemExit(2)


def _at_least(low: int):
    """An argparse type: a whole number >= low, refused in one line otherwise."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return whole


def _pairs(text: str) -> int:
    """An argparse type: how many timed pairs, 1 to MAX_PAIRS (`measure.check_pairs`)."""
    try:
        return check_pairs(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def context_list(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated context lengths, each a whole number >= 2."""
    values = tuple(_at_least(2)(part.strip()) for part in text.split(",") if part.strip())
    if not values:
        raise argparse.ArgumentTypeError("give one or more context lengths, e.g. 128,512,1024")
    return values


def _concurrency(text: str) -> list[int]:
    """An argparse type: comma-separated concurrency levels."""
    from .engine.bench import parse_concurrency

    try:
        return parse_concurrency(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_decoding(p: argparse.ArgumentParser, pairs: int = PAIRS) -> None:
    p.add_argument("--target", default=DEFAULT_TARGET, help="target model: default, a local folder or a hub id")
    p.add_argument("--gamma", type=int, default=4, help="draft length γ (default 4)")
    p.add_argument("--adaptive", action="store_true", help="adaptive γ: +2 after a fully accepted round, -1 otherwise")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--sample-top-k", type=int, default=0, help="top-k filter when sampling (0 = off)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verify", choices=("exact", "relaxed"), default="exact", help="exact is lossless (default)")
    p.add_argument("--tolerance", type=float, default=0.0, help="relaxed greedy: τ in nats")
    p.add_argument("--top-k", type=int, default=1, help="relaxed greedy: accept drafts in the target's top-k")
    p.add_argument("--lenience", type=float, default=1.0, help="relaxed sampling: l in (0, 1]")
    p.add_argument("--tree-budget", type=int, default=0,
                   help="draft a token tree of N nodes, γ deep (0 = a chain of γ, the default)")
    p.add_argument("--tree-branching", type=int, default=2, help="tree: children per expanded node (default 2)")
    p.add_argument("--tree-mode", choices=TREE_MODES, default="dynamic",
                   help="tree: dynamic (EAGLE-2, by cumulative draft probability; default) or static (a fixed shape)")
    p.add_argument("--raw", action="store_true", help="send the prompt as raw text, without the chat template")
    p.add_argument("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, mps")
    p.add_argument("--dtype", default="auto", help="auto (fp32 on CPU, bf16 on GPU), fp32, bf16, fp16")
    p.add_argument("--pairs", "--repeats", dest="pairs", type=_pairs, default=pairs,
                   help=f"time the target alone and the speculative run N times each, in pairs, alternating which goes "
                        f"first; the speedup is the median of the pairs' ratios (default {pairs}, at most "
                        f"{MAX_PAIRS}; `run` times {BUSY_PAIRS} more when other programs take over "
                        f"{NOTICEABLE_SHARE * 100:.0f}%% of the machine)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m specviz", description="See and measure speculative decoding.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    models = sub.add_parser("models", help="targets and drafters available here")
    models.add_argument("--json", action="store_true")

    run = sub.add_parser("run", help="one run, shown round by round, with the measured speedup")
    _add_decoding(run)
    run.add_argument("--draft", default="ngram", help="ngram, layerskip:K, target, or a model name/folder/hub id")
    run.add_argument("--prompt", required=True)
    run.add_argument("--no-baseline", action="store_true", help="skip timing the target alone")
    run.add_argument("--json", action="store_true", help="print the full record as JSON")

    bench = sub.add_parser("bench", help="many prompts and drafts; one JSON line per prompt and draft")
    _add_decoding(bench, pairs=1)
    bench.add_argument("--draft", action="append", required=True, help="repeat for several drafts")
    bench.add_argument(
        "--prompts",
        required=True,
        help="JSONL file, one object per line with id and prompt; or eval / train: the project's own sets",
    )
    bench.add_argument(
        "--per-category", type=_at_least(0), default=0, help="use only the first N prompts of each category (0 = all)"
    )
    bench.add_argument("--out", required=True, help="JSONL file to write")
    bench.add_argument("--limit", type=_at_least(0), default=0, help="use only the first N prompts (0 = all)")
    bench.add_argument(
        "--tree-vs-chain",
        action="store_true",
        help="with --tree-budget N: also run each draft as a chain of γ=N (the same tokens verified), "
        "each timed in pairs with the target alone",
    )
    bench.add_argument(
        "--compare-hf",
        action="store_true",
        help="also time transformers' generate with the same drafter and γ (assisted / prompt lookup)",
    )
    cost = sub.add_parser(
        "verify-cost", help="time one target forward over a token tree of N nodes: v(N) in target steps"
    )
    cost.add_argument("--target", default=DEFAULT_TARGET)
    cost.add_argument("--max-nodes", type=_at_least(1), default=32, help="N = 1 .. this (default 32)")
    cost.add_argument(
        "--context",
        type=context_list,
        default=(128, 512, 1024, 2048),
        help="committed tokens before the tree, one or more, comma-separated (default 128,512,1024,2048)",
    )
    cost.add_argument("--repeats", type=_at_least(1), default=20, help="timings per N, median used (default 20)")
    cost.add_argument("--device", default="auto")
    cost.add_argument("--dtype", default="auto")
    cost.add_argument("--out", help="JSON file to write (the app shows assets/trees/verify_cost.json)")
    engine = sub.add_parser("engine-bench", help="measure speculative decoding on a vLLM server (and a baseline)")
    engine.add_argument("--url", required=True, help="the vLLM server with speculation, e.g. http://127.0.0.1:8000")
    engine.add_argument("--baseline-url", help="the same model served without speculation: speedup per concurrency")
    engine.add_argument(
        "--prompts",
        required=True,
        help="JSONL file, one object per line with id and prompt; or eval / train: the project's own sets",
    )
    engine.add_argument(
        "--per-category", type=_at_least(0), default=0, help="use only the first N prompts of each category (0 = all)"
    )
    engine.add_argument("--limit", type=_at_least(0), default=0, help="use only the first N prompts (0 = all)")
    engine.add_argument(
        "--concurrency",
        type=_concurrency,
        default=[1, 4, 16],
        help="requests in flight, comma-separated levels (default 1,4,16)",
    )
    engine.add_argument(
        "--max-new-tokens",
        type=_at_least(1),
        default=64,
        help="tokens per request, fixed (min_tokens = max_tokens, ignore_eos)",
    )
    engine.add_argument(
        "--draft",
        default="",
        help="the drafter the server runs, as SpecViz names it (e.g. ngram): "
        "pairs this run with lab runs on the Serving page",
    )
    engine.add_argument(
        "--raw", action="store_true", help="send the prompt as raw text (/v1/completions), without the chat template"
    )
    engine.add_argument("--out", required=True, help="JSONL file to write, one line per server and concurrency")
    from . import distill_command

    distill_command.add_arguments(sub.add_parser("distill", help="distil a tiny draft from the target and save it"))
    return parser


def settings_of(args) -> Decoding:
    return Decoding(
        gamma=args.gamma,
        adaptive=args.adaptive,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        chat=not args.raw,
        sampling=Sampling(temperature=args.temperature, top_k=args.sample_top_k, top_p=args.top_p),
        verification=Verification(mode=args.verify, tolerance=args.tolerance, top_k=args.top_k, lenience=args.lenience),
        tree=TreeShape(budget=args.tree_budget, branching=args.tree_branching, mode=args.tree_mode),
    )
