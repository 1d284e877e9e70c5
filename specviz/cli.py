"""Command line: `python -m specviz models | run | bench | verify-cost | engine-bench | distill`.

Errors a user can cause exit with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

from . import race, terminal
from .config import TREE_MODES, Decoding, Sampling, TreeShape, Verification
from .drafters import DRAFTERS, build_drafter, kind_of
from .errors import OUT_OF_MEMORY, ConfigError, SpecVizError
from .lab.bench import bench_rows, warm_up_bench
from .lab.measure import MAX_PAIRS, PAIRS, compare, noise_warning, timed
from .models import DEFAULT_TARGET, available_models, load_model
from .prompts import check_prompt, first_per_category, load_prompt_set, read_jsonl


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
    """An argparse type: how many timed pairs, 1 to MAX_PAIRS."""
    value = _at_least(1)(text)
    if value > MAX_PAIRS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_PAIRS}, got {value}")
    return value


def _contexts(text: str) -> tuple[int, ...]:
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
                        f"first; the speedup is the median of the pairs' ratios (default {pairs}, at most {MAX_PAIRS})")


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
        type=_contexts,
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


def _settings(args) -> Decoding:
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


class ModelPool:
    """Loads each model once per process, on the device and dtype asked for."""

    def __init__(self, device: str, dtype: str):
        self.device, self.dtype, self.loaded = device, dtype, {}

    def __call__(self, name: str):
        if name not in self.loaded:
            self.loaded[name] = load_model(name, self.device, self.dtype, progress=lambda m: print(m, file=sys.stderr))
        return self.loaded[name]


def cmd_models(args) -> int:
    """Every model found here, then every drafter kind of the registry (a new kind appears without a line here)."""
    rows = [{**r, "role": "target or draft"} for r in available_models()]
    rows += [
        {
            "name": name,
            "kind": "drafter",
            "title": kind.about,
            "usage": kind.usage,
            "parameters": 0,
            "path": "",
            "offline": True,
            "role": "draft",
            "learns_across_runs": kind.learns,
            "transformers": kind.peer or None,
        }
        for name, kind in DRAFTERS.items()
        if name != "model"
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'name':<18} {'role':<16} {'kind':<14} {'params':>12}  {'offline':<7} path / description")
    for r in rows:
        params = f"{r['parameters']:,}" if r.get("parameters") else "-"
        about = r["path"] or (f"{r['title']} (as {r['usage']})" if r.get("usage") else r["title"])
        print(
            f"{r['name']:<18} {r['role']:<16} {r['kind']:<14} {params:>12}  {'yes' if r['offline'] else 'no':<7} "
            f"{about}"
        )
    print("\nAny Hugging Face model id or local model folder also works as target or draft (hub ids need internet).")
    return 0


def cmd_run(args) -> int:
    settings = _settings(args)
    check_prompt(args.prompt)  # before loading a model for nothing
    pool = ModelPool(args.device, args.dtype)
    target = pool(args.target)
    make = functools.partial(build_drafter, args.draft, target, pool)  # a fresh drafter per run
    make()  # refuse an incompatible or unknown draft before any timing
    if args.no_baseline:
        run, comparison = timed(target, make, args.prompt, settings, args.pairs)[0], None
    else:
        comparison = compare(target, make, args.prompt, settings, pairs=args.pairs)
        run = comparison.spec
    if args.json:
        record = comparison.to_dict() if comparison else run.to_dict()
        record["summary"] = comparison.summary() if comparison else run.summary()
        record["summary"].update(race.latency_fields(run, comparison.baseline if comparison else None))
        print(json.dumps(record))
        return 0
    colour = sys.stdout.isatty()
    print(terminal.render_rounds(run, colour))
    print("\nlegend: accepted  ~rejected~  [resampled]  {bonus}  plain = target alone   | ends a round\n")
    for name, value in terminal.figures(comparison, run):
        print(f"  {name:<32} {value}")
    if comparison is not None and (warning := noise_warning(comparison)):
        print(f"\n  note: {warning}")
    return 0


def cmd_bench(args) -> int:
    settings = _settings(args)
    if args.tree_vs_chain and not settings.tree.on:
        raise ConfigError("--tree-vs-chain compares a tree with a chain: give the tree's size with --tree-budget N")
    # Each variant is (label, settings): the tree, and with --tree-vs-chain the chain that verifies as many tokens.
    variants = [settings] + (
        [replace(settings, gamma=settings.tree.budget, tree=TreeShape())] if args.tree_vs_chain else []
    )
    prompts = _prompt_list(args)
    out_path = Path(args.out)
    if out_path.parent and not out_path.parent.exists():
        raise SpecVizError(f"the folder of --out ({out_path.parent}) does not exist")
    pool = ModelPool(args.device, args.dtype)
    target = pool(args.target)
    makers = {}
    for spec in args.draft:
        build_drafter(spec, target, pool)  # refuse bad drafts up front
        if args.compare_hf and not kind_of(spec).peer:
            raise ConfigError(
                f"--compare-hf: transformers' generate has no equivalent of the drafter {spec}; bench it "
                "without --compare-hf (or compare drafters that have one: `python -m specviz models --json`)"
            )
        makers[spec] = lambda s=spec: build_drafter(s, target, pool)
    from tqdm import tqdm

    warm_up_bench(target, makers, prompts, variants, args.compare_hf)
    rows = []
    with (
        out_path.open("w", encoding="utf-8") as out,
        tqdm(total=len(prompts) * len(makers) * len(variants), file=sys.stderr, unit="run") as bar,
    ):
        for row in bench_rows(
            target, makers, prompts, variants, args.pairs, args.compare_hf, on_run=bar.set_description, warm=False
        ):
            out.write(json.dumps(row) + "\n")
            out.flush()
            rows.append(row)
            bar.update()
    terminal.print_summary(rows)
    return 0


def _prompt_list(args) -> list[dict]:
    prompts = load_prompt_set(split=args.prompts) if args.prompts in ("eval", "train") else read_jsonl(args.prompts)
    if args.per_category:
        prompts = first_per_category(prompts, args.per_category)
    return prompts[: args.limit] if args.limit else prompts


def cmd_engine_bench(args) -> int:
    from .engine import bench as engine_bench

    prompts = _prompt_list(args)
    out_path = Path(args.out)
    if out_path.parent and not out_path.parent.exists():
        raise SpecVizError(f"the folder of --out ({out_path.parent}) does not exist")
    setup = engine_bench.EngineBench(
        args.url,
        args.baseline_url,
        prompts,
        args.prompts,
        args.concurrency,
        args.max_new_tokens,
        args.draft,
        chat=not args.raw,
    )
    with out_path.open("w", encoding="utf-8") as out:
        rows = engine_bench.run(setup, out)
    print("\n".join(engine_bench.summary_lines(rows)))
    print(f"\n{len(rows)} records written to {out_path}")
    return 0


def cmd_verify_cost(args) -> int:
    from .lab.verify_cost import measure_verify_cost, save_verify_cost

    target = load_model(args.target, args.device, args.dtype, progress=lambda m: print(m, file=sys.stderr))
    limit = getattr(target.model.config, "max_position_embeddings", None)
    if limit and max(args.context) + args.max_nodes + 1 > limit:
        print(
            f"error: --context {max(args.context)} with --max-nodes {args.max_nodes} exceeds the target's "
            f"{limit}-token context",
            file=sys.stderr,
        )
        return 2
    cost = measure_verify_cost(target, args.max_nodes, args.context, args.repeats)
    print(f"v(N): one forward over N tree nodes, in plain steps ({cost['machine']})")
    print(" N  " + "".join(f"{'C=' + str(m['context']):>9}" for m in cost["by_context"]))
    print("step" + "".join(f"{m['step_seconds'] * 1000:>7.1f}ms" for m in cost["by_context"]))
    for i, n in enumerate(cost["nodes"]):
        print(f"{n:>2}  " + "".join(f"{m['steps'][i]:>9.2f}" for m in cost["by_context"]))
    if args.out:
        save_verify_cost(cost, Path(args.out))
        print(f"written to {args.out}")
    return 0


def cmd_distill(args) -> int:
    from . import distill_command

    return distill_command.run(args)


COMMANDS = {
    "models": cmd_models,
    "run": cmd_run,
    "bench": cmd_bench,
    "engine-bench": cmd_engine_bench,
    "verify-cost": cmd_verify_cost,
    "distill": cmd_distill,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # stderr stays for our progress and one-line errors
    hf_logging.set_verbosity_error()
    try:
        return COMMANDS[args.command](args)
    except SpecVizError as exc:
        print(f"specviz: error: {exc}", file=sys.stderr)
        return 2
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        print(
            f"specviz: error: {OUT_OF_MEMORY}, load in fp16 (--dtype fp16), or run on the CPU (--device cpu)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("specviz: stopped by the user", file=sys.stderr)
        return 130
