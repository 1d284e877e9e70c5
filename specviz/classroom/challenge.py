"""A drafting challenge: one prompt and token count for the room, each learner's choice measured and ranked.

The presenter opens a `Challenge`; a learner's entry is a `Choice` (drafter, γ, tree budget, verification rule),
run greedily on the challenge's prompt and timed in pairs with the target alone like every measured run. Its
`Result` keeps what the leaderboard shows: the speedup with its spread, tokens per round, α, whether the output
is the target's own, and for a lossy entry how far it drifted (token agreement with the exact output, ROUGE-L).
Identical choices are one result, entered by several learners. The leaderboard ranks by measured speedup and
marks every relaxed entry with its drift, so that being lossy is never rewarded without saying so.

Notation as everywhere: γ (`gamma`) draft length, α (`alpha`) = accepted ÷ drafted.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass

from ..comparison import Comparison
from ..config import (
    APP_MAX_GAMMA,
    APP_MAX_TREE_BUDGET,
    CHALLENGE_MAX_PROMPT_CHARS,
    CHALLENGE_TOKENS,
    Decoding,
    TreeShape,
    Verification,
)
from ..errors import SpecVizError
from ..lab.measure import PAIRS, speedup_text
from ..lab.quality import rouge_l

# The verification rules a learner picks from: the lossless rule and relaxed greedy acceptance (a draft within τ
# nats of the target's best token and in its top 3) at three tolerances.
RULES: dict[str, Verification] = {
    "exact": Verification(),
    "relaxed τ=0.5": Verification("relaxed", tolerance=0.5, top_k=3),
    "relaxed τ=1": Verification("relaxed", tolerance=1.0, top_k=3),
    "relaxed τ=2": Verification("relaxed", tolerance=2.0, top_k=3),
}


@dataclass(frozen=True)
class Challenge:
    """What the presenter opened: every entry continues `prompt` for `tokens` new tokens."""

    id: int
    prompt: str
    tokens: int
    opened_at: float
    closed_at: float | None = None

    @property
    def open(self) -> bool:
        return self.closed_at is None


def check_challenge(prompt: str, tokens: int) -> None:
    """Refuse a prompt or a token count that a room should not wait for, with what to do instead."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise SpecVizError("the challenge needs a prompt: type the text that every entry will continue")
    if len(prompt) > CHALLENGE_MAX_PROMPT_CHARS:
        raise SpecVizError(f"the prompt is {len(prompt):,} characters and a challenge takes at most "
                           f"{CHALLENGE_MAX_PROMPT_CHARS:,} (every entry reads it {2 * PAIRS} times); shorten it")
    if tokens not in CHALLENGE_TOKENS:
        raise SpecVizError(f"a challenge runs {', '.join(map(str, CHALLENGE_TOKENS))} new tokens, not {tokens!r}")


@dataclass(frozen=True)
class Choice:
    """A learner's entry: which drafter, how far it drafts, how wide a tree, and which verification rule."""

    drafter: str
    gamma: int = 4
    tree_budget: int = 0  # 0: a chain of γ; N: a tree of N nodes, γ deep
    rule: str = "exact"  # a key of RULES

    def check(self, offered: list[str]) -> None:
        """Refuse what this room does not offer (a hand-made link), naming what it does."""
        if self.drafter not in offered:
            raise SpecVizError(f"unknown drafter {self.drafter!r}: this challenge offers {', '.join(offered)}")
        if not (isinstance(self.gamma, int) and 1 <= self.gamma <= APP_MAX_GAMMA):
            raise SpecVizError(f"γ must be a whole number from 1 to {APP_MAX_GAMMA}, got {self.gamma!r}")
        if not (isinstance(self.tree_budget, int) and 0 <= self.tree_budget <= APP_MAX_TREE_BUDGET):
            raise SpecVizError(f"the tree budget must be 0 (a chain) to {APP_MAX_TREE_BUDGET} nodes, "
                               f"got {self.tree_budget!r}")
        if self.rule not in RULES:
            raise SpecVizError(f"unknown verification rule {self.rule!r}: choose {', '.join(RULES)}")

    @property
    def lossless(self) -> bool:
        return RULES[self.rule].lossless

    def settings(self, tokens: int) -> Decoding:
        """The run: greedy, seed 0, the challenge's length."""
        return Decoding(gamma=self.gamma, max_new_tokens=tokens, verification=RULES[self.rule],
                        tree=TreeShape(budget=self.tree_budget))

    def key(self) -> str:
        """What makes two entries the same run (the store and the shared measurement key on it)."""
        return json.dumps([self.drafter, self.gamma, self.tree_budget, self.rule])

    @classmethod
    def from_key(cls, key: str) -> Choice:
        return cls(*json.loads(key))

    def label(self) -> str:
        tree = f" · tree of {self.tree_budget}" if self.tree_budget else ""
        return f"{self.drafter} · γ={self.gamma}{tree} · {self.rule}"


