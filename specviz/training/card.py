"""Step 5: the model card (README.md) that ships with a trained draft: what it is, how it was made, how it does.

Every figure comes from the summary the training wrote and the evaluation `evaluate` measured.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..models import ALIASES, EMBEDDED, LoadedModel


def _title(target: LoadedModel) -> str:
    key = ALIASES.get(target.name, target.name)
    return EMBEDDED[key].title if key in EMBEDDED else target.name


def model_card(summary: dict, evaluation: dict | None) -> str:
    """README.md of a shipped draft: what it is, how it was made, and how it does on the eval prompts."""
    shape, data, tr = summary["shape"], summary["data"], summary["training"]
    name = summary["draft"]
    lines = [
        f"# {name}",
        "",
        f"A draft model for speculative decoding with the SpecViz target **{summary['target']}** "
        f"({summary['target_title']}), distilled by `python -m specviz distill`. It shares the target's tokenizer, "
        f'so it drafts for it directly: `python -m specviz run --draft {name} --prompt "..."`.',
        "",
        "## Shape",
        "",
        f"- LlamaForCausalLM, {shape['layers']} layer(s), hidden {shape['hidden']}, {shape['heads']} attention heads "
        f"({shape['kv_heads']} key/value), MLP {shape['intermediate']}, vocabulary {shape['vocab']}, head tied to the "
        f"embedding",
        f"- {summary['parameters']:,} parameters, stored in fp16 (SpecViz loads it in fp32 on the CPU)",
        f"- embedding initialised from the target's output embedding projected onto its top {shape['hidden']} "
        "principal directions",
        "",
        "## Training",
        "",
        f"- data: the target's own answers to {data['prompts']} TRAIN prompts (assets/prompts, split train): "
        f"{data['sequences']} sequences ({data['greedy']} greedy, {data['sampled']} sampled at temperature "
        f"{data['temperature']:g}), {data['answer_tokens']:,} answer tokens ({data['tokens']:,} with the prompts), "
        f"at most {data['max_new_tokens']} new tokens each; generated in {data['minutes']:.1f} min",
        f"- loss: cross-entropy of q to the target's top-{data['top_k']} p at every answer position",
        f"- {tr['steps']} steps of {tr['batch_size']} sequences, AdamW, peak lr {tr['lr']:g}, {tr['warmup']} warm-up "
        f"steps then cosine decay; {tr['minutes']:.1f} min of training on {tr['device']} (torch {tr['torch']})",
        f"- final loss {tr['final_loss']:.3f}; argmax q = argmax p on {tr['final_agreement']:.1%} of training "
        "positions (mean of the last 20 steps)",
    ]
    lines += evaluation_section(evaluation) if evaluation else []
    return "\n".join(lines) + "\n"


def evaluation_section(evaluation: dict) -> list[str]:
    """The EVAL table of a card: per workload α, tokens per round, c, measured speedup, identical output."""
    lines: list[str] = []
    st = evaluation["settings"]
    mode = "greedy" if st["sampling"]["temperature"] == 0 else f"temperature {st['sampling']['temperature']:g}"
    a = evaluation["all"]
    lines += [
        "",
        "## On the EVAL prompts (never trained on)",
        "",
        f"{mode}, γ = {st['gamma']}, {st['max_new_tokens']} new tokens, exact verification, on "
        f"{evaluation.get('device', 'cpu')} ({evaluation.get('threads', '?')} torch threads); measured by "
        f"`specviz.lab.measure.compare` against the target alone, "
        "means over prompts (α = accepted / drafted; c = draft seconds per drafted token / target seconds per "
        "decoding step).",
        "",
        "| category | prompts | α | mean accepted tokens | c | measured speedup | identical output |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for cat, f in [*evaluation["categories"].items(), ("**all**", a)]:
        lines.append(
            f"| {cat} | {f['prompts']} | {f['alpha']:.3f} | {f['mean_accepted_tokens']:.2f} | {f['c']:.3f} | "
            f"{f['speedup']:.2f}x | {f['identical']}/{f['prompts']} |"
        )
    # The target alone makes one token per step; a round costs γc steps of drafting plus one verification.
    break_even = st["gamma"] * a["c"] + a["verify_cost"]
    lines += [
        "",
        f"A target decoding step took {a['target_step_ms']:.0f} ms on average, a verification forward (γ+1 "
        f"tokens) {a['verify_cost']:.2f} steps; median speedup {a['median_speedup']:.2f}x. The machine was "
        "shared with other jobs, so timings are noisy.",
        "",
        f"A round costs γc + {a['verify_cost']:.2f} = {break_even:.2f} target steps, so the draft pays off once a "
        f"round yields more than {break_even:.2f} tokens; it yields {a['mean_accepted_tokens']:.2f}"
        + (
            " (faster than the target alone)."
            if a["mean_accepted_tokens"] > break_even
            else ", so on this machine it makes decoding slower, not faster."
        ),
    ]
    by_position = evaluation["all"].get("alpha_by_position") or []
    if by_position:
        shown = " · ".join(f"{i + 1}: {a:.2f}" for i, a in enumerate(by_position) if a is not None)
        lines += ["", f"Acceptance by draft position (P(accepted | drafted), pooled over prompts): {shown}."]
    return lines


def write_card(run_dir: Path, out_dir: Path) -> Path:
    """(Re)write a distilled draft's README.md from the summary.json and evaluation.json in its run folder."""
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    ev_path = run_dir / "evaluation.json"
    evaluation = json.loads(ev_path.read_text(encoding="utf-8")) if ev_path.is_file() else None
    card = out_dir / "README.md"
    card.write_text(model_card(summary, evaluation), encoding="utf-8")
    return card


