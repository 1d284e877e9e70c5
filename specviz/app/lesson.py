"""The Streamlit side of the lesson: the current step, navigation, predictions, live re-runs, each step's view.

Every step renders at once from the recordings shipped in assets/lesson (no model is loaded); its
"Run it live" button repeats the same runs on this machine through `service.measured_run` and shows them
instead, for this session. The step lives in one place, `current_step()` / `go_to()`, mirrored in
the `?step=N` query parameter so every step has a link.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from ..config import Decoding
from ..lab import same_distribution
from ..lab.same_distribution import EXACT, RELAXED, LabRecord, LabSetup
from ..lesson import claims, recordings, steps
from ..lesson.steps import STEPS, Question, Score
from ..models import DEFAULT_TARGET
from ..records import Comparison, Round, Run
from . import controls, links, service
from .views import charts, lesson_charts, tokens, tree_charts

STEP, LIVE, SCORE, SKIPPED = "lesson-step", "lesson-live", "lesson-score", "lesson-skipped"
LIVE_LAB_SAMPLES = 150  # per set when the lab is run live: about a minute on 2 CPU cores


# --- the current step (one small interface, for links and a presenter to drive) -----------------------
def current_step() -> int:
    """The 1-based step shown: this session's, else the link's ?step=N, else 1."""
    if STEP not in st.session_state:
        st.session_state[STEP] = steps.step_index(st.query_params.get("step", 1))
    return st.session_state[STEP]


def go_to(step) -> None:
    """Show step `step` (clamped to the lesson) and put it in the address bar."""
    st.session_state[STEP] = steps.step_index(step, default=current_step())
    st.query_params["step"] = str(st.session_state[STEP])


def navigation() -> int:
    """Back / Next (keyboard: ← →), progress and score; the step list in the sidebar. Returns the step."""
    n = current_step()
    st.query_params["step"] = str(n)
    back, middle, forward = st.columns([1, 6, 1], vertical_alignment="center")
    back.button("◀ Back", key="lesson-back", shortcut="Left", disabled=n == 1, on_click=go_to, args=(n - 1,),
                help="Previous step (← key)")
    forward.button("Next ▶", key="lesson-next", shortcut="Right", disabled=n == len(STEPS), on_click=go_to,
                   args=(n + 1,), type="primary", help="Next step (→ key)")
    middle.progress(n / len(STEPS), text=f"Step {n} of {len(STEPS)} · {STEPS[n - 1].title} · {score().text()}")
    with st.sidebar:
        st.markdown("**Lesson steps**")
        for i, step in enumerate(STEPS, start=1):
            st.button(f"{i}. {step.title}", key=f"lesson-goto-{i}", type="primary" if i == n else "tertiary",
                      on_click=go_to, args=(i,))
        links.link_box(restores="this step of the lesson")
        st.caption(f"Link to this step: `?step={n}` (the address bar always holds it)")
        worker = service.service().worker
        st.caption(f"Measurement worker: **{'running' if worker.alive else 'not started'}**",
                   help="Every step reads recordings; models load in the measurement worker, a separate process, only "
                        "for a live run (Run it live, or another page's Run)")
    return n


# --- recordings and live runs -------------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def recording() -> recordings.Recording:
    """The shipped recordings, loaded once per process and shared read-only."""
    return recordings.load()


def _live() -> dict:
    return st.session_state.setdefault(LIVE, {"runs": {}, "lab": None, "sources": {}})


def group(name: str) -> tuple[dict[str, Comparison], str]:
    """The runs of a group (live ones in place of the recordings once run) and their source tag."""
    live = _live()
    runs = {n: live["runs"].get(n, c) for n, c in recording().group(name).items()}
    return runs, live["sources"].get(name, "rec")


def lab() -> tuple[LabRecord, str]:
    live = _live()
    return (live["lab"], live["sources"]["lab"]) if live["lab"] is not None else (recording().lab, "rec")


def live_button(group_name: str, what: str) -> None:
    """'Run it live': the same runs as the recording, on this machine, through the library."""
    if not st.button(f"▶ Run it live ({what})", key=f"lesson-live-{group_name}-{current_step()}",
                     help="Repeats this step's runs on this machine and shows them instead of the recording"):
        return
    live = _live()
    with controls.error_box("run it live"):
        if group_name == "lab":
            setup = replace(LabSetup(**recording().lab.setup), samples=LIVE_LAB_SAMPLES)
            bar = st.progress(0.0, text="Sampling…")
            live["lab"] = service.run_job("record_lab", lambda e: bar.progress(e[1] / e[2], text=f"Sampling: {e[1]} of "
                                                                                            f"{e[2]} runs"),
                                          target=DEFAULT_TARGET, setup=setup)
        else:
            info = recording().manifest["runs"]
            for name, c in recording().group(group_name).items():
                settings = Decoding.from_dict(info[name]["settings"])
                live["runs"][name] = service.measured_run(DEFAULT_TARGET, info[name]["draft"], c.spec.prompt, settings)
        live["sources"][group_name] = f"live{len(live['sources']) + 1}-{id(live)}"
        st.rerun()


def provenance(source: str, group_name: str, what: str = "") -> None:
    """Where the runs shown come from: the recording (machine, date, command) or this session."""
    manifest = recording().manifest
    runs = [info for info in manifest["runs"].values() if info["group"] == group_name]
    made = {k: runs[0].get(k, manifest[k]) for k in ("made_on", "date", "made_by")} if runs else manifest
    if source == "rec":
        st.caption(f"Recorded by the project ({what or 'real runs'}) on {made['made_on']}, {made['date']}, with "
                   f"`{made['made_by']}`.")
    else:
        shared = [c for c in group(group_name)[0].values() if service.shared_label(c)]
        st.caption(f"Run live on this machine in this session ({what or 'real runs'})"
                   + (f"; {len(shared)} of them served from another session's identical measurement on this server."
                      if shared else "."))


# --- predictions --------------------------------------------------------------------------------------
def score() -> Score:
    return st.session_state.setdefault(SCORE, Score({}))


def _submit(question: Question) -> None:
    choice = st.session_state.get(f"lesson-q-{question.qid}")
    if choice is not None:
        score().submit(question, question.options.index(choice))


def _skip(question: Question) -> None:
    st.session_state.setdefault(SKIPPED, set()).add(question.qid)


def predict(question: Question | None) -> bool:
    """Ask, and show the verdict once answered. True when the reveal may be shown (answered or skipped)."""
    if question is None:
        return True
    answers = score().answers
    with st.container(border=True, key=f"lesson-predict-{current_step()}"):
        st.markdown(f"**Predict first.** {question.text}")
        if question.qid in answers:
            choice, ok = answers[question.qid]
            yours = question.options[choice]
            if ok:
                st.success(f"✔ Right: {yours}. {question.explain}")
            else:
                st.error(f"✘ Not quite: you said {yours}; the answer is {question.options[question.answer]}. "
                         f"{question.explain}")
            return True
        st.radio("Your prediction", question.options, index=None, key=f"lesson-q-{question.qid}", horizontal=True)
        picked = st.session_state.get(f"lesson-q-{question.qid}") is not None
        c1, c2 = st.columns([1, 4])
        c1.button("Submit prediction", key=f"lesson-submit-{current_step()}", type="primary", disabled=not picked,
                  on_click=_submit, args=(question,))
        c2.button("Skip: just show me", key=f"lesson-skip-{current_step()}", on_click=_skip, args=(question,))
        if question.qid in st.session_state.get(SKIPPED, set()):
            st.info(f"The answer: {question.options[question.answer]}. {question.explain}")
            return True
        st.caption("The verdict stays hidden until you submit.")
        return False


# --- pieces shared by the steps -----------------------------------------------------------------------
def _context(run: Run, r: Round) -> None:
    """The output up to the round before `r`, then r's drafted tokens, not yet verified."""
    before = tokens.output_html(run, upto_round=r.index - 1) if r.index else tokens.CSS + '<div class="sv-text"></div>'
    st.caption("The text so far (earlier rounds, coloured by what happened to each token):")
    st.html(before)
    st.caption(f"Round {r.index + 1}: the draft proposes")
    st.html(tokens.pending_round_html(r))


