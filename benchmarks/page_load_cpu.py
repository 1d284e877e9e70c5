"""What Chromium spends to open a page of the app, and to keep it open: core-seconds, on this machine.

Starts the app on a free port (room mode with a presenter key, so that the Lesson opens as the presenter's), then
opens each page given in a fresh browser context, as each test and each learner does, waits until the page is idle,
and reports the CPU that Chromium (and Playwright's driver) used meanwhile. `--idle S` then leaves the last page of
each round open for S seconds and reports what it used doing nothing.

    python benchmarks/page_load_cpu.py / "/Lesson?presenter=k&step=9" /Challenge --rounds 4 --idle 30
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "browser")]

import psutil  # noqa: E402
from conftest import CHROMIUM, STILL, serve  # noqa: E402  (tests/browser/conftest.py: the suite's server, stillness)
from playwright.sync_api import sync_playwright  # noqa: E402

from browser_helpers import wait_idle  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def browsers() -> dict[tuple[int, float], float]:
    """CPU seconds so far of each Chromium process and Playwright's driver, by (pid, start time)."""
    used = {}
    for proc in psutil.process_iter(["name", "create_time"]):
        if any(name in (proc.info["name"] or "") for name in ("chrom", "node")):
            try:
                used[proc.pid, proc.info["create_time"]] = sum(proc.cpu_times()[:2])
            except psutil.Error:
                pass
    return used


def since(before: dict[tuple[int, float], float]) -> float:
    """Core-seconds the browsers used since `before`, counting processes that started meanwhile in full (a process
    that ended meanwhile is left out: closing a context ends its renderer)."""
    return sum(seconds - before.get(key, 0.0) for key, seconds in browsers().items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="pages to open, e.g. / or /Challenge")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=0.0, help="seconds to leave the last page open, measured")
    args = parser.parse_args()
    env = {"SPECVIZ_ROOM": "1", "SPECVIZ_PRESENTER_KEY": "k"}
    with serve(env, "streamlit-page-load.log") as (url, _), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for n in range(args.rounds):
            for path in args.paths:
                before, start = browsers(), time.time()
                context = browser.new_context(viewport={"width": 1280, "height": 2000})
                context.add_init_script(STILL)
                page = context.new_page()
                page.goto(url + path)
                wait_idle(page)
                print(f"round {n + 1} {path}: open {time.time() - start:.1f} s, "
                      f"browsers {since(before):.2f} core-s", flush=True)
                if args.idle and path == args.paths[-1]:
                    before = browsers()
                    time.sleep(args.idle)
                    used = since(before)
                    print(f"  then idle {args.idle:.0f} s: browsers {used:.2f} core-s", flush=True)
                context.close()


if __name__ == "__main__":
    main()