def head_card(info, evaluation: dict | None, command: str, name: str) -> str:
    """README.md of a draft head (specviz.drafters.head_net): shape, draft vocabulary and coverage, data, training,
    EVAL figures."""
    tr, data, s = info.trained, info.trained["data"], info.shape
    cfg = {**tr["config"], "name": name}
    a, w, d = data["answers"], data["written"], data["documents"]
    def state(i: int) -> str:
        return "its embeddings" if i == 0 else "its final, normed state" if i == info.target_layers else \
            f"layer {i}'s output"

    reads = ("final hidden state" if not s.layers else
             f"hidden states at {len(s.layers)} depths ({'; '.join(state(i) for i in s.layers)}; "
             f"{info.target_layers} layers in all), fused as in EAGLE-3,")
    fuse = (f"fuse([RMSNorm(state) for each of {len(s.layers)} layers]) ({len(s.layers) * s.hidden} → {s.hidden}), "
            if s.layers else "")
    lines = [
        f"# {cfg.get('name') or name}",
        "",
        f"A feature-level draft head (EAGLE-style) for the SpecViz target **{info.target}**. It reads the target's own "
        f"{reads} at the last committed position and the embedding of the next token, and predicts the "
        "target's next hidden state; the target's output head on a reduced draft vocabulary turns that into q. "
        f"Use it as `--draft {cfg.get('name') or name}` (or `ngram+{cfg.get('name') or name}`: n-gram lookup when the "
        "context has a match, the head otherwise).",
        "",
        "## Shape",
        "",
        f"- {fuse}fc([RMSNorm(embedding), RMSNorm(feature)]) ({2 * s.hidden} → {s.hidden}), one decoder layer "
        f"({s.heads} attention heads, {s.kv_heads} key/value heads, MLP {s.intermediate}, RoPE θ {s.rope_theta:g}), "
        "output RMSNorm",
        f"- {tr['parameters']:,} trained parameters, stored in fp16; no embedding of its own (it reads the target's)",
        f"- draft vocabulary: the target's {len(info.vocab):,} most written tokens (its answers' tokens and its greedy "
        f"choice at every position it read); they cover {data.get('vocab_coverage_train', float('nan')):.1%} of the "
        "training answer tokens"
        + (
            f" and {evaluation['coverage']:.1%} of the target's own output on the EVAL prompts"
            if evaluation and "coverage" in evaluation
            else ""
        ),
        "",
        "## Data",
        "",
        f"- the target's answers to {a['prompts']} TRAIN prompts: {a['sequences']} sequences (greedy and "
        f"{a['samples']} "
        f"sampled at temperature {a['temperature']:g}, at most {a['max_new_tokens']} tokens), {a['tokens']:,} tokens, "
        f"generated in {a['minutes']:.1f} min"
        + (f" ({a['dtype']})" if a.get("dtype") else " (bf16 copy of the target)" if cfg.get("bf16_answers") else ""),
        f"- prompts the target wrote for itself (from TRAIN examples, never an EVAL prompt): {w['prompts']} answers, "
        f"{w['tokens']:,} tokens ({w['minutes']:.1f} min)",
        f"- local documents read by the target (Python's language reference topics and standard-library code, as chat "
        f"answers): {d['texts']} chunks, {d['tokens']:,} tokens",
        f"- {data['trained_positions']:,} trained positions ({data['positions']:,} read); the target's features "
        f"captured in {data['capture_minutes']:.1f} min on {tr['device']} (fp32, one teacher-forced forward per batch)",
        "",
        "## Training",
        "",
        f"- loss: soft cross-entropy of q to the target's p on the draft vocabulary, plus {cfg['feature_weight']:g} × "
        f"smooth-L1 feature regression, over {cfg['ttt_steps']} training-time-test steps (the head unrolled on its own "
        f"predictions, weights {cfg['step_decay']:g}^(step−1))",
        f"- {tr['steps']} steps of {cfg['batch_size']} texts (≤ {cfg['seq_len']} tokens), AdamW, peak lr "
        f"{cfg['lr']:g}, "
        f"{cfg['warmup']} warm-up steps then cosine decay; {tr['minutes']:.1f} min on {tr['device']} (torch "
        f"{tr['torch']})",
        f"- final loss {tr['final_loss']:.3f}; argmax q = argmax p on {tr['final_agreement']:.1%} of training "
        f"positions at "
        "the first draft step (mean of the last 20 steps)",
        *checks_section(tr, cfg),
        "",
        f"Made by: `{command}`",
    ]
    if evaluation:
        lines += evaluation_section(evaluation)
        race = evaluation.get("race") or {}
        if race:
            lines += [
                "",
                "The race on the same prompts, settings and baselines (`--eval-only` reruns it):",
                "",
                "| draft | α | tokens / round | c | measured speedup (mean) | median | identical |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
            ]
            for drafter, f in race.items():
                lines.append(
                    f"| {drafter} | {f['alpha']:.3f} | {f['mean_accepted_tokens']:.2f} | {f['c']:.3f} | "
                    f"{f['speedup']:.2f}x | {f['median_speedup']:.2f}x | {f['identical']}/{f['prompts']} |"
                )
    return "\n".join(lines) + "\n"


