"""Distilling tiny drafts for a target that has no small sibling, and shipping them.

Notation as everywhere: p = target distribution, q = draft distribution, γ (`gamma`) = draft length,
α (`alpha`) = acceptance rate, c = draft/target cost ratio.

A draft pays off only when it is far cheaper than the target (small c) and still agrees with it
often (high α). For SmolLM2-135M on a CPU even the target's output head (576 x 49152) is a fifth of a
target step, so the draft has a small hidden size with the full vocabulary, one to three layers,
and an embedding initialised from the target's own (projected onto its top principal directions)
and tied to its head. Three stages, each resumable:

1. data: the target answers the TRAIN prompts itself, greedily once per prompt (the lab's default
   decoding) and with K samples for volume, recording its top-k log p at every answer position.
   Rows are cached in the work folder, so a rerun generates only what is missing.
2. train: the draft learns q ≈ p by cross-entropy to the target's top-k p (the target's tokens
   carry most of that mass), AdamW with warm-up and a cosine schedule, bf16 matmuls where the
   hardware has them, a loss log and checkpoints it resumes from.
3. save and evaluate: an fp16 transformers folder with the target's tokenizer and a model card
   with α, mean accepted tokens, c and the measured speedup on the EVAL prompts (never trained on).

`add_arguments` and `run` are the `python -m specviz distill` subcommand.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch

from .config import Decoding
from .errors import ConfigError, SpecVizError
from .models import ALIASES, EMBEDDED, ROOT, SHIPPED_DRAFTS, LoadedModel, load_model
from .prompts import CATEGORIES, encode, load_prompt_set

WORK_DIR = ROOT / "artifacts" / "distill"  # generated data, checkpoints and loss logs (git-ignored)
DATA_FORMAT = 1  # bump when the cached rows change shape


@dataclass(frozen=True)
class DistillConfig:
    """One distillation: the draft's shape, the data, the optimiser and where things go."""

    target: str = "default"  # the model the draft learns to imitate (and whose tokenizer it shares)
    name: str = ""  # the draft's folder name; "" = smol-draft-<layers>l<hidden>
    layers: int = 2  # decoder layers: each adds little cost next to the vocabulary head
    hidden: int = 256  # hidden size; the tied head (hidden x vocab) dominates the draft's cost
    heads: int = 0  # attention heads; 0 = hidden / 64 (the target's head size), at least 1
    kv_heads: int = 0  # key/value heads; 0 = half the heads (grouped-query, as the target), at least 1
    intermediate: int = 0  # MLP width; 0 = 4 x hidden (cheap beside the head, so generous)
    steps: int = 600  # optimiser steps (about 12 min for 2 x 256 on one CPU core)
    batch_size: int = 8  # sequences (prompt + answer) per step; with little data, more small steps learn faster
    seq_len: int = 384  # tokens kept per sequence; the longest train prompt plus 128 answer tokens fit
    lr: float = 4e-3  # peak AdamW learning rate (tiny models take a high one)
    warmup: int = 30  # linear warm-up steps, then cosine decay to a tenth of the peak
    weight_decay: float = 0.01  # AdamW weight decay
    embedding_lr: float = 1.0  # the tied embedding's learning rate relative to lr; 0 freezes the target's projection
    samples: int = 1  # sampled answers per train prompt, besides the greedy one (more data is the first thing to add)
    temperature: float = 0.8  # temperature of the sampled answers (greedy ones use argmax)
    max_new_tokens: int = 96  # answer length cap; evaluation decodes 64, so this covers it with room
    max_prompts: int = 0  # train prompts used per category; 0 = all of them
    data_minutes: float = 0.0  # generation budget in minutes over all runs (0 = none); greedy answers come first
    gen_batch: int = 32  # rows generated together (left-padded); the target's CPU throughput peaks near here
    top_k: int = 16  # p kept per position for distillation (the rest of p is tiny for this target)
    seed: int = 0  # seeds sampling, initialisation and batch order
    checkpoint_every: int = 50  # steps between checkpoints (one is always written at the end)
    out: str = ""  # draft folder; "" = assets/drafts/<name>
    work: str = ""  # data, checkpoints and logs; "" = artifacts/distill
    device: str = "auto"  # auto (CUDA, then MPS, then CPU), cpu, cuda, mps
    resume: bool = False  # continue training from the checkpoint in the work folder

    def __post_init__(self):
        for key in ("layers", "hidden", "steps", "batch_size", "seq_len", "max_new_tokens", "gen_batch", "top_k"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"{key.replace('_', ' ')} must be at least 1, got {getattr(self, key)}")
        if self.samples < 0 or self.max_prompts < 0:
            raise ConfigError("samples and max prompts must be 0 or more")
        if not self.lr > 0:
            raise ConfigError(f"the learning rate must be positive, got {self.lr}")
        if self.temperature <= 0:
            raise ConfigError(f"the sampling temperature must be positive, got {self.temperature}")
        if self.name and not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", self.name):
            raise ConfigError(f"draft names are lowercase letters, digits, '.', '_' and '-'; got {self.name!r}")

    @property
    def draft_name(self) -> str:
        return self.name or f"smol-draft-{self.layers}l{self.hidden}"

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else SHIPPED_DRAFTS / self.draft_name

    @property
    def work_dir(self) -> Path:
        return Path(self.work) if self.work else WORK_DIR

    @property
    def run_dir(self) -> Path:
        """Checkpoint and loss log of this draft."""
        return self.work_dir / self.draft_name

    def data_path(self, target_name: str) -> Path:
        """One cache per target and generation setting; `samples` only adds rows to it."""
        slug = re.sub(r"[^a-z0-9]+", "-", target_name.lower()).strip("-") or "target"
        return self.work_dir / f"data-{slug}-n{self.max_new_tokens}-t{self.temperature:g}-k{self.top_k}.pt"


