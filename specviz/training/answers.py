"""Step 1: the target answers prompts itself, keeping its top-k p at every answer position.

Greedy answers are what the lab decodes by default; sampled ones add volume and variety. Rows are
cached in one safetensors file per target and setting and saved after every batch, so a rerun
generates only what is missing.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

from ..fast_path import bf16_ok
from ..models import LoadedModel
from ..prompts import CATEGORIES, encode, load_prompt_set
from . import store

DATA_FORMAT = 2  # 2: safetensors (1 was a pickle); bump when the cached rows change shape


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


def prompts_of(split: str, per_category: int = 0) -> list[dict]:
    """The TRAIN or EVAL split, optionally the first N prompts of each category."""
    rows = []
    for category in CATEGORIES:
        mine = load_prompt_set(category, split=split)
        rows += mine[:per_category] if per_category else mine
    return rows


def train_prompts(per_category: int = 0) -> list[dict]:
    return prompts_of("train", per_category)


def eval_prompts(per_category: int = 0) -> list[dict]:
    return prompts_of("eval", per_category)


_TWINS: dict[int, LoadedModel] = {}  # bf16 copies of targets (by id of the model), for writing data quickly


def bf16_twin(target: LoadedModel) -> LoadedModel:
    """A copy of the target with bf16 weights (packed again on first use), for writing training data quickly.

    Autocast converts every weight on every call; weights kept in bf16 skip that and use oneDNN's
    packed bf16 products: 352 against 219 answer tokens/s at a batch of 32 on this project's AMD EPYC.
    """
    if target.dtype == torch.bfloat16:
        return target
    if id(target.model) not in _TWINS:
        with torch.inference_mode(False), torch.no_grad():  # the copy stays a normal tensor (packing reads its version)
            twin = copy.deepcopy(target.model).to(torch.bfloat16)
        _TWINS[id(target.model)] = dataclasses.replace(target, model=twin, dtype=torch.bfloat16)
    return _TWINS[id(target.model)]


def fast_autocast(device: torch.device, enabled: bool = True):
    """bf16 matmuls where they are fast (CUDA, CPUs with AMX / AVX-512 bf16); a no-op elsewhere."""
    if enabled and bf16_ok(device):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()


@torch.inference_mode()
def target_answers(
    target: LoadedModel,
    prompt_ids: list[list[int]],
    greedy: list[bool],
    max_new_tokens: int,
    temperature: float,
    top_k: int,
    generator: torch.Generator,
    fast: bool = False,
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Batched decoding with left padding: (answer, top-k ids, top-k log p) per row.

    A plain loop rather than `model.generate` so that only the top-k of p is kept at each step
    (the full logits of a batch would be hundreds of megabytes) and greedy and sampled rows can
    share one batch. fast=True decodes with a bf16 copy of the target where the hardware has bf16
    products: the text is then the bf16 target's, close to but not always the fp32 one's.
    """
    from ..fast_path import GrowingCache

    if fast and bf16_ok(target.device):
        target = bf16_twin(target)
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
    cache = GrowingCache(config=model.config)
    logits = model(input_ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                   use_cache=True, logits_to_keep=1).logits[:, -1, :vocab].float()
    rows = len(prompt_ids)
    alive = torch.arange(rows, device=device)  # the batch rows still writing (finished ones leave the batch)
    lengths = torch.full((rows,), max_new_tokens, device=device)
    tokens = torch.full((rows, max_new_tokens), pad, dtype=torch.long, device=device)
    top_ids = torch.zeros((rows, max_new_tokens, top_k), dtype=torch.long, device=device)
    top_logp = torch.zeros((rows, max_new_tokens, top_k), device=device)
    for step in range(max_new_tokens):
        logp = torch.log_softmax(logits, dim=-1)
        values, ids = logp.topk(top_k, dim=-1)
        token = torch.where(is_greedy[alive], logp.argmax(-1), sample(logits / temperature, generator))
        tokens[alive, step], top_ids[alive, step], top_logp[alive, step] = token, ids, values
        ended = torch.isin(token, eos_ids)
        lengths[alive[ended]] = step + 1
        if bool(ended.all()) or step == max_new_tokens - 1:
            break
        if bool(ended.any()):  # drop finished rows: every later forward costs only the rows still writing
            keep = (~ended).nonzero()[:, 0]
            cache.batch_select_indices(keep)
            alive, token, mask, positions = alive[keep], token[keep], mask[keep], positions[keep]
        mask = torch.cat([mask, mask.new_ones(len(alive), 1)], dim=1)
        positions = positions[:, -1:] + 1
        logits = model(token[:, None], attention_mask=mask, position_ids=positions, past_key_values=cache,
                       use_cache=True).logits[:, -1, :vocab].float()
    out = []
    for r in range(rows):
        n = int(lengths[r])
        out.append((tokens[r, :n].int().cpu(), top_ids[r, :n].int().cpu(), top_logp[r, :n].half().cpu()))
    return out


