"""Follower lag in room mode: from the presenter's screen showing a step to a learner's screen showing it.

A learner's page polls the room's shared stage every FOLLOW_POLL_S (0.5 s) and then redraws the whole
page, so the lag is at most one poll interval plus one run of the page. The README promises "within about a
second"; this script measures it, in Chromium, on a room-mode server of its own (no model is loaded: the
Rounds page replays the project's recorded run). The browser tests only check that followers get there.

Both pages timestamp what they show in the browser itself (a MutationObserver, Date.now() on the same
machine clock), so the figure holds no polling delay of the script's own.

    python benchmarks/follower_lag.py                 # Rounds page, 20 steps, 1 learner
    python benchmarks/follower_lag.py --page lesson --learners 3 --out lag.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: E402

from specviz.app.room import FOLLOW_POLL_S  # noqa: E402

KEY = "bench-key"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
# The step a page shows: "Round N" on Rounds, "N. title" as the Lesson's heading. window.__shown maps the
# step's text to when it appeared (ms since the epoch); a step that leaves the page is forgotten.
WATCH = """
window.__shown = {};
new MutationObserver(() => {
  const now = Date.now();
  const here = new Set();
  for (const e of document.querySelectorAll("strong, h1, h2, h3")) {
    const m = e.textContent.match(/^(Round \\d+)$|^(\\d+)\\. /);
    if (m) here.add(m[1] || m[2]);
  }
  for (const t of here) if (!(t in window.__shown)) window.__shown[t] = now;
  for (const t of Object.keys(window.__shown)) if (!here.has(t)) delete window.__shown[t];
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.address",
         "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "SPECVIZ_ROOM": "1", "SPECVIZ_PRESENTER_KEY": KEY})
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return server, url
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise SystemExit("the Streamlit server did not become healthy in 60 s")


def shown_at(page, step: str, timeout_s: float = 60) -> float:
    """When `step` appeared on the page (seconds since the epoch), waiting for it up to timeout_s."""
    try:
        page.wait_for_function("s => s in window.__shown", arg=step, timeout=timeout_s * 1000)
    except Exception as e:
        shown = page.evaluate("Object.keys(window.__shown)")
        raise SystemExit(f"step {step!r} did not appear in {timeout_s:.0f} s on {page.url} (it shows {shown})") from e
    return page.evaluate("s => window.__shown[s]", step) / 1000


def idle(page) -> None:
    """The page's script has finished its run and nothing is pending."""
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=120_000)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=120_000)


def measure(browser, url: str, page_name: str, steps: int, learners: int) -> list[float]:
    def open_page(address):
        context = browser.new_context(viewport={"width": 1280, "height": 2000})
        context.add_init_script(WATCH)
        page = context.new_page()
        page.goto(address)
        return page

    lesson = page_name == "lesson"
    presenter = open_page(f"{url}/{'Lesson' if lesson else 'Rounds'}?presenter={KEY}")
    presenter.get_by_text("Presenting.").wait_for(timeout=120_000)
    followers = [open_page(f"{url}/?follow=1") for _ in range(learners)]
    label = (lambda n: str(n)) if lesson else (lambda n: f"Round {n}")
    if lesson:
        last, now = 12, 1
    else:
        presenter.locator('[data-testid="stSlider"]').filter(has_text="Replay up to round").get_by_role(
            "slider").wait_for()
        last = int(presenter.locator('[data-testid="stSlider"]').filter(has_text="Replay up to round")
                   .get_by_role("slider").get_attribute("max"))
        presenter.locator("body").press("Home")
        now = 1
    shown_at(presenter, label(now))
    for page in followers:
        shown_at(page, label(now))
    lags, forward = [], True
    for _ in range(steps):
        if now == last or (now == 1 and not forward):
            forward = not forward
        now += 1 if forward else -1
        for _ in range(3):  # a key pressed while the page reruns can be lost: press again (the lag counts
            idle(presenter)  # from the presenter's screen showing the step, so a second press does not add to it)
            presenter.locator("body").press("ArrowRight" if forward else "ArrowLeft")
            try:
                presenter.wait_for_function("s => s in window.__shown", arg=label(now), timeout=10_000)
                break
            except PlaywrightTimeout:
                pass
        seen = shown_at(presenter, label(now))
        lags += [shown_at(page, label(now)) - seen for page in followers]
    return lags


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--page", choices=["rounds", "lesson"], default="rounds")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--learners", type=int, default=1)
    ap.add_argument("--out", help="write the figures here as JSON")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    server, url = start_server()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            lags = measure(browser, url, args.page, args.steps, args.learners)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    lags.sort()
    figures = {"page": args.page, "steps": args.steps, "learners": args.learners, "poll_interval_s": FOLLOW_POLL_S,
               "median_s": round(statistics.median(lags), 2), "p90_s": round(lags[int(0.9 * (len(lags) - 1))], 2),
               "max_s": round(lags[-1], 2), "max_in_poll_intervals": round(lags[-1] / FOLLOW_POLL_S, 1),
               "cpu_cores": os.cpu_count()}
    print(f"follower lag on {args.page}, {len(lags)} steps seen: median {figures['median_s']} s, "
          f"p90 {figures['p90_s']} s, max {figures['max_s']} s "
          f"({figures['max_in_poll_intervals']} poll intervals of {FOLLOW_POLL_S} s)")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