@dataclass(frozen=True)
class Result:
    """One measured choice, as the leaderboard shows it (plain numbers: it is kept in the store as JSON)."""

    choice: Choice
    speedup: float  # the median of the pairs' ratios
    speedup_low: float
    speedup_high: float
    pairs: int
    spread: str  # "1.17× (1.12–1.21 over 3 pairs)"
    tokens_per_round: float
    alpha: float
    identical: bool  # the output is the target alone's, token for token
    agreement: float  # token agreement with the exact output (the target alone's, greedy)
    rouge: float  # ROUGE-L F1 against the exact output's text
    new_tokens: int
    measured_at: float

    @classmethod
    def of(cls, choice: Choice, c: Comparison, now: float | None = None) -> Result:
        low, high = c.speedup_range
        return cls(choice, c.speedup, low, high, c.pairs, speedup_text(c), c.spec.mean_accepted_tokens,
                   c.spec.acceptance_rate, c.identical, c.agreement, rouge_l(c.spec.text, c.baseline.text),
                   c.spec.new_tokens, time.time() if now is None else now)

    def drift(self) -> str:
        """How far the output is from the exact one: 'identical', or the agreement and ROUGE-L."""
        if self.identical:
            return "identical"
        return f"{self.agreement:.0%} of tokens agree · ROUGE-L {self.rouge:.2f}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Result:
        data = json.loads(text)
        return cls(**{**data, "choice": Choice(**data["choice"])})


@dataclass(frozen=True)
class Row:
    """A leaderboard line: one measured choice, its rank, how many learners entered it, whether one was you."""

    rank: int
    result: Result
    entries: int
    yours: bool = False
    measurements: int = 1  # how many times this choice was timed (identical entries share one measurement)

    @property
    def lossy(self) -> bool:
        """Marked on the board: a relaxed rule, or an output that is not the target's own."""
        return not self.result.choice.lossless or not self.result.identical

    def rank_text(self) -> str:
        return f"{self.rank}" + (" ⚠ lossy" if self.lossy else "")


def ranked(measured: list[tuple[Result, int]], entries: dict[str, int], mine: Collection[str] = ()) -> list[Row]:
    """Fastest first (measured speedup; the earlier measurement first on a tie). `measured`: each result with how
    many times its choice was timed."""
    order = sorted(measured, key=lambda rn: (-rn[0].speedup, rn[0].measured_at))
    return [Row(i, r, entries.get(r.choice.key(), 0), r.choice.key() in mine, n)
            for i, (r, n) in enumerate(order, start=1)]


def headline(rows: list[Row]) -> str:
    """The board in a sentence: the fastest lossless entry, and what the fastest lossy one gave up."""
    if not rows:
        return "No entry has been measured yet."
    lossless = next((r for r in rows if not r.lossy), None)
    text = (f"Fastest lossless entry: **{lossless.result.choice.label()}**, {lossless.result.spread}."
            if lossless else "No lossless entry yet.")
    if rows[0].lossy:
        top = rows[0].result
        text += (f" Ranked first, {top.choice.label()} is lossy: {top.drift()} with the exact output, "
                 f"for {top.speedup:.2f}×.")
    return text


CSV_COLUMNS = ("rank", "lossy", "drafter", "gamma", "tree_budget", "rule", "speedup", "speedup_low", "speedup_high",
               "pairs", "tokens_per_round", "alpha", "identical", "token_agreement", "rouge_l", "new_tokens", "entries",
               "measurements", "measured_at_utc")


def csv_text(rows: list[Row]) -> str:
    """The leaderboard as CSV, one line per measured choice (no names: entries is a count)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        r, c = row.result, row.result.choice
        writer.writerow([row.rank, row.lossy, c.drafter, c.gamma, c.tree_budget, c.rule, f"{r.speedup:.4f}",
                         f"{r.speedup_low:.4f}", f"{r.speedup_high:.4f}", r.pairs, f"{r.tokens_per_round:.4f}",
                         f"{r.alpha:.4f}", r.identical, f"{r.agreement:.4f}", f"{r.rouge:.4f}", r.new_tokens,
                         row.entries, row.measurements, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.measured_at))])
    return out.getvalue()
