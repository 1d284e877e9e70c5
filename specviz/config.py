"""Settings of one speculative run, as small frozen dataclasses.

Each class checks its own ranges, so a bad value is refused with a clear message before any
model is touched (the CLI and the app build these from user input).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .errors import ConfigError

VERIFY_MODES = ("exact", "relaxed")
TREE_MODES = ("dynamic", "static")
MAX_TREE_BUDGET = 64  # nodes per round; a CPU verifies 32 tree tokens in about 2.5 target steps already
MAX_GAMMA = 64  # longer drafts never pay off; the cap keeps a typo from drafting thousands of tokens
MAX_NEW_TOKENS = 4096
MAX_TEMPERATURE = 100.0  # far past any useful value: softmax(logits / 100) is all but uniform
# The app's sliders, and the links that restore them, offer less than the library accepts: enough to see where a
# draft stops paying on a CPU, short enough to wait for in a workshop.
APP_MAX_GAMMA = 16
APP_MAX_TREE_BUDGET = 32
APP_MAX_NEW_TOKENS = 256
# A drafting challenge: every entry reads its prompt and times it in pairs with the target alone, so a class of
# thirty waits for a few runs of this length, not for long prompts or long answers.
CHALLENGE_TOKENS = (16, 32, 64, 128)  # the token counts a presenter may set
CHALLENGE_MAX_PROMPT_CHARS = 2000  # about 500 tokens of the target's


def _number(name: str, value, kind=float):
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, got {value!r}") from None
    if kind is float and not math.isfinite(number):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    if kind is int and number != float(value):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    return number


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen from logits. The same shaping is applied to p and to q."""

    temperature: float = 0.0  # 0 = greedy (argmax); > 0 samples from softmax(logits / temperature)
    top_k: int = 0  # 0 = off; otherwise keep only the k most likely tokens before sampling
    top_p: float = 1.0  # 1 = off; otherwise nucleus sampling over the smallest set with mass >= top_p

    def __post_init__(self):
        t = _number("temperature", self.temperature)
        if not 0 <= t <= MAX_TEMPERATURE:
            raise ConfigError(f"temperature must be between 0 (greedy) and {MAX_TEMPERATURE:g}, got {t:g}")
        k = _number("top-k", self.top_k, int)
        if k < 0:
            raise ConfigError(f"top-k must be 0 (off) or a positive count, got {k}")
        p = _number("top-p", self.top_p)
        if not 0 < p <= 1:
            raise ConfigError(f"top-p must be above 0 and at most 1 (1 = off), got {p:g}")
        object.__setattr__(self, "temperature", t)
        object.__setattr__(self, "top_k", k)
        object.__setattr__(self, "top_p", p)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Verification:
    """Which rule decides whether a drafted token is kept.

    `exact` is lossless: the output is the target's own (greedy) or distributed as the target's
    (sampling). `relaxed` accepts more drafts and drifts from the target; the drift is measured.
    """

    mode: str = "exact"  # "exact" (lossless, default) or "relaxed" (lossy, explicit)
    tolerance: float = 0.0  # relaxed greedy: accept d if log p(d) >= log p(best) - tolerance (τ)
    top_k: int = 1  # relaxed greedy: d must also be among the target's top-k tokens
    lenience: float = 1.0  # relaxed sampling: accept with min(1, p / (lenience * q)); 1 = exact

    def __post_init__(self):
        if self.mode not in VERIFY_MODES:
            raise ConfigError(f"verification mode must be one of {', '.join(VERIFY_MODES)}, got {self.mode!r}")
        tol = _number("tolerance", self.tolerance)
        if not 0 <= tol <= 50:
            raise ConfigError(f"tolerance τ must be between 0 and 50 (nats), got {tol:g}")
        k = _number("verification top-k", self.top_k, int)
        if k < 1:
            raise ConfigError(f"verification top-k must be at least 1, got {k}")
        lenience = _number("lenience", self.lenience)
        if not 0 < lenience <= 1:
            raise ConfigError(f"lenience must be above 0 and at most 1 (1 = exact), got {lenience:g}")
        object.__setattr__(self, "tolerance", tol)
        object.__setattr__(self, "top_k", k)
        object.__setattr__(self, "lenience", lenience)

    @property
    def lossless(self) -> bool:
        """True when the rule cannot change the output (relaxed with neutral settings is exact)."""
        return self.mode == "exact" or (self.tolerance == 0 and self.top_k == 1 and self.lenience == 1)


