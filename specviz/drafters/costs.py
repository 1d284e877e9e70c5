"""What a round costs, measured while the run goes: drafting seconds per token, and v(n) for verification.

A round that drafts n tokens costs v(n) target steps for the forward over the last token and the n
drafts, plus n·c for drafting them (c = a draft's seconds per token / a target step's seconds).
Both differ by machine (v(1) was 1.05 on one CPU and 1.5 on another), so drafters that decide how
much to draft by cost learn them during the run: `Costs` keeps decaying averages of the seconds seen and
reads v(n) off a line fitted through the sizes seen. The seconds are the loop's (`base.Timing`, handed
over in `feedback`): a verification is the target's forward, the acceptance check and the cache rollback.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DECAY = 0.95  # weight left on an old observation after each new one (about the last 20 rounds count)


@dataclass
class Costs:
    """Running seconds: each source's drafting per token, and verification forwards by drafts verified.

    prior_slope: v(n) = 1 + prior_slope·n until two sizes have been measured (a line needs two).
    """

    draft: dict[str, float] = field(default_factory=dict)  # source -> seconds per drafted token
    forward: dict[int, float] = field(default_factory=dict)  # n drafts -> seconds of the forward over 1 + n tokens
    forwards_seen: dict[int, int] = field(default_factory=dict)  # n drafts -> forwards of that size observed
    prior_slope: float = 0.0
    _fit: tuple | None = field(default=None, init=False, repr=False, compare=False)  # (line, step) until a forward

    def observe_draft(self, source: str, seconds: float, tokens: int) -> None:
        """A round's drafting seconds for `tokens` drafted by `source`. A stalled round counts as at most twice the
        usual, as forwards do: a source priced out by one stall would draft no more, and so never be timed again."""
        if tokens:
            old = self.draft.get(source)
            per_token = seconds / tokens if old is None else min(seconds / tokens, 2 * old)
            self.draft[source] = _mix(old, per_token)

    def observe_forward(self, n: int, seconds: float) -> None:
        """One forward's seconds. A stalled one (another process, a page fault, a shape run for the first time)
        counts as at most twice the usual: the size's own average, or for a new size what the line says (at least the
        cheapest forward seen). A size's first few forwards are averaged evenly, so one slow start is outvoted within
        a few rounds, not twenty."""
        old = self.forward.get(n)
        if old is None and self.forward:
            # The line's figure, but never under the cheapest forward seen: a line through a fast size and a slow
            # one can cross zero before n = 0, and a cap under zero would record a negative time.
            a, b = self._line()
            seconds = min(seconds, 2 * max(a + b * n, min(self.forward.values())))
        elif old is not None:
            seconds = min(seconds, 2 * old)
        seen = self.forwards_seen[n] = self.forwards_seen.get(n, 0) + 1
        self._fit = None  # the line and the step change only here (a round's tree asks them at every node)
        self.forward[n] = seconds if old is None else old + (seconds - old) * max(1 / seen, 1 - DECAY)

    def step(self) -> float | None:
        """Seconds of one target step (a forward over one token), measured or read off the line."""
        return self._fitted()[1]

    def _step(self, line: tuple[float, float] | None) -> float | None:
        if 0 in self.forward:
            return self.forward[0]
        if not line:
            return None
        # Off the line's intercept, but never so low that the smallest size seen costs more than the prior says:
        # a line through two sizes, one of them a slow first forward, can point near zero.
        smallest = min(self.forward)
        return max(line[0], self.forward[smallest] / (1.0 + self.prior_slope * smallest))

    def v(self, n: int) -> float:
        """v(n): a verification forward over 1 + n tokens in target steps, off the line through the sizes seen
        (the prior until two sizes are measured). A line rather than each size's own average: rising in n, and
        steady."""
        if len(self.forward) < 2:
            return 1.0 + self.prior_slope * n
        step, line = self.step(), self._line()
        if not step or not line:
            return 1.0
        a, b = line
        return max((a + b * n) / step, 1.0)

    def c(self, source: str) -> float:
        step = self.step()
        return self.draft.get(source, 0.0) / step if step else 0.0

    def _line(self) -> tuple[float, float] | None:
        """seconds ≈ a + b·n by least squares over the sizes seen (flat through one size)."""
        return self._fitted()[0]

    def _fitted(self) -> tuple:
        """(the line, the step), fitted again after a forward is observed."""
        if self._fit is None:
            line = self._fit_line()
            self._fit = (line, self._step(line))
        return self._fit

    def _fit_line(self) -> tuple[float, float] | None:
        if not self.forward:
            return None
        ns = list(self.forward)
        mean_n = sum(ns) / len(ns)
        mean_s = sum(self.forward.values()) / len(ns)
        spread = sum((n - mean_n) ** 2 for n in ns)
        b = max(sum((n - mean_n) * (self.forward[n] - mean_s) for n in ns) / spread, 0.0) if spread else 0.0
        return mean_s - b * mean_n, b


def _mix(old: float | None, new: float) -> float:
    return new if old is None else DECAY * old + (1 - DECAY) * new

