"""A lesson question's answers, counted across the room: no names, one answer per learner.

The presenter sees the counts grow before the reveal, and after it beside the measured answer:
"The room: 60% said ‘ngram’ (3 of 5); measured: suffix."
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tally:
    """How many learners chose each option of one question (in the question's order)."""

    options: tuple[str, ...]
    counts: tuple[int, ...]
    revealed: bool = False  # the presenter has revealed the answer: answers are final

    @property
    def total(self) -> int:
        return sum(self.counts)

    def share(self, i: int) -> float:
        return self.counts[i] / self.total if self.total else 0.0

    def leading(self) -> list[int]:
        """The options most learners chose (several on a tie; none before the first answer)."""
        top = max(self.counts, default=0)
        return [i for i, n in enumerate(self.counts) if n == top] if top else []

    def text(self, answer: int) -> str:
        """The room beside the measured answer, in one sentence."""
        measured = f"measured: {self.options[answer]}"
        if not self.total:
            return f"No one in the room answered; {measured}."
        said = " and ".join(f"{self.share(i):.0%} said ‘{self.options[i]}’" for i in self.leading())
        right = self.share(answer)
        return (f"The room: {said} ({self.total} answer{'s' if self.total != 1 else ''}); {measured}. "
                f"{right:.0%} of the room predicted it.")
