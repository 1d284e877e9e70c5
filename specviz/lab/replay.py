"""Replaying a known greedy answer through a drafter that reads only tokens: tokens per round with no model.

In greedy decoding with exact verification the output is the target's own greedy answer whatever
the drafter proposes. So for a drafter that reads tokens only (ngram, suffix) every round can be
replayed from that answer: draft after the committed tokens, keep the longest prefix (a tree's
longest branch) that equals the answer's next tokens, then add the answer's next token, as the
target would. Tokens per round and α by draft position come out exactly as a real run gives them,
in microseconds per round, so a drafter's settings can be compared on hundreds of answers in
seconds. What a round costs in time is not replayed: that takes the target (`lab.measure`). Given a
measured v(N) (`lab.verify_cost`), `steps(v)` prices the rounds replayed: each one a forward over
the nodes it drafted, so settings can be ranked by modelled tokens per target step as well.

A drafter that learns from the target's logits at the verified nodes (recycle, blend) gets them from a
`teacher`: the target's top-k after a token sequence, or None where it is not known. `AnswerTeacher` knows them
along the answer only (one teacher-forced pass of the target over prompt and answer, done once): the root and
the kept nodes of every round, never the refused ones, which a live run also learns from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..config import Decoding
from ..drafters.base import Drafter, Verified

Teacher = Callable[[list[int]], "tuple[torch.Tensor, torch.Tensor] | None"]  # tokens -> top-k ids and p after them


@dataclass
class Replay:
    rounds: int = 0
    tokens: int = 0  # answer tokens replayed
    drafted: int = 0
    accepted: int = 0
    reached: list[int] = field(default_factory=list)  # rounds whose draft reached position i (0-based)
    kept: list[int] = field(default_factory=list)  # ... and kept the token there
    sizes: dict[int, int] = field(default_factory=dict)  # nodes drafted -> rounds that drafted that many

    @property
    def tokens_per_round(self) -> float:
        return self.tokens / max(1, self.rounds)

    def steps(self, v) -> float:
        """What the rounds cost in target steps, with v(n) the cost of a forward over n drafted nodes (v(0) = 1)."""
        return sum(rounds * v(n) for n, rounds in self.sizes.items())

    def tokens_per_step(self, v) -> float:
        """Tokens per target step under v(n): the speedup the rounds would give, drafting time and overhead aside."""
        return self.tokens / max(self.steps(v), 1e-9)

    def alpha_at(self, i: int) -> float:
        return self.kept[i] / self.reached[i] if i < len(self.reached) and self.reached[i] else float("nan")

    def add(self, other: Replay) -> Replay:
        width = max(len(self.reached), len(other.reached))
        pad = lambda xs: xs + [0] * (width - len(xs))  # noqa: E731
        return Replay(self.rounds + other.rounds, self.tokens + other.tokens, self.drafted + other.drafted,
                      self.accepted + other.accepted, [a + b for a, b in zip(pad(self.reached), pad(other.reached))],
                      [a + b for a, b in zip(pad(self.kept), pad(other.kept))],
                      {n: self.sizes.get(n, 0) + other.sizes.get(n, 0) for n in self.sizes.keys() | other.sizes.keys()})


class AnswerTeacher:
    """The target's top-k after every prefix of prompt + answer that ends inside the answer (or at its start):
    ids and p [len(answer) + 1, k], row j after answer[:j]. Unknown (None) off the answer."""

    def __init__(self, prompt_ids: list[int], answer: list[int], ids: torch.Tensor, probs: torch.Tensor):
        self.text, self.start, self.ids, self.probs = list(prompt_ids) + list(answer), len(prompt_ids), ids, probs

    def __call__(self, tokens: list[int]):
        j = len(tokens) - self.start
        if 0 <= j < self.ids.shape[0] and tokens[self.start:] == self.text[self.start: len(tokens)]:
            return self.ids[j], self.probs[j]
        return None


def replay(drafter: Drafter, prompt_ids: list[int], answer: list[int], settings: Decoding,
           learn: bool = True, teacher: Teacher | None = None) -> Replay:
    """The rounds a greedy run of `drafter` would make to write `answer` after `prompt_ids` (see the module).

    learn=False skips the drafter's `finish`, so a suffix corpus stays as it was (and is not rebuilt).
    teacher: what the target expects after a sequence, handed to the drafter as its verified rows (`Verified`).
    """
    out = Replay()
    ids = torch.tensor([list(prompt_ids)])
    drafter.start(ids, settings)
    done = 0
    while done < len(answer):
        k = min(drafter.gamma, len(answer) - done - 1)
        proposal = drafter.propose(ids, k, settings.sampling, None)
        drafted = proposal.ids.tolist()
        kept = _kept(drafted, proposal.parents, answer[done:])
        depth = _depth(proposal.parents, len(drafted))
        for i in range(min(depth, len(kept) + 1)):  # positions past the first miss were never judged
            _bump(out.reached, i)
            if i < len(kept):
                _bump(out.kept, i)
        verified = taught(teacher, ids[0].tolist(), drafted, proposal.parents) if teacher else None
        drafter.feedback(kept, None, None, verified)
        emitted = answer[done : done + len(kept) + 1]
        ids = torch.cat([ids, torch.tensor([emitted])], dim=1)
        done += len(emitted)
        out.rounds += 1
        out.drafted += len(drafted)
        out.sizes[len(drafted)] = out.sizes.get(len(drafted), 0) + 1
        out.accepted += len(kept)
    out.tokens = done
    if learn:
        drafter.finish(list(answer))
    return out


def taught(teacher: Teacher, context: list[int], drafted: list[int], parents: list[int] | None) -> Verified:
    """The rows of a verification forward over [last committed token, drafts] that the teacher knows."""
    paths: list[list[int]] = []  # each node's tokens after the context, its own last
    for i, token in enumerate(drafted):
        parent = parents[i] if parents is not None else i - 1
        paths.append((paths[parent] if parent >= 0 else []) + [token])
    rows, ids, probs = [], [], []
    for row, path in enumerate([[]] + paths):
        top = teacher(context + path)
        if top is not None:
            rows.append(row)
            ids.append(top[0])
            probs.append(top[1])
    tokens = torch.tensor(context[-1:] + drafted)
    if not rows:
        return Verified(tokens, parents, known=([], torch.empty(0, 0, dtype=torch.long), torch.empty(0, 0)))
    return Verified(tokens, parents, known=(rows, torch.stack(ids), torch.stack(probs)))


def _kept(drafted: list[int], parents: list[int] | None, truth: list[int]) -> list[int]:
    """Indices of the drafts kept: a chain's prefix equal to `truth`, or a tree's branch that follows it."""
    kept, node = [], -1
    for token in truth[:-1]:  # the last answer token always comes from the target
        children = [i for i in range(len(drafted))
                    if (parents[i] if parents is not None else i - 1) == node and drafted[i] == token]
        if not children:
            break
        node = children[0]
        kept.append(node)
    return kept


def _depth(parents: list[int] | None, n: int) -> int:
    if parents is None:
        return n
    depth = [0] * n
    for i, parent in enumerate(parents):
        depth[i] = 1 if parent < 0 else depth[parent] + 1
    return max(depth, default=0)


def _bump(counts: list[int], i: int) -> None:
    while len(counts) <= i:
        counts.append(0)
    counts[i] += 1
