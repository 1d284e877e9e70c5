"""A class at once, in room mode on this machine: N learners answer a lesson question, then N enter a challenge.

One room-mode server (the real embedded model, a class store of its own in a temporary folder), one presenter and
N learners, each a Chromium context of its own (its own cookie: one learner each), all on this machine's cores:

1. **answers**: the presenter shows the lesson's "Which drafter was fastest here?"; every learner picks an option
   and presses Submit at once. All N must be counted (the store, and the presenter's live tally), with no exception.
2. **challenge**: the presenter opens a challenge (16 new tokens); the learners enter 6 distinct settings (N / 6
   each) and press Run at once. The leaderboard must be complete (6 measured choices, N entries) within
   6 × (one measured run) + 60 s, with no exception; a MutationObserver in each browser keeps every note it was
   shown while waiting (its place in the line, or that an identical run is being measured for another session).
   One measured run is timed first, alone, on another setting (after a warm-up that starts the worker).

The board is complete when the server has stored the last entry (the store's own clock); the time until the last
browser showed its entry is kept beside it: on one 2-core machine 30 browsers only draw when the server and its worker
leave them a core, where in a class each draws on its own laptop.

Figures go to artifacts/class_load.json and are printed; the script exits non-zero when a goal is missed.

    flock /work/cpu.lock python benchmarks/class_load.py              # 30 learners
    flock /work/cpu.lock python benchmarks/class_load.py --sessions 12
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "browser")]

import psutil  # noqa: E402
from conftest import CHROMIUM, serve  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

from specviz.classroom.challenge import Choice  # noqa: E402

from browser_helpers import ARTIFACTS, browsers_cpu_seconds, keep_figures, wait_idle  # noqa: E402

KEY = "class-load"
SETTINGS = [("ngram", 4, "exact"), ("suffix", 4, "exact"), ("ngram", 2, "exact"), ("suffix", 6, "exact"),
            ("ngram", 4, "relaxed τ=2"), ("auto", 4, "exact")]
WARM, ALONE = ("ngram", 3, "exact"), ("ngram", 5, "exact")  # a warm-up, then one measured run timed alone
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
# Every waiting note a page showed, in order, without repeats, and when its entry was done (ms since the epoch).
WATCH = """
window.__notes = []; window.__doneAt = null;
new MutationObserver(() => {
  for (const note of document.querySelectorAll('[data-testid="stAlertContentInfo"]')) {
    const text = note.textContent, notes = window.__notes;
    if ((text.includes("in the line") || text.includes("An identical run is being measured"))
        && notes[notes.length - 1] !== text) notes.push(text);
  }
  if (window.__doneAt !== null) return;
  for (const note of document.querySelectorAll('[data-testid^="stAlertContent"]'))
    if (note.textContent.startsWith("Entered:") || note.textContent.includes("already measured in this challenge"))
      window.__doneAt = Date.now();
}).observe(document, {subtree: true, childList: true, characterData: true});
"""
STILL = """
document.addEventListener("DOMContentLoaded", () => {
  const style = document.createElement("style");
  style.textContent = "*, *::before, *::after { animation: none !important; transition: none !important; }";
  document.head.appendChild(style);
});
"""


class CpuTrail:
    """Where the CPU goes, sampled twice a second by a thread of normal priority: the web server, its measurement
    worker, the browsers (Chromium and Playwright's driver) and anything else on the machine (core-seconds)."""

    def __init__(self, server: psutil.Process, every: float = 0.5):
        self.server, self.every = server, every
        self.samples: list[tuple[float, dict]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> CpuTrail:
        self._thread.start()  # before this process enters the idle class: the thread keeps normal priority
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def now(self) -> dict:
        whole = psutil.cpu_times()
        out = {"server": 0.0, "worker": 0.0, "machine": whole.user + whole.system + whole.nice}
        with contextlib.suppress(psutil.Error):
            out["server"] = sum(self.server.cpu_times()[:2])
            for child in self.server.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    out["worker"] += sum(child.cpu_times()[:2])
        out["browsers"] = browsers_cpu_seconds()
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), self.now()))
            self._stop.wait(self.every)

    def between(self, start: float, end: float) -> dict:
        """Core-seconds each spent from `start` to `end`, and the seconds the worker was busy (over half a core)."""
        inside = [(t, s) for t, s in self.samples if start <= t <= end]
        if len(inside) < 2:
            return {}
        (t0, first), (t1, last) = inside[0], inside[-1]
        used = {k: round(last[k] - first[k], 1) for k in first}
        used["other"] = round(max(0.0, used.pop("machine") - used["server"] - used["worker"] - used["browsers"]), 1)
        busy = [(a[0], b[0]) for a, b in zip(inside, inside[1:])
                if (b[1]["worker"] - a[1]["worker"]) / max(1e-6, b[0] - a[0]) > 0.5]
        return {"seconds": round(t1 - t0, 1), "core_seconds": used,
                "worker_busy_s": round(sum(b - a for a, b in busy), 1),
                "worker_first_busy_after_s": round(busy[0][0] - start, 1) if busy else None}


