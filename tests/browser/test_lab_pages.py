"""Draft length, Compare drafts, Verification tolerance and Theory in Chromium, with small settings."""

from playwright.sync_api import expect

from browser_helpers import background, press, screenshot, wait_idle

GREEN, ORANGE = "rgb(26, 152, 80)", "rgb(243, 156, 18)"


def no_exception(page):
    assert page.locator('[data-testid="stException"]').count() == 0


def test_draft_length_sweep(page, app_url):
    page.goto(f"{app_url}/Draft_length")
    wait_idle(page)
    press(page, "Draft lengths", "ArrowLeft", times=5, index=1)  # γ 1..3
    press(page, "Max new tokens", "Home")  # 8 tokens
    press(page, "Timed pairs per point", "Home")  # one pair a point: what the page draws is under test, not the spread
    page.get_by_role("button", name="Run sweep").click()
    expect(page.get_by_text("best γ (measured)")).to_be_visible(timeout=300_000)
    wait_idle(page)
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_attached()
    assert page.locator('[data-testid="stPlotlyChart"]').count() >= 4
    no_exception(page)
    screenshot(page, "draft_length")


def test_compare_drafts(page, app_url):
    page.goto(f"{app_url}/Compare_drafts")
    wait_idle(page)
    press(page, "Max new tokens", "Home")
    press(page, "Timed pairs per point", "Home")
    page.get_by_role("button", name="Run comparison").click()
    expect(page.locator("span.sv-accepted").first).to_be_visible(timeout=300_000)
    wait_idle(page)
    assert background(page, "accepted") == GREEN
    assert page.locator("span.sv-resampled, span.sv-bonus").count() > 0
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_attached()
    no_exception(page)
    screenshot(page, "compare_drafts")


def test_verification_tolerance(page, app_url):
    page.goto(f"{app_url}/Verification_tolerance")
    wait_idle(page)
    press(page, "Max new tokens", "Home")
    press(page, "Tolerance values in the range", "Home")  # 2 values
    page.get_by_role("button", name="Run sweep").click()
    expect(page.locator("span.sv-resampled").first).to_be_visible(timeout=300_000)
    wait_idle(page)
    assert background(page, "resampled") == ORANGE
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_attached()
    no_exception(page)
    screenshot(page, "verification_tolerance")


def test_theory(page, app_url):
    page.goto(f"{app_url}/Theory")
    wait_idle(page)
    before = page.locator('[data-testid="stMetricValue"]').nth(1).inner_text()
    press(page, "Acceptance rate", "ArrowRight", times=5)
    expect(page.locator('[data-testid="stMetricValue"]').nth(1)).not_to_have_text(before)
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_attached()
    no_exception(page)
    screenshot(page, "theory")


def test_distil_takes_zero_evaluation_prompts_from_a_link(page, app_url):
    """The Distil page's race can be left out (0 evaluation prompts per workload): a link sets it, the slider shows it
    and says what it means. (Training without a race, end to end: tests/app/test_page_distil.py.)"""
    page.goto(f"{app_url}/Distil?eval=0")
    wait_idle(page)
    slider = page.get_by_role("slider", name="Evaluation prompts per workload")
    expect(slider).to_have_attribute("aria-valuetext", "0")
    no_exception(page)
    screenshot(page, "distil_no_race")
