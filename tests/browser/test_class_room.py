"""The room as a class, in Chromium: the room's predictions tallied live, and a drafting challenge's leaderboard.

One room-mode server with a presenter key and a class store of its own (a temporary file). Each learner is a
browser context of its own (its own cookie: one learner each). The lesson part runs on recordings (no model);
the challenge's entries are measured by the server's worker on the embedded model, 16 new tokens each.
"""

import re
from urllib.parse import quote

import pytest
from conftest import QUICK_PAIRS, serve
from playwright.sync_api import expect

from browser_helpers import press, screenshot, wait_idle

KEY = "teacher-class"
VIEW = {"width": 1280, "height": 2000}
LIVE = 30_000  # a tally or a board reads the store every second; a busy 2-core machine redraws more slowly
RUN = 300_000  # an entry measured in the line, the worker's start included
DRAFT_CHOICE = 9  # the lesson step "Which drafter was fastest here?" (ngram … suffix)


@pytest.fixture
def contexts():
    """Every browser context a test opens, closed after it whatever happened (a page left open keeps polling)."""
    opened = []
    yield opened
    for context in opened:
        context.close()


@pytest.fixture(scope="module")
def class_url(tmp_path_factory):
    store = tmp_path_factory.mktemp("class") / "class.sqlite3"
    env = {"SPECVIZ_ROOM": "1", "SPECVIZ_PRESENTER_KEY": KEY, "SPECVIZ_CLASS_STORE": str(store)}
    with serve(env, "streamlit-class.log", QUICK_PAIRS) as (url, _):
        yield url


def open_page(browser, url, idle=True, opened=None):
    context = browser.new_context(viewport=VIEW)
    if opened is not None:
        opened.append(context)
    page = context.new_page()
    page.set_default_navigation_timeout(120_000)  # a room's server on 2 busy cores, its worker measuring
    page.goto(url, wait_until="domcontentloaded")
    if idle:
        wait_idle(page)
    return context, page


def no_exception(*pages):
    for page in pages:
        assert page.locator('[data-testid="stException"]').count() == 0


def answer(page, option: str) -> None:
    """Pick an option and submit it. A click that lands while the page redraws can be lost: pick again until the
    submit button takes it."""
    submit = page.get_by_role("button", name=re.compile("Submit prediction|Change my answer"))
    for _ in range(5):
        page.locator('[data-testid="stRadio"]').get_by_text(option, exact=True).click()
        try:
            expect(submit).to_be_enabled(timeout=5_000)
            break
        except AssertionError:
            continue
    expect(submit).to_be_enabled()
    submit.click()
    expect(page.get_by_text(f"Counted: {option}.")).to_be_visible(timeout=LIVE)


def test_three_learners_answer_and_the_presenter_sees_the_tally_before_the_reveal(browser, class_url, contexts):
    lesson = f"{class_url}/Lesson?step={DRAFT_CHOICE}"
    host, presenter = open_page(browser, f"{lesson}&presenter={KEY}", opened=contexts)
    expect(presenter.get_by_text("Presenting.")).to_be_visible()
    expect(presenter.get_by_text("0 answers so far")).to_be_visible(timeout=LIVE)
    learners = [open_page(browser, lesson, opened=contexts) for _ in range(3)]
    for (_, page), option in zip(learners, ("ngram", "ngram", "layerskip:8")):
        expect(page.get_by_text("Predict first — the whole room.")).to_be_visible()
        answer(page, option)
    _, first = learners[0]
    expect(first.locator(".main-svg").filter(has_text="The room's predictions")).to_have_count(1, timeout=LIVE)

    expect(presenter.get_by_text("3 answers so far")).to_be_visible(timeout=LIVE)  # live, no rerun of theirs
    expect(presenter.locator(".main-svg").filter(has_text="The room's predictions: 3 answers")).to_have_count(
        1, timeout=LIVE)
    assert presenter.get_by_text("Which drafter was fastest here").count() == 1
    assert presenter.get_by_text("What these runs show").count() == 0  # nothing revealed yet
    screenshot(presenter, "class_tally_presenter")

    _, third = learners[2]  # a reload is a new session of the same browser: the same learner, the same answer
    third.reload()
    wait_idle(third)
    expect(third.get_by_text("Counted: layerskip:8.")).to_be_visible(timeout=LIVE)
    answer(third, "suffix")  # changed, not added
    expect(presenter.get_by_text("3 answers so far")).to_be_visible(timeout=LIVE)

    presenter.get_by_role("button", name="Reveal the answer to the room").click()
    expect(presenter.get_by_text("The room: 67% said ‘ngram’ (3 answers); measured: suffix.")).to_be_visible(
        timeout=LIVE)
    for (_, page), verdict in zip(learners, ("Not quite", "Not quite", "Right")):
        expect(page.get_by_text(re.compile(f"{verdict}: "))).to_be_visible(timeout=LIVE)
        expect(page.get_by_text("What these runs show")).to_be_visible(timeout=LIVE)
    no_exception(presenter, *(page for _, page in learners))
    screenshot(presenter, "class_tally_revealed")

    presenter.get_by_role("button", name="Reset this question").click()  # asked afresh
    expect(presenter.get_by_text("0 answers so far")).to_be_visible(timeout=LIVE)
    expect(first.get_by_role("button", name="Submit prediction")).to_be_visible(timeout=LIVE)


def board_rows(page) -> list[list[str]]:
    rows = page.locator('[data-testid="stTable"] tbody tr')
    return [[cell.strip() for cell in rows.nth(i).locator("th, td").all_inner_texts()] for i in range(rows.count())]


def entry_link(url: str, drafter: str, gamma: int, rule: str = "exact") -> str:
    return f"{url}/Challenge?drafter={quote(drafter)}&gamma={gamma}&tree=0&rule={quote(rule)}"


