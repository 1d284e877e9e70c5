"""The lesson's steps, in order: one module per step.

Each module defines `STEP` (a `specviz.lesson.step.Step`): its title and what it teaches, the question it asks
before the reveal, the claim it checks against its runs, and its view. Adding a step is one file here and one
line in ORDER; the page, its navigation and the tests read the lesson from this list.
"""

from __future__ import annotations

from importlib import import_module

from ....lesson.step import Step

ORDER = (  # module names, in lesson order
    "bottleneck",
    "draft_verify",
    "accept_reject",
    "sampling",
    "bonus",
    "worksheet",
    "cost",
    "gamma",
    "draft_choice",
    "trees",
    "heads",
    "relaxed",
    "faster",
    "same",
)
STEPS: tuple[Step, ...] = tuple(import_module(f".{name}", __name__).STEP for name in ORDER)
KEYS = tuple(step.key for step in STEPS)
