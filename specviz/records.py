"""What a run leaves behind: plain data records that every chart, table, export and test reads.

A `Run` holds the prompt, the output tokens and one `Round` per iteration of the speculative
loop (a tree round keeps its `TreeRecord`). A run beside its target-alone baseline is a
`specviz.comparison.Comparison`.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, fields

from . import theory
from .errors import SpecVizError

SCHEMA = "specviz.run/1"

# Status of a token in a round. "target" marks a token the target produced with nothing drafted
# (the autoregressive baseline, or an n-gram round that found no match).
ACCEPTED, REJECTED, RESAMPLED, BONUS, TARGET, DRAFTED = (
    "accepted",
    "rejected",
    "resampled",
    "bonus",
    "target",
    "drafted",
)


@dataclass
class Alternative:
    """One of the target's likely tokens at a verified position, with p and q of it."""

    token: int
    p: float
    q: float
    text: str = ""


@dataclass
class TreeRecord:
    """A round's token tree (specviz.trees): every drafted node, whether or not the target reached it."""

    tokens: list[int]
    parents: list[int]  # node i follows node parents[i]; -1 = the last committed token
    q: list[float]  # draft probability of each node's token (under its parent's q)
    p: list[float | None]  # target probability of each node's token; None where the target never looked
    status: list[str]  # ACCEPTED (the kept branch), REJECTED (tested and refused) or DRAFTED (never reached)
    text: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.tokens)

    @property
    def depth(self) -> int:
        level: list[int] = []
        for parent in self.parents:
            level.append(1 if parent < 0 else level[parent] + 1)
        return max(level, default=0)


@dataclass
class Round:
    index: int
    gamma: int  # γ used this round (adaptive, and cut so no draft lies past max-new-tokens)
    drafted: list[int]  # proposed ids; fewer than γ when an n-gram drafter found less
    q: list[float]  # draft probability of each drafted token
    p: list[float | None]  # target probability of each drafted token; None after the first rejection (never computed)
    n_accepted: int  # accepted prefix length
    next_token: int  # the resampled token (after a rejection) or the bonus/target token
    next_kind: str  # RESAMPLED, BONUS or TARGET
    next_p: float  # target probability of next_token
    emitted: int  # tokens appended to the output (accepted + next, cut at EOS / max-new-tokens)
    alternatives: list[list[Alternative]]  # per verified position (len(drafted) + 1): target's top tokens
    draft_seconds: float
    verify_seconds: float
    drafted_text: list[str] = field(default_factory=list)
    next_text: str = ""
    # A tree round: all its nodes. `drafted` then shows the branch the target walked: the kept nodes and the
    # first child it refused after them, so every chain view reads a tree round too.
    tree: TreeRecord | None = None
    source: str = ""  # the drafter that made this round's proposal, where one chooses among several (auto)
    why: str = ""  # ... and why it was chosen

    @property
    def verified(self) -> int:
        """Drafted tokens the target read in its forward (γ of a chain, the node count of a tree)."""
        return self.tree.size if self.tree else len(self.drafted)

    @property
    def rejected_position(self) -> int | None:
        return self.n_accepted if self.n_accepted < len(self.drafted) else None

    def statuses(self) -> list[tuple[int, str, str]]:
        """(token id, text, status) for every token shown in this round, in order."""
        out = []
        for i, tok in enumerate(self.drafted):
            status = ACCEPTED if i < self.n_accepted else REJECTED
            out.append((tok, self._text(i), status))
        out.append((self.next_token, self.next_text, self.next_kind))
        return out

    def _text(self, i: int) -> str:
        return self.drafted_text[i] if i < len(self.drafted_text) else ""


