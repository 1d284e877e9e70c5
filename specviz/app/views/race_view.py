"""The race as a self-contained HTML page: lanes side by side, each token shown at its recorded time.

The page animates in the browser (requestAnimationFrame), so the race runs smoothly without a single
Streamlit rerun. It shows what `specviz.race` computed, nothing more: a token appears when the race clock
passes its arrival time (`specviz.race.frame` is the same rule), each lane has an elapsed clock that stops
at its finish line, and the tokens keep the app's colours and markers by status.
"""

from __future__ import annotations

import html
import json

import pandas as pd
import plotly.graph_objects as go

from ... import race
from ...comparison import Comparison
from ...race import BASELINE, Lane
from .tokens import CSS, DESCRIPTIONS, _visible

RACE_CSS = """
<style>
body {margin: 0; font-family: "Source Sans Pro", sans-serif; color: #262730;}
.race {display: grid; gap: 0.8rem; padding: 2px;}
.race-top {display: flex; justify-content: space-between; align-items: baseline; font-size: 0.95rem;}
.race-clock {font-variant-numeric: tabular-nums; font-weight: 600;}
.lane {border: 1px solid #ddd; border-radius: 6px; padding: 0.5rem 0.6rem; min-width: 0;}
.lane.done {border-color: #1a9850; box-shadow: 0 0 0 1px #1a9850 inset;}
.lane-head {display: flex; justify-content: space-between; align-items: baseline; gap: 0.5rem;}
.lane-name {font-weight: 700;}
.lane-clock {font-variant-numeric: tabular-nums; font-size: 1.25rem; font-weight: 600;}
.lane-meta {color: #666; font-size: 0.8rem; min-height: 1.1rem;}
.lane-flag {visibility: hidden; color: #1a9850; font-weight: 700;}
.lane.done .lane-flag {visibility: visible;}
.track {position: relative; height: 10px; background: #f0f2f6; border-radius: 5px; margin: 0.35rem 0;}
.progress {position: absolute; left: 0; top: 0; bottom: 0; width: 0; background: #9ab; border-radius: 5px;}
.finish-line {position: absolute; top: -4px; bottom: -4px; width: 3px; margin-left: -1px;
  background: repeating-linear-gradient(#000 0 3px, #fff 3px 6px);}
.rt {visibility: hidden;}
.rt.on {visibility: visible; animation: arrive 0.4s ease-out;}
@keyframes arrive {from {outline: 2px solid #ffd400;} to {outline: 2px solid transparent;}}
.sv-text {font-size: 0.9rem; line-height: 1.8;}
</style>
"""

SCRIPT = """
<script>
const SPEED = %(speed)s, LONGEST = %(longest)s;
const lanes = [...document.querySelectorAll('.lane')].map(el => ({
  el, finish: parseFloat(el.dataset.finish), tokens: [...el.querySelectorAll('.rt')], next: 0,
  clock: el.querySelector('.lane-clock'), meta: el.querySelector('.lane-now'),
  progress: el.querySelector('.progress')}));
const raceClock = document.querySelector('.race-clock');
let t0 = null;
function draw(now) {
  if (t0 === null) t0 = now;
  const t = (now - t0) / 1000 * SPEED;  // race seconds: the recorded clock, at the chosen speed
  for (const lane of lanes) {
    let burst = 0, at = null;
    while (lane.next < lane.tokens.length && parseFloat(lane.tokens[lane.next].dataset.at) <= t) {
      const tok = lane.tokens[lane.next++];
      tok.classList.add('on');
      if (tok.dataset.at !== at) { at = tok.dataset.at; burst = 0; }
      burst++;
    }
    if (burst) lane.meta.textContent = `${lane.next} of ${lane.tokens.length} tokens · last arrival: ` +
      (burst > 1 ? `a burst of ${burst}` : '1 token');
    lane.el.dataset.shown = lane.next;
    lane.clock.textContent = Math.min(t, lane.finish).toFixed(2) + ' s';
    lane.progress.style.width = (100 * Math.min(t, lane.finish) / LONGEST) + '%%';
    if (t >= lane.finish && lane.el.dataset.finished !== 'true') {
      lane.el.dataset.finished = 'true';
      lane.el.classList.add('done');
    }
  }
  raceClock.textContent = Math.min(t, LONGEST).toFixed(2) + ' s';
  if (t < LONGEST) requestAnimationFrame(draw);
  else document.querySelector('.race').dataset.finished = 'true';
}
requestAnimationFrame(draw);
</script>
"""


def speed_label(speed: float) -> str:
    return "real time" if speed == 1 else f"{speed:g}×"


def _token(token: race.Token) -> str:
    hover = f"{DESCRIPTIONS[token.status]} · round {token.round + 1} · arrived at {token.at:.3f} s"
    return (f'<span class="sv-tok sv-{token.status} rt" data-status="{token.status}" data-at="{token.at:.6f}" '
            f'title="{html.escape(hover, quote=True)}">{_visible(token.text)}</span>')


