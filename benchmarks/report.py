"""Every summary of `specviz bench` JSONL files: the README's tables and plots, per-drafter tables, trees against
chains, and before → after.

    python benchmarks/report.py benchmarks/results/*.jsonl --plots docs/performance > benchmarks/results/README-table.md
    python benchmarks/report.py drafters benchmarks/results/eval84-t128-g6-auto.jsonl
    python benchmarks/report.py trees benchmarks/results/trees-eval14-n4-t128.jsonl [more.jsonl ...]
    python benchmarks/report.py before-after BEFORE.jsonl AFTER.jsonl

`drafters`: one table per drafter, one row per workload: prompts; α at draft positions 1, 2 and 3 (kept / drafted
there, pooled over the workload's prompts as bench's position_reached and position_accepted count them: from
position 2 on this is the chance that the draft and every one before it were kept, not the theory's conditional
α); tokens per round; c; v (a verification forward in target steps); the measured speedup, mean and lowest; and
how many outputs were identical to the target alone's.

`trees`: files of `bench --tree-vs-chain` pair, per prompt and drafter, a tree of N nodes with the chain of γ = N
(the same drafted tokens verified per round), timed against the same baseline: tokens per round and speedup.

`before-after`: mean measured speedup by workload from two files of the same prompts.

The default (no subcommand):
Tables: per draft over all prompts and per workload category (α, mean accepted tokens, c, verify
cost, measured speedup, the theory from the run's own α/γ/c/verify and their ratio, and, when the
bench ran with --compare-hf, our tokens/s ÷ transformers' for the same drafter and γ, and our
baseline ÷ transformers' greedy generate). Means over prompts for the speedups; medians for ratios.
Plots (PNG, needs matplotlib: benchmarks/requirements.txt): speedup by category, measured against
theory per prompt, and the ratios to transformers per prompt.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.theory import alpha_from_mean_tokens, expected_speedup


def theory(row: dict) -> float:
    """The standard model from the row's own measured c, verify cost, γ = tokens drafted per round and α per
    tested draft (Run.implied_alpha), recomputed from the measured fields so older files are read alike."""
    per_round = row["drafted"] / row["rounds"]
    alpha = alpha_from_mean_tokens(row["mean_accepted_tokens"], per_round) if row["drafted"] else 0.0
    return expected_speedup(alpha, per_round, row["cost_ratio"], row["verify_cost"])


def theory_ratio(row: dict) -> float:
    return row["speedup"] / theory(row) if theory(row) else 0.0


def _mean(rows: list[dict], key: str) -> float:
    return statistics.fmean(r[key] for r in rows)


def _median(rows: list[dict], key) -> float:
    return statistics.median(key(r) if callable(key) else r[key] for r in rows)


def read_rows(paths: list[str]) -> list[dict]:
    """Every run row of the files (bench's summary lines, which carry no speedup, are left out)."""
    rows = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if "speedup" in r]


def by(rows: list[dict], key) -> dict:
    """Rows grouped by key(row), in order of first appearance."""
    groups: dict = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    return groups


