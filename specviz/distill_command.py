"""The `distill` subcommand: its arguments, the training configs they make, and the figures it prints.

The training itself is specviz.training (distill: a tiny draft; train_head: a feature-level head);
this module is only the command line around it, so training code never parses arguments.
"""

from __future__ import annotations

import argparse

import torch

from .config import Decoding
from .drafters.head_net import is_head
from .errors import SpecVizError
from .models import load_model
from .training.distill import DistillConfig, distill, evaluate_drafts
from .training.head_eval import evaluate_head, label
from .training.train_head import HeadConfig, train_head


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = DistillConfig()
    p.add_argument("--kind", choices=("draft", "head"), default="draft",
                   help="draft: a standalone tiny causal LM; head: a feature-level head over the target's hidden "
                        "states (EAGLE-style), which is what pays off on the embedded pair")
    p.add_argument("--target", default=d.target, help="target to distil from: default, a local folder or a hub id")
    p.add_argument("--name", default="", help="draft name (default smol-draft-<layers>l<hidden>, smol-head-<vocab>k)")
    p.add_argument("--layers", type=int, default=d.layers, help=f"decoder layers (default {d.layers})")
    p.add_argument("--hidden", type=int, default=d.hidden, help=f"hidden size (default {d.hidden})")
    p.add_argument("--heads", type=int, default=0, help="attention heads (default hidden/64)")
    p.add_argument("--intermediate", type=int, default=0, help="MLP width (default 4 x hidden)")
    p.add_argument("--steps", type=int, default=None, help=f"training steps (default {d.steps}; heads 2000)")
    p.add_argument("--batch-size", type=int, default=None, help=f"sequences per step (default {d.batch_size})")
    p.add_argument("--lr", type=float, default=None, help=f"peak learning rate (default {d.lr:g}; heads 0.002)")
    p.add_argument("--samples", type=int, default=d.samples,
                   help=f"sampled target answers per train prompt, besides the greedy one (default {d.samples})")
    p.add_argument(
        "--max-new-tokens", type=int, default=None, help="answer length cap for the data (default 96; heads 128)"
    )
    p.add_argument("--max-prompts", type=int, default=0, help="train prompts per category (default all)")
    p.add_argument(
        "--data-minutes",
        type=float,
        default=0.0,
        help="stop generating data after this many minutes in all (greedy answers first; default no limit)",
    )
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out", default="", help="draft folder (default assets/drafts/<name>)")
    p.add_argument("--work", default="", help="data, checkpoints and loss logs (default artifacts/distill)")
    p.add_argument("--resume", action="store_true", help="continue training from the last checkpoint")
    p.add_argument(
        "--eval-prompts", type=int, default=0, help="eval prompts per category for the model card (default all)"
    )
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation (the card then has no figures)")
    p.add_argument(
        "--eval-only", action="store_true", help="evaluate the saved draft and rewrite its card; no training"
    )
    p.add_argument("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, mps")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)")
    add_head_arguments(p)


def config_from_args(args) -> DistillConfig:
    given = {
        k: v
        for k, v in (
            ("steps", args.steps),
            ("batch_size", args.batch_size),
            ("lr", args.lr),
            ("max_new_tokens", args.max_new_tokens),
        )
        if v is not None
    }
    return DistillConfig(
        target=args.target,
        name=args.name,
        layers=args.layers,
        hidden=args.hidden,
        heads=args.heads,
        intermediate=args.intermediate,
        **given,
        samples=args.samples,
        max_prompts=args.max_prompts,
        data_minutes=args.data_minutes,
        seed=args.seed,
        out=args.out,
        work=args.work,
        device=args.device,
        resume=args.resume,
    )


