"""'Is it really the same?': the first generated token, sampled many times, with and without a draft.

Notation as everywhere: p = the target's distribution, q = the draft's, γ (`gamma`) = draft length.
Exact speculative sampling claims its output is distributed as p. The claim is checked here the
plain way: many runs of the real loop (`decode.generate`), each with its own seed, made with the
target alone and with a drafter under exact and under relaxed verification; the first token of
each run is kept. Two sample sets of the same distribution still differ by chance, so the
total-variation distance (TV) between them is shown beside its sampling noise: the TV between two
sample sets of the same size drawn from the target-alone counts (a bootstrap).

Seeds: each set uses its own block of seeds, so no two sets share a random stream (a shared
stream would correlate the draws and make the sets look more alike than chance allows).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..config import Decoding, Sampling, Verification
from ..decode import generate
from ..drafters import Drafter
from ..models import LoadedModel

ALONE, EXACT, RELAXED = "target alone", "exact", "relaxed"
SEED_BLOCK = 1_000_000  # set i uses seeds i·SEED_BLOCK + 0 .. n-1


@dataclass(frozen=True)
class LabSetup:
    """What the lab samples: a short raw prompt whose next token has a spread-out distribution."""

    prompt: str = "My favourite fruit is"
    draft: str = "smol-draft-1l128"  # a cheap draft whose q overlaps p on this prompt (α ≈ 0.4 at token 1)
    samples: int = 400  # runs per set; the noise band narrows as 1/√samples
    temperature: float = 1.0
    top_k: int = 10  # sampling shaped to the 10 likeliest tokens (the same shaping for p and q)
    lenience: float = 0.3  # relaxed verification: accept with min(1, p / (l·q))
    chat: bool = False  # a raw continuation: its first token varies (a chat answer mostly starts with "The")

    def settings(self, seed: int = 0, verification: Verification | None = None) -> Decoding:
        # Two new tokens: the loop drafts at most max_new_tokens - 1 tokens a round, so one draft is tested
        # for the first token (accepted, or replaced by a resampled token).
        return Decoding(gamma=1, max_new_tokens=2, seed=seed, chat=self.chat,
                        sampling=Sampling(temperature=self.temperature, top_k=self.top_k),
                        verification=verification or Verification())

    def rules(self) -> dict[str, Verification | None]:
        """Set name -> verification rule (None: the target alone)."""
        return {ALONE: None, EXACT: Verification(), RELAXED: Verification("relaxed", lenience=self.lenience)}


@dataclass
class LabRecord:
    """The first token of every run, per set, with the token strings: all the page needs."""

    setup: dict  # LabSetup as a dict
    first_tokens: dict[str, list[int]]  # set name -> first token of each run, in seed order
    texts: dict[int, str] = field(default_factory=dict)  # token id -> its string
    seconds: float = 0.0  # wall time of all the runs
    device: str = "cpu"

    def to_dict(self) -> dict:
        return {**asdict(self), "texts": {str(k): v for k, v in self.texts.items()}}

    @classmethod
    def from_dict(cls, data: dict) -> LabRecord:
        return cls(data["setup"], {k: [int(t) for t in v] for k, v in data["first_tokens"].items()},
                   {int(k): v for k, v in data.get("texts", {}).items()}, float(data.get("seconds", 0.0)),
                   data.get("device", "cpu"))


def sample_first_tokens(
    target: LoadedModel,
    make_drafter: Callable[[], Drafter],
    setup: LabSetup,
    on_run: Callable[[int, int], None] | None = None,
) -> LabRecord:
    """`setup.samples` seeded runs per set through the real loop; on_run(done, total) after each."""
    started = time.perf_counter()
    sets: dict[str, list[int]] = {}
    total, done = setup.samples * len(setup.rules()), 0
    for block, (name, rule) in enumerate(setup.rules().items()):
        sets[name] = []
        for i in range(setup.samples):
            settings = setup.settings(seed=block * SEED_BLOCK + i, verification=rule)
            if rule is None:  # the target alone needs one token only
                settings = replace(settings, max_new_tokens=1)
            run = generate(target, make_drafter() if rule is not None else None, setup.prompt, settings, detail=False)
            sets[name].append(run.output_ids[0])
            done += 1
            if on_run:
                on_run(done, total)
    seen = sorted({t for tokens in sets.values() for t in tokens})
    texts = {t: target.tokenizer.decode([t]) for t in seen}
    return LabRecord(asdict(setup), sets, texts, time.perf_counter() - started, str(target.device))


def frequencies(tokens: list[int], support: list[int]) -> np.ndarray:
    counts = Counter(tokens)
    return np.array([counts[t] for t in support], dtype=float) / max(1, len(tokens))


def tv(a: list[int], b: list[int]) -> float:
    """Total-variation distance between the empirical distributions of two samples: ½ Σ |f_a − f_b|."""
    support = sorted(set(a) | set(b))
    return 0.5 * float(np.abs(frequencies(a, support) - frequencies(b, support)).sum())


def noise_band(reference: list[int], n_other: int, repeats: int = 1000, level: float = 0.95, seed: int = 0) -> float:
    """The TV that chance alone reaches with probability `level`: two samples (sizes len(reference) and
    n_other) drawn from the reference's own frequencies, `repeats` times (a parametric bootstrap)."""
    support = sorted(set(reference))
    f = frequencies(reference, support)
    rng = np.random.default_rng(seed)
    a = rng.multinomial(len(reference), f, size=repeats) / len(reference)
    b = rng.multinomial(n_other, f, size=repeats) / n_other
    return float(np.quantile(0.5 * np.abs(a - b).sum(axis=1), level))


@dataclass
class Closeness:
    tv: dict[str, float]  # set name -> TV against the target-alone set (EXACT, RELAXED)
    band: float  # 95% of chance TVs fall below this
    samples: int

    def within(self, name: str) -> bool:
        return self.tv[name] <= self.band


def closeness(record: LabRecord) -> Closeness:
    """TV of exact and relaxed against the target alone, and the noise band they are judged by."""
    ref = record.first_tokens[ALONE]
    n = len(record.first_tokens[EXACT])
    distances = {name: tv(ref, record.first_tokens[name]) for name in (EXACT, RELAXED)}
    return Closeness(distances, noise_band(ref, n), len(ref))
