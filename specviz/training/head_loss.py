"""The head's training-time forward and its loss: "training-time test", several draft steps unrolled at once.

Each step s reads the head's own step s-1 prediction, as drafting does (see `unrolled_features`). Shared by
the training loop (`train_head`) and the held-out agreement check (`agreement`), which read the same attention
pattern; kept apart from both so that neither imports the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..drafters.head_net import DraftHead
from .answers import fast_autocast
from .features import Features


@dataclass
class Batch:
    tokens: torch.Tensor  # [B, L] right-padded
    features: torch.Tensor  # [B, L, H] the target's f at each position
    mask: torch.Tensor  # [B, L-1] pair j is trained on: it predicts an answer token and f_{j+1} exists
    inputs: torch.Tensor | None = None  # [B, L, len(layers) * H] the layers a head reads, when it reads several


def make_batch(data: Features, rows: list[int], seq_len: int, device: torch.device) -> Batch:
    toks, feats, masks, inputs = [], [], [], []
    length = min(seq_len, max(len(data.tokens[r]) for r in rows))
    for r in rows:
        t, f, start = data.tokens[r][:length], data.features[r][:length], data.answer_from[r]
        n = len(t)
        j = torch.arange(length - 1)
        masks.append((j <= n - 2) & (j >= start - 2))
        toks.append(F.pad(t, (0, length - n)))
        feats.append(F.pad(f.float(), (0, 0, 0, length - n)))
        if data.inputs is not None:
            inputs.append(F.pad(data.inputs[r][:length].float(), (0, 0, 0, length - n)))
    return Batch(torch.stack(toks).to(device), torch.stack(feats).to(device), torch.stack(masks).to(device),
                 torch.stack(inputs).to(device) if inputs else None)


def unrolled_features(
    head: DraftHead, embeddings: torch.Tensor, features: torch.Tensor, steps: int
) -> list[torch.Tensor]:
    """The head's predicted features [B, P, H] for each drafting step s = 1..steps, over P pairs at once.

    Step 1 reads the true pairs (f_j, e(x_{j+1})), f_j the target's features as the head reads them (lifted:
    several layers fused; `features` is then [B, P, len(layers) * H]). Step s > 1 at pair j reads (the step s-1
    prediction made at pair j-1, e(x_{j+1})): the chain that started at pair j-s+1. When drafting,
    that chain's query attends to the true keys up to pair j-s+1 and to its own steps' keys at
    pairs j-s+2 .. j; here it does exactly that, with the keys of every step kept.
    """
    B, P, _ = features.shape
    positions = torch.arange(P, device=features.device)
    s_ = head.shape
    group = s_.heads // s_.kv_heads
    scale = 1.0 / math.sqrt(s_.head_dim)
    x = head.inputs(embeddings, head.lift(features))
    q, k1, v1 = head.qkv(x, positions)
    attended = F.scaled_dot_product_attention(q, k1, v1, is_causal=True, enable_gqa=True)
    out = [head.finish(x, attended)]
    k1, v1 = k1.repeat_interleave(group, dim=1), v1.repeat_interleave(group, dim=1)
    keys, values = [], []  # keys and values of steps 2.. (expanded to every query head)
    for s in range(2, steps + 1):
        shifted = F.pad(out[-1][:, :-1], (0, 0, 1, 0))  # pair j reads the prediction made at pair j-1
        x = head.inputs(embeddings, shifted)
        q, k, v = head.qkv(x, positions)
        keys.append(k.repeat_interleave(group, dim=1))
        values.append(v.repeat_interleave(group, dim=1))
        main = (q @ k1.transpose(-1, -2)) * scale  # true keys: pair i <= j - s + 1
        allowed = positions[None, :] <= positions[:, None] - (s - 1)
        main = main.masked_fill(~allowed, -1e4)
        # Step i (2..s) of this chain sits at pair j - (s - i): shift that step's keys right by s - i.
        diag_k = [F.pad(kk, (0, 0, s - i, 0))[:, :, :P] for i, kk in zip(range(2, s + 1), keys)]
        diag_v = [F.pad(vv, (0, 0, s - i, 0))[:, :, :P] for i, vv in zip(range(2, s + 1), values)]
        diag = torch.stack([(q * kk).sum(-1) * scale for kk in diag_k], dim=-1)  # [B, h, P, s-1]
        weights = torch.cat([main, diag], dim=-1).softmax(-1)
        attended = weights[..., :P] @ v1
        attended = attended + sum(weights[..., P + n, None] * vv for n, vv in enumerate(diag_v))
        out.append(head.finish(x, attended))
    return out


def head_loss(
    head: DraftHead,
    rows: torch.Tensor,
    embedding: torch.Tensor,
    batch: Batch,
    device: torch.device,
    steps: int,
    step_decay: float,
    feature_weight: float,
) -> tuple[torch.Tensor, dict]:
    """Σ_s w_s (soft CE on the draft vocabulary + λ · feature regression), and each step's greedy agreement: `steps`
    unrolled draft steps, step s weighted step_decay^(s-1), the regression weighted `feature_weight` (λ)."""
    with fast_autocast(device):
        emb = embedding[batch.tokens[:, 1:]]  # e(x_{j+1}) for pairs j = 0 .. L-2
        feats = (batch.inputs if batch.inputs is not None else batch.features)[:, :-1]  # what pair j reads
        truth = batch.features[:, 1:]  # f_{j+1}
        with torch.no_grad():
            p = (truth[batch.mask] @ rows.T).float().softmax(-1)  # the target's p on the draft vocabulary
            target_top = p.argmax(-1)
        predicted = unrolled_features(head, emb, feats, steps)
    total, figures = 0.0, {}
    valid = batch.mask
    for s, pred in enumerate(predicted, start=1):
        keep = valid.clone()
        keep[:, : s - 1] = False  # a chain needs s-1 earlier pairs
        sel = keep[valid]  # which of the masked rows this step trains on
        if not sel.any():
            continue
        g = pred[keep].float()
        logq = (g @ rows.float().T).log_softmax(-1)
        ce = -(p[sel] * logq).sum(-1).mean()
        reg = F.smooth_l1_loss(g, truth[keep].float())
        total = total + step_decay ** (s - 1) * (ce + feature_weight * reg)
        agree = (logq.argmax(-1) == target_top[sel]).float().mean()
        figures[f"agreement_{s}" if s > 1 else "agreement"] = agree.item()
        if s == 1:
            figures["ce"] = ce.item()
            figures["regression"] = reg.item()
    return total, figures