@dataclass
class Run:
    """One generation: speculative (with a drafter) or the target alone (draft = None)."""

    target: str
    draft: str | None
    prompt: str
    prompt_ids: list[int]
    settings: dict  # Decoding.to_dict()
    device: str
    dtype: str
    rounds: list[Round]
    output_ids: list[int]  # the new tokens, prompt excluded
    text: str
    prefill_seconds: float
    seconds: float  # wall time of the whole generation, prefill included
    stopped_at_eos: bool = False
    schema: str = SCHEMA
    # Per new token: seconds since the run started when it became available (the end of its round's
    # verification, device-synchronised). None in records made before SpecViz kept it (specviz.race).
    arrival_seconds: list[float] | None = None

    # --- derived figures -------------------------------------------------------------------
    @property
    def new_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def drafted(self) -> int:
        return sum(len(r.drafted) for r in self.rounds)

    @property
    def accepted(self) -> int:
        return sum(r.n_accepted for r in self.rounds)

    @property
    def acceptance_rate(self) -> float:
        """α = accepted / drafted (0 when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def mean_accepted_tokens(self) -> float:
        """Tokens gained per target forward: accepted drafts plus the resampled/bonus token."""
        return self.new_tokens / len(self.rounds) if self.rounds else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def draft_seconds(self) -> float:
        return sum(r.draft_seconds for r in self.rounds)

    @property
    def verify_seconds(self) -> float:
        return sum(r.verify_seconds for r in self.rounds)

    @property
    def draft_seconds_per_token(self) -> float:
        """Drafting time per token drafted (every node of a tree counts)."""
        verified = sum(r.verified for r in self.rounds)
        return self.draft_seconds / verified if verified else 0.0

    @property
    def is_tree(self) -> bool:
        return any(r.tree for r in self.rounds)

    def accept_by_rank(self) -> list[float]:
        """a_r: how often a tree's rank-r child was kept when the target reached its parent (tree rounds only)."""
        tested: list[int] = []
        kept: list[int] = []
        for t in (r.tree for r in self.rounds if r.tree):
            reached = {-1} | {i for i, s in enumerate(t.status) if s == ACCEPTED}
            for rank, parent, status in zip(theory.sibling_ranks(t.parents), t.parents, t.status):
                if parent in reached:
                    tested += [0] * (rank + 1 - len(tested))
                    kept += [0] * (rank + 1 - len(kept))
                    tested[rank] += 1
                    kept[rank] += status == ACCEPTED
        return [k / n if n else 0.0 for k, n in zip(kept, tested)]

    def tree_expected_tokens(self) -> float:
        """The tree theory's tokens per round: each round's shape under the run's own a_r (chain rounds give 1)."""
        a = self.accept_by_rank()
        values = [theory.tree_expected_tokens(r.tree.parents, a) if r.tree else 1.0 for r in self.rounds]
        return statistics.fmean(values) if values else 0.0

    @property
    def step_seconds(self) -> float:
        """Mean time of one target forward in the loop (a plain decoding step for a baseline run)."""
        return self.verify_seconds / len(self.rounds) if self.rounds else 0.0

    @property
    def mean_gamma(self) -> float:
        """The γ scheduled per round (adaptive, and cut near max-new-tokens)."""
        return statistics.fmean(r.gamma for r in self.rounds) if self.rounds else 0.0

    @property
    def implied_alpha(self) -> float:
        """The theory's α: the per-token acceptance probability that gives this run's tokens per round at its
        drafted length. Lower acceptance_rate (accepted ÷ drafted) counts drafts after a rejection, which are
        never tested; the standard model's α is the chance that a tested draft is accepted."""
        return theory.alpha_from_mean_tokens(self.mean_accepted_tokens, self.mean_drafted) if self.drafted else 0.0

    @property
    def mean_drafted(self) -> float:
        """Tokens actually drafted per round: γ for a model draft, often fewer for n-gram lookup (0 with no match).
        This is the γ of the theory: a round that drafts nothing costs one step and yields one token."""
        return self.drafted / len(self.rounds) if self.rounds else 0.0

    def acceptance_by_position(self) -> list[float]:
        """P(draft token i accepted | it was drafted), for i = 0 .. longest draft - 1."""
        reached, accepted = self.position_counts()
        return [a / n for a, n in zip(accepted, reached)]

    def position_counts(self) -> tuple[list[int], list[int]]:
        """Per draft position i: how many rounds drafted a token there, and how many of those were accepted
        (kept so acceptance by position can be pooled over runs, as engine-bench pools vLLM's counters)."""
        longest = max((len(r.drafted) for r in self.rounds), default=0)
        reached = [sum(len(r.drafted) > i for r in self.rounds) for i in range(longest)]
        accepted = [sum(len(r.drafted) > i and r.n_accepted > i for r in self.rounds) for i in range(longest)]
        return reached, accepted

    @property
    def mean_verified(self) -> float:
        """Drafted tokens the target read per round (a tree's nodes, a chain's drafts)."""
        return statistics.fmean(r.verified for r in self.rounds) if self.rounds else 0.0

    @property
    def drafting_rounds(self) -> int:
        """Rounds that drafted at least one token (vLLM counts only these as drafts)."""
        return sum(bool(r.drafted) for r in self.rounds)

    def summary(self) -> dict:
        return {
            "target": self.target,
            "draft": self.draft,
            "new_tokens": self.new_tokens,
            "rounds": len(self.rounds),
            "drafted": self.drafted,
            "accepted": self.accepted,
            "acceptance_rate": self.acceptance_rate,
            "mean_accepted_tokens": self.mean_accepted_tokens,
            "mean_gamma": self.mean_gamma,
            "mean_drafted": self.mean_drafted,
            "implied_alpha": self.implied_alpha,
            "seconds": self.seconds,
            "tokens_per_second": self.tokens_per_second,
            "draft_seconds": self.draft_seconds,
            "verify_seconds": self.verify_seconds,
        }

    # --- serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Run:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise SpecVizError(
                f"not a SpecViz run of this version (expected schema {SCHEMA!r}, found {found!r}); "
                "export it again with this version of SpecViz"
            )
        try:
            data = dict(data)
            data["rounds"] = [
                Round(
                    **{
                        **r,
                        "alternatives": [[Alternative(**a) for a in pos] for pos in r["alternatives"]],
                        "tree": TreeRecord(**r["tree"]) if r.get("tree") else None,
                    }
                )
                for r in data["rounds"]
            ]
            names = {f.name for f in fields(cls)}
            run = cls(**{k: v for k, v in data.items() if k in names})
            _check_types(run)
            return run
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecVizError(f"the run record is damaged ({exc}); export it again from SpecViz") from None


