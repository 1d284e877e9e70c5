"""How busy the rest of the machine was while a run was timed: the CPU that other programs took, from Linux's /proc.

A timing taken while something else runs is not a clean measurement, and pairing does not fully answer it: the
target alone reads all its weights for every token, so other work that competes for memory bandwidth slows it
more than a speculative run, which reads them once per round. So each timed pair also records the share of the
machine's CPU time that went to other processes (the hypervisor's steal included), and the figure is flagged when
that share is large. The fast path's choice of products (`products.choose_blas_rows`) reads it too: a choice timed
while other programs ran is used, not kept. `None` where /proc cannot be read (not Linux): nothing is claimed there.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

BUSY_SHARE = 0.25  # other work above a quarter of the machine's CPU time: the figure is flagged
NOTICEABLE_SHARE = 0.03  # a noticeable share: a quiet machine gives 0.1-0.3%, a server with busy visitors 3-9% (Xeon)
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuTimes:
    """Busy CPU seconds of the whole machine (all cores, steal included), of niced processes, and of this one."""

    busy: float
    niced: float
    own: float
    at: float  # time.monotonic() when read


def read() -> CpuTimes | None:
    """The machine's and this process's CPU seconds so far (None where /proc is not there)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
        own = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        utime, stime = int(own[11]), int(own[12])  # fields 14 and 15 of proc(5), after the name
        return CpuTimes(
            busy=(user + nice + system + irq + softirq + steal) / _TICK,
            niced=nice / _TICK,
            own=(utime + stime) / _TICK,
            at=time.monotonic(),
        )
    return None


@dataclass(frozen=True)
class OtherWork:
    """The share of the machine's CPU time (all cores) that other processes took over an interval, 0..1."""

    share: float
    niced: float  # of which niced processes (the app's web server runs niced beside its measurement worker)


def between(before: CpuTimes | None, after: CpuTimes | None) -> OtherWork | None:
    if before is None or after is None or after.at <= before.at:
        return None
    capacity = (after.at - before.at) * (os.cpu_count() or 1)
    others = (after.busy - before.busy) - (after.own - before.own)
    # a process's own ticks are sampled apart from the machine's: clamp the rounding into 0..1
    return OtherWork(
        share=min(1.0, max(0.0, others / capacity)), niced=min(1.0, max(0.0, (after.niced - before.niced) / capacity))
    )


def busy_text(shares: list[float]) -> str | None:
    """What to say when other work took a large share of the machine while a comparison was timed (else None)."""
    if not shares or max(shares) <= BUSY_SHARE:
        return None
    return (
        f"Other programs took up to {max(shares):.0%} of this machine's CPU while these runs were timed (other "
        "visitors' pages, other programs), so this speedup may differ from a quiet machine's: usually it is higher, "
        "because work that competes for memory slows the target alone more than speculative decoding. Run again "
        "when the machine is quiet."
    )
