"""The workshop lesson: its steps, the predictions asked of the learner, and the score.

Pure logic over recorded runs (no Streamlit, no model): the page renders what this returns.
Notation as everywhere: p target, q draft, γ (`gamma`) draft length, α (`alpha`) = accepted ÷
drafted, c = draft time per token ÷ target time per step.

A question is built from a real record (recorded or run live), so its answer is what the target
actually did; its id names the record's source, so a live re-run asks afresh.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import Round, Run

from ..comparison import Comparison


@dataclass(frozen=True)
class Step:
    key: str
    title: str
    teaches: str  # one sentence: what the learner should leave the step knowing


STEPS = (
    Step("bottleneck", "One expensive step at a time",
         "A language model writes one token per forward pass, and each pass reads every weight: the target is the bottleneck."),
    Step("draft-verify", "Draft, then verify",
         "A cheap draft guesses γ tokens; the target checks all of them in one forward pass."),
    Step("accept-reject", "Accept, reject, resample",
         "The longest prefix the target agrees with is kept; the first disagreement is replaced by the target's own token."),
    Step("sampling", "Sampling: accept with probability min(1, p/q)",
         "When sampling, a draft is kept with probability min(1, p/q) and a rejection is redrawn from norm(max(0, p − q))."),
    Step("bonus", "The bonus token",
         "When every draft is kept, the target's last position gives one more token for free."),
    Step("worksheet", "The acceptance-rate worksheet",
         "α = accepted ÷ drafted, counted on a real run."),
    Step("cost", "Why a bad draft is slower (c)",
         "Every drafted token costs c target steps: a perfect but expensive draft is slower than no draft."),
    Step("gamma", "Draft length: how long a guess pays?",
         "Longer drafts gain more when accepted but cost more when rejected: the best γ balances α against c."),
    Step("draft-choice", "Draft choice: accurate against cheap",
         "What matters is tokens gained per unit of time: a draft must be right often (α) and cheap (small c)."),
    Step("trees", "Token trees: several guesses, one check",
         "A tree drafts several continuations and the target checks them all in one pass; it pays only if the extra "
         "tokens it keeps outgrow what the wider check costs, v(N), which depends on the machine."),
    Step("heads", "Feature heads: a draft that reads the target",
         "A draft head predicts the next tokens from the target's own hidden state: almost free to run, and as good "
         "as what one small layer can read from those features."),
    Step("relaxed", "Relaxed verification and what it costs",
         "Accepting near-misses raises α and speed, and the output stops being the target's."),
    Step("faster", "Is it really faster?",
         "Measured against the target alone on the same prompts and lengths: the gain depends on the prompt."),
    Step("same", "Is it really the same?",
         "Exact speculative sampling draws from the target's own distribution; relaxed verification does not."),
)


def step(key: str) -> Step:
    return next(s for s in STEPS if s.key == key)


def step_index(value, default: int = 1) -> int:
    """A 1-based step number from user input (a query parameter), clamped; `default` if unreadable."""
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return default
    return min(max(n, 1), len(STEPS))


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    options: tuple[str, ...]
    answer: int  # index of the right option
    explain: str  # shown with the verdict


def tok(text: str) -> str:
    """A token as a learner reads it: escapes shown, ∅ for nothing."""
    return repr(text)[1:-1] or "∅"


def _pick(rounds: list[Round], *tests) -> Round | None:
    """The first round passing every test of the longest prefix of `tests` that some round passes."""
    for n in range(len(tests), 0, -1):
        found = [r for r in rounds if all(t(r) for t in tests[:n])]
        if found:
            return found[0]
    return rounds[0] if rounds else None


def keep_round(run: Run) -> Round | None:
    """A round worth predicting: several drafts, some kept, not all, not the first round."""
    return _pick(run.rounds, lambda r: len(r.drafted) >= 3, lambda r: 0 < r.n_accepted < len(r.drafted),
                 lambda r: r.index > 0)


def keep_question(run: Run, source: str) -> Question | None:
    r = keep_round(run)
    if r is None or not r.drafted:
        return None
    k = len(r.drafted)
    return Question(f"draft-verify:{source}:{r.index}",
                    f"Round {r.index + 1}: the draft proposed {k} tokens. How many will the target keep?",
                    tuple(str(i) for i in range(k + 1)), r.n_accepted,
                    f"The target kept {r.n_accepted} of {k}: drafts are kept up to the first one the target's own "
                    f"choice disagrees with, then the target's token replaces it.")


def fail_round(run: Run) -> Round | None:
    return _pick(run.rounds, lambda r: r.rejected_position is not None, lambda r: len(r.drafted) >= 3,
                 lambda r: (r.rejected_position or 0) >= 1)


def fail_question(run: Run, source: str) -> Question | None:
    r = fail_round(run)
    if r is None or not r.drafted:
        return None
    texts = [tok(r.drafted_text[i] if i < len(r.drafted_text) else "") for i in range(len(r.drafted))]
    options = tuple(f"draft {i + 1}: «{t}»" for i, t in enumerate(texts)) + ("none: all kept",)
    if r.rejected_position is None:
        answer, explain = len(r.drafted), f"The target agreed with every draft and added the bonus «{tok(r.next_text)}»."
    else:
        answer = r.rejected_position
        explain = (f"The target's own choice at that position was «{tok(r.next_text)}», so «{texts[answer]}» was refused "
                   "and every draft after it discarded with it.")
    return Question(f"accept-reject:{source}:{r.index}", f"Round {r.index + 1}: which draft does the target refuse first?",
                    options, answer, explain)


def tree_round(run: Run) -> Round | None:
    """A tree round worth drawing: branches to choose from, some kept, some refused."""
    def branched(r):
        return r.tree is not None and len(set(r.tree.parents)) < len(r.tree.parents)
    return _pick([r for r in run.rounds if r.tree], branched, lambda r: r.n_accepted >= 1,
                 lambda r: "rejected" in r.tree.status, lambda r: r.n_accepted >= 2)


def tree_question(run: Run, source: str) -> Question | None:
    r = tree_round(run)
    if r is None:
        return None
    depth = max(1, run.settings["gamma"])
    return Question(f"trees:{source}:{r.index}",
                    f"Round {r.index + 1}: the draft offers a tree of {r.tree.size} nodes, at most {depth} deep. How many "
                    "of its tokens will the target keep?", tuple(str(i) for i in range(depth + 1)), r.n_accepted,
                    f"The target kept {r.n_accepted}: it walks from the root, each time into the child holding its own "
                    "choice, and stops where no child does; every other branch is dropped.")


def head_question(runs: dict[str, Comparison], source: str) -> Question | None:
    head = next((c for n, c in runs.items() if "+" not in n), None)
    if head is None:
        return None
    return Question(f"heads:{source}", f"The head {head.spec.draft} drafts γ = {head.spec.settings['gamma']} tokens a "
                    "round from the target's hidden state. Compared with the target alone, is it…",
                    ("faster", "about the same", "slower"), direction(head.speedup),
                    f"Measured: {head.speedup:.2f}× (α = {head.spec.acceptance_rate:.2f}, c = {head.cost_ratio:.3f}).")


def sampling_pick(run: Run) -> tuple[Round, int] | None:
    """A drafted token with p < q (acceptance not certain), preferring p/q well inside (0, 1)."""
    best = None
    for r in run.rounds:
        for i, (p, q) in enumerate(zip(r.p, r.q)):
            if p is None or q <= 0 or p >= q:
                continue
            score = abs(p / q - 0.5)
            if best is None or score < best[0]:
                best = (score, r, i)
    return (best[1], best[2]) if best else None


def accept_probability(p: float, q: float) -> float:
    return min(1.0, p / q) if q > 0 else 1.0


def sampling_question(run: Run, source: str) -> Question | None:
    pick = sampling_pick(run)
    if pick is None:
        return None
    r, i = pick
    p, q = r.p[i], r.q[i]
    right = accept_probability(p, q)
    values = [right, p, q, 1.0, 1 - q + p if 1 - q + p < 1 else max(0.0, q - p)]
    shown: list[str] = []
    for v in values:
        label = f"{v:.2f}"
        if label not in shown:
            shown.append(label)
    token = tok(r.drafted_text[i] if i < len(r.drafted_text) else "")
    fate = "kept" if i < r.n_accepted else "refused"
    return Question(f"sampling:{source}:{r.index}:{i}",
                    f"Round {r.index + 1}, draft {i + 1} «{token}»: the draft gave it q = {q:.3f}, the target p = {p:.3f}. "
                    "With what probability is it kept?",
                    tuple(shown), 0,
                    f"min(1, p/q) = min(1, {p:.3f}/{q:.3f}) = {right:.2f}. In this run it was {fate}.")


def bonus_round(run: Run) -> Round | None:
    return _pick(run.rounds, lambda r: len(r.drafted) >= 2 and r.n_accepted == len(r.drafted),
                 lambda r: r.emitted == len(r.drafted) + 1)


def bonus_question(run: Run, source: str) -> Question | None:
    r = bonus_round(run)
    if r is None or not r.drafted or r.n_accepted < len(r.drafted):
        return None
    k = len(r.drafted)
    return Question(f"bonus:{source}:{r.index}",
                    f"Round {r.index + 1}: the target keeps all {k} drafts. How many tokens does this round add?",
                    tuple(str(v) for v in (k - 1, k, k + 1)), 2,
                    f"{k} drafts plus the bonus token «{tok(r.next_text)}»: the target's forward pass already scored "
                    f"the position after the last draft, so one more token costs nothing.")


def worksheet_question(run: Run, source: str) -> Question | None:
    if not run.drafted:
        return None
    right = run.accepted / run.drafted
    candidates = [right, run.accepted / max(1, len(run.rounds)), run.new_tokens / run.drafted,
                  run.accepted / max(1, run.new_tokens)]
    shown = []
    for v in candidates:
        if f"{v:.2f}" not in shown:
            shown.append(f"{v:.2f}")
    return Question(f"worksheet:{source}", f"This run drafted {run.drafted} tokens over {len(run.rounds)} rounds, "
                    f"kept {run.accepted} of them and wrote {run.new_tokens} tokens. What is α?",
                    tuple(shown), 0, f"α = accepted ÷ drafted = {run.accepted} ÷ {run.drafted} = {right:.2f}.")


def direction(speedup: float) -> int:
    """0 faster, 1 about the same (within 5%), 2 slower."""
    return 0 if speedup > 1.05 else (2 if speedup < 0.95 else 1)


def cost_question(runs: dict[str, Comparison], source: str) -> Question | None:
    self_draft = runs.get("drafts:target")
    if self_draft is None:
        return None
    return Question(f"cost:{source}", "The target drafts for itself: every draft is accepted (α = 1). "
                    "Compared with the target alone, is that…", ("faster", "about the same", "slower"),
                    direction(self_draft.speedup),
                    f"Measured: {self_draft.speedup:.2f}× (α = {self_draft.spec.acceptance_rate:.2f}, "
                    f"c = {self_draft.cost_ratio:.2f}). Each round pays γ full target steps to draft, plus the check.")


def best_by_speedup(runs: dict[str, Comparison], label) -> tuple[list[str], int]:
    labels = [label(name) for name in runs]
    best = max(range(len(labels)), key=lambda i: list(runs.values())[i].speedup)
    return labels, best


def gamma_question(runs: dict[str, Comparison], source: str) -> Question | None:
    if not runs:
        return None
    labels, best = best_by_speedup(runs, lambda n: f"γ = {n.split(':', 1)[1]}")
    fastest = list(runs.values())[best]
    return Question(f"gamma:{source}", "Which draft length was fastest on this prompt?", tuple(labels), best,
                    f"{labels[best]}: {fastest.speedup:.2f}× measured.")


def draft_question(runs: dict[str, Comparison], source: str) -> Question | None:
    runs = {n: c for n, c in runs.items() if n != "drafts:target"}
    if len(runs) < 2:
        return None
    labels, best = best_by_speedup(runs, lambda n: n.split(":", 1)[1])
    fastest = list(runs.values())[best]
    return Question(f"draft-choice:{source}", "Which drafter was fastest here?", tuple(labels), best,
                    f"{labels[best]}: {fastest.speedup:.2f}× (α = {fastest.spec.acceptance_rate:.2f}, "
                    f"c = {fastest.cost_ratio:.3f}).")


def relaxed_question(runs: dict[str, Comparison], source: str) -> Question | None:
    if len(runs) < 2:
        return None
    labels = [f"τ = {n.split(':', 1)[1]}" for n in runs] + ["none of them"]
    changed = [i for i, c in enumerate(runs.values()) if not c.identical]
    answer = changed[0] if changed else len(labels) - 1
    return Question(f"relaxed:{source}", "From which tolerance τ does the output stop being the target's own text?",
                    tuple(labels), answer,
                    f"{labels[answer]}: a near-miss accepted once changes the context, and every later token with it.")


def faster_question(runs: dict[str, Comparison], source: str) -> Question | None:
    if not runs:
        return None
    wins = sum(c.speedup > 1 for c in runs.values())
    return Question(f"faster:{source}", f"On how many of these {len(runs)} prompts is the speculative run faster than "
                    "the target alone?", tuple(str(i) for i in range(len(runs) + 1)), wins,
                    f"{wins} of {len(runs)}: each was timed against the target alone on the same prompt and length.")


def same_question(within_exact: bool, source: str) -> Question:
    return Question(f"same:{source}", "Exact speculative sampling against the target alone: is their difference bigger "
                    "than two samples of the target alone would show by chance?",
                    ("yes, it drifts", "no, it is within the noise"), 1 if within_exact else 0,
                    "Exact speculative sampling is lossless: its first tokens follow the target's distribution, and the "
                    "gap to the target-alone sample is what chance alone gives.")


@dataclass
class Score:
    """The running score: question id -> right or not (a question counts once)."""

    answers: dict[str, tuple[int, bool]]

    def submit(self, question: Question, choice: int) -> bool:
        if question.qid not in self.answers:
            self.answers[question.qid] = (choice, choice == question.answer)
        return self.answers[question.qid][1]

    @property
    def right(self) -> int:
        return sum(ok for _, ok in self.answers.values())

    @property
    def asked(self) -> int:
        return len(self.answers)

    def text(self) -> str:
        return f"Score: {self.right} / {self.asked}" if self.asked else "Score: no predictions yet"
