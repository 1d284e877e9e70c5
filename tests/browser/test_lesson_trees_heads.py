"""The lesson's recorded steps on token trees, feature heads and the draft choice (with the suffix drafter) in Chromium.

Each step opens from its link on the lesson's server (no model loaded), reveals its charts and states
what its runs show without a contradiction warning; the trees step labels the flat GPU curve as theory.
"""

import pytest
from playwright.sync_api import expect

from specviz.app.lesson.steps import STEPS

from browser_helpers import screenshot, wait_idle

STEP = {s.key: i for i, s in enumerate(STEPS, start=1)}


@pytest.fixture(scope="module")
def lesson_url(lesson_server):
    return f"{lesson_server}/Lesson"


def reveal(page, url: str, key: str) -> None:
    n = STEP[key]
    page.goto(f"{url}?step={n}", timeout=180_000)
    wait_idle(page)
    expect(page.get_by_role("heading", name=f"{n}. {STEPS[n - 1].title}")).to_be_visible()
    page.get_by_role("button", name="Skip: just show me").click()
    expect(page.get_by_text("What these runs show:")).to_be_visible()
    wait_idle(page)
    assert page.locator('[data-testid="stException"]').count() == 0, key
    assert page.locator('[data-testid="stAlertContentWarning"]').count() == 0, key  # no contradiction
    expect(page.get_by_text("Measurement worker: not started")).to_be_visible()


def test_trees_heads_and_draft_choice_steps(page, lesson_url):
    page.set_viewport_size({"width": 1280, "height": 2000})
    reveal(page, lesson_url, "trees")
    charts = page.locator('[data-testid="stPlotlyChart"]')
    expect(charts).to_have_count(2)  # the round's tree, and what a tree buys by N
    expect(charts.first.locator(".main-svg").first).to_be_attached()
    expect(charts.nth(1)).to_contain_text("theoretical GPU, not measured")
    expect(charts.nth(1)).to_contain_text("this machine's v(N) (measured)")
    expect(page.get_by_text("no GPU was measured for this lesson")).to_be_visible()
    expect(page.get_by_text("with a theoretical flat v(N) = 1")).to_be_visible()
    screenshot(page, "lesson_trees")

    reveal(page, lesson_url, "heads")
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_attached()
    expect(page.get_by_text("smol-head-8k: c = ")).to_be_visible()
    expect(page.locator('[data-testid="stDataFrame"]')).to_be_visible()
    screenshot(page, "lesson_heads")

    reveal(page, lesson_url, "draft-choice")
    expect(page.get_by_text("suffix ", exact=False).first).to_be_visible()  # the suffix drafter is one of the choices
    assert "suffix" in page.get_by_text("Ranked:").inner_text()
    screenshot(page, "lesson_draft_choice")
