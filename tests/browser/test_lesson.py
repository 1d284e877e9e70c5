"""The Lesson in Chromium: every step with the keyboard, no model loaded, a prediction, the lab, a step's link.

The lesson's tests get a server of their own (conftest.lesson_server): "no model loaded" is a claim about the whole app
process, and the session-wide server of the other browser tests has loaded the target by the time this runs.
"""

import pytest
from playwright.sync_api import expect

from specviz.app.lesson.steps import STEPS, draft_verify
from specviz.lesson import recordings

from browser_helpers import screenshot, wait_idle


@pytest.fixture(scope="module")
def lesson_url(lesson_server):
    return f"{lesson_server}/Lesson"


def header(page, n: int):
    return page.get_by_role("heading", name=f"{n}. {STEPS[n - 1].title}")


def check_step(page, n: int) -> None:
    expect(header(page, n)).to_be_visible()
    wait_idle(page)
    assert page.locator('[data-testid="stException"]').count() == 0, f"step {n}"
    expect(page.get_by_text("Measurement worker: not started")).to_be_visible()
    expect(page.locator('[data-testid="stProgress"]')).to_contain_text(f"Step {n} of {len(STEPS)}")


def test_walk_the_lesson_with_the_keyboard(page, lesson_url, browser):
    page.goto(lesson_url, timeout=180_000)  # a busy shared CPU can hold the first load a while
    wait_idle(page)
    run = recordings.load().runs["main"].spec
    for n in range(1, len(STEPS) + 1):
        check_step(page, n)
        assert f"step={n}" in page.url  # the address bar holds the step's link

        if n == 2:  # predict, then reveal
            box = page.locator(".st-key-lesson-predict-2")
            expect(box.get_by_text("The verdict stays hidden until you submit.")).to_be_visible()
            expect(page.get_by_text("Right: ")).to_have_count(0)
            expect(page.get_by_text("Not quite: ")).to_have_count(0)
            verified = page.get_by_text("after the target's one forward pass")
            expect(verified).to_have_count(0)
            right = str(draft_verify.keep_round(run).n_accepted)
            box.get_by_role("radiogroup").get_by_text(right, exact=True).click()
            wait_idle(page)
            expect(page.get_by_text("Right: ")).to_have_count(0)
            page.get_by_role("button", name="Submit prediction").click()
            expect(page.get_by_text("Right: ")).to_be_visible()
            expect(page.locator('[data-testid="stProgress"]')).to_contain_text("Score: 1 / 1")
            expect(verified).to_be_visible()
            wait_idle(page)
            screenshot(page, "lesson_draft_verify")
        if STEPS[n - 1].key == "gamma":
            page.get_by_role("button", name="Skip: just show me").click()
            expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_attached()
            wait_idle(page)
            screenshot(page, "lesson_gamma")
        if STEPS[n - 1].key == "same":  # the distribution lab
            page.get_by_role("button", name="Skip: just show me").click()
            expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_attached()
            wait_idle(page)
            shown = {}
            for metric in page.locator('[data-testid="stMetric"]').all():
                label = metric.locator('[data-testid="stMetricLabel"]').inner_text().strip()
                shown[label] = metric.locator('[data-testid="stMetricValue"]').inner_text().strip()
            band = float(shown["noise band (95%)"].lstrip("≤ "))
            assert float(shown["TV(exact, target)"]) <= band < float(shown["TV(relaxed, target)"]), shown
            screenshot(page, "lesson_same")
            break
        page.locator("body").press("ArrowRight")  # the Next shortcut
    expect(page.locator('[data-testid="stProgress"]')).to_contain_text("Score: 1 / 1")
    page.locator("body").press("ArrowLeft")  # the Back shortcut
    check_step(page, n - 1)

    fresh = browser.new_context(viewport={"width": 1280, "height": 2000})  # a step's link, in a fresh browser
    other = fresh.new_page()
    other.goto(f"{lesson_url}?step=7", timeout=180_000)
    wait_idle(other)
    check_step(other, 7)
    fresh.close()