TRAIL: CpuTrail | None = None


def learners(browser, n: int, url: str) -> list:
    pages = []
    for _ in range(n):
        context = browser.new_context(viewport={"width": 1280, "height": 1400})
        context.add_init_script(WATCH)
        context.add_init_script(STILL)
        page = context.new_page()
        page.set_default_navigation_timeout(300_000)
        page.goto(url, wait_until="domcontentloaded")
        pages.append(page)
    for page in pages:
        wait_idle(page, timeout=300_000)
    return pages


def exceptions(pages) -> int:
    return sum(p.locator('[data-testid="stException"]').count() for p in pages)


def close(pages) -> None:
    for page in pages:
        page.context.close()


def answers_case(browser, url: str, n: int, store: Path) -> dict:
    presenter = learners(browser, 1, f"{url}/Lesson?step=9&presenter={KEY}")[0]
    pages = learners(browser, n, f"{url}/Lesson?step=9")
    options = ["ngram", "suffix", "smol-head-8k"]
    for i, page in enumerate(pages):  # pick first, everywhere; then every Submit at once
        page.locator('[data-testid="stRadio"]').get_by_text(options[i % 3], exact=True).click()
    for i, page in enumerate(pages):  # a click that lands while the page redraws can be lost: pick again
        submit = page.get_by_role("button", name="Submit prediction")
        for _ in range(5):
            try:
                expect(submit).to_be_enabled(timeout=10_000)
                break
            except AssertionError:
                page.locator('[data-testid="stRadio"]').get_by_text(options[i % 3], exact=True).click()
        expect(submit).to_be_enabled(timeout=60_000)
    started = time.time()
    for page in pages:
        page.get_by_role("button", name="Submit prediction").click()
    for i, page in enumerate(pages):
        expect(page.get_by_text(f"Counted: {options[i % 3]}.")).to_be_visible(timeout=120_000)
    counted_s = time.time() - started
    expect(presenter.get_by_text(f"{n} answers so far")).to_be_visible(timeout=60_000)
    shown_s = time.time() - started
    with sqlite3.connect(store) as db:
        stored = db.execute("SELECT COUNT(*) FROM answers WHERE qid = 'draft-choice:rec'").fetchone()[0]
    figures = {"sessions": n, "answers_stored": stored, "seconds_until_every_learner_saw_counted": round(counted_s, 1),
               "seconds_until_the_presenter_showed_all": round(shown_s, 1),
               "exceptions": exceptions([presenter, *pages])}
    close([presenter, *pages])
    return figures


def entry_link(url: str, drafter: str, gamma: int, rule: str) -> str:
    return f"{url}/Challenge?drafter={quote(drafter)}&gamma={gamma}&tree=0&rule={quote(rule)}"


