"""Standalone tiny drafts: a small causal LM distilled from the target's own answers.

A draft pays off only when it is far cheaper than the target (small c) and still agrees with it
often (high α). For SmolLM2-135M on a CPU even the target's output head (576 x 49152) is a fifth of a
target step, so the draft has a small hidden size with the full vocabulary, one to three layers,
and an embedding initialised from the target's own (projected onto its top principal directions)
and tied to its head. The data are the target's answers (answers.py) with its top-k p; the draft
learns q ≈ p by cross-entropy to that top-k p in the shared loop (loop.py), bf16 matmuls where the
hardware has them; it ships as an fp16 transformers folder with a model card (card.py) whose
figures come from the EVAL prompts (evaluate.py).

`add_arguments` and `run` are the `python -m specviz distill` subcommand, for drafts and heads.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..config import Decoding
from ..errors import ConfigError, SpecVizError
from ..models import ROOT, SHIPPED_DRAFTS, LoadedModel, load_model
from . import answers
from .answers import Dataset, Sequence, eval_prompts, fast_autocast, train_prompts
from .card import _title, model_card, write_card
from .evaluate import measure_drafts
from .loop import Schedule, Training, batch_indices, train_loop

WORK_DIR = ROOT / "artifacts" / "distill"  # generated data, checkpoints and loss logs (git-ignored)


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
        return self.work_dir / f"data-{slug}-n{self.max_new_tokens}-t{self.temperature:g}-k{self.top_k}.safetensors"


# --- 1. data: the target's own answers (answers.py) -----------------------------------------------
def generate_data(target: LoadedModel, cfg: DistillConfig, prompts: list[dict] | None = None,
                  cache_path: Path | None = None, progress: bool = True) -> Dataset:
    """The target's answers to the train prompts for this draft's settings (cached; only what is missing is
    generated)."""
    return answers.generate_data(
        target,
        prompts if prompts is not None else train_prompts(cfg.max_prompts),
        cache_path or cfg.data_path(target.name),
        cfg.samples,
        cfg.max_new_tokens,
        cfg.temperature,
        cfg.top_k,
        batch=cfg.gen_batch,
        minutes=cfg.data_minutes,
        seed=cfg.seed,
        progress=progress,
    )


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
    rope = getattr(t, "rope_parameters", None) or {
        "rope_type": "default",
        "rope_theta": getattr(t, "rope_theta", 10000.0),
    }
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
    with fast_autocast(device):
        hidden = model.model(input_ids=batch.input_ids.to(device)).last_hidden_state
        rows, cols = batch.positions[:, 0].to(device), batch.positions[:, 1].to(device)
        logits = model.lm_head(hidden[rows, cols])
    ids = batch.topk_ids.to(device)
    losses, argmax = SoftCrossEntropy.apply(logits, ids, batch.topk_p.to(device))
    return losses.mean(), (argmax == ids[:, 0]).float().mean()


def train(
    cfg: DistillConfig,
    target: LoadedModel,
    data: Dataset,
    progress: bool = True,
    device: torch.device | None = None,
    on_step: Callable[[dict], None] | None = None,
) -> Training:
    """Train a fresh draft (or resume one) on the target's answers; checkpoints and a jsonl loss log in run_dir."""
    device = device or target.device
    model = new_draft(cfg, target).to(device)
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
    pad = target.tokenizer.pad_token_id or 0
    n = len(data.sequences)
    if n == 0:
        raise SpecVizError("no training data: the target produced no answers")

    def step_loss(step: int):
        batch = make_batch(
            [data.sequences[i] for i in batch_indices(step, cfg.batch_size, n, cfg.seed)], cfg.seq_len, pad
        )
        loss, agreement = distill_loss(model, batch, device)
        return loss, {"agreement": agreement.item(), "tokens": batch.tokens}

    schedule = Schedule(cfg.steps, cfg.lr, cfg.warmup, cfg.checkpoint_every)
    return train_loop(
        model, groups, schedule, step_loss, cfg.run_dir, cfg.resume, f"train {cfg.draft_name}", progress, on_step
    )


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


def summarize(
    cfg: DistillConfig, target: LoadedModel, model: torch.nn.Module, data: Dataset, training: Training
) -> dict:
    """What the model card says about how a draft was made; kept as summary.json beside its checkpoint."""
    c = model.config
    greedy = sum(s.sample == 0 for s in data.sequences)
    return {
        "draft": cfg.draft_name,
        "target": target.name,
        "target_title": _title(target),
        "shape": {
            "layers": c.num_hidden_layers,
            "hidden": c.hidden_size,
            "heads": c.num_attention_heads,
            "kv_heads": c.num_key_value_heads,
            "intermediate": c.intermediate_size,
            "vocab": c.vocab_size,
        },
        "parameters": sum(p.numel() for p in model.parameters()),
        "data": {
            "prompts": len({s.prompt_id for s in data.sequences}),
            "sequences": len(data.sequences),
            "greedy": greedy,
            "sampled": len(data.sequences) - greedy,
            "temperature": cfg.temperature,
            "max_new_tokens": cfg.max_new_tokens,
            "top_k": cfg.top_k,
            "answer_tokens": data.answer_tokens,
            "tokens": data.tokens,
            "minutes": data.seconds / 60,
        },
        "training": {
            "steps": training.steps,
            "batch_size": cfg.batch_size,
            "lr": cfg.lr,
            "warmup": cfg.warmup,
            "minutes": training.seconds / 60,
            "final_loss": training.final_loss,
            "final_agreement": training.final_agreement,
            "device": str(target.device),
            "torch": torch.__version__,
        },
    }


def evaluate_drafts(
    cfgs: list[DistillConfig], target: LoadedModel, per_category: int = 0, settings: Decoding | None = None
) -> dict[str, dict]:
    """Evaluate saved drafts, each timed in a pair with the target alone per prompt, and rewrite their model cards."""
    settings = settings or Decoding(gamma=4, max_new_tokens=64)
    evaluations = measure_drafts([cfg.out_dir for cfg in cfgs], target, eval_prompts(per_category), settings)
    results = {}
    for cfg in cfgs:
        evaluation = evaluations[str(cfg.out_dir)]
        (cfg.run_dir / "evaluation.json").write_text(json.dumps(evaluation, indent=1), encoding="utf-8")
        write_card(cfg.run_dir, cfg.out_dir)
        results[cfg.draft_name] = evaluation
    return results


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
