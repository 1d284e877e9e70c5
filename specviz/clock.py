"""The one clock that times SpecViz's work: wall-clock seconds once the device has finished what was queued.

On CUDA and MPS a call returns as soon as its kernels are queued, so a clock that does not wait first
would charge the work to whatever reads the result next. The loop (`decode.generate`) and the lab's
measurements time with this; drafters never hold one, they get the loop's times in `feedback`.
"""

from __future__ import annotations

import time

import torch


class Clock:
    """Call it for the seconds now (perf_counter), read after the device's queued work has finished."""

    def __init__(self, device: torch.device | str = "cpu"):
        kind = torch.device(device).type
        self.sync = {"cuda": torch.cuda.synchronize, "mps": getattr(torch.mps, "synchronize", None)}.get(kind)

    def __call__(self) -> float:
        if self.sync:
            self.sync()
        return time.perf_counter()
