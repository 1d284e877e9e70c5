"""The Lesson page: speculative decoding step by step, on recorded runs, predict first and then see.

`page` is the frame (the current step, navigation, one step drawn); `steps/` holds one file per step (its text,
question, claim and view) and their order; `session` the runs shown (recorded, or re-run live this session);
`prediction` the questions' box and the score; `parts` the views several steps share.
"""

from .page import current_step, go_to, navigation, render
from .session import STEP
from .steps import STEPS

__all__ = ["STEP", "STEPS", "current_step", "go_to", "navigation", "render"]
