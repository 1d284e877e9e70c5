"""Room load for a class: N learners press Run on Home at once on one room-mode server (the README's figures).

Runs the browser test tests/browser/test_room_load.py with SPECVIZ_LOAD_SESSIONS=N (the test itself opens 6,
enough to check the queue's behaviour) and prints what it measured: time to the first and last result,
seconds per run, peak and idle server RSS, the places in line shown, the CPU seconds spent. Needs Chromium
(scripts/install.sh dev). Takes about 90 s for 20 sessions on 2 cores.

    python benchmarks/room_load.py              # 20 sessions
    python benchmarks/room_load.py --sessions 30
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "artifacts" / "room_load.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=20)
    args = ap.parse_args()
    FIGURES.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "tests/browser/test_room_load.py"],
                          cwd=ROOT, env={**os.environ, "SPECVIZ_LOAD_SESSIONS": str(args.sessions)})
    if done.returncode != 0 or not FIGURES.is_file():
        raise SystemExit(f"the load test failed (exit {done.returncode}); see artifacts/streamlit-load.log")
    figures = json.loads(FIGURES.read_text())
    print(json.dumps(figures, indent=1))
    print(f"{figures['sessions']} sessions: last result after {figures['seconds_to_last_result']} s "
          f"(first {figures['seconds_to_first_result']} s, {figures['seconds_per_run']} s a run), peak server RSS "
          f"{figures['peak_rss_mb']} MB ({figures['idle_rss_mb']} MB idle; bound {figures['rss_bound_mb']} MB), "
          f"{figures['sessions_shown_a_place']} of {figures['sessions']} shown their own place")


if __name__ == "__main__":
    main()