def checks_section(trained: dict, cfg: dict) -> list[str]:
    """The held-out checks of a head's training: when it stopped, and agreement by positions seen (the data curve)."""
    checks = trained.get("checks") or []
    if not checks:
        return []
    best = max(checks, key=lambda c: c.get("score", float("-inf")))
    lines = [
        f"- every {cfg['validate_every']} steps, agreement on the target's greedy answers to the EVAL prompts (offline "
        "greedy acceptance by draft position, `specviz.training.agreement`); the saved weights are the best check's, "
        f"at step {best['step']} (α {best.get('alpha_1', float('nan')):.3f} · {best.get('alpha_2', float('nan')):.3f} "
        f"· "
        f"{best.get('alpha_3', float('nan')):.3f})"
        + (
            f"; training stopped after {cfg['patience']} checks without a better one"
            if cfg.get("patience") and trained["steps"] < cfg["steps"]
            else ""
        ),
        "",
        "| step | answer positions trained on so far (repeats counted) | α at 1 | α at 2 | α at 3 |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in checks:
        lines.append(
            f"| {c['step']} | {int(c.get('positions', 0)):,} | {c.get('alpha_1', float('nan')):.3f} | "
            f"{c.get('alpha_2', float('nan')):.3f} | {c.get('alpha_3', float('nan')):.3f} |"
        )
    return lines