def sample(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row from softmax(logits), by inverting the cumulative distribution at a uniform draw.

    Exact like `torch.multinomial`, which drew an exponential for every vocabulary entry: that took
    13% of a batch-32 decoding step on this CPU; a cumulative sum and a search take a fraction of it.
    """
    cdf = torch.softmax(logits, dim=-1).cumsum(-1)
    u = torch.rand((logits.shape[0], 1), generator=generator, device=logits.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, u)[:, 0].clamp(max=logits.shape[-1] - 1)


def save_dataset(sequences: list[Sequence], seconds: float, path: Path) -> None:
    """All rows in one safetensors file: ragged tensors packed flat, the per-row facts as JSON metadata."""
    answers, offsets = store.pack([s.answer for s in sequences])
    prompts, prompt_offsets = store.pack([torch.tensor(s.prompt_ids, dtype=torch.int32) for s in sequences])
    top_ids, _ = store.pack([s.topk_ids for s in sequences])
    top_logp, _ = store.pack([s.topk_logp for s in sequences])
    rows = [{"prompt_id": s.prompt_id, "category": s.category, "sample": s.sample} for s in sequences]
    store.save(path, {"answers": answers.int(), "offsets": offsets, "prompts": prompts.int(),
                      "prompt_offsets": prompt_offsets, "topk_ids": top_ids.int(), "topk_logp": top_logp.half()},
               {"format": DATA_FORMAT, "seconds": seconds, "rows": rows})


def load_dataset(path: Path) -> Dataset | None:
    """The cached rows, or None when there are none (or they are in an older format)."""
    if not Path(path).is_file():
        return None
    tensors, meta = store.load(path)
    if meta.get("format") != DATA_FORMAT:
        return None
    answers = store.unpack(tensors["answers"], tensors["offsets"])
    prompts = store.unpack(tensors["prompts"], tensors["prompt_offsets"])
    top_ids = store.unpack(tensors["topk_ids"], tensors["offsets"])
    top_logp = store.unpack(tensors["topk_logp"], tensors["offsets"])
    sequences = [Sequence(r["prompt_id"], r["category"], r["sample"], p.tolist(), a, i, lp)
                 for r, a, p, i, lp in zip(meta["rows"], answers, prompts, top_ids, top_logp)]
    return Dataset(sequences, meta.get("seconds", 0.0))


def generate_data(
    target: LoadedModel,
    prompts: list[dict],
    cache_path: Path,
    samples: int,
    max_new_tokens: int,
    temperature: float,
    top_k: int,
    batch: int = 32,
    minutes: float = 0.0,
    seed: int = 0,
    fast: bool = False,
    progress: bool = True,
) -> Dataset:
    """The target's answers to `prompts`: cached rows plus whatever is missing, saved after each batch.

    With a time budget (`minutes`, counted over every run that filled the cache) generation stops
    once it is spent: all greedy answers come before any sampled one, so what is left out is
    sampled answers (the rows still missing are generated by a later run with a larger budget).
    """
    from tqdm import tqdm

    saved = load_dataset(cache_path)
    cached = {(s.prompt_id, s.sample): s for s in saved.sequences} if saved else {}
    seconds = saved.seconds if saved else 0.0
    wanted = [(p, j) for j in range(samples + 1) for p in prompts]  # every greedy answer first
    missing = [(p, j) for p, j in wanted if (p["id"], j) not in cached]
    budget = 60 * minutes
    if missing and not (budget and seconds >= budget):
        generator = torch.Generator(device=target.device).manual_seed(seed + len(cached))
        bar = tqdm(total=len(missing), desc="target answers", unit="seq", file=sys.stderr, disable=not progress)
        for start in range(0, len(missing), batch):
            if budget and seconds >= budget:
                break
            chunk = missing[start : start + batch]
            ids = [encode(target.tokenizer, p["prompt"]) for p, _ in chunk]
            t0 = time.perf_counter()
            answers = target_answers(target, ids, [j == 0 for _, j in chunk], max_new_tokens, temperature, top_k,
                                     generator, fast=fast)
            seconds += time.perf_counter() - t0
            for (p, j), prompt_ids, (answer, top_ids, top_logp) in zip(chunk, ids, answers):
                category = p.get("category", "")
                cached[(p["id"], j)] = Sequence(p["id"], category, j, prompt_ids, answer, top_ids, top_logp)
            save_dataset(list(cached.values()), seconds, cache_path)
            bar.update(len(chunk))
        bar.close()
    return Dataset([cached[(p["id"], j)] for p, j in wanted if (p["id"], j) in cached], seconds)
