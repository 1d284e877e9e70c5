"""What the presenter is showing the room: a page and the few session-state entries that place it.

One `Stage` per server, kept in `st.cache_resource` and behind a lock: the presenter's session is
the only writer, every follower's session polls it. It is generic so that any page publishes with
one call: the Rounds page publishes its selected round and run (`{"rounds-step": 7, "rounds-result":
run}`), a lesson page its step. A follower copies the entries into its own session state and opens
the page. A run is shared by reference and read-only, like a cached model.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Slide:
    """One state of the stage; `version` grows by one with every change, so a follower knows it moved."""

    page: str  # the page's script relative to the app, as st.switch_page takes it: "home.py", "pages/1_Rounds.py"
    state: dict = field(default_factory=dict)  # session-state key -> value (a position, a run reference)
    version: int = 0
    at: float = 0.0  # time.time() of the change


def _same(a: dict, b: dict) -> bool:
    """Equal keys and values, a run compared by identity (a new run is a new object)."""
    return a.keys() == b.keys() and all(a[k] is b[k] or (type(a[k]) in (int, float, str, bool) and a[k] == b[k])
                                        for k in a)


class Stage:
    """The presenter's current slide behind a lock; only a change bumps the version."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slide: Slide | None = None

    def publish(self, page: str, state: dict | None = None) -> Slide:
        state = dict(state or {})
        with self._lock:
            now = self._slide
            if now is not None and now.page == page and _same(now.state, state):
                return now
            self._slide = Slide(page, state, (now.version if now else 0) + 1, time.time())
            return self._slide

    def current(self) -> Slide | None:
        with self._lock:
            return self._slide
