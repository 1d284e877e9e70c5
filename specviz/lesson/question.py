"""The predictions a lesson step asks of the learner, and the running score.

A question is built from a real record (recorded or run live), so its answer is what the target actually
did; its id names the record's source, so a live re-run asks afresh. Each step builds its own question
(specviz/app/lesson/steps/); what several of them share is here. Pure logic, no Streamlit, no model.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..comparison import Comparison
from ..records import Round


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    options: tuple[str, ...]
    answer: int  # index of the right option
    explain: str  # shown with the verdict


@dataclass
class Score:
    """The running score: question id -> right or not (a question counts once)."""

    answers: dict[str, tuple[int, bool]]

    def submit(self, question: Question, choice: int) -> bool:
        if question.qid not in self.answers:
            self.answers[question.qid] = (choice, choice == question.answer)
        return self.answers[question.qid][1]

    @property
    def right(self) -> int:
        return sum(ok for _, ok in self.answers.values())

    @property
    def asked(self) -> int:
        return len(self.answers)

    def text(self) -> str:
        return f"Score: {self.right} / {self.asked}" if self.asked else "Score: no predictions yet"


def tok(text: str) -> str:
    """A token as a learner reads it: escapes shown, ∅ for nothing."""
    return repr(text)[1:-1] or "∅"


def pick_round(rounds: list[Round], *tests) -> Round | None:
    """The first round passing every test of the longest prefix of `tests` that some round passes."""
    for n in range(len(tests), 0, -1):
        found = [r for r in rounds if all(t(r) for t in tests[:n])]
        if found:
            return found[0]
    return rounds[0] if rounds else None


def distinct(values: list[float]) -> tuple[str, ...]:
    """Numeric options as shown (two decimals), each once, in the order given: the right one first."""
    shown: list[str] = []
    for v in values:
        if f"{v:.2f}" not in shown:
            shown.append(f"{v:.2f}")
    return tuple(shown)


def best_by_speedup(runs: dict[str, Comparison], label) -> tuple[list[str], int]:
    """The runs' labels, and the index of the fastest."""
    labels = [label(name) for name in runs]
    best = max(range(len(labels)), key=lambda i: list(runs.values())[i].speedup)
    return labels, best