def add_head_arguments(p) -> None:
    d = HeadConfig()
    g = p.add_argument_group("heads (--kind head)")
    g.add_argument("--vocab", type=int, default=d.vocab, help=f"draft vocabulary size (default {d.vocab})")
    g.add_argument(
        "--written",
        type=int,
        default=d.written,
        help="prompts per category the target writes for itself and answers (default 0)",
    )
    g.add_argument(
        "--document-tokens",
        type=int,
        default=d.document_tokens,
        help=f"tokens of local documents the target reads (default {d.document_tokens:,})",
    )
    g.add_argument(
        "--positions",
        type=int,
        default=d.positions,
        help="train on texts drawn at random up to N trained positions (default 0: all; for a data curve)",
    )
    g.add_argument(
        "--ttt-steps", type=int, default=d.ttt_steps, help=f"training-time-test steps (default {d.ttt_steps})"
    )
    g.add_argument(
        "--feature-weight",
        type=float,
        default=d.feature_weight,
        help=f"weight of the feature regression (default {d.feature_weight:g})",
    )
    g.add_argument("--seq-len", type=int, default=d.seq_len, help=f"tokens kept per text (default {d.seq_len})")
    g.add_argument("--train-minutes", type=float, default=d.train_minutes,
                   help="stop training after this many minutes, keeping the best check's weights (default 0: none)")
    g.add_argument("--answer-batch", type=int, default=d.answer_batch,
                   help=f"answers the target writes at once (default {d.answer_batch}; a GPU takes hundreds)")
    g.add_argument(
        "--feature-layers",
        type=_layer_list,
        default=d.feature_layers,
        help="the target's hidden states the head reads, fused (EAGLE-3), as indices: 0 the embeddings, i the "
        "output of layer i, the layer count the final state; for example 3,15,30 on a 30-layer target "
        "(default: the final state alone)",
    )
    g.add_argument(
        "--validate-every",
        type=int,
        default=d.validate_every,
        help="steps between agreement checks on the target's answers to the EVAL prompts (default 0: none)",
    )
    g.add_argument(
        "--patience",
        type=int,
        default=d.patience,
        help="stop after this many checks without a better one; the best check's weights are saved (default 0)",
    )
    g.add_argument("--eval-gamma", type=int, default=3, help="γ of the evaluation race (default 3)")
    g.add_argument("--eval-tokens", type=int, default=64, help="new tokens per prompt in the race (default 64)")


def _layer_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected layer indices separated by commas, like 3,15,30; got {text!r}")


def head_config_from_args(args) -> HeadConfig:
    given = {
        k: v
        for k, v in (
            ("steps", args.steps),
            ("batch_size", args.batch_size),
            ("lr", args.lr),
            ("max_new_tokens", args.max_new_tokens),
        )
        if v is not None
    }
    return HeadConfig(
        target=args.target,
        name=args.name,
        vocab=args.vocab,
        samples=args.samples,
        answer_minutes=args.data_minutes,
        max_prompts=args.max_prompts,
        written=args.written,
        document_tokens=args.document_tokens,
        positions=args.positions,
        validate_every=args.validate_every,
        patience=args.patience,
        seq_len=args.seq_len,
        ttt_steps=args.ttt_steps,
        feature_weight=args.feature_weight,
        feature_layers=args.feature_layers,
        answer_batch=args.answer_batch,
        train_minutes=args.train_minutes,
        seed=args.seed,
        out=args.out,
        work=args.work,
        device=args.device,
        resume=args.resume,
        **given,
    )


def run(args) -> int:
    """`python -m specviz distill ...`: distil (unless --eval-only), then evaluate and print the figures."""
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.kind == "head":
        return run_head(args)
    cfg = config_from_args(args)
    if args.eval_only:
        if not (cfg.run_dir / "summary.json").is_file() or not (cfg.out_dir / "config.json").is_file():
            raise SpecVizError(f"no distilled draft {cfg.draft_name} to evaluate; run without --eval-only first")
    else:
        print(f"draft saved to {distill(cfg)}")
    if args.no_eval:
        return 0
    target = load_model(cfg.target, device=cfg.device)
    ev = evaluate_drafts([cfg], target, per_category=args.eval_prompts)[cfg.draft_name]
    print(f"\n{'category':<14} {'prompts':>7} {'α':>6} {'acc/round':>9} {'c':>6} {'speedup':>8} {'identical':>9}")
    for name, f in [*ev["categories"].items(), ("all", ev["all"])]:
        print(
            f"{name:<14} {f['prompts']:>7} {f['alpha']:>6.3f} {f['mean_accepted_tokens']:>9.2f} {f['c']:>6.3f} "
            f"{f['speedup']:>7.2f}x {f['identical']:>5}/{f['prompts']}"
        )
    return 0


def run_head(args) -> int:
    """`python -m specviz distill --kind head ...`: data, training, then the race and the model card."""
    cfg = head_config_from_args(args)
    target = load_model(cfg.target, device=cfg.device)
    if args.eval_only:
        if not is_head(cfg.out_dir):
            raise SpecVizError(f"no head {cfg.head_name} to evaluate; run without --eval-only first")
    else:
        print(f"head saved to {train_head(cfg, target)}")
    if args.no_eval:
        return 0
    results = evaluate_head(
        cfg, target, args.eval_prompts, Decoding(gamma=args.eval_gamma, max_new_tokens=args.eval_tokens)
    )
    print(f"\n{'draft':<28} {'α':>6} {'acc/round':>9} {'c':>6} {'speedup':>8} {'identical':>9}")
    for name, e in results.items():
        f = e["all"]
        print(
            f"{label(name):<28} {f['alpha']:>6.3f} {f['mean_accepted_tokens']:>9.2f} "
            f"{f['c']:>6.3f} {f['speedup']:>7.2f}x {f['identical']:>5}/{f['prompts']}"
        )
    return 0
