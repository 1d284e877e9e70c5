"""Room load for a class: N learners press Run on Home at once on one room-mode server (the README's figures).

Runs the browser test tests/browser/test_room_load.py with SPECVIZ_LOAD_SESSIONS=N (the test itself opens 4,
enough to check the behaviour) and prints what it measured in both of its cases: every learner with its own
prompt (each run measured, one at a time, in a visible line) and every learner pressing Run on the same settings
(one measurement, shared). For each: time to the first and last result, peak and idle server RSS, the places in
line or the shared labels shown, the CPU seconds spent. Needs Chromium (scripts/install.sh dev). Takes about
3 minutes for 30 sessions on 2 cores.

    python benchmarks/room_load.py              # 30 sessions
    python benchmarks/room_load.py --sessions 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz.lab.measure import PAIRS  # noqa: E402

FIGURES = ROOT / "artifacts" / "room_load.json"
IDENTICAL_GOAL_S = 60  # issue 20: a class of 30 pressing Run on the same settings, last result within a minute


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=30)
    args = ap.parse_args()
    FIGURES.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "tests/browser/test_room_load.py"],
        cwd=ROOT,
        # every run timed in as many pairs as the app times them (the test alone times one)
        env={**os.environ, "SPECVIZ_LOAD_SESSIONS": str(args.sessions), "SPECVIZ_TEST_PAIRS": str(PAIRS),
             "SPECVIZ_SERVER_NICE": "10", "SPECVIZ_BUSY_PAIRS": "2"},  # as a real server
    )
    if done.returncode != 0 or not FIGURES.is_file():
        raise SystemExit(f"the load test failed (exit {done.returncode}); see artifacts/streamlit-load.log")
    figures = json.loads(FIGURES.read_text())
    print(json.dumps(figures, indent=1))
    for case, shown in (("differing", "sessions_shown_a_place"), ("identical", "sessions_shown_shared")):
        f = figures[case]
        print(
            f"{case} settings, {f['sessions']} sessions: last result after {f['seconds_to_last_result']} s "
            f"(first {f['seconds_to_first_result']} s), peak server RSS {f['peak_rss_mb']} MB (bound "
            f"{f['rss_bound_mb']} MB), its worker {f['peak_worker_rss_mb']} MB, both {f['peak_total_rss_mb']} MB "
            f"({f['idle_rss_mb']} MB idle), "
            f"{f[shown]} of {f['sessions']} "
            f"{'shown their own place' if case == 'differing' else 'shown the shared label'}"
        )
    last = figures["identical"]["seconds_to_last_result"]
    if last > IDENTICAL_GOAL_S:
        raise SystemExit(f"identical presses: last result after {last} s, over the goal of {IDENTICAL_GOAL_S} s")
    print(f"identical presses: last result within the goal of {IDENTICAL_GOAL_S} s")


if __name__ == "__main__":
    main()
