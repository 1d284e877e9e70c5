"""Step 4a: evaluation agreement, the head's greedy acceptance by draft position without running the loop.

In greedy decoding a head's draft at position s is kept when it equals the target's own next token,
given that drafts 1..s-1 were kept. The target's greedy answers to the EVAL prompts (never trained
on) are exactly the texts where every earlier draft was kept, so one teacher-forced pass over them
measures that acceptance offline: at each answer position the head is unrolled s steps on its own
predicted features (as when drafting), and its top draft token is compared with the token the
target wrote. It is averaged over every answer position, where a run's rounds start at some of them
only, so a run's α by position is close to it but not equal. A check costs seconds, so training can watch it and
stop once it no longer rises.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ..drafters.head_net import DraftHead
from ..models import LoadedModel
from .answers import eval_prompts, generate_data
from .features import Features, capture, layers_suffix, load_features, shard_names
from .head_loss import unrolled_features  # the training unroll: both read the same attention pattern
from .texts import answer_texts


@dataclass
class HeldOut:
    """Texts the head never trains on, with the target's features: what agreement is measured on."""

    features: Features
    name: str  # what they are, for logs and the model card
    categories: list[str]  # each text's workload


def eval_answers(
    target: LoadedModel, work: Path, slug: str, max_new_tokens: int = 128, progress: bool = True, say=print,
    layers: tuple[int, ...] = (),
) -> HeldOut:
    """The target's greedy fp32 answers to the EVAL prompts and its features over them (both cached in `work`)."""
    prompts = eval_prompts()
    answers = generate_data(
        target,
        prompts,
        work / f"eval-answers-{slug}-n{max_new_tokens}.safetensors",
        0,
        max_new_tokens,
        1.0,
        1,
        batch=28,
        progress=progress,
    )
    texts = answer_texts(answers.sequences, "eval")
    folder = work / f"features-eval-{slug}-n{max_new_tokens}{layers_suffix(layers)}"
    manifest = capture(target, texts, folder, progress=progress, say=say, layers=layers)
    features = load_features(folder, [n for n in shard_names(texts) if n in manifest["shards"]])
    category = {tuple(s.prompt_ids) + tuple(s.answer.tolist()): s.category for s in answers.sequences}
    return HeldOut(
        features,
        f"the target's greedy answers to the {len(prompts)} EVAL prompts "
        f"({features.trained_positions:,} answer tokens)",
        [category.get(tuple(t.tolist()), "") for t in features.tokens],
    )


@torch.no_grad()
def agreement(
    head: DraftHead,
    held: HeldOut,
    embedding: torch.Tensor,
    rows: torch.Tensor,
    vocab_ids: torch.Tensor,
    steps: int = 3,
    batch: int = 16,
) -> list[float]:
    """P(the head's top draft = the target's token | the drafts before it were right), at draft positions 1..steps.

    rows: the target's output head on the draft vocabulary [N, H]; vocab_ids: those N target ids.
    Pair j = (f_j, e(x_{j+1})) drafts x_{j+2} at position 1; the chain that started at pair j-s+1 drafts
    it at position s, and counts there only when its drafts at positions 1..s-1 were the target's tokens (the
    unroll reads the true tokens, as a run reads the kept drafts). Every answer token is counted (the first one
    is drafted from the prompt's last pair).
    """

    data, device = held.features, embedding.device
    hits, counts = [0] * steps, [0] * steps
    was_training = head.training
    head.eval()
    order = sorted(range(len(data.tokens)), key=lambda i: len(data.tokens[i]))  # similar lengths share a batch
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        length = max(len(data.tokens[i]) for i in chunk)
        tokens = torch.stack([F.pad(data.tokens[i], (0, length - len(data.tokens[i]))) for i in chunk]).to(device)
        read = data.inputs if head.shape.layers else data.features  # what the head reads of the target
        if read is None:
            raise ValueError(f"the held-out features hold no layers {head.shape.layers}: capture them with those")
        feats = torch.stack(
            [F.pad(read[i].float(), (0, 0, 0, length - len(data.tokens[i]))) for i in chunk]
        ).to(device, embedding.dtype)
        predicted = unrolled_features(head, embedding[tokens[:, 1:]], feats[:, :-1], steps)  # [B, L-1, H] each
        j = torch.arange(length - 1, device=device)
        for b, i in enumerate(chunk):
            n, first = len(data.tokens[i]), data.answer_from[i]
            kept_before = None  # [L-1]: the chain ending at pair j had every draft before this step right
            for s, pred in enumerate(predicted):
                right = vocab_ids[(pred[b] @ rows.T).argmax(-1)] == F.pad(tokens[b, 2:], (0, 1), value=-1)
                # pair j drafts x_{j+2} at step s (0-based) of the chain that started at pair j - s
                valid = (j + 2 <= n - 1) & (j + 2 >= first) & (j >= s)
                if kept_before is not None:
                    valid &= F.pad(kept_before[:-1], (1, 0), value=False)  # step s-1 of that chain, at pair j-1
                hits[s] += int((right & valid).sum())
                counts[s] += int(valid.sum())
                kept_before = right & valid
    head.train(was_training)
    return [h / max(1, c) for h, c in zip(hits, counts)]
