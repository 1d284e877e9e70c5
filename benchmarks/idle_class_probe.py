"""Does Linux's idle scheduling class keep busy programs out of a timed run's way? (a probe, not a test)

Times a two-thread torch loop (20,000 one-row products with a 1536 × 576 weight, the shape of the target's MLP) on a
quiet machine, then beside four busy loops in the idle scheduling class (`SCHED_IDLE`) started three ways:

- in a session of their own (as Playwright starts every browser): with Linux's autogroup on, each session is a
  scheduling group that the kernel weighs against the timed process's group as an equal, whatever the class of
  the threads inside it;
- in a session of their own whose autogroup is set to niceness 19 (`benchmarks/app_vs_cli.py` starts its browsers
  so);
- in the timed process's own session, where the idle class orders them behind it.

    python benchmarks/idle_class_probe.py          # a minute, minutes where the idle class does not hold; quiet machine

Prints the seconds of each, and whether autogroup is on (/proc/sys/kernel/sched_autogroup_enabled).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

BUSY = """
import os, sys
if sys.argv[1] != "same":
    os.setsid()  # a session (and an autogroup) of its own, its children with it
if sys.argv[1] == "nice19":
    open("/proc/self/autogroup", "w").write("19")
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
os.fork()  # two busy loops per process
while True:
    pass
"""
WAYS = {
    "own session": "own",
    "own session, its autogroup at niceness 19": "nice19",
    "the timed process's session": "same",
}


def timed() -> float:
    torch.set_num_threads(2)
    weight, row = torch.randn(1536, 576), torch.randn(1, 576)
    for _ in range(200):
        row @ weight.T
    start = time.perf_counter()
    for _ in range(20_000):
        row @ weight.T
    return time.perf_counter() - start


def beside(way: str) -> float:
    """The timed loop beside four idle-class busy loops started `way`; they are all stopped after."""
    group = 0 if way == "same" else None  # "same": a process group of its own (to be stopped), in this session
    procs = [subprocess.Popen([sys.executable, "-c", BUSY, way], process_group=group) for _ in range(2)]
    try:
        time.sleep(1.0)
        return timed()
    finally:
        for proc in procs:  # each is the leader of its process group (its session's, or one made for "same")
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> None:
    flag = Path("/proc/sys/kernel/sched_autogroup_enabled")
    print(f"autogroup: {flag.read_text().strip() if flag.exists() else 'not here'}")
    print(f"quiet: {timed():.2f} s")
    for label, way in WAYS.items():
        print(f"beside four idle-class busy loops, {label}: {beside(way):.2f} s")
    print(f"quiet again: {timed():.2f} s")


if __name__ == "__main__":
    main()
