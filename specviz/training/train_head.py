"""Training a feature-level draft head (specviz.drafters.head_net) on the target's captured features.

Data: the target's answers to the TRAIN prompts (greedy and sampled), optionally prompts it wrote
for itself, and local documents it reads (texts.py); one teacher-forced forward captures its
feature f at every position (features.py). The draft vocabulary is the N tokens the target writes
most (its answers, and its greedy choice at every captured position).

Loss, per pair j = (f_j, e(x_{j+1})) whose next token is part of an answer:
- soft cross-entropy of q to the target's p at x_{j+2}, both on the draft vocabulary. p is the
  target's own output head applied to f_{j+1}, so it is recomputed exactly from the features;
- feature regression: smooth L1 between the predicted and the true f_{j+1};
- training-time test: the head is unrolled for `ttt_steps` steps on its own predicted features,
  each step attending exactly as it will when drafting (true keys up to the chain's start, then the
  keys of its own earlier steps), and each step's loss is added with a decaying weight.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

import torch

from ..drafters.head_net import DraftHead, HeadInfo, HeadShape, embedding_check, save_head
from ..errors import ConfigError, SpecVizError
from ..models import SHIPPED_DRAFTS, LoadedModel, load_model
from . import store
from .agreement import HeldOut, agreement, eval_answers
from .answers import Dataset, bf16_ok, generate_data, train_prompts
from .features import Features, capture, layers_suffix, load_features, on_device, shard_names, subset
from .head_loss import head_loss, make_batch
from .loop import Schedule, Training, batch_indices, read_log, train_loop
from .texts import answer_texts, document_texts, written_prompts

WORK_DIR = SHIPPED_DRAFTS.parent.parent / "artifacts" / "heads"  # data, features, checkpoints (git-ignored)


@dataclass(frozen=True)
class HeadConfig:
    """One head: its data, its draft vocabulary, the optimiser and where things go."""

    target: str = "default"  # the model whose hidden states the head reads
    name: str = ""  # folder name; "" = smol-head-<vocab in k>
    vocab: int = 8192  # draft vocabulary: the target's N most written tokens (acceptance never exceeds its coverage)
    samples: int = 1  # sampled answers per TRAIN prompt, besides the greedy one
    max_new_tokens: int = 128  # answer length cap for the target's answers
    temperature: float = 0.8  # temperature of the sampled answers
    answer_minutes: float = 0.0  # generation budget for each set of answers (0 = none); greedy answers come first
    max_prompts: int = 0  # TRAIN prompts per category the target answers; 0 = all of them
    written: int = 0  # prompts per category the target writes for itself (answered greedily and `samples` times)
    bf16_answers: bool = True  # a bf16 copy of the target writes the answers where the hardware has bf16 (faster)
    answer_batch: int = 48  # answers written at once (48: 507 tokens/s against 396 at 16 on this CPU, in bf16)
    document_tokens: int = 250_000  # tokens of local documents (Python's reference and code) the target reads
    positions: int = 0  # train on texts drawn at random up to this many trained positions (0 = all): the data curve
    steps: int = 2000  # optimiser steps
    batch_size: int = 8  # texts per step
    seq_len: int = 320  # tokens kept per text
    lr: float = 2e-3  # peak AdamW learning rate (a 4M-parameter head from scratch takes a high one)
    warmup: int = 100  # linear warm-up steps, then cosine decay
    weight_decay: float = 0.0
    ttt_steps: int = 3  # training-time test: drafting steps unrolled on the head's own predictions
    step_decay: float = 0.7  # loss weight of unrolled step s is step_decay ** (s - 1)
    feature_weight: float = 0.2  # weight of the feature regression beside the cross-entropy
    # The target's hidden states the head reads (HeadShape.layers): () its final one; several are fused (EAGLE-3)
    feature_layers: tuple[int, ...] = ()
    seed: int = 0
    checkpoint_every: int = 100
    validate_every: int = 0
    patience: int = 0  # stop after this many checks without a better one (0 = run every step)
    train_minutes: float = 0.0  # stop training after this many minutes (0 = no limit); the best check's weights stay
    out: str = ""  # head folder; "" = assets/drafts/<name>
    work: str = ""  # data, features, checkpoints; "" = artifacts/heads
    device: str = "auto"
    resume: bool = False

    def __post_init__(self):
        for key in ("vocab", "steps", "batch_size", "seq_len", "ttt_steps", "max_new_tokens", "answer_batch"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"{key.replace('_', ' ')} must be at least 1, got {getattr(self, key)}")
        if self.samples < 0 or self.written < 0 or self.document_tokens < 0 or self.positions < 0:
            raise ConfigError("samples, written prompts, document tokens and positions must be 0 or more")
        if not self.lr > 0:
            raise ConfigError(f"the learning rate must be positive, got {self.lr}")
        if any(int(i) < 0 for i in self.feature_layers) or len(set(self.feature_layers)) != len(self.feature_layers):
            raise ConfigError(f"feature layers must be distinct and 0 or more, got {list(self.feature_layers)}")

    @property
    def head_name(self) -> str:
        return self.name or f"smol-head-{self.vocab // 1024}k"

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else SHIPPED_DRAFTS / self.head_name

    @property
    def work_dir(self) -> Path:
        return Path(self.work) if self.work else WORK_DIR

    @property
    def run_dir(self) -> Path:
        return self.work_dir / self.head_name

    def slug(self, target_name: str) -> str:
        return "".join(ch if ch.isalnum() else "-" for ch in target_name.lower()).strip("-") or "target"


# --- data ----------------------------------------------------------------------------------------
@dataclass
class HeadData:
    features: Features
    answer_tokens: Counter  # tokens of the target's own answers (for the draft vocabulary)
    summary: dict  # what the data is, for the model card


def own_answers(cfg: HeadConfig, target: LoadedModel, progress: bool = True) -> tuple[Dataset, Dataset | None]:
    """The target's answers to the TRAIN prompts, and to the prompts it wrote for itself (None without them).

    Both are cached in the work folder, so the suffix drafter's corpus (scripts/make_suffix_corpus.py)
    is made from the same answers as the head's data, and whichever runs second generates nothing.
    """
    slug, work = cfg.slug(target.name), cfg.work_dir
    answers = generate_data(
        target,
        train_prompts(cfg.max_prompts),
        work / f"answers-{slug}-n{cfg.max_new_tokens}-t{cfg.temperature:g}-k16.safetensors",
        cfg.samples,
        cfg.max_new_tokens,
        cfg.temperature,
        16,
        batch=cfg.answer_batch,
        minutes=cfg.answer_minutes,
        seed=cfg.seed,
        fast=cfg.bf16_answers,
        progress=progress,
    )
    if not cfg.written:
        return answers, None
    asks = written_prompts(target, cfg.written, work / f"written-{slug}.json", seed=cfg.seed, progress=progress)
    own = generate_data(
        target,
        asks,
        work / f"written-answers-{slug}-n{cfg.max_new_tokens}.safetensors",
        cfg.samples,
        cfg.max_new_tokens,
        cfg.temperature,
        16,
        batch=cfg.answer_batch,
        minutes=cfg.answer_minutes,
        seed=cfg.seed,
        fast=cfg.bf16_answers,
        progress=progress,
    )
    return answers, own


def collect(
    cfg: HeadConfig,
    target: LoadedModel,
    progress: bool = True,
    say: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
) -> HeadData:
    """Answers, written prompts and documents, then the target's features over all of them (each step resumes)."""
    slug = cfg.slug(target.name)
    work = cfg.work_dir
    t0 = time.perf_counter()
    answers, own = own_answers(cfg, target, progress)
    texts = answer_texts(answers.sequences, "answers")
    written_seconds = 0.0
    if own is not None:
        texts += answer_texts(own.sequences, "written")
        written_seconds = own.seconds
    docs = document_texts(target.tokenizer, cfg.document_tokens) if cfg.document_tokens else []
    texts += docs
    layers = _layers(cfg, target)
    folder = work / f"features-{slug}{layers_suffix(layers)}"
    manifest = capture(target, texts, folder, progress=progress, say=say, layers=layers)
    features = load_features(folder, [n for n in shard_names(texts) if n in manifest["shards"]])
    counts = Counter()
    for s in answers.sequences + (own.sequences if own else []):
        counts.update(s.answer.tolist())
    if cfg.positions:
        features = subset(features, cfg.positions, cfg.seed)
        counts = Counter(t for toks, start in zip(features.tokens, features.answer_from) for t in toks[start:].tolist())
    summary = {
        "answers": {
            "dtype": "bf16" if cfg.bf16_answers and bf16_ok(target.device) else "fp32",
            "prompts": len({s.prompt_id for s in answers.sequences}),
            "sequences": len(answers.sequences),
            "tokens": answers.answer_tokens,
            "samples": cfg.samples,
            "temperature": cfg.temperature,
            "max_new_tokens": cfg.max_new_tokens,
            "minutes": answers.seconds / 60,
        },
        "written": {
            "prompts": len(own.sequences) if own else 0,
            "tokens": own.answer_tokens if own else 0,
            "minutes": written_seconds / 60,
        },
        "documents": {"texts": len(docs), "tokens": sum(len(t.ids) - t.answer_from for t in docs)},
        "positions": features.positions,
        "trained_positions": features.trained_positions,
        "capture_minutes": manifest["seconds"] / 60,
        "minutes": (time.perf_counter() - t0) / 60,
    }
    say(
        f"data: {features.trained_positions:,} trained positions ({features.positions:,} read), "
        f"features captured in {manifest['seconds'] / 60:.1f} min"
    )
    return HeadData(features, counts, summary)


