"""What the command line prints: a run's tokens marked by status with its figures, and a bench's summary table.

Colour is never the only cue: each status also has a marker (`~rejected~`, `[resampled]`, `{bonus}`).
"""

from __future__ import annotations

import statistics

from . import race
from .comparison import Comparison
from .lab.measure import speedup_text
from .records import ACCEPTED, BONUS, REJECTED, RESAMPLED, TARGET

STYLE = {  # terminal rendering of token status: colour plus a marker, so colour is never the only cue
    ACCEPTED: ("\033[32m", "", ""),
    REJECTED: ("\033[31;9m", "~", "~"),
    RESAMPLED: ("\033[33m", "[", "]"),
    BONUS: ("\033[34m", "{", "}"),
    TARGET: ("", "", ""),
}


def render_rounds(run, colour: bool) -> str:
    out = []
    for r in run.rounds:
        for _, text, status in r.statuses():
            code, left, right = STYLE[status]
            out.append(f"{code}{left}{text}{right}\033[0m" if colour and code else f"{left}{text}{right}")
        out.append("|")
    return "".join(out)


def figures(c: Comparison | None, run) -> list[tuple[str, str]]:
    rows = [
        ("new tokens", f"{run.new_tokens}"),
        ("rounds", f"{len(run.rounds)}"),
        ("drafted / accepted", f"{run.drafted} / {run.accepted}"),
        ("acceptance rate α", f"{run.acceptance_rate:.3f}"),
        ("mean accepted tokens per round", f"{run.mean_accepted_tokens:.2f}"),
        ("tokens/s", f"{run.tokens_per_second:.1f}"),
    ]
    rows += _latency_rows(run, c)
    if run.is_tree:
        rows += [("tree nodes verified per round", f"{run.mean_verified:.2f}"),
                 ("kept by sibling rank a_r", " ".join(f"{a:.2f}" for a in run.accept_by_rank()))]
    if c is not None:
        rows += [
            ("baseline tokens/s", f"{c.baseline.tokens_per_second:.1f}"),
            ("measured speedup", speedup_text(c)),
            ("other programs' CPU share", f"up to {max(c.other_work):.0%} while timed" if c.other_work else "-"),
            ("α per tested draft (theory's α)", f"{run.implied_alpha:.3f}"),
            ("cost ratio c", f"{c.cost_ratio:.3f}"),
            ("verify cost v (target steps)", f"{c.verify_cost:.2f}"),
            ("theoretical speedup (v = 1)", f"{c.theoretical_speedup:.2f}x"),
            ("theoretical speedup (v measured)", f"{c.theoretical_speedup_measured_verify:.2f}x"),
            ("measured / theory", f"{c.speedup / c.theoretical_speedup_measured_verify:.2f}"
                                  if c.theoretical_speedup_measured_verify else "-"),
            ("identical to target alone", "yes" if c.identical else f"no (agreement {c.agreement:.1%})"),
        ]
    return rows


def _latency_rows(run, c: Comparison | None) -> list[tuple[str, str]]:
    """Time to first token and the gaps between tokens, with the target alone's beside them."""
    mine, alone = race.latency(run), race.latency(c.baseline) if c is not None else None
    if mine is None:
        return []

    def ms(figures, name):
        return f"{getattr(figures, name) * 1000:.1f} ms" + (f" (target alone {getattr(alone, name) * 1000:.1f} ms)"
                                                             if alone else "")

    return [("time to first token", ms(mine, "ttft")), ("gap between tokens, median", ms(mine, "gap_median")),
            ("gap between tokens, p90", ms(mine, "gap_p90"))]


def theory_ratio(row: dict) -> float:
    """Measured speedup ÷ the speedup the standard model predicts from the run's own α, γ, c and verify cost."""
    theory = row["theoretical_speedup_measured_verify"]
    return row["speedup"] / theory if theory else 0.0


def _by_draft(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows by draft (and by tree or chain, when a bench ran both)."""
    shapes = {r.get("shape") for r in rows}
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["draft"] if len(shapes) == 1 else f"{r['draft']} [{r['shape']}]", []).append(r)
    return groups


def print_summary(rows: list[dict]) -> None:
    def mean(mine, key):
        return statistics.fmean(r[key] for r in mine)

    def med(mine, key):
        return statistics.median(key(r) if callable(key) else r[key] for r in mine)

    width = max([22] + [len(d) for d in _by_draft(rows)])
    print(f"\n{'draft':<{width}} {'prompts':>7} {'α':>6} {'acc/round':>9} {'c':>6} {'verify':>6} {'speedup med':>11} "
          f"{'mean':>6} {'theory':>6} {'meas/theory':>11} {'identical':>9}")
    for draft, mine in _by_draft(rows).items():
        print(
            f"{draft:<{width}} {len(mine):>7} {mean(mine, 'acceptance_rate'):>6.3f} "
            f"{mean(mine, 'mean_accepted_tokens'):>9.2f} "
            f"{mean(mine, 'cost_ratio'):>6.3f} {mean(mine, 'verify_cost'):>6.2f} {med(mine, 'speedup'):>10.2f}x "
            f"{mean(mine, 'speedup'):>5.2f}x {mean(mine, 'theoretical_speedup_measured_verify'):>5.2f}x "
            f"{med(mine, theory_ratio):>11.2f} {sum(r['identical'] for r in mine):>5}/{len(mine)}"
        )
    print(
        "(verify: one verification forward in target steps; theory: from the run's own c, verify cost, tokens"
        " drafted per round and α per tested draft; meas/theory: median over prompts)"
    )
    checked = [r for r in rows if r.get("final_answer_match") is not None]
    if checked:
        print(
            "\nfinal answer of math prompts, exact match against the target alone's final number "
            "(no reference answers):"
        )
        for draft, mine in _by_draft(checked).items():
            print(f"{draft:<{width}} {sum(r['final_answer_match'] for r in mine):>5}/{len(mine)}")
    if rows and "ratio_vs_hf" in rows[0]:
        print("\nversus transformers' generate (same drafter, γ, prompts; medians over prompts):")
        print(f"{'draft':<22} {'ours/HF tok/s':>13} {'HF speedup':>10} {'HF identical':>12} {'baseline ours/HF':>16}")
        for draft, mine in _by_draft(rows).items():
            print(
                f"{draft:<22} {med(mine, 'ratio_vs_hf'):>13.3f} {med(mine, 'hf_speedup'):>9.2f}x "
                f"{sum(r['hf_identical'] for r in mine):>8}/{len(mine)} {med(mine, 'baseline_ratio_vs_hf'):>16.3f}"
            )