def _verified(r: Round) -> None:
    st.caption(f"Round {r.index + 1}, after the target's one forward pass")
    st.html(tokens.CSS + '<div class="sv-text">' + "".join(tokens.round_spans(r, upto_emitted=False)) + "</div>")


def _table(runs: dict[str, Comparison], label) -> None:
    rows = [{"run": label(n), "α": c.spec.acceptance_rate, "tokens / round": c.spec.mean_accepted_tokens,
             "c": c.cost_ratio, "speedup": c.speedup, "theory": c.theoretical_speedup_measured_verify,
             "identical": c.identical, "target alone (s)": c.baseline_seconds, "speculative (s)": c.spec_seconds}
            for n, c in runs.items()]
    st.dataframe(pd.DataFrame(rows), hide_index=True, column_config={
        "α": st.column_config.NumberColumn(format="%.2f"), "tokens / round": st.column_config.NumberColumn(format="%.2f"),
        "c": st.column_config.NumberColumn(format="%.3f"), "speedup": st.column_config.NumberColumn(format="%.2f×"),
        "theory": st.column_config.NumberColumn(format="%.2f×"),
        "target alone (s)": st.column_config.NumberColumn(format="%.2f"),
        "speculative (s)": st.column_config.NumberColumn(format="%.2f")})


