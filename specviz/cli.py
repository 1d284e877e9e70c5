"""Command line: `python -m specviz models | run | bench | verify-cost | engine-bench | distill`.

Errors a user can cause exit with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

from . import race, terminal
from .cli_args import build_parser, settings_of
from .config import TreeShape
from .drafters import DRAFTERS, build_drafter, kind_of
from .errors import OUT_OF_MEMORY, ConfigError, SpecVizError
from .lab.bench import bench_rows, warm_up_bench
from .lab.measure import BUSY_PAIRS, busy_warning, compare, noise_warning, timed
from .models import available_models, load_model
from .prompts import check_prompt, first_per_category, load_prompt_set, read_jsonl


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
    settings = settings_of(args)
    check_prompt(args.prompt)  # before loading a model for nothing
    pool = ModelPool(args.device, args.dtype)
    target = pool(args.target)
    make = functools.partial(build_drafter, args.draft, target, pool)  # a fresh drafter per run
    make()  # refuse an incompatible or unknown draft before any timing
    if args.no_baseline:
        run, comparison = timed(target, make, args.prompt, settings, args.pairs)[0], None
    else:
        comparison = compare(target, make, args.prompt, settings, pairs=args.pairs, busy_pairs=BUSY_PAIRS)
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
    if comparison is not None and (warning := busy_warning(comparison)):
        print(f"\n  note: {warning}")
    return 0


def cmd_bench(args) -> int:
    settings = settings_of(args)
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