def open_challenge(browser, url, opened):
    host, presenter = open_page(browser, f"{url}/Challenge?presenter={KEY}", opened=opened)
    press(presenter, "New tokens per entry", "Home")  # 16
    presenter.get_by_role("button", name="Open a new challenge").click()
    expect(presenter.get_by_text(re.compile(r"^Challenge \d+: continue this prompt for 16 new tokens$"))).to_be_visible(
        timeout=LIVE)
    return host, presenter


def run_entry(page) -> None:
    page.get_by_role("button", name="Run my entry").click()


def test_a_challenge_ranks_three_entries_and_a_fourth_session_sees_them(browser, class_url, contexts):
    host, presenter = open_challenge(browser, class_url, contexts)
    choices = [("ngram", 4, "exact"), ("suffix", 4, "exact"), ("ngram", 4, "relaxed τ=2")]
    learners = [open_page(browser, entry_link(class_url, *c), opened=contexts) for c in choices]
    for _, page in learners:
        run_entry(page)
    for _, page in learners:
        expect(page.get_by_text(re.compile("^Entered: "))).to_be_visible(timeout=RUN)
    fourth_context, fourth = open_page(browser, f"{class_url}/Challenge", opened=contexts)
    expect(fourth.locator('[data-testid="stTable"] tbody tr')).to_have_count(3, timeout=LIVE)
    rows = board_rows(fourth)
    labels = {f"{d} · γ={g} · {r}" for d, g, r in choices}
    assert {row[1] for row in rows} == labels
    assert [row[0].split()[0] for row in rows] == ["1", "2", "3"]
    speedups = [float(row[2].split("×")[0]) for row in rows]
    assert speedups == sorted(speedups, reverse=True)
    relaxed = next(row for row in rows if "relaxed" in row[1])
    assert "⚠ lossy" in relaxed[0] and relaxed[5].startswith("⚠ ")  # marked, with its drift beside it
    assert all(row[5].startswith("✔ identical") for row in rows if "exact" in row[1])
    assert all(row[8] == "" for row in rows)  # the fourth session entered nothing
    _, first = learners[0]
    expect(first.locator('[data-testid="stTable"] tbody tr')).to_have_count(3, timeout=LIVE)  # live, no rerun
    screenshot(fourth, "class_leaderboard")

    presenter.reload()  # the presenter's cookie and the store outlive the session: close and export
    wait_idle(presenter)
    presenter.get_by_role("button", name="Close the challenge").click()
    expect(fourth.get_by_text("This challenge is closed: the board below is final.")).to_be_visible(timeout=LIVE)
    with presenter.expect_download() as info:
        presenter.get_by_role("button", name="Leaderboard (CSV)").click()
    csv = open(info.value.path(), encoding="utf-8").read().splitlines()
    assert csv[0].startswith("rank,lossy,drafter,gamma") and len(csv) == 4
    no_exception(presenter, fourth, *(page for _, page in learners))


def test_two_identical_entries_are_measured_once(browser, class_url, contexts):
    host, presenter = open_challenge(browser, class_url, contexts)
    twins = [open_page(browser, entry_link(class_url, "ngram", 2), opened=contexts) for _ in range(2)]
    for _, page in twins:  # both presses before either run ends
        run_entry(page)
    for _, page in twins:
        expect(page.get_by_text(re.compile("^Entered: |already measured in this challenge"))).to_be_visible(
            timeout=RUN)
    _, page = twins[0]
    expect(page.locator('[data-testid="stTable"] tbody tr')).to_have_count(1, timeout=LIVE)
    expect(page.locator('[data-testid="stTable"] tbody tr').first).to_contain_text("★", timeout=LIVE)
    for _ in range(40):  # the board redraws every few seconds: wait for the second entry to reach it
        (row,) = board_rows(page)
        if row[6] == "2":
            break
        page.wait_for_timeout(500)
    assert row[1] == "ngram · γ=2 · exact" and row[6] == "2" and row[7] == "1"  # two entries, timed once
    shared = [p.get_by_text(re.compile("served from an identical run|already measured in this challenge")).count()
              for _, p in twins]
    assert sorted(shared) == [0, 1]  # one measured it, the other was served that measurement
    no_exception(presenter, *(p for _, p in twins))


def test_a_learner_who_leaves_mid_run_does_not_block_the_line(browser, class_url, contexts):
    host, presenter = open_challenge(browser, class_url, contexts)
    leaver_context, leaver = open_page(browser, entry_link(class_url, "suffix", 3), opened=contexts)
    stayer_context, stayer = open_page(browser, entry_link(class_url, "ngram", 6), opened=contexts)
    run_entry(leaver)
    expect(leaver.get_by_text(re.compile("^Timing suffix"))).to_be_visible(timeout=RUN)  # measuring now
    run_entry(stayer)  # in the line behind it
    leaver_context.close()  # the tab is gone mid-run: its job is given up
    expect(stayer.get_by_text(re.compile("^Entered: "))).to_be_visible(timeout=RUN)
    expect(stayer.locator('[data-testid="stTable"] tbody tr').filter(has_text="ngram · γ=6 · exact")).to_have_count(1)
    no_exception(stayer)


def test_a_hand_made_link_with_an_unknown_drafter_gets_a_message(browser, class_url, contexts):
    host, presenter = open_challenge(browser, class_url, contexts)
    context, page = open_page(browser, f"{class_url}/Challenge?drafter=gpt-9&gamma=99", opened=contexts)
    expect(page.get_by_text(re.compile("drafter: 'gpt-9' is not offered here"))).to_be_visible()
    expect(page.get_by_text(re.compile("gamma: '99' is outside 1 to 16"))).to_be_visible()
    no_exception(page)