def _main() -> tuple[Comparison, str]:
    runs, source = group(recordings.MAIN)
    return runs["main"], source


# --- the steps ----------------------------------------------------------------------------------------
def step_bottleneck() -> bool:
    main, source = _main()
    base = main.baseline
    st.markdown(f"The target alone wrote these {base.new_tokens} tokens in **{base.new_tokens} forward passes, one after "
                "another**: each needs the token before it. A pass reads all 135M weights to produce one token.")
    cols = st.columns(4)
    cols[0].metric("tokens", base.new_tokens)
    cols[1].metric("ms per token", f"{1000 * base.step_seconds:.1f}", help="mean time of one target forward, measured")
    cols[2].metric("tokens / s", f"{base.tokens_per_second:.1f}")
    cols[3].metric("total", f"{main.baseline_seconds:.2f} s")
    st.plotly_chart(lesson_charts.step_times_figure(base), key="lesson-steptimes")
    st.caption(f"Prompt ({len(base.prompt_ids)} tokens, read in one pass of {1000 * base.prefill_seconds:.0f} ms): "
               f"{base.prompt[:160]}…")
    st.markdown("Reading the prompt took **one** pass for all its tokens; writing takes one pass **per** token. "
                "Speculative decoding makes the target check several tokens in one pass, the way it reads a prompt.")
    provenance(source, recordings.MAIN, f"target alone, {base.new_tokens} tokens")
    live_button(recordings.MAIN, "the target alone and the n-gram draft")
    return True


def step_draft_verify() -> bool:
    main, source = _main()
    run = main.spec
    r = steps.keep_round(run)
    st.markdown(f"Here the draft is **{run.draft}** (γ = {run.settings['gamma']}), the target SmolLM2-135M.")
    _context(run, r)
    revealed = predict(steps.keep_question(run, source))
    if revealed:
        _verified(r)
        step_ms = 1000 * main.baseline.step_seconds
        st.markdown(f"Checking {len(r.drafted)} drafts (+1 position) took **{1000 * r.verify_seconds:.1f} ms**, "
                    f"one plain target step {step_ms:.1f} ms: this round gave **{r.emitted} tokens** for one pass.")
        controls.legend()
    provenance(source, recordings.MAIN, f"{run.draft} drafting, {run.new_tokens} tokens")
    live_button(recordings.MAIN, f"{run.draft} and the target alone")
    return revealed


def step_accept_reject() -> bool:
    main, source = _main()
    run = main.spec
    r = steps.fail_round(run)
    st.markdown("Greedy decoding: the target keeps a draft when it is the target's own first choice at that position.")
    _context(run, r)
    revealed = predict(steps.fail_question(run, source))
    if revealed:
        _verified(r)
        if r.rejected_position is not None and r.alternatives:
            st.plotly_chart(charts.residual_figure(r), key="lesson-residual")
        st.caption("Timeline of the first rounds: every drafted token and its fate")
        st.html(tokens.timeline_html(run, upto_round=min(len(run.rounds) - 1, 7)))
        controls.legend()
    provenance(source, recordings.MAIN)
    live_button(recordings.MAIN, f"{run.draft} and the target alone")
    return revealed


def step_sampling() -> bool:
    runs, source = group(recordings.SAMPLED)
    c = runs["sampled"]
    run = c.spec
    pick = steps.sampling_pick(run)
    st.markdown(f"With sampling (temperature {run.settings['sampling']['temperature']:g}) the draft **{run.draft}** draws "
                "each token from its q, and the target keeps it with probability **min(1, p/q)**: always when p ≥ q. "
                "After a rejection the replacement is drawn from **norm(max(0, p − q))**, the mass the draft "
                "under-proposed. Together they give exactly the target's distribution.")
    revealed = True
    if pick is None:
        st.info("No drafted token in this run had p < q; run it live for another draw.")
    else:
        r, _ = pick
        _context(run, r)
        revealed = predict(steps.sampling_question(run, source))
        if revealed:
            _verified(r)
            if r.rejected_position is not None and r.alternatives:
                st.plotly_chart(charts.residual_figure(r), key="lesson-sampling-residual")
            controls.legend()
    provenance(source, recordings.SAMPLED, f"{run.draft}, sampling")
    live_button(recordings.SAMPLED, f"{run.draft}, sampling")
    return revealed