def challenge_case(browser, url: str, n: int, store: Path) -> dict:
    presenter = learners(browser, 1, f"{url}/Challenge?presenter={KEY}")[0]
    thumb = presenter.locator('[data-testid="stSlider"]').filter(has_text="New tokens per entry").get_by_role("slider")
    thumb.focus()
    thumb.press("Home")  # 16 new tokens
    wait_idle(presenter)
    presenter.get_by_role("button", name="Open a new challenge").click()
    expect(presenter.get_by_text("continue this prompt for 16 new tokens")).to_be_visible(timeout=60_000)

    warm = learners(browser, 1, entry_link(url, *WARM))[0]  # the worker starts and loads the target here
    warm.get_by_role("button", name="Run my entry").click()
    expect(warm.get_by_text("Entered: ")).to_be_visible(timeout=300_000)
    close([warm])
    alone = learners(browser, 1, entry_link(url, *ALONE))[0]
    began = time.time()
    alone.get_by_role("button", name="Run my entry").click()
    expect(alone.get_by_text("Entered: ")).to_be_visible(timeout=300_000)
    one_run_s = time.time() - began  # click to result, as a learner sees it
    alone_cpu = TRAIL.between(began, time.time()) if TRAIL else {}
    close([alone])

    pages = []
    for i in range(n):
        pages += learners(browser, 1, entry_link(url, *SETTINGS[i % len(SETTINGS)]))
    started = time.time()
    for page in pages:
        page.get_by_role("button", name="Run my entry").click()
    deadline = started + 900
    for page in pages:
        expect(page.get_by_text("Entered: ").or_(page.get_by_text("already measured in this challenge"))).to_be_visible(
            timeout=max(1, deadline - time.time()) * 1000)
    done = sorted(page.evaluate("window.__doneAt") / 1000 - started for page in pages)
    notes = [page.evaluate("window.__notes") for page in pages]
    keys = [Choice(d, g, 0, r).key() for d, g, r in SETTINGS]
    with sqlite3.connect(store) as db:
        cid = db.execute("SELECT MAX(id) FROM challenges").fetchone()[0]
        timed = dict(db.execute("SELECT choice, measurements FROM results WHERE challenge = ?", (cid,)))
        entered = dict(db.execute("SELECT choice, COUNT(*) FROM entries WHERE challenge = ? GROUP BY choice", (cid,)))
        last_stored = db.execute("SELECT MAX(at) FROM entries WHERE challenge = ?", (cid,)).fetchone()[0]
    measured = (sum(k in timed for k in keys), sum(timed.get(k, 0) for k in keys))
    entries = sum(entered.get(k, 0) for k in keys)
    goal = len(SETTINGS) * one_run_s + 60
    figures = {"sessions": n, "distinct_settings": len(SETTINGS), "max_new_tokens": 16,
               "one_measured_run_s": round(one_run_s, 1), "goal_s": round(goal, 1),
               "one_run_cpu": alone_cpu,
               "challenge_cpu": TRAIL.between(started, last_stored) if TRAIL else {},
               "seconds_to_first_entry": round(done[0], 1),
               "seconds_to_complete_leaderboard": round(last_stored - started, 1),
               "seconds_until_the_last_browser_showed_its_entry": round(done[-1], 1),
               "entries_stored": entries, "choices_on_the_board": measured[0], "measurements": measured[1],
               "sessions_shown_a_place": sum(any("in the line" in t for t in ns) for ns in notes),
               "sessions_shown_joining": sum(any("identical run is being measured" in t for t in ns) for ns in notes),
               "sessions_shown_nothing_while_waiting": sum(not ns for ns in notes),
               "exceptions": exceptions([presenter, *pages])}
    close([presenter, *pages])
    return figures


def _both_cases(pw, url: str, n: int, store: Path) -> dict:
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    try:
        return {"answers": answers_case(browser, url, n, store), "challenge": challenge_case(browser, url, n, store),
                "browsers": "SCHED_IDLE (as if on the learners' own machines)"}
    finally:
        browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=30)
    args = ap.parse_args()
    store = Path(tempfile.mkdtemp(prefix="specviz-class-load-")) / "class.sqlite3"
    env = {"SPECVIZ_ROOM": "1", "SPECVIZ_PRESENTER_KEY": KEY, "SPECVIZ_CLASS_STORE": str(store),
           "SPECVIZ_SERVER_NICE": "10", "SPECVIZ_BUSY_PAIRS": os.environ.get("SPECVIZ_BUSY_PAIRS", "2")}
    global TRAIL
    with serve(env, "streamlit-class-load.log") as (url, server):
        TRAIL = CpuTrail(psutil.Process(server.pid)).start()
        # From here on this process and what it starts (Playwright, the browsers) run in Linux's idle scheduling
        # class: in a class the learners' browsers run on their own laptops, not on the server's two cores. The
        # server and its worker, started above, keep their priority. But the idle class orders threads within one
        # scheduling group only, and each browser gets a session (an autogroup) of its own, so the kernel weighs
        # each browser as the server's equal (docs/performance.md). Setting those groups to niceness 19 as well
        # (`app_vs_cli.background_chromium`) starved the learners' pages instead: with nothing else running, a learner's
        # "Run my entry" could not be clicked within 30 s while the worker timed the first runs. Not solved here.
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        with sync_playwright() as pw:
            figures = _both_cases(pw, url, args.sessions, store)
    TRAIL.stop()
    keep_figures("class_load", figures)
    keep_figures("class_load_cpu_trail", {"samples": TRAIL.samples})  # (time, core-seconds so far) twice a second
    print(json.dumps(figures, indent=1))
    a, c = figures["answers"], figures["challenge"]
    problems = []
    if a["answers_stored"] != args.sessions or a["exceptions"]:
        problems.append(f"answers: {a['answers_stored']} of {args.sessions} counted, {a['exceptions']} exceptions")
    if c["entries_stored"] != args.sessions or c["choices_on_the_board"] != len(SETTINGS) or c["exceptions"]:
        problems.append(f"challenge: {c['entries_stored']} entries, {c['choices_on_the_board']} choices, "
                        f"{c['exceptions']} exceptions")
    if c["seconds_to_complete_leaderboard"] > c["goal_s"]:
        problems.append(f"challenge: complete after {c['seconds_to_complete_leaderboard']} s, goal {c['goal_s']} s")
    print(f"figures in {ARTIFACTS / 'class_load.json'}")
    if problems:
        raise SystemExit("; ".join(problems))
    print("every goal met")


if __name__ == "__main__":
    main()
