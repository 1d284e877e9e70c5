"""The acceptance rule: pure functions over tensors, no model calls.

Notation (used across SpecViz): p = the target's distribution, q = the draft's, γ (`gamma`) = the
number of drafted tokens, α (`alpha`) = the fraction of drafted tokens accepted.

`verify` takes the target's logits at the γ drafted positions plus one (the bonus position), the
drafted ids and the draft's probabilities q, and returns how many drafts are accepted and the
token that follows them: resampled at the first rejection, or a bonus token when all are kept.
The logits may come as `LazyLogits`: rows are then asked for the first position alone, and for the
others only when the first draft is accepted (rows after a rejection are never needed, and the head
over a 49k vocabulary is a sizeable part of a small target's forward; the loop's forward computes
small sets of rows in one pass, where one row costs about what eight do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .config import Sampling, Verification


def shape_logits(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """Temperature, top-k and top-p applied to logits (masked entries become -inf)."""
    if sampling.greedy:
        return logits
    logits = logits / sampling.temperature
    if sampling.top_k and sampling.top_k < logits.shape[-1]:
        kth = torch.topk(logits, sampling.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if sampling.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        mass_before = sorted_logits.softmax(-1).cumsum(-1) - sorted_logits.softmax(-1)
        drop_sorted = mass_before >= sampling.top_p  # keeps the smallest prefix reaching top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


CHUNKS = (512, 256, 128)  # block sizes `greatest` and `top_k` read a vocabulary in (the first that divides it)


def _blocks(logits: torch.Tensor, k: int = 1) -> int:
    """The block size to split the last dimension of `logits` into, 0 where the plain operation is as good."""
    width = logits.shape[-1]
    if not logits.is_contiguous() or logits.device.type != "cpu":
        return 0
    return next((c for c in CHUNKS if width % c == 0 and width >= 8 * k * c), 0)


def greatest(logits: torch.Tensor) -> torch.Tensor:
    """argmax over the last dimension, [..., V] -> [...], the first index of the greatest value as argmax gives.

    On a CPU torch's argmax over a 49k vocabulary is slow (44 us a row, where amax takes 2): the greatest value of
    each block of 512 first, then argmax of the first block holding the greatest, the same index."""
    blocks = _blocks(logits)
    if not blocks:
        return logits.argmax(-1)
    rows = logits.reshape(-1, logits.shape[-1] // blocks, blocks)
    block = rows.amax(-1).argmax(-1)  # [R]: the first block holding each row's greatest value
    inside = rows[torch.arange(rows.shape[0]), block].argmax(-1)
    return (block * blocks + inside).reshape(logits.shape[:-1])


def top_k(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, ids) of the k greatest entries of each row of `logits` [R, V], greatest first, as torch.topk.

    The k greatest lie in the k blocks of the greatest maxima, so topk runs over those blocks only (110 us for 9
    rows of 49k on this project's AMD EPYC, against 305 us): the same values, the same ids but among equal values."""
    blocks = _blocks(logits, k)
    if not blocks or logits.dim() != 2:
        return logits.topk(k, dim=-1)
    rows = logits.view(logits.shape[0], -1, blocks)
    _, chosen = rows.amax(-1).topk(k, dim=-1)  # [R, k] blocks
    values, where = rows.gather(1, chosen[..., None].expand(-1, -1, blocks)).flatten(1).topk(k, dim=-1)
    return values, chosen.gather(1, where // blocks) * blocks + where % blocks


def distribution(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """The probabilities a token is drawn from (plain softmax when greedy, for display)."""
    return shape_logits(logits.float(), sampling).softmax(-1)


def choose(probs: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> torch.Tensor:
    """One token id per row: argmax when greedy, a draw from probs otherwise."""
    if sampling.greedy:
        return greatest(probs)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


class LazyLogits:
    """The target's logits at positions 0..n-1 of a verification forward, computed when first asked for.

    `rows(a, b)` computes rows a..b-1; `whole()`, where given, computes every row in one pass (a small forward,
    where one row costs about what all do): the first row asked for then brings every row with it.
    """

    def __init__(self, n: int, rows: Callable[[int, int], torch.Tensor] | None = None,
                 whole: Callable[[], torch.Tensor] | None = None):
        self.n, self._done, self._whole, self._all = n, None, whole, None
        self._rows = rows if rows is not None else lambda a, b: self._every_row()[a:b]
        self._picked: dict[int, torch.Tensor] = {}  # rows asked for one by one (a tree's branch)

    @classmethod
    def ready(cls, logits: torch.Tensor) -> LazyLogits:
        """Logits already computed in full."""
        done = cls(logits.shape[0], lambda a, b: logits[a:b])
        done._done = done._all = logits
        return done

    def _every_row(self) -> torch.Tensor:
        if self._all is None:
            self._all = self._whole()
        return self._all

    def known(self) -> tuple[list[int], torch.Tensor | None]:
        """The positions whose logits the head has computed so far and those logits ([m, V]), computing none."""
        if self._all is not None:
            return list(range(self.n)), self._all
        have = 0 if self._done is None else self._done.shape[0]
        picked = sorted(i for i in self._picked if i >= have)
        if not have and not picked:
            return [], None
        parts = ([self._done] if have else []) + [self._picked[i].unsqueeze(0) for i in picked]
        return list(range(have)) + picked, torch.cat(parts)

    def upto(self, m: int) -> torch.Tensor:
        """Logits of the first m positions, [m, V] (computing only the rows not computed yet)."""
        have = 0 if self._done is None else self._done.shape[0]
        if m > have:
            more = self._rows(have, m)
            self._done = more if self._done is None else torch.cat([self._done, more])
        return self._done[:m]

    def rows(self, indices: list[int]) -> torch.Tensor:
        """Logits of the given positions, [len(indices), V], each computed once (a tree needs its branch only)."""
        have = 0 if self._done is None else self._done.shape[0]
        for i in indices:
            if i >= have and i not in self._picked:
                self._picked[i] = self._rows(i, i + 1)[0]
        return torch.stack([self._done[i] if i < have else self._picked[i] for i in indices])

    @property
    def computed(self) -> torch.Tensor:
        return self._done


@dataclass
class Verdict:
    n_accepted: int  # length of the accepted prefix of the draft
    next_token: int  # resampled token (after a rejection) or bonus token (all accepted)
    resampled: bool  # True when a draft token was rejected and next_token replaces it
    p: torch.Tensor  # target distribution at the verified positions computed, [1 or γ+1, V]

    @property
    def kept(self) -> list[int]:
        """The drafted tokens kept, by index: a chain's accepted prefix."""
        return list(range(self.n_accepted))


def residual(p: torch.Tensor, q: torch.Tensor, lenience: float = 1.0) -> torch.Tensor:
    """norm(max(0, p - l·q)): the mass the draft under-proposed, where a resampled token comes from."""
    r = (p - lenience * q).clamp_min(0)
    total = r.sum()
    return r / total if total > 1e-12 else p  # p == q: a rejection had probability 0


def _accepted_prefix(ok: torch.Tensor) -> int:
    """Number of leading True values."""
    return int(ok.long().cumprod(0).sum()) if ok.numel() else 0


def verify(
    target_logits: torch.Tensor | LazyLogits,
    draft_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    sampling: Sampling,
    rule: Verification,
    generator: torch.Generator | None = None,
) -> Verdict:
    """Decide the fate of γ drafted tokens.

    target_logits: [γ+1, V], the target's logits after the context and after each draft token (or
    LazyLogits giving them). draft_ids: [γ] drafted token ids. draft_probs: [γ, V] the draft's q at
    each position, or None for a model-free drafter whose proposal is certain (one-hot q).
    """
    scores = target_logits if isinstance(target_logits, LazyLogits) else LazyLogits.ready(target_logits)
    gamma = draft_ids.shape[0]
    relaxed = rule.mode == "relaxed"
    lenience = rule.lenience if relaxed else 1.0
    # The uniforms of the acceptance tests are drawn up front, so the random stream is the same
    # whether or not the rows after a rejection are computed.
    r = None if sampling.greedy else torch.rand(gamma, generator=generator, device=draft_ids.device)

    def accepted(logits: torch.Tensor, upto: int) -> torch.Tensor:
        """Acceptance of drafts 0..upto-1, given the logits of at least that many positions."""
        d = draft_ids[:upto]
        if sampling.greedy and relaxed:
            # Accept d when it is in the target's top-k and within τ nats of the best token.
            logp = logits[:upto].float().log_softmax(-1)
            logp_d = logp.gather(-1, d[:, None]).squeeze(-1)
            rank = (logp > logp_d[:, None]).sum(-1)
            return (rank < rule.top_k) & (logp_d >= logp.max(-1).values - rule.tolerance)
        if sampling.greedy:
            return greatest(logits[:upto]) == d
        # Accept draft i with probability min(1, p/(l·q)): r < p/(l·q)  <=>  r·l·q < p.
        positions = torch.arange(upto, device=d.device)
        p_d = distribution(logits[:upto], sampling)[positions, d]
        q_d = torch.ones_like(p_d) if draft_probs is None else draft_probs[positions, d]
        return r[:upto] * lenience * q_d < p_d

    # Position 0 first; the rest only if the first draft survives.
    n = 0
    if gamma and bool(accepted(scores.upto(1), 1)[0]):
        n = 1 + _accepted_prefix(accepted(scores.upto(gamma + 1), gamma)[1:])
    logits = scores.upto(n + 1)
    p = distribution(scores.computed, sampling)  # every row computed, for the record
    if sampling.greedy:  # the target's own choice, resampled (after a rejection) or a bonus token
        return Verdict(n, int(greatest(logits[n])), n < gamma, p)
    if n == gamma:  # all kept (or nothing drafted): the bonus token, drawn from the target alone
        return Verdict(n, int(choose(p[gamma], sampling, generator)), False, p)
    # Rejected at n: draw from the residual norm(max(0, p - l·q)), the mass the draft under-proposed.
    if draft_probs is None:
        q_n = torch.zeros_like(p[n])
        q_n[draft_ids[n]] = 1.0
    else:
        q_n = draft_probs[n]
    return Verdict(n, int(torch.multinomial(residual(p[n], q_n, lenience), 1, generator=generator)), True, p)