def three_depths(layers: int) -> tuple[int, ...]:
    """EAGLE-3's choice for a target of `layers` layers: an early layer's output, the middle one's and the final
    state (3, 15 and 30 on the embedded 30-layer target), as hidden-state indices."""
    return tuple(sorted({min(3, layers), max(1, layers // 2), layers}))


def _layers(cfg: HeadConfig, target: LoadedModel) -> tuple[int, ...]:
    """The config's feature layers, checked against the target (its hidden-state list has layers + 1 entries)."""
    count = target.model.config.num_hidden_layers
    if any(i > count for i in cfg.feature_layers):
        raise ConfigError(f"{target.name} has {count} layers: feature layers go from 0 (the embeddings) to {count} "
                          f"(its final state), got {list(cfg.feature_layers)}")
    return tuple(cfg.feature_layers)


@torch.no_grad()
def draft_vocabulary(target: LoadedModel, data: HeadData, size: int) -> list[int]:
    """The `size` tokens the target writes most: its answers' tokens and its greedy choice at every position read."""
    out = target.model.get_output_embeddings()
    counts = Counter(data.answer_tokens)
    for feats in data.features.features:
        for chunk in feats.split(4096):
            logits = out(chunk.to(out.weight.device, out.weight.dtype))  # features wait on the CPU
            counts.update(logits[:, : target.vocab_size].argmax(-1).tolist())
    ranked = [t for t, _ in counts.most_common(size)]
    if len(ranked) < size:  # pad with ids never seen, lowest first, so the size is what was asked
        seen = set(ranked)
        ranked += [t for t in range(target.vocab_size) if t not in seen][: size - len(ranked)]
    return ranked


def coverage(tokens: list[int], vocab: list[int]) -> float:
    """The share of `tokens` that the draft vocabulary contains (acceptance can never exceed it)."""
    inside = set(vocab)
    return sum(t in inside for t in tokens) / max(1, len(tokens))


# --- training, saving ----------------------------------------------------------------------------
def new_head(target: LoadedModel, seed: int, layers: tuple[int, ...] = ()) -> DraftHead:
    torch.manual_seed(seed)
    head = DraftHead(replace(HeadShape.of_target(target.model.config), layers=layers))
    norm = getattr(target.model.base_model, "norm", None)
    if norm is not None:  # start the output norm at the target's, so predicted features begin at its scale
        with torch.no_grad():
            head.out_norm.weight.copy_(norm.weight.float())
    return head


def weight_groups(head: DraftHead, weight_decay: float) -> list[dict]:
    """AdamW's parameter groups for `train_loop`: weight decay on the head's matrices only."""
    return [
        {"params": [p for p in head.parameters() if p.ndim >= 2], "weight_decay": weight_decay, "scale": 1.0},
        {"params": [p for p in head.parameters() if p.ndim < 2], "weight_decay": 0.0, "scale": 1.0},
    ]


def train(
    cfg: HeadConfig,
    target: LoadedModel,
    data: HeadData,
    vocab: list[int],
    progress: bool = True,
    on_step: Callable[[dict], None] | None = None,
    held: HeldOut | None = None,
) -> Training:
    device = target.device
    head = new_head(target, cfg.seed, _layers(cfg, target)).to(device)
    if device.type == "cuda":  # every batch is cut from data already on the GPU, not copied over each step
        data = replace(data, features=on_device(data.features, device))
    embedding = target.model.get_input_embeddings().weight.detach().float()
    # The target's output head on the draft vocabulary: p from true features, q from predicted ones.
    rows = target.model.get_output_embeddings().weight.detach().float()[torch.tensor(vocab, device=device)]
    n = len(data.features.tokens)
    if n == 0:
        raise SpecVizError("no training data: the target read no text")
    groups = weight_groups(head, cfg.weight_decay)

    seen = [0]  # answer positions trained on so far, for the data curve of the checks (and in the loss log)

    def step_loss(step: int):
        if step and not seen[0]:  # a resumed run: count on from the loss log, which holds the steps before this one
            seen[0] = int(next((row.get("positions", 0) for row in reversed(read_log(cfg.run_dir / "loss.jsonl"))), 0))
        batch = make_batch(data.features, batch_indices(step, cfg.batch_size, n, cfg.seed), cfg.seq_len, device)
        seen[0] += int(batch.mask.sum())
        loss, figures = head_loss(
            head, rows, embedding, batch, device, cfg.ttt_steps, cfg.step_decay, cfg.feature_weight
        )
        return loss, {**figures, "positions": seen[0]}

    vocab_ids = torch.tensor(vocab, device=device)

    def validate() -> dict:
        alphas = agreement(head, held, embedding, rows, vocab_ids, steps=3)
        # the score: expected drafts kept per round of three, α1 + α1·α2 + α1·α2·α3
        return {
            "score": alphas[0] * (1 + alphas[1] * (1 + alphas[2])),
            "positions": seen[0],
            **{f"alpha_{s}": a for s, a in enumerate(alphas, start=1)},
        }

    schedule = Schedule(
        cfg.steps,
        cfg.lr,
        cfg.warmup,
        cfg.checkpoint_every,
        validate_every=cfg.validate_every if held else 0,
        patience=cfg.patience,
        minutes=cfg.train_minutes,
    )
    return train_loop(
        head,
        groups,
        schedule,
        step_loss,
        cfg.run_dir,
        cfg.resume,
        f"train {cfg.head_name}",
        progress,
        on_step,
        validate if held else None,
    )


def info_for(cfg: HeadConfig, target: LoadedModel, vocab: list[int], data: HeadData, training: Training) -> HeadInfo:
    embedding = target.model.get_input_embeddings().weight.detach().float().cpu()
    return HeadInfo(
        shape=replace(HeadShape.of_target(target.model.config), layers=_layers(cfg, target)),
        vocab=vocab,
        target=target.name,
        target_layers=target.model.config.num_hidden_layers,
        target_vocab=embedding.shape[0],
        embedding_check=embedding_check(embedding, vocab),
        trained={
            "config": asdict(cfg),
            "data": data.summary,
            "steps": training.steps,
            "minutes": training.seconds / 60,
            "final_loss": training.final_loss,
            "final_agreement": training.final_agreement,
            "device": str(target.device),
            "checks": training.checks,
            "best_step": training.best_step,
            "torch": torch.__version__,
            "parameters": sum(p.numel() for p in training.model.parameters()),
        },
    )


def train_head(
    cfg: HeadConfig,
    target: LoadedModel | None = None,
    progress: bool = True,
    say: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
    on_step: Callable[[dict], None] | None = None,
) -> Path:
    """Data, vocabulary, training and the saved head folder (its card gets figures from `evaluate`)."""
    target = target or load_model(cfg.target, device=cfg.device, progress=say)
    data = collect(cfg, target, progress, say)
    vocab_path = cfg.run_dir / "vocab.json"
    vocab = store.load_json(vocab_path) if cfg.resume else None
    if vocab is None or len(vocab) != cfg.vocab:
        vocab = draft_vocabulary(target, data, cfg.vocab)
        store.save_json(vocab_path, vocab)
    train_tokens = [
        t for toks, start in zip(data.features.tokens, data.features.answer_from) for t in toks[start:].tolist()
    ]
    data.summary["vocab_coverage_train"] = coverage(train_tokens, vocab)
    held = (
        eval_answers(target, cfg.work_dir, cfg.slug(target.name), progress=progress, say=say,
                     layers=_layers(cfg, target))
        if cfg.validate_every
        else None
    )
    training = train(cfg, target, data, vocab, progress, on_step, held)
    folder = save_head(training.model, info_for(cfg, target, vocab, data, training), cfg.out_dir)
    say(f"saved {folder} (loss {training.final_loss:.3f}, agreement {training.final_agreement:.1%})")
    return folder
