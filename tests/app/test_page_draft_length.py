"""The draft-length page and the γ sweep behind it.

The sweep itself is checked on the tiny random models of conftest.py (milliseconds); the page is
driven with AppTest on the real embedded SmolLM2 target, kept small: one prompt, 8 new tokens,
γ from 1 to 3, the n-gram drafter.
"""

import json
import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz import theory
from specviz.config import Decoding
from specviz.errors import SpecVizError
from specviz.lab import sweeps
from specviz.prompts import load_prompt_set

from tiny import PROMPTS

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "2_Draft_length.py")
TIMEOUT = 300  # one script run: the first loads (and may convert) the embedded target


# --- the sweep, on tiny models ------------------------------------------------------------------
def test_sweep_times_every_gamma_in_pairs_with_its_own_runs_of_the_target_alone(target, load):
    done = []
    points = sweeps.gamma_sweep(target, "tiny-draft", list(PROMPTS[:2]), [3, 1, 2], Decoding(max_new_tokens=10),
                                load=load, on_point=lambda p, n, total: done.append((n, total)), pairs=2)
    assert [(p.prompt_index, p.gamma) for p in points] == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3)]
    assert done == [(n, 6) for n in range(1, 7)]
    for index in (0, 1):
        mine = [p.comparison for p in points if p.prompt_index == index]
        assert len({id(c.baseline) for c in mine}) == 3, "no γ reuses a baseline timed for another"
        assert len({tuple(c.baseline.output_ids) for c in mine}) == 1
    assert all(p.comparison.pairs == 2 and len(p.comparison.baseline_times) == 2 for p in points)
    assert all(p.comparison.spec.settings["gamma"] == p.gamma for p in points)
    assert all(p.comparison.identical for p in points), "greedy exact verification must keep the target's output"


def test_a_stopped_sweep_returns_the_points_done(target, load):
    seen = []
    points = sweeps.gamma_sweep(
        target,
        "tiny-draft",
        list(PROMPTS[:2]),
        [1, 2, 3],
        Decoding(max_new_tokens=8),
        load=load,
        on_point=lambda p, n, total: seen.append(p),
        should_stop=lambda: len(seen) >= 2,
    )
    assert [(p.prompt_index, p.gamma) for p in points] == [(0, 1), (0, 2)]
    assert all(a is b for a, b in zip(points, seen)) and len(seen) == 2


def test_stop_from_another_script_run_keeps_the_points_done(target, load):
    """What the page does: the sweep measures in one thread (a script run); Stop comes from another."""
    sweep = sweeps.Sweep(planned=6, setup={})
    two_done, stopped = threading.Event(), threading.Event()

    def on_point(point, done, total):
        sweep.add(point, done, total)
        if done == 2:  # the user presses Stop while the measuring run is here
            two_done.set()
            stopped.wait(timeout=30)

    returned = []
    worker = threading.Thread(
        target=lambda: returned.extend(
            sweeps.gamma_sweep(
                target,
                "tiny-draft",
                list(PROMPTS[:2]),
                [1, 2, 3],
                Decoding(max_new_tokens=8),
                load=load,
                on_point=on_point,
                should_stop=sweep.should_stop,
            )
        )
    )
    worker.start()
    assert two_done.wait(timeout=60)
    sweep.stop()
    stopped.set()
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert [(p.prompt_index, p.gamma) for p in sweep.points] == [(0, 1), (0, 2)]
    assert [id(p) for p in returned] == [id(p) for p in sweep.points], "the sweep left between points"
    sweep.add(returned[0])  # a point the stopped run would finish late is not added to what was shown
    assert len(sweep.points) == 2
    assert sweep.message("points") == "Stopped after 2 of 6 points; the points done are shown below."
    sweep.finish()  # the stopped run returning does not turn the sweep into a finished one
    assert sweep.status == sweeps.STOPPED


