"""The line for measured runs: first in, first out, shared by every browser session of one server.

Two runs at once on the same CPU/GPU would slow each other down and make every timing wrong, so a
server measures one run at a time. In a class of thirty that is a queue, and a queue you cannot see
feels like a hang: this one knows who is waiting, each ticket's place in the line and an estimate of
its wait from the durations of the last few runs. The head of the line is the run being measured.

No Streamlit here: `specviz.app.controls` keeps one `RunQueue` in `st.cache_resource` and shows a waiting
session its place; the tests drive the queue with threads and a fake clock.
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@dataclass(eq=False)
class Ticket:
    """One place in the line. `started` is set when its run begins (it is then the head)."""

    id: int
    who: str
    priority: bool = False  # the presenter's runs go before every learner who is still waiting
    started: float | None = field(default=None, compare=False)


class RunQueue:
    """A FIFO line of tickets behind one lock; the head runs, the others wait their turn."""

    def __init__(self, history: int = 5, clock: Callable[[], float] = time.monotonic):
        self._cond = threading.Condition()
        self._line: list[Ticket] = []
        self._durations: deque[float] = deque(maxlen=history)  # seconds of the last finished runs
        self._ids = itertools.count(1)
        self._clock = clock

    def join(self, who: str, priority: bool = False) -> Ticket:
        """A new ticket at the end of the line (a priority ticket after the head and other priority ones)."""
        with self._cond:
            ticket = Ticket(next(self._ids), who, priority)
            at = len(self._line)
            if priority:
                at = next((i for i, t in enumerate(self._line) if i > 0 and not t.priority and t.started is None), at)
            self._line.insert(at, ticket)
            return ticket

    def position(self, ticket: Ticket) -> int:
        """0 when it is this ticket's turn, else how many tickets are ahead of it; -1 once it has left."""
        with self._cond:
            return self._line.index(ticket) if ticket in self._line else -1

    def waiting(self) -> list[str]:
        """Who is in the line, head first."""
        with self._cond:
            return [t.who for t in self._line]

    def typical_run(self) -> float | None:
        """Median seconds of the recent runs (None before the first run has finished)."""
        with self._cond:
            return statistics.median(self._durations) if self._durations else None

    def estimate(self, ticket: Ticket) -> float | None:
        """Seconds until this ticket's run starts: what remains of the head's run plus a typical run for
        each ticket between. None while no run has finished yet (nothing to estimate from)."""
        with self._cond:
            typical = statistics.median(self._durations) if self._durations else None
            if ticket not in self._line or typical is None:
                return None
            ahead = self._line[: self._line.index(ticket)]
            if not ahead:
                return 0.0
            head = ahead[0]
            head_left = typical if head.started is None else max(0.0, typical - (self._clock() - head.started))
            return head_left + typical * (len(ahead) - 1)

    def wait_turn(self, ticket: Ticket, timeout: float | None = None) -> bool:
        """Block until the ticket is the head (True) or the timeout passes (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: bool(self._line) and self._line[0] is ticket, timeout)

    def start(self, ticket: Ticket) -> None:
        with self._cond:
            if not self._line or self._line[0] is not ticket:
                raise RuntimeError("only the head of the line may start its run")
            ticket.started = self._clock()

    def leave(self, ticket: Ticket, finished: bool = False) -> None:
        """Out of the line, waiting or running; a finished run's duration feeds the estimates."""
        with self._cond:
            if ticket in self._line:
                self._line.remove(ticket)
            if finished and ticket.started is not None:
                self._durations.append(self._clock() - ticket.started)
            self._cond.notify_all()

    @contextlib.contextmanager
    def turn(self, who: str, on_wait: Callable[[int, float | None], None], poll: float = 1.0,
             priority: bool = False) -> Iterator[Ticket]:
        """Wait in line, then hold the head for the body. `on_wait(position, seconds)` is called at once
        and every `poll` seconds while others are ahead; whatever it or the body raises frees the line."""
        ticket = self.join(who, priority)
        finished = False
        try:
            while not self.wait_turn(ticket, 0):
                on_wait(self.position(ticket), self.estimate(ticket))
                self.wait_turn(ticket, poll)
            self.start(ticket)
            yield ticket
            finished = True
        finally:
            self.leave(ticket, finished)