def step_bonus() -> bool:
    main, source = _main()
    run = main.spec
    r = steps.bonus_round(run)
    st.markdown("The target's forward pass over [last token, d₁ … d_γ] gives γ + 1 distributions: one to check each draft "
                "and **one more after the last draft**.")
    _context(run, r)
    revealed = predict(steps.bonus_question(run, source))
    if revealed:
        _verified(r)
        bonus = sum(x.next_kind == "bonus" for x in run.rounds)
        st.markdown(f"In this run **{bonus} of {len(run.rounds)} rounds** ended with a bonus token.")
        controls.legend()
    provenance(source, recordings.MAIN)
    live_button(recordings.MAIN, f"{run.draft} and the target alone")
    return revealed


def step_worksheet() -> bool:
    main, source = _main()
    run = main.spec
    st.html(tokens.output_html(run))
    controls.legend()
    revealed = predict(steps.worksheet_question(run, source))
    if revealed:
        st.markdown("**Worksheet**, filled in from this run:")
        st.dataframe(pd.DataFrame([
            ("rounds (target forward passes)", f"{len(run.rounds)}"),
            ("tokens drafted", f"{run.drafted}"),
            ("drafts accepted", f"{run.accepted}"),
            ("α = accepted ÷ drafted", f"{run.accepted} ÷ {run.drafted} = {run.acceptance_rate:.2f}"),
            ("tokens written", f"{run.new_tokens}"),
            ("tokens per round = written ÷ rounds", f"{run.new_tokens} ÷ {len(run.rounds)} = {run.mean_accepted_tokens:.2f}"),
            ("target alone: passes for the same text", f"{main.baseline.new_tokens}"),
        ], columns=["quantity", "value"]), hide_index=True)
        st.caption("Per-position acceptance: α falls along the draft, because a draft is only tested if all before it "
                   "were kept.")
        st.plotly_chart(charts.acceptance_by_position_figure({run.draft: run}), key="lesson-bypos")
    provenance(source, recordings.MAIN)
    live_button(recordings.MAIN, f"{run.draft} and the target alone")
    return revealed


def step_cost() -> bool:
    runs, source = group(recordings.DRAFTS)
    st.markdown("Speedup = tokens per round ÷ cost per round, with the cost in target steps: **γ·c + v** "
                "(c: one draft token's time ÷ one target step; v: one verification pass, about 1).")
    revealed = predict(steps.cost_question(runs, source))
    if revealed:
        _table(runs, lambda n: n.split(":", 1)[1])
        st.markdown("The target drafting for itself keeps everything (α = 1) and still loses: each round pays γ full "
                    "target steps to draft. A draft must be **cheap** (small c) as well as right.")
    provenance(source, recordings.DRAFTS, "each drafter against the target alone, same prompt, γ and length")
    live_button(recordings.DRAFTS, "every drafter, ~1 min")
    return revealed


def step_gamma() -> bool:
    runs, source = group(recordings.GAMMA)
    first = next(iter(runs.values()))
    st.markdown(f"The same prompt with **{first.spec.draft}** at each draft length γ. Longer drafts gain more tokens per "
                "round when they are accepted, and cost more when they are not.")
    revealed = predict(steps.gamma_question(runs, source))
    if revealed:
        st.plotly_chart(lesson_charts.gamma_figure(runs), key="lesson-gamma")
        _table(runs, lambda n: f"γ = {n.split(':', 1)[1]}")
        st.caption("Differences of a few percent are within the timing noise of a shared CPU; the theory line uses each "
                   "run's own α, c and verification cost.")
    provenance(source, recordings.GAMMA)
    live_button(recordings.GAMMA, "each γ, ~1 min")
    return revealed


