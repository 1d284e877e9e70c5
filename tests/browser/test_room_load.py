"""Twenty learners press Run on Home at once, in room mode, on one server (the real embedded model).

Every session must get its own result, with a clear place-in-line message while it waits, and no
exception; the server's resident memory must stay under RSS_BOUND_MB. Runs are short (16 new tokens,
the shortest Home offers) so that the test measures the queue, not the model. The figures (time to
the last result, peak RSS) are written to screenshots/room_load.json for the README.
"""

import json
import threading
import time

import psutil
from playwright.sync_api import expect

from browser_helpers import SCREENSHOTS, screenshot, wait_idle
from conftest import serve

SESSIONS = 20
# The server holds one SmolLM2-135M target (~0.6 GB in fp32 with torch around it) whatever the room's
# size; twenty sessions add their pages' state and results, a few MB each. 2 GiB leaves room for the
# allocator and fails if sessions were to copy models or keep growing.
RSS_BOUND_MB = 2048
DONE = "Step through it round by round"
WAITING = "in the line"


def test_twenty_sessions_press_run_at_once_and_all_get_their_result(browser):
    with serve({"SPECVIZ_ROOM": "1"}, "streamlit-load.log") as (url, server):
        process, peak, stop = psutil.Process(server.pid), [0.0], threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], process.memory_info().rss / 2**20)
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        pages = []
        for _ in range(SESSIONS):
            page = browser.new_context(viewport={"width": 1280, "height": 1400}).new_page()
            page.goto(f"{url}/?max_new=16")
            pages.append(page)
        for page in pages:  # the first one waits for the target to load, the others for their page
            wait_idle(page, timeout=300_000)
            expect(page.get_by_role("button", name="Run ngram")).to_contain_text("16 tokens")
        idle_mb = process.memory_info().rss / 2**20

        started = time.perf_counter()
        for page in pages:
            page.get_by_role("button", name="Run ngram").click()
        finished, told = {}, set()
        while len(finished) < SESSIONS and time.perf_counter() - started < 900:
            for i, page in enumerate(pages):
                if i in finished:
                    continue
                if page.get_by_text(WAITING).count():
                    told.add(i)
                if page.get_by_text(DONE).count():
                    finished[i] = time.perf_counter() - started
            time.sleep(0.5)
        stop.set()
        sampler.join()

        assert len(finished) == SESSIONS, f"only {len(finished)} of {SESSIONS} sessions got their result"
        assert len(told) >= SESSIONS // 2, f"only {len(told)} waiting sessions were told their place in the line"
        for page in pages:
            wait_idle(page)
            assert page.locator('[data-testid="stException"]').count() == 0
            assert page.locator('[data-testid="stAlertContentError"]').count() == 0
            expect(page.get_by_text("Identical to the target alone")).to_be_visible()
            expect(page.get_by_text(WAITING)).to_have_count(0)  # the queue note is gone once the run is done
        assert peak[0] < RSS_BOUND_MB, f"server RSS peaked at {peak[0]:.0f} MB (bound {RSS_BOUND_MB} MB)"
        figures = {"sessions": SESSIONS, "max_new_tokens": 16, "seconds_to_last_result": max(finished.values()),
                   "seconds_to_first_result": min(finished.values()), "peak_rss_mb": peak[0], "idle_rss_mb": idle_mb,
                   "rss_bound_mb": RSS_BOUND_MB, "told_their_place": len(told)}
        (SCREENSHOTS / "room_load.json").write_text(json.dumps(figures, indent=1))
        print(figures)
        screenshot(pages[-1], "room_load_last")
        for page in pages:
            page.context.close()
