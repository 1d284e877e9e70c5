"""What a lesson step is, and what it reads.

A step is one file under specviz/app/lesson/steps/ that defines a `Step`: its text (title, what it teaches),
the question it asks first, the claim it checks against its runs, and its view. All three read the same
`Data`: the runs shown (the shipped recording, or this session's live re-runs), so that the question, the
claim and the view can never disagree about what was run. The lesson's order is the list of those files.

Notation as everywhere: p target, q draft, γ (`gamma`) draft length, α (`alpha`) = accepted ÷ drafted,
c = draft time per token ÷ target time per step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..comparison import Comparison
from ..lab.same_distribution import LabRecord
from .claim import Claim
from .question import Question


@dataclass(frozen=True)
class Data:
    """What a step reads: its runs by group, the distribution lab, and where each came from."""

    group: Callable[[str], dict[str, Comparison]]  # a recordings group ("main", "gamma", …) -> its runs by name
    lab: LabRecord | None = None
    source: Callable[[str], str] = lambda name: "rec"  # "rec" for the recording, a live run's tag otherwise
    keys: tuple[str, ...] = ()  # every step's key in lesson order, for a step that points to another by number

    def number(self, key: str) -> int:
        """The 1-based number of the step named `key`."""
        return self.keys.index(key) + 1


@dataclass(frozen=True)
class Step:
    key: str  # names the step in question ids and tests, e.g. "draft-verify"
    title: str
    teaches: str  # one sentence: what the learner should leave the step knowing
    question: Callable[[Data], Question | None]  # the prediction asked before the reveal (None: nothing to ask)
    claim: Callable[[Data], Claim]  # what the runs show, in words computed from them, and what they contradict
    view: Callable[[Data], bool]  # draws the step (Streamlit); True once the reveal is shown


def step_index(value, count: int, default: int = 1) -> int:
    """A 1-based step number of a lesson of `count` steps from user input (a query parameter), clamped;
    `default` if unreadable."""
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return default
    return min(max(n, 1), count)