@dataclass(frozen=True)
class TreeShape:
    """Draft a token tree instead of a chain (specviz.trees). budget 0 keeps the chain of γ tokens.

    With a tree, γ is its depth limit and `budget` the number of drafted nodes the target verifies
    (a chain of γ verifies γ tokens, so chain γ=N and a tree of budget N cost the same forward).
    """

    budget: int = 0  # drafted nodes per round; 0 = no tree (a chain of γ)
    branching: int = 2  # children per expanded node (the draft's top-k), and nodes expanded per depth
    mode: str = "dynamic"  # "dynamic": keep the nodes of highest cumulative q (EAGLE-2); "static": a fixed shape

    def __post_init__(self):
        budget = _number("tree budget", self.budget, int)
        if not 0 <= budget <= MAX_TREE_BUDGET:
            raise ConfigError(f"tree budget must be between 0 (a chain) and {MAX_TREE_BUDGET} nodes, got {budget}")
        branching = _number("tree branching", self.branching, int)
        if not 1 <= branching <= 8:
            raise ConfigError(f"tree branching must be between 1 and 8 children per node, got {branching}")
        if self.mode not in TREE_MODES:
            raise ConfigError(f"tree mode must be one of {', '.join(TREE_MODES)}, got {self.mode!r}")
        object.__setattr__(self, "budget", budget)
        object.__setattr__(self, "branching", branching)

    @property
    def on(self) -> bool:
        return self.budget > 0


@dataclass(frozen=True)
class Decoding:
    """One run: draft length, stopping, seed, sampling and verification."""

    gamma: int = 4  # γ: tokens drafted per round (the first γ when adaptive)
    adaptive: bool = False  # adaptive γ: +2 after a fully accepted round, -1 otherwise, at least 1
    max_new_tokens: int = 64  # generation stops after this many new tokens, or at EOS
    seed: int = 0  # seeds the one random generator shared by drafting and verification
    chat: bool = True  # wrap the prompt in the target's chat template (when it has one); False = raw text
    sampling: Sampling = field(default_factory=Sampling)
    verification: Verification = field(default_factory=Verification)
    tree: TreeShape = field(default_factory=TreeShape)  # budget 0: draft a chain

    def __post_init__(self):
        if self.tree.on and self.verification.mode == "relaxed" and not self.sampling.greedy:
            raise ConfigError("a token tree verifies sampled drafts exactly; relaxed sampling (lenience) is for chains")
        gamma = _number("gamma (draft length)", self.gamma, int)
        if not 1 <= gamma <= MAX_GAMMA:
            raise ConfigError(f"gamma (draft length) must be between 1 and {MAX_GAMMA}, got {gamma}")
        n = _number("max new tokens", self.max_new_tokens, int)
        if not 1 <= n <= MAX_NEW_TOKENS:
            raise ConfigError(f"max new tokens must be between 1 and {MAX_NEW_TOKENS}, got {n}")
        seed = _number("seed", self.seed, int)
        if not 0 <= seed < 2**63:
            raise ConfigError(f"seed must be a non-negative whole number, got {seed}")
        object.__setattr__(self, "gamma", gamma)
        object.__setattr__(self, "max_new_tokens", n)
        object.__setattr__(self, "seed", seed)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Decoding:
        data = dict(data)
        data["sampling"] = Sampling(**data.get("sampling", {}))
        data["verification"] = Verification(**data.get("verification", {}))
        data["tree"] = TreeShape(**data.get("tree", {}))
        return cls(**data)