def step_draft_choice() -> bool:
    runs, source = group(recordings.DRAFTS)
    drafts = {n: c for n, c in runs.items() if n != "drafts:target"}
    st.markdown("An accurate draft (high α) that is expensive (high c), or a weak one that is almost free?")
    revealed = predict(steps.draft_question(drafts, source))
    if revealed:
        st.plotly_chart(lesson_charts.drafts_figure(drafts), key="lesson-drafts")
        _table(drafts, lambda n: n.split(":", 1)[1])
    provenance(source, recordings.DRAFTS)
    live_button(recordings.DRAFTS, "every drafter, ~1 min")
    return revealed


def step_trees() -> bool:
    runs, source = group(recordings.TREES)
    tree = runs["trees:tree"]
    run = tree.spec
    shape = run.settings["tree"]
    st.markdown(f"**{run.draft}** drafts a tree of **{shape['budget']} nodes** (each expanded node gets its "
                f"{shape['branching']} best guesses, at most γ = {run.settings['gamma']} deep). The target verifies every "
                "node in one forward, each node seeing only its own ancestors, and keeps one branch. Beside it, the same "
                f"drafter as a chain of γ = {shape['budget']}: as many drafted tokens verified per round.")
    r = steps.tree_round(run)
    revealed = predict(steps.tree_question(run, source))
    if revealed:
        if r is not None:
            st.caption(f"Round {r.index + 1}: the tree, the kept branch highlighted")
            st.plotly_chart(tree_charts.tree_figure(r), key="lesson-tree")
        _table(runs, lambda n: n.split(":", 1)[1])
        costs = claims.tree_costs_of(claim_data())
        if costs is not None:
            st.plotly_chart(lesson_charts.tree_costs_figure(costs), key="lesson-tree-costs")
            st.caption(f"Solid: v(N) measured on {costs.machine} at a context of {costs.context} tokens "
                       "(assets/trees/verify_cost.json, `python -m specviz verify-cost`). Dashed: a flat v(N) = 1, the "
                       "theoretical memory-bound forward of a GPU for small N; no GPU was measured for this lesson.")
        controls.legend()
    provenance(source, recordings.TREES, f"{run.draft}, tree and chain")
    live_button(recordings.TREES, "the tree and the chain, ~1 min")
    return revealed


def step_heads() -> bool:
    runs, source = group(recordings.HEADS)
    head = next(c for n, c in runs.items() if "+" not in n)
    st.markdown(f"**{head.spec.draft}** is not a separate model: it is one small layer that reads the target's last "
                "hidden state (what the target computed for the token it just wrote) and guesses the next tokens from "
                "it. Every verification forward hands it fresh features, so it costs almost nothing to run.")
    revealed = predict(steps.head_question(runs, source))
    if revealed:
        _table(runs, lambda n: n.split(":", 1)[1])
        st.plotly_chart(charts.acceptance_by_position_figure({c.spec.draft: c.spec for c in runs.values()}),
                        key="lesson-head-bypos")
        r = steps.keep_round(head.spec)
        if r is not None:
            _verified(r)
            controls.legend()
    provenance(source, recordings.HEADS, "the head alone and beside n-gram lookup")
    live_button(recordings.HEADS, "the head runs, ~1 min")
    return revealed


def step_relaxed() -> bool:
    runs, source = group(recordings.RELAXED)
    first = next(iter(runs.values()))
    st.markdown(f"Relaxed (greedy) verification keeps a draft that is in the target's top {recordings.RELAXED_TOP_K} and "
                f"within τ nats of its best token. Draft: **{first.spec.draft}**. τ = 0 is exact verification.")
    revealed = predict(steps.relaxed_question(runs, source))
    if revealed:
        st.plotly_chart(lesson_charts.relaxed_figure(runs), key="lesson-relaxed")
        _table(runs, lambda n: f"τ = {n.split(':', 1)[1]}")
        loosest_name, loosest = list(runs.items())[-1]
        left, right = st.columns(2)
        left.caption("The target alone")
        left.html(tokens.CSS + f'<div class="sv-text">{loosest.baseline.text}</div>')
        right.caption(f"Relaxed, τ = {loosest_name.split(':', 1)[1]} ({loosest.agreement:.0%} token agreement)")
        right.html(tokens.output_html(loosest.spec))
    provenance(source, recordings.RELAXED)
    live_button(recordings.RELAXED, "each τ, ~1 min")
    return revealed