# --- 1. data: the target's own answers ---------------------------------------------------------
@dataclass
class Sequence:
    """One answer of the target: the prompt ids, the answer ids and top-k log p at each answer position."""

    prompt_id: str
    category: str
    sample: int  # 0 = greedy; 1.. = sampled at the configured temperature
    prompt_ids: list[int]
    answer: torch.Tensor  # [T] int32 token ids (ends with EOS when the target stopped)
    topk_ids: torch.Tensor  # [T, k] int32: the target's most likely tokens at each answer position
    topk_logp: torch.Tensor  # [T, k] fp16: their log p (p over the full vocabulary)


@dataclass
class Dataset:
    sequences: list[Sequence]
    seconds: float  # generation time spent on these rows, summed over runs

    @property
    def answer_tokens(self) -> int:
        return sum(len(s.answer) for s in self.sequences)

    @property
    def tokens(self) -> int:
        return sum(len(s.answer) + len(s.prompt_ids) for s in self.sequences)


@torch.inference_mode()
def target_answers(
    target: LoadedModel,
    prompt_ids: list[list[int]],
    greedy: list[bool],
    max_new_tokens: int,
    temperature: float,
    top_k: int,
    generator: torch.Generator,
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Batched decoding with left padding: (answer, top-k ids, top-k log p) per row.

    A plain loop rather than `model.generate` so that only the top-k of p is kept at each step
    (the full logits of a batch would be hundreds of megabytes) and greedy and sampled rows can
    share one batch.
    """
    from transformers import DynamicCache

    model, device = target.model, target.device
    vocab = target.vocab_size
    eos = target.eos_ids
    pad = target.tokenizer.pad_token_id
    pad = pad if pad is not None else (min(eos) if eos else 0)
    width = max(len(ids) for ids in prompt_ids)
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in prompt_ids], device=device)
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompt_ids], device=device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    is_greedy = torch.tensor(greedy, device=device)
    eos_ids = torch.tensor(sorted(eos) or [-1], device=device)
    cache = DynamicCache(config=model.config)
    logits = model(input_ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                   use_cache=True, logits_to_keep=1).logits[:, -1, :vocab].float()
    rows = len(prompt_ids)
    done = torch.zeros(rows, dtype=torch.bool, device=device)
    lengths = torch.full((rows,), max_new_tokens, device=device)
    tokens, top_ids, top_logp = [], [], []
    for step in range(max_new_tokens):
        logp = torch.log_softmax(logits, dim=-1)
        values, ids = logp.topk(top_k, dim=-1)
        sampled = torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator)[:, 0]
        token = torch.where(is_greedy, logp.argmax(-1), sampled)
        tokens.append(token)
        top_ids.append(ids)
        top_logp.append(values)
        ended = ~done & torch.isin(token, eos_ids)
        lengths = torch.where(ended, step + 1, lengths)
        done |= ended
        if bool(done.all()) or step == max_new_tokens - 1:
            break
        mask = torch.cat([mask, mask.new_ones(rows, 1)], dim=1)
        positions = positions[:, -1:] + 1
        logits = model(token[:, None], attention_mask=mask, position_ids=positions, past_key_values=cache,
                       use_cache=True).logits[:, -1, :vocab].float()
    tokens, top_ids, top_logp = torch.stack(tokens, 1), torch.stack(top_ids, 1), torch.stack(top_logp, 1)
    out = []
    for r in range(rows):
        n = int(lengths[r])
        out.append((tokens[r, :n].int().cpu(), top_ids[r, :n].int().cpu(), top_logp[r, :n].half().cpu()))
    return out


def generate_data(
    target: LoadedModel,
    cfg: DistillConfig,
    prompts: list[dict] | None = None,
    cache_path: Path | None = None,
    progress: bool = True,
) -> Dataset:
    """The target's answers to the train prompts: cached rows plus whatever is missing, saved after each batch.

    With a time budget (`data_minutes`, counted over every run that filled the cache) generation
    stops once it is spent: all greedy answers come before any sampled one, so what is left out
    is sampled answers (the rows still missing are generated by a later run with a larger budget).
    """
    from tqdm import tqdm

    prompts = prompts if prompts is not None else train_prompts(cfg.max_prompts)
    cache_path = cache_path or cfg.data_path(target.name)
    cached: dict[tuple[str, int], Sequence] = {}
    seconds = 0.0
    if cache_path.is_file():
        saved = torch.load(cache_path, weights_only=False)
        if saved.get("format") == DATA_FORMAT:
            cached = {(s.prompt_id, s.sample): s for s in saved["sequences"]}
            seconds = saved.get("seconds", 0.0)
    wanted = [(p, j) for j in range(cfg.samples + 1) for p in prompts]  # every greedy answer first
    missing = [(p, j) for p, j in wanted if (p["id"], j) not in cached]
    budget = 60 * cfg.data_minutes
    if missing and not (budget and seconds >= budget):
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        generator = torch.Generator(device=target.device).manual_seed(cfg.seed + len(cached))
        bar = tqdm(total=len(missing), desc="target answers", unit="seq", file=sys.stderr, disable=not progress)
        for start in range(0, len(missing), cfg.gen_batch):
            if budget and seconds >= budget:
                break
            chunk = missing[start : start + cfg.gen_batch]
            ids = [encode(target.tokenizer, p["prompt"]) for p, _ in chunk]
            t0 = time.perf_counter()
            answers = target_answers(target, ids, [j == 0 for _, j in chunk], cfg.max_new_tokens,
                                     cfg.temperature, cfg.top_k, generator)
            seconds += time.perf_counter() - t0
            for (p, j), prompt_ids, (answer, top_ids, top_logp) in zip(chunk, ids, answers):
                cached[(p["id"], j)] = Sequence(p["id"], p.get("category", ""), j, prompt_ids, answer, top_ids, top_logp)
            _save_atomic({"format": DATA_FORMAT, "sequences": list(cached.values()), "seconds": seconds}, cache_path)
            bar.update(len(chunk))
        bar.close()
    return Dataset([cached[(p["id"], j)] for p, j in wanted if (p["id"], j) in cached], seconds)


def prompts_of(split: str, per_category: int = 0) -> list[dict]:
    """The TRAIN or EVAL split, optionally the first N prompts of each category."""
    rows = []
    for category in CATEGORIES:
        mine = load_prompt_set(category, split=split)
        rows += mine[:per_category] if per_category else mine
    return rows


def train_prompts(per_category: int = 0) -> list[dict]:
    return prompts_of("train", per_category)


def _save_atomic(obj, path: Path) -> None:
    scratch = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, scratch)
    scratch.replace(path)


# --- 2. the draft and its training ---------------------------------------------------------------
def draft_config(cfg: DistillConfig, target: LoadedModel):
    """A LlamaConfig for the draft: the target's vocabulary, special ids and RoPE, a tiny body."""
    from transformers import LlamaConfig

    t = target.model.config
    heads = cfg.heads or max(1, cfg.hidden // 64)
    if cfg.hidden % heads:
        raise ConfigError(f"hidden size {cfg.hidden} is not divisible by {heads} heads")
    kv_heads = cfg.kv_heads or max(1, heads // 2)
    if heads % kv_heads:
        raise ConfigError(f"{heads} heads cannot be grouped into {kv_heads} key/value heads")
    rope = getattr(t, "rope_parameters", None) or {"rope_type": "default", "rope_theta": getattr(t, "rope_theta", 10000.0)}
    return LlamaConfig(
        vocab_size=target.model.get_output_embeddings().weight.shape[0],
        hidden_size=cfg.hidden,
        intermediate_size=cfg.intermediate or 4 * cfg.hidden,
        num_hidden_layers=cfg.layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=cfg.hidden // heads,
        max_position_embeddings=getattr(t, "max_position_embeddings", 2048) or 2048,
        rms_norm_eps=getattr(t, "rms_norm_eps", 1e-5),
        rope_parameters=dict(rope),
        tie_word_embeddings=True,
        bos_token_id=getattr(t, "bos_token_id", None),
        eos_token_id=getattr(t, "eos_token_id", None),
        pad_token_id=getattr(t, "pad_token_id", None),
        initializer_range=0.02,
    )


def new_draft(cfg: DistillConfig, target: LoadedModel) -> torch.nn.Module:
    """A fresh draft whose tied embedding is the target's output embedding on its top principal directions.

    With the target's head W (vocab x d) = U S V^T, the draft's embedding is W V_h (vocab x h): the
    best rank-h view of the target's head, so q starts out ranking tokens as p would from a
    projected hidden state, and the few training steps go into the layers.
    """
    from transformers import LlamaForCausalLM

    config = draft_config(cfg, target)
    torch.manual_seed(cfg.seed)
    model = LlamaForCausalLM(config).float()
    head = target.model.get_output_embeddings().weight.detach().float().cpu()
    if cfg.hidden > head.shape[1]:
        raise ConfigError(f"the draft's hidden size ({cfg.hidden}) must not exceed the target's ({head.shape[1]})")
    _, vectors = torch.linalg.eigh(head.T @ head)  # eigenvectors of W^T W = right singular vectors of W
    basis = vectors[:, -cfg.hidden :].flip(-1)  # top h directions, largest first
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(head @ basis)
        # The final norm keeps its weight of 1. Scaling it up to the target's logit scale looks right
        # but makes the untrained draft predict its own input token with logits near 100 (the
        # embedding is tied and the random layers barely change the residual), a loss of 100
        # that costs the first steps and floods Adam's second moments.
    model.tie_weights()
    return model


@dataclass
class Batch:
    input_ids: torch.Tensor  # [B, L] right-padded
    positions: torch.Tensor  # [N, 2] (row, column) of each answer position that is trained on
    topk_ids: torch.Tensor  # [N, k]
    topk_p: torch.Tensor  # [N, k] p renormalised over the top k

    @property
    def tokens(self) -> int:
        return self.positions.shape[0]


def make_batch(sequences: list[Sequence], seq_len: int, pad: int) -> Batch:
    """Prompt + answer per row; the answer positions carry the target's top-k p as the label.

    The logits at column len(prompt) - 1 + t predict answer token t. Right padding needs no
    attention mask (causal attention never looks ahead) and keeps positions as at decoding time.
    """
    rows, places, ids, logps = [], [], [], []
    for r, s in enumerate(sequences):
        tokens = (s.prompt_ids + s.answer.tolist())[: seq_len + 1]
        kept = len(tokens) - len(s.prompt_ids)  # answer tokens that fit
        rows.append(tokens[:-1])
        if kept > 0:
            start = len(s.prompt_ids) - 1
            places.append(torch.stack([torch.full((kept,), r), torch.arange(start, start + kept)], 1))
            ids.append(s.topk_ids[:kept].long())
            logps.append(s.topk_logp[:kept].float())
    width = max(len(t) for t in rows)
    input_ids = torch.tensor([t + [pad] * (width - len(t)) for t in rows])
    logp = torch.cat(logps)
    return Batch(input_ids, torch.cat(places), torch.cat(ids), torch.softmax(logp, dim=-1))


def batch_indices(step: int, batch_size: int, n: int, seed: int) -> list[int]:
    """Sequences of one step: shuffled epochs, a function of the step alone (so resuming repeats nothing)."""
    out = []
    for i in range(step * batch_size, (step + 1) * batch_size):
        epoch, position = divmod(i, n)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
        out.append(int(order[position]))
    return out


class SoftCrossEntropy(torch.autograd.Function):
    """-Σ_k p_k log q(id_k) per row from logits z, with p given at k ids (Σ_k p_k = 1).

    Equal to logsumexp(z) - Σ_k p_k z_k, whose gradient is softmax(z) - p. Written out so that the
    vocabulary-sized exponentials are computed once and reused by the backward pass: on a CPU
    they, not the matmul, are most of a training step (log_softmax's backward computes them again).
    """

    @staticmethod
    def forward(ctx, logits, ids, p):
        z = logits.float()
        picked = (z.gather(1, ids) * p).sum(-1)
        top, argmax = z.max(-1)
        e = z.sub_(top[:, None]).exp_() if z is not logits else (z - top[:, None]).exp_()
        total = e.sum(-1)
        ctx.save_for_backward(e, total, ids, p)
        ctx.dtype = logits.dtype
        ctx.mark_non_differentiable(argmax)
        return top + total.log() - picked, argmax

    @staticmethod
    def backward(ctx, grad, _):
        e, total, ids, p = ctx.saved_tensors
        g = e * (grad / total)[:, None]  # softmax(z) * grad
        g.scatter_add_(1, ids, (-grad[:, None] * p).to(g.dtype))
        return g.to(ctx.dtype), None, None


def distill_loss(model: torch.nn.Module, batch: Batch, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of q to the target's top-k p, and how often argmax q is argmax p (greedy agreement).

    The head is applied only at answer positions: the prompt and the padding would cost as much
    as the answers in the vocabulary-sized matmul and teach nothing the draft is used for.
    """
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=_bf16_ok(device))
    with autocast:
        hidden = model.model(input_ids=batch.input_ids.to(device)).last_hidden_state
        rows, cols = batch.positions[:, 0].to(device), batch.positions[:, 1].to(device)
        logits = model.lm_head(hidden[rows, cols])
    ids = batch.topk_ids.to(device)
    losses, argmax = SoftCrossEntropy.apply(logits, ids, batch.topk_p.to(device))
    return losses.mean(), (argmax == ids[:, 0]).float().mean()


def _bf16_ok(device: torch.device) -> bool:
    """bf16 matmuls where they are fast: CUDA, and CPUs with AMX / AVX-512 bf16 (5x fp32 here)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return bool(getattr(torch.backends.cpu, "get_cpu_capability", lambda: "")() in ("AVX512", "AMX")) and _cpu_has_bf16()
    return False


def _cpu_has_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def learning_rate(step: int, cfg: DistillConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


@dataclass
class Training:
    model: torch.nn.Module
    steps: int
    seconds: float  # training wall time, summed over resumed runs
    final_loss: float  # mean loss over the last steps (up to 20)
    final_agreement: float  # mean greedy agreement over the same steps
    log: list[dict] = field(default_factory=list)


def train(
    cfg: DistillConfig, target: LoadedModel, data: Dataset, progress: bool = True, device: torch.device | None = None,
    on_step: Callable[[dict], None] | None = None,
) -> Training:
    """Train a fresh draft (or resume one) on the target's answers; checkpoints and a jsonl loss log in run_dir."""
    from tqdm import tqdm

    device = device or target.device
    run_dir = cfg.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint, log_path = run_dir / "checkpoint.pt", run_dir / "loss.jsonl"
    model = new_draft(cfg, target).to(device)
    model.train()
    # Training the embedding with the body learnt faster than freezing the target's projection
    # (loss 6.4 against 7.4 after 80 steps for 1 layer x 128), so it is trained at full rate by default.
    embedding = model.get_input_embeddings().weight
    embedding.requires_grad_(cfg.embedding_lr > 0)
    body = [p for p in model.parameters() if p is not embedding]
    groups = [
        {"params": [p for p in body if p.ndim >= 2], "weight_decay": cfg.weight_decay, "scale": 1.0},
        {"params": [p for p in body if p.ndim < 2], "weight_decay": 0.0, "scale": 1.0},
    ]
    if cfg.embedding_lr > 0:
        groups.append({"params": [embedding], "weight_decay": 0.0, "scale": cfg.embedding_lr})
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98))
    start, seconds, log = 0, 0.0, []
    if cfg.resume and checkpoint.is_file():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start, seconds = state["step"], state["seconds"]
        log = [row for row in _read_log(log_path) if row["step"] < start]  # drop steps after the checkpoint
    with log_path.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in log)
    pad = target.tokenizer.pad_token_id or 0
    n = len(data.sequences)
    if n == 0:
        raise SpecVizError("no training data: the target produced no answers")
    bar = tqdm(total=cfg.steps, initial=start, desc=f"train {cfg.draft_name}", unit="step", file=sys.stderr,
               disable=not progress)
    with log_path.open("a", encoding="utf-8") as f:
        for step in range(start, cfg.steps):
            t0 = time.perf_counter()
            batch = make_batch([data.sequences[i] for i in batch_indices(step, cfg.batch_size, n, cfg.seed)],
                               cfg.seq_len, pad)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, cfg) * group["scale"]
            loss, agreement = distill_loss(model, batch, device)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], 1.0)
            optimizer.step()
            seconds += time.perf_counter() - t0
            row = {"step": step, "loss": round(loss.item(), 5), "agreement": round(agreement.item(), 4),
                   "lr": learning_rate(step, cfg), "tokens": batch.tokens, "seconds": round(seconds, 2)}
            log.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            bar.set_postfix(loss=f"{row['loss']:.3f}", agree=f"{row['agreement']:.2f}")
            bar.update()
            if on_step:
                on_step(row)  # the app's live loss curve
            if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
                _save_atomic({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                              "step": step + 1, "seconds": seconds, "config": asdict(cfg)}, checkpoint)
    bar.close()
    model.eval()
    tail = log[-20:]
    return Training(
        model=model,
        steps=cfg.steps,
        seconds=seconds,
        final_loss=statistics.fmean(r["loss"] for r in tail) if tail else float("nan"),
        final_agreement=statistics.fmean(r["agreement"] for r in tail) if tail else float("nan"),
        log=log,
    )