def test_a_sweep_that_raises_midway_is_failed_and_keeps_its_points(target, load):
    sweep = sweeps.Sweep(planned=3, setup={})

    def on_point(point, done, total):
        sweep.add(point, done, total)
        if done == 2:
            raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        sweeps.gamma_sweep(
            target,
            "tiny-draft",
            [PROMPTS[0]],
            [1, 2, 3],
            Decoding(max_new_tokens=8),
            load=load,
            on_point=on_point,
            should_stop=sweep.should_stop,
        )
    sweep.finish()
    assert sweep.status == sweeps.FAILED and len(sweep.points) == 2
    assert sweep.message("points").startswith("The sweep ended with an error after 2 of 3 points")
    whole = sweeps.Sweep(planned=2, setup={})
    sweeps.gamma_sweep(
        target,
        "ngram",
        [PROMPTS[0]],
        [1, 2],
        Decoding(max_new_tokens=8),
        load=load,
        on_point=whole.add,
        should_stop=whole.should_stop,
    )
    whole.finish()
    assert whole.status == sweeps.DONE and whole.message("points") is None and len(whole.points) == 2


def test_gamma_table_pools_prompts_and_flags_the_best_gamma(target, load):
    points = sweeps.gamma_sweep(target, "tiny-draft", list(PROMPTS[:2]), [1, 2], Decoding(max_new_tokens=10), load=load)
    table = sweeps.gamma_table(points)
    assert table["gamma"].tolist() == [1, 2]
    for row in table.itertuples():
        mine = [p.comparison for p in points if p.gamma == row.gamma]
        assert row.speedup == pytest.approx(sum(c.baseline_seconds for c in mine) / sum(c.spec_seconds for c in mine))
        assert row.alpha == pytest.approx(sum(c.spec.accepted for c in mine) / sum(c.spec.drafted for c in mine))
        per_round = sum(c.spec.drafted for c in mine) / sum(len(c.spec.rounds) for c in mine)
        assert row.alpha_theory == pytest.approx(theory.alpha_from_mean_tokens(row.mean_accepted, per_round))
        assert row.theoretical_speedup == pytest.approx(theory.expected_speedup(row.alpha_theory, per_round, row.c))
        assert row.prompts == 2
    best = sweeps.best_gamma(table)
    assert best == int(table.loc[table["speedup"].idxmax(), "gamma"])
    assert table.loc[table["best"], "gamma"].tolist() == [best]


def test_the_tables_show_the_pairs_range_and_their_95_percent_interval(target, load):
    """Each row's spread: the lowest and highest pooled pair, and Student's t interval over them (none for 1 pair)."""
    from specviz.comparison import interval95, pooled_pair_ratios
    from specviz.lab.measure import row_spread_text

    points = sweeps.gamma_sweep(target, "tiny-draft", list(PROMPTS[:2]), [2], Decoding(max_new_tokens=10), load=load,
                                pairs=3)
    row = sweeps.gamma_table(points).iloc[0]
    ratios = pooled_pair_ratios([p.comparison for p in points])
    assert len(ratios) == 3 and (row["speedup_low"], row["speedup_high"]) == (min(ratios), max(ratios))
    low, high = interval95(ratios)
    assert (row["speedup_interval_low"], row["speedup_interval_high"]) == pytest.approx((low, high))
    assert low <= min(ratios) and max(ratios) <= high  # 3 pairs: t = 4.30 holds them all
    assert "; 95% interval " in row_spread_text(row)
    drafts = sweeps.draft_table(points).iloc[0]
    assert drafts["speedup_interval_low"] == pytest.approx(low)
    one = sweeps.gamma_table(sweeps.gamma_sweep(target, "tiny-draft", [PROMPTS[0]], [2], Decoding(max_new_tokens=10),
                                                load=load)).iloc[0]
    assert one[["speedup_interval_low", "speedup_interval_high"]].isna().all()
    assert "interval" not in row_spread_text(one)


@pytest.mark.parametrize(
    "draft, prompts, gammas",
    [
        ("tiny-draft", [PROMPTS[0]], [0, 2]),  # γ out of range
        ("tiny-draft", [PROMPTS[0]], []),  # no γ
        ("tiny-draft", [], [1, 2]),  # no prompt
        ("no-such-draft", [PROMPTS[0]], [1]),
    ],
)
def test_sweep_refuses_bad_input_before_running_anything(target, load, draft, prompts, gammas):
    calls = []
    with pytest.raises(SpecVizError):
        sweeps.gamma_sweep(
            target, draft, prompts, gammas, Decoding(max_new_tokens=8), load=load, on_point=lambda *a: calls.append(a)
        )
    assert calls == []


# --- the page, on the embedded target -------------------------------------------------------------
def chart(at: AppTest, title: str) -> dict:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    found = [s for s in specs if s["layout"]["title"]["text"].startswith(title)]
    assert found, f"no chart titled {title!r} among {[s['layout']['title']['text'] for s in specs]}"
    return found[0]


