"""How often does one run's spread of pairs cover the median of other runs of the same case? (issue #30; a script)

`benchmarks/app_vs_cli.py` asks of each figure the app shows that its spread (the lowest and highest of its pairs'
ratios, rounded outward to two decimals, as the page shows it) covers the command line's median over several runs.
This script asks the same of the command line itself, with no app and no browser: it runs `python -m specviz run
--json` R times in a row on one case (Home's live run, Rounds' default run: `app_vs_cli.cases()`), and counts the runs
whose spread covers the median of the *other* runs' figures. That is the rate an app that equals the command line
can reach on this machine: the spread of one run says how far that run's own pairs moved, not how far the machine
drifts between runs a minute apart.

    python benchmarks/range_coverage.py                      # Rounds and Home, 8 runs each of 3 pairs
    python benchmarks/range_coverage.py --pairs 3 5 --runs 8 --cases rounds

Nothing else may run meanwhile (tests included): it is a timing.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from app_vs_cli import cases  # noqa: E402

from specviz.comparison import interval95  # noqa: E402

OUT = ROOT / "artifacts" / "range_coverage.json"


def shown(low: float, high: float) -> tuple[float, float]:
    """The spread as the page and `run` show it: rounded outward to two decimals (`measure.spread_text`)."""
    return math.floor(low * 100 + 1e-9) / 100, math.ceil(high * 100 - 1e-9) / 100


def timed_runs(args: list[str], pairs: int, runs: int) -> list[dict]:
    """R fresh `specviz run --json` processes of one case, one after another: each one's median and spread."""
    out = []
    for i in range(runs):
        text = subprocess.run([sys.executable, "-m", "specviz", "run", "--json", "--pairs", str(pairs), *args],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout
        record = json.loads(text.strip().splitlines()[-1])
        s = record["summary"]
        ratios = [b / t for b, t in zip(record["baseline_times"], record["spec_times"])]
        out.append({"speedup": s["speedup"], "low": s["speedup_low"], "high": s["speedup_high"],
                    "pairs": s["pairs"], "ratios": ratios, "other_work": s.get("other_work"), "at": time.time()})
        print(f"  run {i + 1}: {s['speedup']:.3f}× ({s['speedup_low']:.3f}–{s['speedup_high']:.3f}, "
              f"{s['pairs']} pairs)", flush=True)
    return out


def coverage(runs: list[dict], interval=None) -> tuple[int, list[float]]:
    """How many runs' shown spreads (or `interval(ratios)`) cover the median of the other runs (shown to two
    decimals), and by how much each miss fell short (0 for a cover)."""
    covered, short = 0, []
    for i, run in enumerate(runs):
        others = round(statistics.median(r["speedup"] for j, r in enumerate(runs) if j != i), 2)
        low, high = shown(*(interval(run["ratios"]) if interval else (run["low"], run["high"])))
        covered += low <= others <= high
        short.append(max(0.0, low - others, others - high))
    return covered, short


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--pairs", type=int, nargs="+", default=[3])
    parser.add_argument("--cases", nargs="+", default=["rounds", "home"], choices=["rounds", "home"])
    opts = parser.parse_args()
    if opts.runs < 3:
        parser.error("--runs needs at least 3 (each run is set against the median of the others)")
    all_args = cases()
    machine = platform.processor() or platform.machine()
    try:
        machine = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    results = {"machine": machine, "date": time.strftime("%Y-%m-%d %H:%M"), "cases": {}}
    for case in opts.cases:
        for pairs in opts.pairs:
            print(f"{case}, {pairs} pairs a run, {opts.runs} runs:", flush=True)
            runs = timed_runs(all_args[case], pairs, opts.runs)
            covered, short = coverage(runs)
            t_covered, _ = coverage(runs, interval95)
            widths = [(lambda lo, hi: (hi - lo) / r["speedup"])(*interval95(r["ratios"])) for r in runs]
            speedups = [r["speedup"] for r in runs]
            results["cases"][f"{case}/{pairs}"] = {"runs": runs, "covered": covered, "t_covered": t_covered}
            print(f"  medians {min(speedups):.2f}–{max(speedups):.2f}× (median {statistics.median(speedups):.2f}×); "
                  f"a run's spread covers the others' median in {covered} of {len(runs)}"
                  + (f"; misses short by {', '.join(f'{s:.2f}' for s in short if s)}" if covered < len(runs) else ""),
                  flush=True)
            print(f"  a 95% t-interval over the logs of its pairs' ratios covers it in {t_covered} of {len(runs)}; "
                  f"its width {min(widths):.0%}–{max(widths):.0%} of the median (the range's "
                  f"{min((r['high'] - r['low']) / r['speedup'] for r in runs):.0%}–"
                  f"{max((r['high'] - r['low']) / r['speedup'] for r in runs):.0%})", flush=True)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(f"\n{machine}; figures in {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