def token_agreement(output: list[int], reference: list[int]) -> float:
    """Fraction of positions where two token lists agree, over the longer one (1 when both are empty)."""
    if not output and not reference:
        return 1.0
    return sum(a == b for a, b in zip(output, reference)) / max(len(output), len(reference))


def _check_types(run: Run) -> None:
    """Raise TypeError if a loaded record holds values of the wrong type (a hand-edited or damaged file)."""

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise TypeError(f"{what} has the wrong type")

    def ints(values, what):
        need(isinstance(values, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in values), what)

    def numbers(values, what):
        need(
            isinstance(values, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values),
            what,
        )

    ints(run.output_ids, "output_ids")
    ints(run.prompt_ids, "prompt_ids")
    numbers([run.seconds, run.prefill_seconds], "seconds")
    if run.arrival_seconds is not None:
        numbers(run.arrival_seconds, "arrival_seconds")
        need(len(run.arrival_seconds) == len(run.output_ids), "arrival_seconds (one per new token)")
    need(
        isinstance(run.text, str) and isinstance(run.prompt, str) and isinstance(run.settings, dict),
        "text/prompt/settings",
    )
    for r in run.rounds:
        ints([r.index, r.gamma, r.n_accepted, r.next_token, r.emitted], f"round {r.index} counts")
        ints(r.drafted, f"round {r.index} drafted")
        numbers(
            r.q + [v for v in r.p if v is not None] + [r.next_p, r.draft_seconds, r.verify_seconds],
            f"round {r.index} probabilities/times",
        )
        need(len(r.q) == len(r.p) == len(r.drafted) and 0 <= r.n_accepted <= len(r.drafted), f"round {r.index} sizes")
        need(r.next_kind in (RESAMPLED, BONUS, TARGET), f"round {r.index} next_kind")
        if r.tree is not None:
            t = r.tree
            ints(t.tokens, f"round {r.index} tree tokens")
            ints(t.parents, f"round {r.index} tree parents")
            need(
                len(t.parents) == len(t.q) == len(t.p) == len(t.status) == len(t.tokens)
                and all(-1 <= parent < i for i, parent in enumerate(t.parents)),
                f"round {r.index} tree shape",
            )