def _lane(runner: Lane, longest: float, baseline: Lane | None) -> str:
    sooner = ""
    if baseline is not None and runner is not baseline and runner.finish > 0:
        ratio = baseline.finish / runner.finish
        sooner = f" · {ratio:.2f}× {'sooner' if ratio >= 1 else 'later'} than the target alone"
    bursts = race.bursts(runner)
    where = (f"{len(runner.tokens)} tokens in {len(bursts)} arrivals" if runner.name == BASELINE else
             f"{len(runner.tokens)} tokens in {len(bursts)} bursts (up to {max(bursts, default=0)} at once)")
    return (
        f'<div class="lane" data-lane="{html.escape(runner.name, quote=True)}" data-finish="{runner.finish:.6f}" '
        f'data-finished="false" data-shown="0">'
        f'<div class="lane-head"><span class="lane-name">{html.escape(runner.name)}</span>'
        f'<span class="lane-clock">0.00 s</span></div>'
        f'<div class="track" title="elapsed time; the chequered mark is this lane\'s finish line">'
        f'<div class="progress"></div><div class="finish-line" '
        f'style="left:{100 * runner.finish / longest:.2f}%"></div></div>'
        f'<div><span class="lane-flag">✓ finished at {runner.finish:.2f} s{sooner}</span></div>'
        f'<div class="lane-meta">{where}</div><div class="lane-meta lane-now"></div>'
        f'<div class="sv-text">{"".join(_token(t) for t in runner.tokens)}</div></div>'
    )


def race_html(lanes: list[Lane], speed: float = 1.0, replay: int = 0) -> str:
    """The whole race page; `replay` makes a new page (the browser starts the race again) when it changes."""
    longest = max((runner.finish for runner in lanes), default=0.0) or 1e-9
    baseline = next((runner for runner in lanes if runner.name == BASELINE), None)
    columns = max(1, min(len(lanes), 4))
    body = "".join(_lane(runner, longest, baseline) for runner in lanes)
    return (
        f"<!-- race {replay} -->{CSS}{RACE_CSS}"
        f'<div class="race-top"><span>Race clock: <span class="race-clock">0.00 s</span> of {longest:.2f} s recorded · '
        f"replayed at {speed_label(speed)}</span></div>"
        f'<div class="race" data-finished="false" style="grid-template-columns: repeat({columns}, minmax(0, 1fr))">'
        f"{body}</div>" + SCRIPT % {"speed": json.dumps(float(speed)), "longest": json.dumps(longest)}
    )


def latency_frame(comparison: Comparison) -> pd.DataFrame:
    """Time to first token and the gaps between tokens, target alone against speculative (ms)."""
    rows = []
    for name, run in ((BASELINE, comparison.baseline), (comparison.spec.draft or "speculative", comparison.spec)):
        figures = race.latency(run)
        if figures is None:
            rows.append(
                {
                    "run": name,
                    "time to first token (ms)": None,
                    "median gap (ms)": None,
                    "p90 gap (ms)": None,
                    "arrival times": "not in this record",
                }
            )
            continue
        rows.append(
            {
                "run": name,
                "time to first token (ms)": 1000 * figures.ttft,
                "median gap (ms)": 1000 * figures.gap_median,
                "p90 gap (ms)": 1000 * figures.gap_p90,
                "arrival times": figures.source,
            }
        )
    return pd.DataFrame(rows)


KIND_STYLE = {  # not token statuses: where the time went (a pattern as well as a colour)
    "prefill": ("#c7c7c7", "/", "prefill (reading the prompt)"),
    "draft": ("#9467bd", "", "drafting"),
    "target": ("#2c3e50", "", "target forward (verify; one step for the target alone)"),
}


def time_lanes_figure(lanes: dict[str, list[race.Span]]) -> go.Figure:
    """Per round, the drafter's time and the target's time against the wall clock, beside the target alone."""
    fig = go.Figure()
    rows = []
    for name, spans in lanes.items():
        rows += [f"{name} · target"] + ([] if name == BASELINE else [f"{name} · draft"])
    shown = set()
    for kind, (colour, pattern, label) in KIND_STYLE.items():
        spans = [s for group in lanes.values() for s in group if s.kind == kind]
        if not spans:
            continue
        fig.add_bar(
            name=label,
            orientation="h",
            base=[s.start for s in spans],
            x=[s.end - s.start for s in spans],
            y=[f"{s.lane} · {'draft' if kind == 'draft' else 'target'}" for s in spans],
            marker=dict(color=colour, pattern_shape=pattern, line=dict(width=0.5, color="#fff")),
            customdata=[[s.round + 1 if s.round >= 0 else "prefill", 1000 * (s.end - s.start)] for s in spans],
            hovertemplate="%{y}<br>round %{customdata[0]}<br>%{base:.3f} s → %{customdata[1]:.1f} ms<extra></extra>",
        )
        shown.add(kind)
    for name, spans in lanes.items():
        if spans:
            end = max(s.end for s in spans)
            fig.add_scatter(
                x=[end],
                y=[f"{name} · target"],
                mode="markers+text",
                text=[f"finish {end:.2f} s"],
                cliponaxis=False,
                textposition="middle right",
                marker=dict(symbol="line-ns-open", size=18, color="#000"),
                showlegend=False,
                hoverinfo="skip",
            )
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(rows)))
    fig.update_layout(
        barmode="overlay",
        title="Where the time goes: drafting and the target's forwards, round by round",
        xaxis_title="wall-clock seconds since the start",
        height=140 + 45 * len(rows),
        margin=dict(l=40, r=110, t=50, b=40),
        legend=dict(orientation="h", y=-0.3),
    )
    return fig
