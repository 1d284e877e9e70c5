"""The one clock that times SpecViz's work: wall-clock seconds once the device has finished what was queued.

On CUDA and MPS a call returns as soon as its kernels are queued, so a clock that does not wait first
would charge the work to whatever reads the result next. The loop (`decode.generate`) and the lab's
measurements time with this; drafters never hold one, they get the loop's times in `feedback`.
A clock can be paused: two runs measured side by side, a round of one and then of the other
(`lab.measure.side_by_side`), each count only the time of their own rounds.
"""

from __future__ import annotations

import time

import torch


class Clock:
    """Call it for the seconds now (perf_counter, less the time it was paused), read after the device's queued work
    has finished."""

    def __init__(self, device: torch.device | str = "cpu"):
        kind = torch.device(device).type
        self.sync = {"cuda": torch.cuda.synchronize, "mps": getattr(torch.mps, "synchronize", None)}.get(kind)
        self.away = 0.0  # seconds spent paused: another run's work, not this one's
        self.paused_at: float | None = None

    def __call__(self) -> float:
        if self.sync:
            self.sync()
        return time.perf_counter() - self.away

    def pause(self) -> None:
        """Stop counting once the device is done (another run's round comes next)."""
        if self.sync:
            self.sync()
        self.paused_at = time.perf_counter()

    def resume(self) -> None:
        """Count again from now, leaving out the time since `pause`."""
        if self.paused_at is not None:
            self.away += time.perf_counter() - self.paused_at
            self.paused_at = None
