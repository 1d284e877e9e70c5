"""Stop in the middle of a γ sweep (Draft length page): the points measured are kept and shown."""

import re

from playwright.sync_api import expect

from browser_helpers import download_json, press, screenshot, wait_idle

STOPPED = re.compile(r"Stopped after (\d+) of 8 points")


def test_stop_mid_sweep_keeps_the_points_done(page, app_url):
    page.goto(f"{app_url}/Draft_length")
    wait_idle(page)
    press(page, "Max new tokens", "Home")
    # 64 tokens a run, γ 1..8 with n-gram lookup, one timed pair a point: 8 points of a few seconds each on a quiet
    # CPU, so the sweep is still running when Stop is pressed (at 32 tokens a quiet machine finished all 8 before the
    # test saw "2 of 8").
    press(page, "Max new tokens", "ArrowRight", times=7)
    press(page, "Timed pairs per point", "Home")  # one pair a point: the stop, not the spread, is under test
    page.locator(".st-key-dl-run button").first.click()
    expect(page.locator('[data-testid="stProgress"]')).to_contain_text(re.compile(r"[2-6] of 8"), timeout=300_000)
    page.locator(".st-key-dl-stop button").first.click()  # not the toolbar's own Stop

    message = page.get_by_text(STOPPED)
    expect(message).to_be_visible(timeout=60_000)
    wait_idle(page)
    kept = int(STOPPED.search(message.inner_text()).group(1))
    assert 2 <= kept < 8
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_attached()
    assert page.locator('[data-testid="stException"]').count() == 0
    screenshot(page, "draft_length_stopped")

    exported = download_json(page)  # also reruns the page, after the stopped run had time to finish its point
    assert sorted(exported) == sorted(f"ngram-g{g}-p1" for g in range(1, kept + 1)), "the points done, in order"
    wait_idle(page)
    expect(page.get_by_text(f"Stopped after {kept} of 8 points")).to_be_visible()
