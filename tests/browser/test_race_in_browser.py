"""The race in Chromium: on Home from the shipped recording, live on Rounds after a run, and followed in room mode.

The race animates in the browser from the recorded times; these tests watch its lanes (how many tokens each
shows, whether it has crossed its finish line) while it plays.
"""

import time

from conftest import ROOM_KEY as KEY
from playwright.sync_api import expect

from specviz import race

from browser_helpers import screenshot, wait_idle

VIEW = {"width": 1280, "height": 2000}
FOLLOW_TIMEOUT = 30_000


def lanes(page) -> list[dict]:
    """Each lane of the race on the page: its name, tokens shown and total, finish time and whether it finished."""
    frame = page.frame_locator('iframe[title="st.iframe"]').first
    return frame.locator(".lane").evaluate_all(
        """els => els.map(e => ({name: e.dataset.lane, shown: +e.dataset.shown, total: e.querySelectorAll('.rt').length,
                                  finish: +e.dataset.finish, finished: e.dataset.finished === 'true'}))""")


def watch(page, seconds: float) -> list[list[dict]]:
    """The lanes, every 50 ms, until every lane has finished (or `seconds` pass)."""
    seen, deadline = [], time.time() + seconds
    while time.time() < deadline:
        seen.append(lanes(page))
        if seen[-1] and all(lane["finished"] for lane in seen[-1]):
            break
        time.sleep(0.05)
    return seen


def speed(page, label: str) -> None:
    """Pick a race speed (a segmented control) and wait for the page to redraw the race at that speed.

    Waiting for the script alone is not enough: the click's rerun may not have begun when the page first looks idle,
    and a race watched then is the old one, which the new race replaces from its first token.
    """
    page.locator('[data-testid="stButtonGroup"]').get_by_text(label, exact=True).click()
    wait_idle(page)
    frame = page.frame_locator('iframe[title="st.iframe"]').first
    expect(frame.locator(".race-top")).to_contain_text(f"replayed at {label}")
    wait_idle(page)


def no_exception(*pages):
    for page in pages:
        assert page.locator('[data-testid="stException"]').count() == 0


def test_home_races_the_shipped_recording(page, app_url):
    page.goto(app_url)
    wait_idle(page)
    recording = race.load_recording()
    expected, _ = race.race_lanes(recording.runs)
    speed(page, "0.25×")  # slow enough to watch every burst arrive
    wait_idle(page)
    seen = watch(page, 60)
    names = [lane["name"] for lane in seen[-1]]
    assert names == [lane.name for lane in expected] == [race.BASELINE, *recording.runs]
    assert all(lane["finished"] and lane["shown"] == lane["total"] for lane in seen[-1]), "every lane crosses its line"
    shown = [[lane["shown"] for lane in frame] for frame in seen]
    assert any(0 < n < total for frame in seen for n, total in ((x["shown"], x["total"]) for x in frame)), \
        "tokens appear over time, not all at once"
    assert all(a <= b for before, after in zip(shown, shown[1:]) for a, b in zip(before, after)), "tokens never vanish"
    # The recorded order of the finish: a faster lane crosses its line while a slower one is still running.
    first, last = min(expected, key=lambda lane: lane.finish), max(expected, key=lambda lane: lane.finish)
    at = names.index(first.name), names.index(last.name)
    assert any(frame[at[0]]["finished"] and not frame[at[1]]["finished"] for frame in seen)
    frame = page.frame_locator('iframe[title="st.iframe"]').first
    expect(frame.locator(f'.lane[data-lane="{first.name}"] .lane-flag')).to_contain_text(
        f"finished at {first.finish:.2f} s"
    )
    assert frame.locator(".lane .sv-accepted").count() > 0 and frame.locator(".lane .sv-target").count() > 0
    no_exception(page)
    screenshot(page, "race")


def test_rounds_races_a_live_run_against_the_target_alone(page, app_url):
    page.goto(f"{app_url}/Rounds?max_new=24")
    wait_idle(page)
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.get_by_text("Showing a run recorded by the project")).to_have_count(0, timeout=120_000)
    wait_idle(page)
    expect(page.get_by_text("reconstructed from per-round times")).to_have_count(0)  # a live run's times are measured
    speed(page, "0.5×")
    wait_idle(page)
    seen = watch(page, 30)
    last = seen[-1]
    assert [lane["name"] for lane in last][0] == race.BASELINE and len(last) == 2
    assert all(lane["finished"] and lane["shown"] == lane["total"] == 24 for lane in last)
    assert any(0 < lane["shown"] < lane["total"] for frame in seen for lane in frame)
    expect(
        page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Where the time goes").locator(".main-svg").first
    ).to_be_attached()
    expect(page.locator('[data-testid="stDataFrame"]').first).to_be_visible()
    no_exception(page)


def open_page(browser, url, idle=True):
    context = browser.new_context(viewport=VIEW)
    page = context.new_page()
    page.goto(url)
    if idle:
        wait_idle(page)
    return context, page


def srcdoc(page) -> str:
    return page.locator('iframe[title="st.iframe"]').first.get_attribute("srcdoc") or ""


def test_a_follower_sees_the_race_the_presenter_shows(browser, room_url):
    host, presenter = open_page(browser, f"{room_url}/Rounds?presenter={KEY}&max_new=16")
    expect(presenter.get_by_text("Presenting.")).to_be_visible()
    presenter.get_by_role("button", name="Run", exact=True).click()
    expect(presenter.get_by_text("Showing a run recorded by the project")).to_have_count(0, timeout=120_000)
    wait_idle(presenter)
    speed(presenter, "2×")
    wait_idle(presenter)
    follow_link = presenter.locator('[data-testid="stSidebar"] [data-testid="stCode"]').inner_text().strip()
    guest, learner = open_page(browser, follow_link, idle=False)
    expect(learner.get_by_text("Following the presenter's race: 2×")).to_be_visible(timeout=FOLLOW_TIMEOUT)
    mine = watch(presenter, 20)[-1]
    theirs = watch(learner, 20)[-1]
    assert [(lane["name"], lane["finish"], lane["total"]) for lane in theirs] == [
        (lane["name"], lane["finish"], lane["total"]) for lane in mine
    ], "the presenter's run, lane by lane"
    assert all(lane["finished"] for lane in theirs)
    assert "replayed at 2×" in srcdoc(learner)

    wait_idle(presenter)  # (a click that lands while the page is still rerunning can be lost on a busy machine)
    presenter.get_by_role("button", name="↺ Replay the race").click()  # the room sees it start again
    deadline = time.time() + FOLLOW_TIMEOUT / 1000
    restarted = ("<!-- race 1 -->",)
    while time.time() < deadline and not all(srcdoc(page).startswith(restarted) for page in (presenter, learner)):
        time.sleep(0.2)
    assert srcdoc(presenter).startswith(restarted) and srcdoc(learner).startswith(restarted)
    no_exception(presenter, learner)
    screenshot(learner, "race_follower")
    guest.close()
    host.close()