def trace(spec: dict, name: str) -> dict:
    found = [d for d in spec["data"] if d.get("name", "").startswith(name)]
    assert found, f"no trace {name!r} in {[d.get('name') for d in spec['data']]}"
    return found[0]


@pytest.fixture()
def sweep_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    return at


@pytest.mark.slow
def test_sweep_page_plots_and_tabulates_every_measured_gamma(sweep_page):
    at = sweep_page
    assert not at.get("plotly_chart"), "nothing is plotted before a sweep"
    assert "Run sweep" in at.info[0].value
    prompt = load_prompt_set("chat", "eval")[0]
    at.selectbox(key="dl-draft").set_value("ngram")
    at.multiselect(key="dl-prompts").set_value([prompt["id"]])
    at.slider(key="dl-gammas").set_value((1, 3))
    at.slider(key="dl-maxnew").set_value(8)
    at.button(key="dl-run").click().run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]

    table = at.dataframe[0].value
    assert table["gamma"].tolist() == [1, 2, 3], "one row per γ of the range"
    assert (table["prompts"] == 1).all() and table["identical"].all()
    best = int(table.loc[table["speedup"].idxmax(), "gamma"])
    assert table.loc[table["best"], "gamma"].tolist() == [best]
    assert at.metric[0].label == "best γ (measured)" and at.metric[0].value == str(best)
    assert at.get("progress")[0].proto.value == 100

    speedup = chart(at, "Speedup vs γ")
    measured = trace(speedup, "measured")
    assert measured["x"] == [1, 2, 3]
    assert measured["y"] == pytest.approx(table["speedup"].tolist())
    star = trace(speedup, "best γ")
    assert star["x"] == [best] and star["y"] == pytest.approx([table.loc[table["gamma"] == best, "speedup"].item()])
    curve = trace(speedup, "theory (1−α")
    assert curve["x"][0] == 1 and curve["x"][-1] == 3 and len(curve["x"]) > 10, "a smooth curve over γ 1..3"
    assert all(y > 0 for y in curve["y"])
    own = trace(speedup, "theory at each γ")
    assert own["y"] == pytest.approx(table["theoretical_speedup"].tolist())  # its formula: test_gamma_table_...

    alpha = chart(at, "Acceptance α and tokens per round")
    assert trace(alpha, "α")["y"] == pytest.approx(table["alpha"].tolist())
    assert trace(alpha, "tokens per round")["y"] == pytest.approx(table["mean_accepted"].tolist())
    by_position = chart(at, "Acceptance by draft position")
    assert [d["name"] for d in by_position["data"]] == ["γ=1", "γ=2", "γ=3"]
    assert chart(at, "Tokens per second")["data"][0]["y"] == pytest.approx(table["tokens_per_s"].tolist())
    assert len(at.get("download_button")) == 3

    at.run()  # any later rerun (a control moved, a stop) shows the kept points without measuring again
    assert not at.exception
    assert at.dataframe[0].value.equals(table)
    assert trace(chart(at, "Speedup vs γ"), "measured")["y"] == measured["y"]


@pytest.mark.slow
def test_sweep_without_a_prompt_shows_an_error_box_not_a_traceback(sweep_page):
    at = sweep_page
    at.multiselect(key="dl-prompts").set_value([])
    at.slider(key="dl-maxnew").set_value(8)
    at.button(key="dl-run").click().run()
    assert not at.exception
    assert len(at.error) == 1 and "Could not run the sweep" in at.error[0].value and "prompt" in at.error[0].value
    assert not at.get("plotly_chart")


def test_the_interval_columns_are_hidden_only_when_no_row_has_an_interval():
    """One pair a point: no interval, so its two columns are left out rather than shown as None."""
    import pandas as pd

    from specviz.app import controls

    one_pair = pd.DataFrame({"speedup_interval_low": [None, None], "speedup_interval_high": [None, None]})
    assert controls.sweep_columns(one_pair)["speedup_interval_low"] is None
    assert controls.sweep_columns(one_pair)["speedup_interval_high"] is None
    pairs = pd.DataFrame({"speedup_interval_low": [1.05, None], "speedup_interval_high": [1.3, None]})
    assert controls.sweep_columns(pairs) is controls.SWEEP_COLUMNS
