"""Home and Rounds in Chromium: coloured tokens of every status, live runs, no exceptions."""

import re
import time

from playwright.sync_api import expect

from browser_helpers import background, choose, keep_figures, press, screenshot, wait_idle

GREEN, RED, ORANGE, BLUE = "rgb(26, 152, 80)", "rgb(215, 48, 39)", "rgb(243, 156, 18)", "rgb(69, 117, 180)"


def test_home_shows_recorded_run_then_a_live_one(page, app_url):
    page.goto(f"{app_url}/?max_new=16")  # Home's shortest live run: what the page shows is under test, not the model
    wait_idle(page)
    expect(page.get_by_text("A recorded run")).to_be_visible()
    assert background(page, "accepted") == GREEN
    assert background(page, "rejected") == RED
    assert background(page, "resampled") == ORANGE
    assert background(page, "bonus") == BLUE
    strike = page.locator("span.sv-rejected").first.evaluate("e => getComputedStyle(e).textDecorationLine")
    assert "line-through" in strike  # colour is never the only cue
    page.get_by_role("button", name="Run").first.click()
    expect(page.get_by_text("Step through it round by round")).to_be_visible(timeout=240_000)
    wait_idle(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    screenshot(page, "home")


def test_rounds_page_runs_and_replays(page, app_url):
    page.goto(f"{app_url}/Rounds?max_new=16")  # 2 pairs of 16 tokens: the pairing, not the model, is under test
    wait_idle(page)
    expect(page.get_by_text("Showing a run recorded by the project")).to_be_visible()
    started = time.perf_counter()
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.get_by_text("Identical to the target alone")).to_be_visible(timeout=300_000)
    wait_idle(page)
    expect(page.get_by_text("Showing a run recorded by the project")).to_have_count(0)
    # The speedup with its spread: the median of the 2 timed pairs, their range and the 95% interval.
    spread = page.get_by_text(re.compile(
        r"Measured speedup \d+\.\d\d× \(\d+\.\d\d–\d+\.\d\d over 2 pairs; 95% interval \d+\.\d\d–\d+\.\d\d\)"))
    expect(spread).to_be_visible()
    card = page.locator('[data-testid="stMetric"]').filter(has_text="speedup").first.inner_text()
    assert re.search(r"\d+\.\d\d(–\d+\.\d\d)?×", card), card
    # Press Run -> a rendered 16-token Rounds view (2 timed pairs), kept for the notes.
    keep_figures("rounds_run_seconds", {"seconds": time.perf_counter() - started})
    for status, colour in (("accepted", GREEN), ("resampled", ORANGE)):
        assert background(page, status) == colour
    hover = page.locator('span.sv-resampled[title*="round"]').first.get_attribute("title")
    assert "p (target)" in hover
    page.get_by_role("button", name="◀ Back").click()
    wait_idle(page)
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_attached()
    assert page.locator('[data-testid="stException"]').count() == 0
    screenshot(page, "rounds")


def test_the_page_list_starts_with_home_even_when_a_page_is_opened_directly(page, app_url):
    """A room's deep links open pages directly; on a fresh server that showed "app" in place of "Home"."""
    for path in ("Theory", "Rounds"):
        page.goto(f"{app_url}/{path}")
        wait_idle(page)
        links = page.locator('[data-testid="stSidebarNav"] a')
        expect(links.first).to_contain_text("Home")
        names = [n.strip() for n in links.all_inner_texts()]
        assert names[:3] == ["Home", "Lesson", "Rounds"], names
        assert "app" not in [n.lower() for n in names]
        assert page.locator('[data-testid="stException"]').count() == 0


def test_the_rounds_timeline_says_why_the_suffix_drafter_drafted_what_it_did(page, app_url):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{app_url}/Rounds")
    wait_idle(page)
    choose(page, "Draft", "suffix")
    press(page, "Max new tokens", "Home")
    press(page, "Max new tokens", "ArrowRight", times=2)  # 24 tokens: a timeline that fits a picture
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.get_by_text("Identical to the target alone")).to_be_visible(timeout=300_000)
    wait_idle(page)
    expect(page.get_by_text("Showing a run recorded by the project")).to_have_count(0)
    timeline = page.locator("table.sv-timeline").last
    why = timeline.locator("div.sv-why")
    expect(why.first).to_be_visible()
    assert why.count() == timeline.locator("tr").count()  # one line for every round
    lines = why.all_inner_texts()
    # What it matched and where it cut: "earlier answers: last 2 tokens seen 1×; 2 drafted, 0.2 expected kept, ..."
    assert any("drafted," in line and "expected kept" in line and "steps" in line for line in lines), lines
    assert page.locator('[data-testid="stException"]').count() == 0
    page.add_style_tag(content='[data-testid="stHeader"] {display: none}')  # it would cover the table's first rows
    screenshot(timeline, "rounds_suffix")
