"""A token tree on the Rounds page in Chromium: drafted live, drawn with its kept branch, its mask on demand."""

from playwright.sync_api import expect

from browser_helpers import choose, press, screenshot, wait_idle


def test_rounds_page_draws_a_live_token_tree_and_its_mask(page, app_url):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{app_url}/Rounds")
    wait_idle(page)
    choose(page, "Draft", "smol-head-8k")
    press(page, "Max new tokens", "Home")  # 8 tokens: a few rounds
    press(page, "Token tree", "ArrowRight", times=6)  # a tree of 6 nodes per round
    expect(page.get_by_text("Children per node", exact=True)).to_be_visible()
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.get_by_text("Showing a run recorded by the project")).to_have_count(0, timeout=240_000)
    wait_idle(page)
    expect(page.get_by_text("Identical to the target alone")).to_be_visible()
    expect(page.get_by_text("tree of 6 nodes")).to_be_visible()  # the run's caption
    page.get_by_role("button", name="« First").click()  # round 1 (the last may draft nothing: the budget is spent)
    wait_idle(page)

    trees = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="verified in one target forward")
    expect(trees.last).to_contain_text("Round 1:")
    for n in range(2, 7):  # show a round that kept part of its tree, if the first rounds kept nothing
        if " 0 kept" not in trees.last.text_content():
            break
        page.get_by_role("button", name="Next ▶").click()
        wait_idle(page)
        expect(trees.last).to_contain_text(f"Round {n}:")  # the replay fragment swaps its chart after the rerun
    tree = trees.last
    expect(tree.get_by_text("last token")).to_be_attached()
    assert tree.locator("path.point").count() >= 6  # the nodes (and root and next token) are drawn
    legend = tree.locator("g.legend").text_content()
    assert "last committed token" in legend and ("kept" in legend or "refused" in legend)
    tree.scroll_into_view_if_needed()
    screenshot(tree, "rounds_tree")

    page.get_by_text("Show the tree's attention mask").click()
    wait_idle(page)
    mask = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Tree attention mask")
    expect(mask.last).to_be_visible()
    assert page.locator('[data-testid="stException"]').count() == 0


def test_theory_page_shows_the_measured_verify_cost_and_chain_against_tree(page, app_url):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{app_url}/Theory")
    wait_idle(page)
    section = page.get_by_text("Token trees: several guesses per position, one forward")
    section.scroll_into_view_if_needed()
    charts = page.locator('[data-testid="stPlotlyChart"]')
    expect(charts.filter(has_text="Verification cost v(N)").last).to_be_visible()
    expect(charts.filter(has_text="Chain or tree at the same tokens verified").last).to_be_visible()
    expect(page.get_by_text("verify-cost --max-nodes 32")).to_be_visible()  # how v(N) was measured
    assert page.locator('[data-testid="stException"]').count() == 0
    charts.filter(has_text="Verification cost v(N)").last.scroll_into_view_if_needed()
    screenshot(page, "theory_trees")