def grouped(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Rows by (draft, "all") and by (draft, workload)."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["draft"], "all")].append(r)
    for r in rows:
        groups[(r["draft"], r.get("category") or "-")].append(r)
    return groups


def table(rows: list[dict]) -> str:
    hf = all("ratio_vs_hf" in r for r in rows)
    head = ["draft", "category", "prompts", "α", "mean accepted tokens", "c", "verify (steps)", "speedup (mean)",
            "speedup (median)", "theory (mean)", "measured ÷ theory (median)", "identical"]
    if hf:
        head += ["ours ÷ HF tokens/s (median)", "our baseline ÷ HF greedy (median)", "HF identical"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for (draft, category), mine in grouped(rows).items():
        mean = functools.partial(_mean, mine)
        med = functools.partial(_median, mine)
        name = f"**{draft}**" if category == "all" else draft
        cells = [
            name,
            category,
            len(mine),
            f"{mean('acceptance_rate'):.3f}",
            f"{mean('mean_accepted_tokens'):.2f}",
            f"{mean('cost_ratio'):.3f}",
            f"{mean('verify_cost'):.2f}",
            f"{mean('speedup'):.2f}×",
            f"{med('speedup'):.2f}×",
            f"{statistics.fmean(theory(r) for r in mine):.2f}×",
            f"{med(theory_ratio):.2f}",
            f"{sum(r['identical'] for r in mine)}/{len(mine)}",
        ]
        if hf:
            cells += [
                f"{med('ratio_vs_hf'):.3f}",
                f"{med('baseline_ratio_vs_hf'):.3f}",
                f"{sum(r['hf_identical'] for r in mine)}/{len(mine)}",
            ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def settings_line(rows: list[dict]) -> str:
    first = rows[0]
    machines = sorted({r.get("machine", "unknown machine") for r in rows})
    return (
        f"greedy, γ = {first['gamma']}, {first.get('max_new_tokens', '?')} new tokens, "
        f"{first.get('repeats', 1)} timed repeat(s) per run (median), {len({r['id'] for r in rows})} prompts; "
        f"machine: {'; '.join(machines)}"
    )


def plots(rows: list[dict], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    drafts = list(dict.fromkeys(r["draft"] for r in rows))
    categories = sorted({r.get("category") or "-" for r in rows})
    groups = grouped(rows)
    made = []

    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(drafts)
    for i, draft in enumerate(drafts):
        xs = [j + i * width for j in range(len(categories) + 1)]
        ys = [
            statistics.fmean(r["speedup"] for r in groups[(draft, c)]) if groups.get((draft, c)) else 0.0
            for c in [*categories, "all"]
        ]
        ax.bar(xs, ys, width, label=draft)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(categories) + 1)], [*categories, "all"])
    ax.set_ylabel("measured speedup (mean)")
    ax.set_title("Speedup over the target alone, by workload")
    ax.legend(fontsize=8)
    made.append(_save(fig, folder / "speedup_by_category.png"))

    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    for draft in drafts:
        mine = [r for r in rows if r["draft"] == draft]
        ax.scatter([theory(r) for r in mine], [r["speedup"] for r in mine], s=14, label=draft)
    top = max(max(r["speedup"], theory(r)) for r in rows) * 1.05
    ax.plot([0, top], [0, top], color="black", linewidth=0.8, label="measured = theory")
    ax.plot([0, top], [0, 0.9 * top], color="grey", linewidth=0.8, linestyle="--", label="90 % of theory")
    ax.set_xlabel("theory from the run's own α, drafted tokens per round, c, verify cost")
    ax.set_ylabel("measured speedup")
    ax.set_title("Measured against theory, per prompt")
    ax.legend(fontsize=8)
    made.append(_save(fig, folder / "measured_vs_theory.png"))

    if all("ratio_vs_hf" in r for r in rows):
        fig, ax = plt.subplots(figsize=(7, 3.8))
        data = [[r["ratio_vs_hf"] for r in rows if r["draft"] == d] for d in drafts]
        base = {r["id"]: r["baseline_ratio_vs_hf"] for r in rows}
        ax.boxplot([*data, list(base.values())], showmeans=True)
        ax.set_xticks(range(1, len(drafts) + 2), [*drafts, "baseline\n(target alone)"], fontsize=8)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(1.1, color="grey", linewidth=0.8, linestyle="--")
        ax.set_ylabel("ours ÷ transformers, tokens/s")
        ax.set_title("SpecViz loop against transformers' generate, same drafter and γ")
        made.append(_save(fig, folder / "ours_vs_hf.png"))
    return made


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


# --- per drafter, by workload ------------------------------------------------------------------
def alpha_at(rows: list[dict], position: int) -> str:
    reached = sum(r["position_reached"][position] for r in rows if len(r.get("position_reached", [])) > position)
    kept = sum(r["position_accepted"][position] for r in rows if len(r.get("position_accepted", [])) > position)
    return f"{kept / reached:.2f}" if reached else "–"


def drafter_line(name: str, rows: list[dict]) -> str:
    speedups = [r["speedup"] for r in rows]
    return (
        f"| {name} | {len(rows)} | {alpha_at(rows, 0)} · {alpha_at(rows, 1)} · {alpha_at(rows, 2)} | "
        f"{_mean(rows, 'mean_accepted_tokens'):.2f} | {_mean(rows, 'cost_ratio'):.3f} | "
        f"{_mean(rows, 'verify_cost'):.2f} | "
        f"**{statistics.fmean(speedups):.2f}×** (lowest {min(speedups):.2f}×) | "
        f"{sum(bool(r['identical']) for r in rows)}/{len(rows)} |"
    )


def drafter_tables(rows: list[dict]) -> str:
    out = []
    for draft, mine in by(rows, lambda r: r["draft"]).items():
        gammas = sorted({r["gamma"] for r in mine})
        out += [
            f"**{draft}** (γ {', '.join(map(str, gammas))}, {mine[0].get('max_new_tokens', '?')} new tokens, "
            f"{mine[0].get('machine', '')})",
            "",
            "| workload | prompts | α at 1 · 2 · 3 | tokens / round | c | v | speedup | identical |",
            "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: |",
        ]
        categories = by(mine, lambda r: r.get("category", "?"))
        out += [drafter_line(category, categories[category]) for category in sorted(categories)]
        out += [drafter_line("all", mine), "", *first_token_line(mine)]
    return "\n".join(out)


def first_token_line(rows: list[dict]) -> list[str]:
    """What the time to the first token leaves a drafter (where the rows carry it), pooled over the prompts: the
    speedup after the first token, and how fast the rest would have to be for twice the target alone's pace. The
    prefill is the same forward in both runs, so a long prompt's share of it bounds what any draft can do."""
    if not all(r.get("ttft_seconds") and r.get("baseline_ttft_seconds") for r in rows):
        return []
    alone, alone_first = sum(r["baseline_seconds"] for r in rows), sum(r["baseline_ttft_seconds"] for r in rows)
    spec, spec_first = sum(r["spec_seconds"] for r in rows), sum(r["ttft_seconds"] for r in rows)
    if spec <= spec_first or alone <= alone_first:  # runs of one token: nothing came after the first
        return []
    n = len(rows)
    after = (alone - alone_first) / (spec - spec_first)
    room = alone / 2 - spec_first
    twice = f"{(alone - alone_first) / room:.1f}× as fast" if room > 0 else "faster than instant"
    return [f"After the first token (the prompts' seconds pooled): {after:.2f}×. A prompt took the target alone "
            f"{alone / n:.2f} s on average, {alone_first / n:.2f} s of it to the first token, and the drafted run "
            f"{spec / n:.2f} s, {spec_first / n:.2f} s to the first token. Twice the target alone's pace would need "
            f"the rest {twice}.", ""]


# --- trees against chains ----------------------------------------------------------------------
def trees_table(name: str, rows: list[dict]) -> str:
    trees = [r for r in rows if r["tree_budget"]]
    n = trees[0]["tree_budget"] if trees else 0
    shape = trees[0]["shape"] if trees else ""
    out = [
        f"### {name}: {shape} against a chain of γ = {n} ({len({r['id'] for r in rows})} prompts, "
        f"{rows[0]['max_new_tokens']} new tokens, {rows[0]['machine'].split(';')[0]})",
        "",
        "| drafter | workload | tokens/round chain | tokens/round tree | gain | speedup chain | speedup tree "
        "| identical |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for draft, of_draft in by(rows, lambda r: r["draft"]).items():
        categories = sorted({r["category"] for r in of_draft})
        for category in categories + ["**all**"]:
            mine = [r for r in of_draft if category == "**all**" or r["category"] == category]
            chain = [r for r in mine if r["tree_budget"] == 0]
            tree = [r for r in mine if r["tree_budget"] > 0]
            if not chain or not tree:
                continue
            gain = _mean(tree, "mean_accepted_tokens") / _mean(chain, "mean_accepted_tokens") - 1
            out.append(
                f"| {draft} | {category} | {_mean(chain, 'mean_accepted_tokens'):.2f} | "
                f"{_mean(tree, 'mean_accepted_tokens'):.2f} | {gain:+.0%} | {_mean(chain, 'speedup'):.2f}× | "
                f"{_mean(tree, 'speedup'):.2f}× | {sum(r['identical'] for r in tree + chain)}/{len(tree + chain)} |"
            )
    return "\n".join(out + [""])


# --- before → after ------------------------------------------------------------------------------
def before_after_table(before: list[dict], after: list[dict]) -> str:
    categories = sorted({r.get("category") or "-" for r in after})

    def speedup(rows: list[dict], draft: str, category: str | None = None) -> str:
        mine = [r["speedup"] for r in rows if r["draft"] == draft and category in (None, r.get("category") or "-")]
        return f"{statistics.fmean(mine):.2f}" if mine else "–"

    out = ["| drafter | " + " | ".join(categories) + " | mean | identical (before, after) |",
           "|---|" + "---|" * (len(categories) + 2)]
    for d in dict.fromkeys(r["draft"] for r in after):
        cells = [f"{speedup(before, d, c)} → {speedup(after, d, c)}" for c in categories]
        n = sum(r["draft"] == d for r in after)
        same = [sum(r["identical"] for r in t if r["draft"] == d) for t in (before, after)]
        out.append(f"| {d} | " + " | ".join(cells) + f" | **{speedup(before, d)} → {speedup(after, d)}** "
                   f"| {same[0]}/{n}, {same[1]}/{n} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in ("drafters", "trees", "before-after") else None
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="JSONL files written by `python -m specviz bench --out`")
    if command is None:
        ap.add_argument("--plots", help="folder for the PNG plots")
    args = ap.parse_args(argv[1:] if command else argv)
    if command == "drafters":
        print(drafter_tables(read_rows(args.results)))
    elif command == "trees":
        for path in args.results:
            print(trees_table(Path(path).name, read_rows([path])))
    elif command == "before-after":
        if len(args.results) != 2:
            ap.error("before-after takes two files: BEFORE.jsonl AFTER.jsonl")
        print(before_after_table(read_rows(args.results[:1]), read_rows(args.results[1:])))
    else:
        rows = read_rows(args.results)
        print(settings_line(rows) + "\n")
        print(table(rows))
        if args.plots:
            for path in plots(rows, Path(args.plots)):
                print(f"\n![{path.stem}]({path})")


if __name__ == "__main__":
    main()