def _read_log(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --- 3. save and evaluate ------------------------------------------------------------------------
def save_draft(model: torch.nn.Module, target: LoadedModel, folder: Path) -> Path:
    """A transformers folder: config, fp16 weights (the head tied, stored once), tokenizer, generation config."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shipped = copy.deepcopy(model).to("cpu", torch.float16)
    shipped.generation_config = copy.deepcopy(target.model.generation_config)
    shipped.save_pretrained(folder)
    target.tokenizer.save_pretrained(folder)
    return folder


def evaluate(
    draft: str | Path,
    target: LoadedModel,
    prompts: list[dict],
    settings: Decoding,
    baselines: dict | None = None,
    progress: bool = True,
) -> dict:
    """α, mean accepted tokens, c and measured speedup of a draft, per category and over all prompts.

    Means over prompts, as `specviz bench` reports them. Pass the same `baselines` dict to several
    calls to time the target alone once per prompt and compare every draft against the same run.
    """
    return measure_drafts([draft], target, prompts, settings, baselines, progress)[str(draft)]


def measure_drafts(
    drafts: list[str | Path],
    target: LoadedModel,
    prompts: list[dict],
    settings: Decoding,
    baselines: dict | None = None,
    progress: bool = True,
) -> dict[str, dict]:
    """`evaluate` for several drafts, prompt by prompt: the target alone, then each draft.

    Interleaving keeps a slow spell of a shared machine from falling on one draft only.
    """
    from tqdm import tqdm

    from .drafters import build_drafter
    from .measure import compare, timed, warm_up

    makers = {}
    for draft in drafts:
        loaded = load_model(str(draft), device=str(target.device), dtype=_dtype_name(target.dtype))
        makers[str(draft)] = lambda d=str(draft), m=loaded: build_drafter(d, target, load=lambda _: m)
    baselines = {} if baselines is None else baselines
    warm_up(target, None, prompts[0]["prompt"], settings)
    for make in makers.values():
        warm_up(target, make, prompts[0]["prompt"], settings)
    rows: dict[str, list[dict]] = {name: [] for name in makers}
    for item in tqdm(prompts, desc="evaluate", unit="prompt", file=sys.stderr, disable=not progress):
        if item["id"] not in baselines:
            baselines[item["id"]] = timed(target, None, item["prompt"], settings)
        for name, make in makers.items():
            c = compare(target, make, item["prompt"], settings, baseline=baselines[item["id"]], warm=False)
            s = c.summary()
            rows[name].append({
                "id": item["id"], "category": item.get("category", ""), "alpha": s["acceptance_rate"],
                "mean_accepted_tokens": s["mean_accepted_tokens"], "c": s["cost_ratio"], "speedup": s["speedup"],
                "verify_cost": s["verify_cost"], "identical": s["identical"],
                "target_step_ms": 1000 * c.baseline.step_seconds,
            })
    results = {}
    for name, mine in rows.items():
        categories = [cat for cat in CATEGORIES if any(r["category"] == cat for r in mine)]
        categories += sorted({r["category"] for r in mine} - set(categories))
        results[name] = {
            "settings": settings.to_dict(),
            "device": str(target.device),
            "threads": torch.get_num_threads(),
            "categories": {cat: _figures([r for r in mine if r["category"] == cat]) for cat in categories},
            "all": _figures(mine),
            "rows": mine,
        }
    return results


def _figures(rows: list[dict]) -> dict:
    mean = lambda key: statistics.fmean(r[key] for r in rows)  # noqa: E731
    return {
        "prompts": len(rows),
        "alpha": mean("alpha"),
        "mean_accepted_tokens": mean("mean_accepted_tokens"),
        "c": mean("c"),
        "speedup": mean("speedup"),
        "median_speedup": statistics.median(r["speedup"] for r in rows),
        "verify_cost": mean("verify_cost"),
        "target_step_ms": mean("target_step_ms"),
        "identical": sum(r["identical"] for r in rows),
    }


def _dtype_name(dtype: torch.dtype) -> str:
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "auto")


def eval_prompts(per_category: int = 0) -> list[dict]:
    return prompts_of("eval", per_category)


def summarize(cfg: DistillConfig, target: LoadedModel, model: torch.nn.Module, data: Dataset, training: Training) -> dict:
    """What the model card says about how a draft was made; kept as summary.json beside its checkpoint."""
    c = model.config
    greedy = sum(s.sample == 0 for s in data.sequences)
    return {
        "draft": cfg.draft_name,
        "target": target.name,
        "target_title": _title(target),
        "shape": {"layers": c.num_hidden_layers, "hidden": c.hidden_size, "heads": c.num_attention_heads,
                  "kv_heads": c.num_key_value_heads, "intermediate": c.intermediate_size, "vocab": c.vocab_size},
        "parameters": sum(p.numel() for p in model.parameters()),
        "data": {"prompts": len({s.prompt_id for s in data.sequences}), "sequences": len(data.sequences),
                 "greedy": greedy, "sampled": len(data.sequences) - greedy, "temperature": cfg.temperature,
                 "max_new_tokens": cfg.max_new_tokens, "top_k": cfg.top_k, "answer_tokens": data.answer_tokens,
                 "tokens": data.tokens, "minutes": data.seconds / 60},
        "training": {"steps": training.steps, "batch_size": cfg.batch_size, "lr": cfg.lr, "warmup": cfg.warmup,
                     "minutes": training.seconds / 60, "final_loss": training.final_loss,
                     "final_agreement": training.final_agreement, "device": str(target.device),
                     "torch": torch.__version__},
    }


def _title(target: LoadedModel) -> str:
    key = ALIASES.get(target.name, target.name)
    return EMBEDDED[key].title if key in EMBEDDED else target.name


def model_card(summary: dict, evaluation: dict | None) -> str:
    """README.md of a shipped draft: what it is, how it was made, and how it does on the eval prompts."""
    shape, data, tr = summary["shape"], summary["data"], summary["training"]
    name = summary["draft"]
    lines = [
        f"# {name}",
        "",
        f"A draft model for speculative decoding with the SpecViz target **{summary['target']}** "
        f"({summary['target_title']}), distilled by `python -m specviz distill`. It shares the target's tokenizer, "
        f"so it drafts for it directly: `python -m specviz run --draft {name} --prompt \"...\"`.",
        "",
        "## Shape",
        "",
        f"- LlamaForCausalLM, {shape['layers']} layer(s), hidden {shape['hidden']}, {shape['heads']} attention heads "
        f"({shape['kv_heads']} key/value), MLP {shape['intermediate']}, vocabulary {shape['vocab']}, head tied to the embedding",
        f"- {summary['parameters']:,} parameters, stored in fp16 (SpecViz loads it in fp32 on the CPU)",
        f"- embedding initialised from the target's output embedding projected onto its top {shape['hidden']} "
        "principal directions",
        "",
        "## Training",
        "",
        f"- data: the target's own answers to {data['prompts']} TRAIN prompts (assets/prompts, split train): "
        f"{data['sequences']} sequences ({data['greedy']} greedy, {data['sampled']} sampled at temperature "
        f"{data['temperature']:g}), {data['answer_tokens']:,} answer tokens ({data['tokens']:,} with the prompts), "
        f"at most {data['max_new_tokens']} new tokens each; generated in {data['minutes']:.1f} min",
        f"- loss: cross-entropy of q to the target's top-{data['top_k']} p at every answer position",
        f"- {tr['steps']} steps of {tr['batch_size']} sequences, AdamW, peak lr {tr['lr']:g}, {tr['warmup']} warm-up "
        f"steps then cosine decay; {tr['minutes']:.1f} min of training on {tr['device']} (torch {tr['torch']})",
        f"- final loss {tr['final_loss']:.3f}; argmax q = argmax p on {tr['final_agreement']:.1%} of training "
        "positions (mean of the last 20 steps)",
    ]
    if evaluation:
        st = evaluation["settings"]
        mode = "greedy" if st["sampling"]["temperature"] == 0 else f"temperature {st['sampling']['temperature']:g}"
        a = evaluation["all"]
        lines += [
            "",
            "## On the EVAL prompts (never trained on)",
            "",
            f"{mode}, γ = {st['gamma']}, {st['max_new_tokens']} new tokens, exact verification, on "
            f"{evaluation.get('device', 'cpu')} ({evaluation.get('threads', '?')} torch threads); measured by `specviz.measure.compare` against the target alone, "
            "means over prompts (α = accepted / drafted; c = draft seconds per drafted token / target seconds per "
            "decoding step).",
            "",
            "| category | prompts | α | mean accepted tokens | c | measured speedup | identical output |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for cat, f in [*evaluation["categories"].items(), ("**all**", a)]:
            lines.append(
                f"| {cat} | {f['prompts']} | {f['alpha']:.3f} | {f['mean_accepted_tokens']:.2f} | {f['c']:.3f} | "
                f"{f['speedup']:.2f}x | {f['identical']}/{f['prompts']} |"
            )
        # The target alone makes one token per step; a round costs γc steps of drafting plus one verification.
        break_even = st["gamma"] * a["c"] + a["verify_cost"]
        lines += [
            "",
            f"A target decoding step took {a['target_step_ms']:.0f} ms on average, a verification forward (γ+1 "
            f"tokens) {a['verify_cost']:.2f} steps; median speedup {a['median_speedup']:.2f}x. The machine was "
            "shared with other jobs, so timings are noisy.",
            "",
            f"A round costs γc + {a['verify_cost']:.2f} = {break_even:.2f} target steps, so the draft pays off once a "
            f"round yields more than {break_even:.2f} tokens; it yields {a['mean_accepted_tokens']:.2f}"
            + (" (faster than the target alone)." if a["mean_accepted_tokens"] > break_even
               else ", so on this machine it makes decoding slower, not faster."),
        ]
    return "\n".join(lines) + "\n"


def write_card(cfg: DistillConfig) -> Path:
    """(Re)write a draft's README.md from the summary.json and evaluation.json in its run folder."""
    summary = json.loads((cfg.run_dir / "summary.json").read_text(encoding="utf-8"))
    ev_path = cfg.run_dir / "evaluation.json"
    evaluation = json.loads(ev_path.read_text(encoding="utf-8")) if ev_path.is_file() else None
    card = cfg.out_dir / "README.md"
    card.write_text(model_card(summary, evaluation), encoding="utf-8")
    return card


def evaluate_drafts(cfgs: list[DistillConfig], target: LoadedModel, per_category: int = 0,
                    settings: Decoding | None = None) -> dict[str, dict]:
    """Evaluate saved drafts against one baseline per prompt and rewrite their model cards."""
    settings = settings or Decoding(gamma=4, max_new_tokens=64)
    evaluations = measure_drafts([cfg.out_dir for cfg in cfgs], target, eval_prompts(per_category), settings)
    results = {}
    for cfg in cfgs:
        evaluation = evaluations[str(cfg.out_dir)]
        (cfg.run_dir / "evaluation.json").write_text(json.dumps(evaluation, indent=1), encoding="utf-8")
        write_card(cfg)
        results[cfg.draft_name] = evaluation
    return results


# --- the subcommand ------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    d = DistillConfig()
    p.add_argument("--target", default=d.target, help="target to distil from: default, a local folder or a hub id")
    p.add_argument("--name", default="", help="draft name (default smol-draft-<layers>l<hidden>)")
    p.add_argument("--layers", type=int, default=d.layers, help=f"decoder layers (default {d.layers})")
    p.add_argument("--hidden", type=int, default=d.hidden, help=f"hidden size (default {d.hidden})")
    p.add_argument("--heads", type=int, default=0, help="attention heads (default hidden/64)")
    p.add_argument("--intermediate", type=int, default=0, help="MLP width (default 4 x hidden)")
    p.add_argument("--steps", type=int, default=d.steps, help=f"training steps (default {d.steps})")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help=f"sequences per step (default {d.batch_size})")
    p.add_argument("--lr", type=float, default=d.lr, help=f"peak learning rate (default {d.lr:g})")
    p.add_argument("--samples", type=int, default=d.samples,
                   help=f"sampled target answers per train prompt, besides the greedy one (default {d.samples})")
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens, help="answer length cap for the data")
    p.add_argument("--max-prompts", type=int, default=0, help="train prompts per category (default all)")
    p.add_argument("--data-minutes", type=float, default=0.0,
                   help="stop generating data after this many minutes in all (greedy answers first; default no limit)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out", default="", help="draft folder (default assets/drafts/<name>)")
    p.add_argument("--work", default="", help="data, checkpoints and loss logs (default artifacts/distill)")
    p.add_argument("--resume", action="store_true", help="continue training from the last checkpoint")
    p.add_argument("--eval-prompts", type=int, default=0, help="eval prompts per category for the model card (default all)")
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation (the card then has no figures)")
    p.add_argument("--eval-only", action="store_true", help="evaluate the saved draft and rewrite its card; no training")
    p.add_argument("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, mps")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)")


