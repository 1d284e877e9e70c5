"""The target's greedy answers to the project's prompts, with its top-16 next tokens along each (for replays).

A replay (specviz.lab.replay) rebuilds a greedy run's rounds from the target's answer alone. Drafters that learn
from the target's logits at the verified nodes (recycle, blend) also need what the target expected after each
token of that answer: one teacher-forced forward over prompt + answer gives it (`AnswerTeacher`). Each answer
is written by `decode.generate` with no drafter, fp32, exactly as `bench` writes its baseline.

    python benchmarks/greedy_answers.py --split eval --max-new-tokens 128
    python benchmarks/greedy_answers.py --split train --max-new-tokens 128

Cached in artifacts/recycle/answers-<split>-n<tokens>.safetensors (`load_answers`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.config import Decoding  # noqa: E402
from specviz.decode import generate  # noqa: E402
from specviz.prompts import load_prompt_set  # noqa: E402

WORK = Path(__file__).resolve().parents[1] / "artifacts" / "recycle"
WIDTH = 16


@dataclass
class Answer:
    id: str
    category: str
    prompt_ids: list[int]
    answer: list[int]
    top_ids: torch.Tensor  # [len(answer) + 1, WIDTH]: row j is the target's top after prompt + answer[:j]
    top_probs: torch.Tensor


def answers_path(split: str, max_new_tokens: int) -> Path:
    return WORK / f"answers-{split}-n{max_new_tokens}.safetensors"


def load_answers(split: str, max_new_tokens: int = 128) -> list[Answer]:
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = answers_path(split, max_new_tokens)
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads(f.metadata()["json"])
    tensors = load_file(str(path))
    return [Answer(m["id"], m["category"], m["prompt_ids"], m["answer"], tensors[f"ids{i}"].long(),
                   tensors[f"probs{i}"].float()) for i, m in enumerate(meta["answers"])]


@torch.inference_mode()
def top_along(target, prompt_ids: list[int], answer: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's top-WIDTH after prompt + answer[:j], j = 0 .. len(answer): one teacher-forced forward."""
    ids = torch.tensor([prompt_ids + answer])
    hidden = target.model.model(ids).last_hidden_state[0, len(prompt_ids) - 1:]
    logits = target.model.get_output_embeddings()(hidden)[:, : target.vocab_size].float()
    values, top = logits.topk(WIDTH, dim=-1)
    return top.to(torch.int32), (values - logits.logsumexp(-1, keepdim=True)).exp().half()


def main() -> None:
    from safetensors.torch import save_file

    from specviz.models import load_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("eval", "train"), default="eval")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    target = load_model("default")
    prompts = load_prompt_set(split=args.split)
    meta, tensors = [], {}
    began = time.perf_counter()
    for i, item in enumerate(prompts):
        run = generate(target, None, item["prompt"], Decoding(max_new_tokens=args.max_new_tokens), detail=False)
        top, probs = top_along(target, run.prompt_ids, run.output_ids)
        meta.append({"id": item["id"], "category": item.get("category", ""), "prompt_ids": run.prompt_ids,
                     "answer": run.output_ids})
        tensors[f"ids{i}"], tensors[f"probs{i}"] = top, probs
        if i % 20 == 0:
            print(f"  {i + 1}/{len(prompts)} {time.perf_counter() - began:.0f} s", flush=True)
    path = answers_path(args.split, args.max_new_tokens)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={"json": json.dumps({"answers": meta})})
    print(f"{len(meta)} answers -> {path}")


if __name__ == "__main__":
    main()