def step_faster() -> bool:
    runs, source = group(recordings.FASTER)
    main, _ = _main()
    runs = {"faster:retrieval": main, **runs}
    same = sum(c.identical for c in runs.values())
    st.markdown(f"**{main.spec.draft}** against the target alone on {len(runs)} evaluation prompts, each timed by the "
                f"same loop after a warm-up, with the same length and settings; the output was identical to the "
                f"target's on {same} of {len(runs)}.")
    revealed = predict(steps.faster_question(runs, source))
    if revealed:
        st.plotly_chart(lesson_charts.faster_figure(runs), key="lesson-faster")
        _table(runs, lambda n: n.split(":", 1)[1])
        mean = sum(c.speedup for c in runs.values()) / len(runs)
        st.markdown(f"Mean speedup **{mean:.2f}×**. The more of its answer a prompt lets the draft copy, the more it "
                    "gains; the ranking below says which prompts did here.")
    provenance(source, recordings.FASTER)
    live_button(recordings.FASTER, "every prompt, ~1 min")
    return revealed


def step_same() -> bool:
    record, source = lab()
    setup = LabSetup(**record.setup)
    closeness = same_distribution.closeness(record)
    st.markdown(
        f"**{closeness.samples} seeded runs per set** of the prompt “{setup.prompt}” (raw text, temperature "
        f"{setup.temperature:g}, the {setup.top_k} likeliest tokens), each through the real loop; the first generated "
        f"token of each run is counted. Sets: the **target alone**, **exact** speculative sampling with "
        f"{setup.draft} drafting, and **relaxed** verification (lenience l = {setup.lenience:g}: keep with "
        f"min(1, p/(l·q))). Each set has its own seeds. Why sampling and not the formula: the formula is what is being "
        "tested; these are draws from the code that runs.")
    revealed = predict(steps.same_question(closeness.within(EXACT), source))
    if revealed:
        st.plotly_chart(lesson_charts.lab_figure(record), key="lesson-lab")
        cols = st.columns(3)
        cols[0].metric("TV(exact, target)", f"{closeness.tv[EXACT]:.3f}",
                       help="total-variation distance between the exact set's and the target-alone set's histograms")
        cols[1].metric("noise band (95%)", f"≤ {closeness.band:.3f}",
                       help="95% of TVs between two equally large samples of the target alone fall below this "
                            "(bootstrap from the target-alone counts, 1000 draws)")
        cols[2].metric("TV(relaxed, target)", f"{closeness.tv[RELAXED]:.3f}")
        for name in (EXACT, RELAXED):
            inside = closeness.within(name)
            (st.success if inside == (name == EXACT) else st.warning)(
                f"{name}: TV {closeness.tv[name]:.3f} is {'within' if inside else 'above'} the noise band "
                f"({closeness.band:.3f}) → {'indistinguishable from the target' if inside else 'a different distribution'}.")
    st.caption(f"{'Recorded by the project' if source == 'rec' else 'Run live in this session'}: "
               f"{sum(len(v) for v in record.first_tokens.values())} runs in {record.seconds:.0f} s on {record.device}"
               + ("." if source != "rec" else f", with `{recording().manifest['made_by']}`."))
    live_button("lab", f"{LIVE_LAB_SAMPLES} runs per set, ~1–2 min; fewer runs, so a wider band")
    return revealed


RENDERERS = {
    "bottleneck": step_bottleneck, "draft-verify": step_draft_verify, "accept-reject": step_accept_reject,
    "sampling": step_sampling, "bonus": step_bonus, "worksheet": step_worksheet, "cost": step_cost,
    "gamma": step_gamma, "draft-choice": step_draft_choice, "relaxed": step_relaxed, "faster": step_faster,
    "same": step_same, "trees": step_trees, "heads": step_heads,
}


def claim_data() -> claims.Data:
    """The runs the steps show now (this session's live ones in place of the recordings)."""
    return claims.Data(lambda name: group(name)[0], lab()[0])


def show_claim(key: str) -> None:
    """What the shown runs say, in words computed from them; a live run that contradicts the step is told so."""
    claim = claims.claim(key, claim_data())
    st.markdown(f"**What these runs show:** {claim.text}")
    if claim.problems:
        st.warning("These runs do not bear out the step's text: " + "; ".join(claim.problems) + ".", icon="⚖️")


def render(n: int) -> None:
    step = STEPS[n - 1]
    st.header(f"{n}. {step.title}")
    st.markdown(f"*{step.teaches}*")
    if RENDERERS[step.key]():
        show_claim(step.key)
    if n < len(STEPS):
        st.button(f"Next: {STEPS[n].title} ▶", key="lesson-next-bottom", on_click=go_to, args=(n + 1,))