def config_from_args(args) -> DistillConfig:
    return DistillConfig(
        target=args.target, name=args.name, layers=args.layers, hidden=args.hidden, heads=args.heads,
        intermediate=args.intermediate, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
        samples=args.samples, max_new_tokens=args.max_new_tokens, max_prompts=args.max_prompts,
        data_minutes=args.data_minutes, seed=args.seed,
        out=args.out, work=args.work, device=args.device, resume=args.resume,
    )


def distill(cfg: DistillConfig, say: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> Path:
    """Data, training and the saved folder with its card (without figures until `evaluate_drafts`)."""
    target = load_model(cfg.target, device=cfg.device, progress=say)
    data = generate_data(target, cfg)
    say(f"data: {len(data.sequences)} sequences, {data.answer_tokens:,} answer tokens ({data.seconds / 60:.1f} min)")
    training = train(cfg, target, data)
    folder = save_draft(training.model, target, cfg.out_dir)
    summary = summarize(cfg, target, training.model, data, training)
    (cfg.run_dir / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    (folder / "README.md").write_text(model_card(summary, None), encoding="utf-8")
    say(f"saved {folder} (loss {training.final_loss:.3f}, greedy agreement {training.final_agreement:.1%})")
    return folder


def run(args) -> int:
    """`python -m specviz distill ...`: distil (unless --eval-only), then evaluate and print the figures."""
    if args.threads:
        torch.set_num_threads(args.threads)
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
        print(f"{name:<14} {f['prompts']:>7} {f['alpha']:>6.3f} {f['mean_accepted_tokens']:>9.2f} {f['c']:>6.3f} "
              f"{f['speedup']:>7.2f}x {f['identical']:>5}/{f['prompts']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point until the CLI hooks `distill` in: python -m specviz.distill ..."""
    parser = argparse.ArgumentParser(prog="python -m specviz.distill", description="Distil a tiny draft for a target.")
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except SpecVizError as exc:
        print(f"specviz: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
