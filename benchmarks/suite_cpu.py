"""Where a command's CPU goes on this machine: core-seconds by kind of process while it runs.

Runs the command (by default the README's test command) and samples every process on the machine once a second:
the CPU time each one used since the last sample is added to its kind (Chromium, the Playwright driver, Streamlit
servers, the app's measuring workers, pytest and its workers, other). A process that starts and ends between two
samples is missed, so the totals are a lower bound. Run it on a quiet machine: other programs land in "other".

    python benchmarks/suite_cpu.py                                      # bash scripts/test.sh
    python benchmarks/suite_cpu.py -- python -m pytest -q tests/browser/test_lab_pages.py
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import subprocess
import sys
import time

import psutil

KINDS = (("chromium", ("chromium", "chrome")), ("playwright driver", ("playwright/driver",)),
         ("streamlit server", ("streamlit run",)), ("measuring worker", ("specviz.worker",)),
         ("pytest", ("pytest", "xdist", "execnet", "sys.stdin.readline")))  # xdist workers start as `python -c`


def kind(cmdline: str) -> str:
    for name, marks in KINDS:
        if any(mark in cmdline for mark in marks):
            return name
    return "other"


def cpu_of(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="*", default=["bash", "scripts/test.sh"], help="the command (after --)")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    args = parser.parse_args()
    seen: dict[tuple[int, float], float] = {}

    def sample(totals: collections.Counter | None) -> None:
        for proc in psutil.process_iter(["cmdline", "create_time"]):
            with contextlib.suppress(psutil.Error):
                used = cpu_of(proc)
                key = (proc.pid, proc.info["create_time"])
                if totals is not None:
                    totals[kind(" ".join(proc.info["cmdline"] or []))] += used - seen.get(key, 0.0)
                seen[key] = used

    sample(None)  # what every process already running had used: not counted
    totals: collections.Counter = collections.Counter()
    start = time.time()
    command = subprocess.Popen(args.command)
    while command.poll() is None:
        time.sleep(args.every)
        sample(totals)
    wall = time.time() - start
    print(f"{' '.join(args.command)}: exit {command.returncode}, {wall:.0f} s, "
          f"{psutil.cpu_count()} cores ({psutil.cpu_count() * wall:.0f} core-seconds available)")
    for name, seconds in totals.most_common():
        print(f"  {name:18} {seconds:8.1f} core-s")
    print(f"  {'all':18} {sum(totals.values()):8.1f} core-s")
    return command.returncode


if __name__ == "__main__":
    sys.exit(main())
