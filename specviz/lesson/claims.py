"""What each lesson step says about its runs, derived from those runs, and a check of the step's words.

A step's fixed sentence (`Step.teaches`) is general; what it claims about the recording it shows is
written here from that recording ("fastest at γ = 8, still rising", never "peaks at a moderate γ"
when the numbers climb). `check(key, data)` reads the step's words, the fixed sentence and the derived
one, and lists each statement the runs contradict: the test over every step must find none, and a
live re-run that disagrees with the text is told so on the page.

Pure logic over records (no Streamlit, no model). Notation: p target, q draft, γ draft length,
α accepted ÷ drafted, c draft time per token ÷ target step.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..lab import same_distribution
from ..lab.same_distribution import EXACT, RELAXED, LabRecord
from ..comparison import Comparison
from . import steps

NOISE = 0.05  # speedups closer than 5% are within a shared CPU's timing noise (steps.direction uses the same)


@dataclass(frozen=True)
class Data:
    """What a step reads: its runs by group (recorded or live) and the distribution lab."""

    group: Callable[[str], dict[str, Comparison]]
    lab: LabRecord | None = None


@dataclass(frozen=True)
class Claim:
    text: str  # what this step's runs show, in words computed from them
    problems: tuple[str, ...] = ()  # statements of the step that the runs contradict (none when it holds)


def _label(name: str) -> str:
    return name.split(":", 1)[1]


def _c(value: float) -> str:
    return f"c = {value:.3f}" if value >= 0.001 else "c < 0.001"


def _x(value: float) -> str:
    return f"{value:.2f}×"


def _near(runs: dict[str, Comparison], best: str) -> list[str]:
    top = runs[best].speedup
    return [_label(n) for n, c in runs.items() if n != best and c.speedup >= top * (1 - NOISE)]


# --- the claims, one per step ----------------------------------------------------------------------------
def bottleneck(data: Data) -> Claim:
    base = data.group("main")["main"].baseline
    step, prompt = base.step_seconds, len(base.prompt_ids)
    problems = []
    if len(base.rounds) != base.new_tokens:
        problems.append(f"the target alone made {len(base.rounds)} forward passes for {base.new_tokens} tokens, not one each")
    if base.prefill_seconds >= prompt * step:
        problems.append(f"reading the {prompt}-token prompt ({1000 * base.prefill_seconds:.0f} ms) was not cheaper than "
                        f"{prompt} single steps ({1000 * prompt * step:.0f} ms)")
    return Claim(f"{base.new_tokens} tokens took {len(base.rounds)} passes of {1000 * step:.1f} ms each; the {prompt}-token "
                 f"prompt took one pass of {1000 * base.prefill_seconds:.0f} ms, "
                 f"{base.prefill_seconds / step:.1f} steps' time for {prompt} tokens.", tuple(problems))


def draft_verify(data: Data) -> Claim:
    main = data.group("main")["main"]
    r = steps.keep_round(main.spec)
    step = main.baseline.step_seconds
    problems = []
    if r is None or r.emitted < 2:
        return Claim("No round of this run gave more than one token.", ("no round shows a pass giving several tokens",))
    if r.verify_seconds >= (len(r.drafted) + 1) * step:
        problems.append(f"checking {len(r.drafted)} drafts took {1000 * r.verify_seconds:.1f} ms, no less than "
                        f"{len(r.drafted) + 1} single steps")
    return Claim(f"Round {r.index + 1}: one pass checked {len(r.drafted)} drafts in {1000 * r.verify_seconds:.1f} ms "
                 f"({r.verify_seconds / step:.1f} steps' time) and gave {r.emitted} tokens.", tuple(problems))


def accept_reject(data: Data) -> Claim:
    run = data.group("main")["main"].spec
    r = steps.fail_round(run)
    if r is None or r.rejected_position is None:
        return Claim("No draft was refused in this run.", ("the run shows no rejection to replace",))
    problems = []
    if r.n_accepted != r.rejected_position:
        problems.append(f"round {r.index + 1} kept {r.n_accepted} drafts though the first refusal was at {r.rejected_position}")
    if r.next_token == r.drafted[r.rejected_position]:
        problems.append(f"round {r.index + 1} replaced the refused draft by the same token")
    later = len(r.drafted) - r.rejected_position - 1
    return Claim(f"Round {r.index + 1}: {r.n_accepted} kept, draft {r.rejected_position + 1} refused and replaced by the "
                 f"target's «{steps.tok(r.next_text)}», {later} later draft(s) discarded unchecked.",
                 tuple(problems))


def sampling(data: Data) -> Claim:
    run = data.group("sampled")["sampled"].spec
    pick = steps.sampling_pick(run)
    problems = []
    if not run.settings["sampling"]["temperature"]:
        problems.append("the sampling step's run is greedy")
    if pick is None:
        problems.append("no drafted token had p < q, so no acceptance was uncertain")
    uncertain = sum(p is not None and p < q for r in run.rounds for p, q in zip(r.p, r.q))
    return Claim(f"{run.accepted} of {run.drafted} drafts kept (α = {run.acceptance_rate:.2f}); {uncertain} drafted "
                 "tokens had p < q and were kept only by chance.", tuple(problems))


def bonus(data: Data) -> Claim:
    run = data.group("main")["main"].spec
    r = steps.bonus_round(run)
    count = sum(x.next_kind == "bonus" for x in run.rounds)
    if r is None or r.n_accepted < len(r.drafted) or r.next_kind != "bonus" or r.emitted != len(r.drafted) + 1:
        return Claim(f"{count} of {len(run.rounds)} rounds ended with a bonus token.",
                     ("no round kept every draft and added a bonus token",))
    return Claim(f"{count} of {len(run.rounds)} rounds kept every draft and added a bonus token.")


def worksheet(data: Data) -> Claim:
    run = data.group("main")["main"].spec
    problems = []
    if sum(r.emitted for r in run.rounds) != run.new_tokens:
        problems.append("the rounds' tokens do not add up to the run's output")
    if not 0 < run.acceptance_rate <= 1:
        problems.append(f"α = {run.acceptance_rate:.2f} is not a rate of kept drafts")
    return Claim(f"α = {run.accepted} ÷ {run.drafted} = {run.acceptance_rate:.2f}; {run.new_tokens} tokens in "
                 f"{len(run.rounds)} rounds ({run.mean_accepted_tokens:.2f} a round).", tuple(problems))


def cost(data: Data) -> Claim:
    self_draft = data.group("drafts").get("drafts:target")
    if self_draft is None:
        return Claim("No run of the target drafting for itself.", ("the step's self-draft run is missing",))
    a, s = self_draft.spec.acceptance_rate, self_draft.speedup
    problems = []
    if a < 0.99:
        problems.append(f"the target drafting for itself kept only {a:.2f} of its drafts, not every one")
    if s >= 1 - NOISE:
        problems.append(f"the perfect but expensive self-draft was not slower than the target alone ({_x(s)})")
    return Claim(f"The target drafting for itself: α = {a:.2f}, c = {self_draft.cost_ratio:.2f}, {_x(s)}: "
                 f"{'slower' if s < 1 else 'not slower'} than the target alone.", tuple(problems))


def gamma(data: Data) -> Claim:
    runs = data.group("gamma")
    gammas = {n: int(_label(n)) for n in runs}
    best = max(runs, key=lambda n: runs[n].speedup)
    top, lowest = max(gammas.values()), min(gammas.values())
    b = runs[best]
    near = _near(runs, best)
    tie = f" (γ = {', '.join(near)} within {NOISE:.0%}, the timing noise)" if near else ""
    if gammas[best] == top:
        why = (f"the draft is almost free here ({_c(b.cost_ratio)}), so a rejected long draft wastes little, and "
               f"tokens per round still grow ({b.spec.mean_accepted_tokens:.2f} at γ = {top})")
        text = f"Speedup is still rising at γ = {top}, the longest tried ({_x(b.speedup)}){tie}: {why}."
    elif gammas[best] == lowest:
        text = (f"Speedup is highest at the shortest draft, γ = {lowest} ({_x(b.speedup)}){tie}: longer drafts are "
                f"rejected too often to pay for their cost ({_c(b.cost_ratio)}).")
    else:
        text = (f"Speedup peaks at γ = {gammas[best]} ({_x(b.speedup)}){tie}; shorter drafts leave tokens on the table, "
                "longer ones are refused more often than they pay for.")
    return Claim(text, tuple(_gamma_words(steps.step("gamma").teaches + " " + text, runs)))


def _gamma_words(text: str, runs: dict[str, Comparison]) -> list[str]:
    """Each shape the words claim, held against the sweep."""
    speed = {int(_label(n)): c.speedup for n, c in runs.items()}
    best = max(speed, key=speed.get)
    problems = []
    for said in re.findall(r"peaks at γ = (\d+)", text):
        g = int(said)
        if g != best or g in (min(speed), max(speed)):
            problems.append(f"the text says speedup peaks at γ = {g}; it is fastest at γ = {best} "
                            f"({_x(speed[best])}) of γ = {min(speed)}…{max(speed)}")
    if "moderate" in text and best in (min(speed), max(speed)):
        problems.append(f"the text says the best γ is moderate; it is γ = {best}, the end of the range tried")
    if "still rising" in text and best != max(speed):
        problems.append(f"the text says speedup is still rising at the longest γ; it is fastest at γ = {best}")
    return problems


def draft_choice(data: Data) -> Claim:
    runs = {n: c for n, c in data.group("drafts").items() if n != "drafts:target"}
    best = max(runs, key=lambda n: runs[n].speedup)
    b = runs[best]
    beaten = [n for n, c in runs.items() if c.spec.acceptance_rate > b.spec.acceptance_rate and c.speedup < b.speedup]
    ranked = ", ".join(f"{_label(n)} {_x(c.speedup)}" for n, c in sorted(runs.items(), key=lambda kv: -kv[1].speedup))
    if beaten:
        m = max(beaten, key=lambda n: runs[n].spec.acceptance_rate)
        text = (f"Fastest: {_label(best)} ({_x(b.speedup)}, α = {b.spec.acceptance_rate:.2f}, {_c(b.cost_ratio)}), "
                f"ahead of the more accurate {_label(m)} (α = {runs[m].spec.acceptance_rate:.2f}, "
                f"{_c(runs[m].cost_ratio)}). Ranked: {ranked}.")
    else:
        text = (f"Fastest: {_label(best)} ({_x(b.speedup)}), which is also the most accurate here "
                f"(α = {b.spec.acceptance_rate:.2f}, {_c(b.cost_ratio)}). Ranked: {ranked}.")
    problems = []
    if "more accurate" in text and not beaten:
        problems.append("no more accurate drafter was slower")
    if "most accurate" in text and any(c.spec.acceptance_rate > b.spec.acceptance_rate for c in runs.values()):
        problems.append(f"{_label(best)} is not the most accurate drafter")
    costly = [n for n, c in runs.items() if c.cost_ratio > 10 * max(b.cost_ratio, 1e-3) and c.speedup < b.speedup]
    if not costly:
        problems.append("no costlier drafter lost to the fastest: nothing shows that cost matters")
    return Claim(text, tuple(problems))


def relaxed(data: Data) -> Claim:
    runs = data.group("relaxed")
    exact, loosest = runs[min(runs, key=lambda n: float(_label(n)))], runs[max(runs, key=lambda n: float(_label(n)))]
    changed = [_label(n) for n, c in runs.items() if not c.identical]
    problems = []
    if loosest.spec.acceptance_rate <= exact.spec.acceptance_rate:
        problems.append("the loosest tolerance did not raise α")
    if loosest.speedup <= exact.speedup:
        problems.append("the loosest tolerance was not faster than exact verification")
    if not changed:
        problems.append("no tolerance changed the output")
    if not exact.identical:
        problems.append("exact verification (τ = 0) did not give the target's own text")
    return Claim(f"From τ = 0 to τ = {max(float(_label(n)) for n in runs):g}: α {exact.spec.acceptance_rate:.2f} → "
                 f"{loosest.spec.acceptance_rate:.2f}, speedup {_x(exact.speedup)} → {_x(loosest.speedup)}; the output "
                 f"differs from the target's from τ = {changed[0] if changed else 'never'}.", tuple(problems))


def faster(data: Data) -> Claim:
    runs = {"faster:retrieval": data.group("main")["main"], **data.group("faster")}
    ranked = sorted(runs.items(), key=lambda kv: -kv[1].speedup)
    faster_ = [n for n, c in runs.items() if steps.direction(c.speedup) == 0]
    same = [n for n, c in runs.items() if steps.direction(c.speedup) == 1]
    slower = [n for n, c in runs.items() if steps.direction(c.speedup) == 2]
    parts = [f"faster on {len(faster_)} of {len(runs)} prompts"]
    if same:
        parts.append(f"within {NOISE:.0%} of the target alone on {len(same)} ({', '.join(_label(n) for n in same)})")
    if slower:
        parts.append(f"slower on {len(slower)} ({', '.join(_label(n) for n in slower)})")
    text = ("Measured: " + "; ".join(parts) + ". Ranked: " +
            ", ".join(f"{_label(n)} {_x(c.speedup)}" for n, c in ranked) + ".")
    problems = []
    teaches = steps.step("faster").teaches
    if "not on all" in teaches and not (same or slower):
        problems.append("the text says not every prompt is faster; every one was")
    if "some prompts" in teaches and not faster_:
        problems.append("the text says some prompts are faster; none was")
    if len(faster_) + len(same) + len(slower) != len(runs):
        problems.append("a prompt is counted twice or not at all")
    if not all(c.identical for c in runs.values()):
        problems.append("an exact run's output differs from the target's")
    return Claim(text, tuple(problems))


def same(data: Data) -> Claim:
    c = same_distribution.closeness(data.lab)
    problems = []
    if not c.within(EXACT):
        problems.append(f"exact speculative sampling's TV {c.tv[EXACT]:.3f} is above the noise band {c.band:.3f}")
    if c.within(RELAXED):
        problems.append(f"relaxed verification's TV {c.tv[RELAXED]:.3f} is within the noise band {c.band:.3f}")
    return Claim(f"TV(exact, target) {c.tv[EXACT]:.3f} is {'within' if c.within(EXACT) else 'above'} the noise band "
                 f"{c.band:.3f}; TV(relaxed, target) {c.tv[RELAXED]:.3f} is "
                 f"{'within' if c.within(RELAXED) else 'above'} it.", tuple(problems))


def tree_costs_of(data: Data):
    """What a tree buys at this machine's v(N) and at a theoretical flat one, from the tree run's own a_r and c."""
    from ..lab.verify_cost import load_verify_cost
    from .tree_costs import tree_costs
    cost = load_verify_cost()
    tree = data.group("trees")["trees:tree"]
    if cost is None or not tree.spec.accept_by_rank():
        return None
    context = len(tree.spec.prompt_ids) + tree.spec.new_tokens // 2
    return tree_costs(tree.spec.accept_by_rank(), tree.cost_ratio, cost, tree.spec.settings["gamma"], context)


def trees(data: Data) -> Claim:
    runs = data.group("trees")
    tree, chain = runs["trees:tree"], runs["trees:chain"]
    r = steps.tree_round(tree.spec)
    n = tree.spec.settings["tree"]["budget"]
    problems = []
    if not (tree.identical and chain.identical):
        problems.append("a tree or chain run's output differs from the target's")
    if r is None or len(set(r.tree.parents)) == len(r.tree.parents):
        problems.append("no round of the tree run branched")
    gain = tree.spec.mean_accepted_tokens / chain.spec.mean_accepted_tokens - 1
    text = (f"Measured, {n} drafted tokens verified per round either way: the tree kept "
            f"{tree.spec.mean_accepted_tokens:.2f} tokens per round against the chain's {chain.spec.mean_accepted_tokens:.2f} "
            f"({gain:+.0%}), {_x(tree.speedup)} against {_x(chain.speedup)}.")
    costs = tree_costs_of(data)
    if costs is not None:
        best_here = max(range(len(costs.nodes)), key=lambda i: costs.here_tree[i])
        best_flat = max(range(len(costs.nodes)), key=lambda i: costs.flat_tree[i])
        text += (f" On this machine v(N) grows from {costs.v_here[0]:.2f} steps at N = 1 to {costs.v_here[-1]:.2f} at "
                 f"N = {costs.nodes[-1]}, so by this run's own acceptance the best tree has N = {costs.nodes[best_here]} "
                 f"nodes ({_x(costs.here_tree[best_here])} expected); with a theoretical flat v(N) = 1 (a GPU's "
                 f"memory-bound forward, not measured here) it would be N = {costs.nodes[best_flat]} "
                 f"({_x(costs.flat_tree[best_flat])}).")
        if costs.flat_tree[best_flat] < costs.here_tree[best_here]:
            problems.append("a flat v(N) should never make the best tree slower than a growing one")
    return Claim(text, tuple(problems))


def heads(data: Data) -> Claim:
    runs = data.group("heads")
    head = next(c for n, c in runs.items() if "+" not in n)
    paired = next((c for n, c in runs.items() if "+" in n), None)
    model = data.group("drafts").get("drafts:smol-draft-2l256")
    by_pos = ", ".join(f"{a:.2f}" for a in head.spec.acceptance_by_position())
    text = (f"{head.spec.draft}: {_c(head.cost_ratio)} per drafted token, α = {head.spec.acceptance_rate:.2f} (by "
            f"position: {by_pos}), {head.spec.mean_accepted_tokens:.2f} tokens per round, {_x(head.speedup)}.")
    if model is not None:
        n = next(i for i, s in enumerate(steps.STEPS, start=1) if s.key == "draft-choice")
        text += f" A separate 2-layer draft model (smol-draft-2l256, step {n}) costs {_c(model.cost_ratio)}."
    if paired is not None:
        text += (f" Beside n-gram lookup ({paired.spec.draft}): α = {paired.spec.acceptance_rate:.2f}, "
                 f"{paired.spec.mean_accepted_tokens:.2f} tokens per round, {_x(paired.speedup)}.")
    problems = []
    if not all(c.identical for c in runs.values()):
        problems.append("a head run's output differs from the target's")
    if head.cost_ratio >= 0.1:
        problems.append(f"the head is not almost free: {_c(head.cost_ratio)}")
    if model is not None and head.cost_ratio >= model.cost_ratio:
        problems.append("the head costs no less than a separate draft model")
    return Claim(text, tuple(problems))


CLAIMS: dict[str, Callable[[Data], Claim]] = {
    "bottleneck": bottleneck, "draft-verify": draft_verify, "accept-reject": accept_reject, "sampling": sampling,
    "bonus": bonus, "worksheet": worksheet, "cost": cost, "gamma": gamma, "draft-choice": draft_choice,
    "relaxed": relaxed, "faster": faster, "same": same, "trees": trees, "heads": heads,
}


def claim(key: str, data: Data) -> Claim:
    """What step `key` shows on these runs, and what of its words they contradict."""
    return CLAIMS[key](data)
