"""Tokens as HTML, one colour and one marker per status, used on every page.

Colour is never the only cue: rejected tokens are struck through, resampled ones underlined
with a wavy line, bonus ones carry a small "+", and every token shows p and q on hover.
"""

from __future__ import annotations

import html

from ...records import ACCEPTED, BONUS, DRAFTED, REJECTED, RESAMPLED, TARGET, Round, Run

COLOURS = {
    ACCEPTED: "#1a9850",  # green: a drafted token the target kept
    REJECTED: "#d73027",  # red, struck through: a drafted token the target refused
    RESAMPLED: "#f39c12",  # orange: the target's replacement at the first rejection
    BONUS: "#4575b4",  # blue: the extra token after a fully accepted draft
    TARGET: "#555555",  # grey: produced by the target with nothing drafted
    DRAFTED: "#8c8c8c",  # grey, dashed: proposed, fate not yet shown (replay)
}
DESCRIPTIONS = {
    ACCEPTED: "accepted draft token",
    REJECTED: "rejected draft token",
    RESAMPLED: "resampled by the target",
    BONUS: "bonus token (all drafts accepted)",
    TARGET: "target alone (nothing drafted)",
    DRAFTED: "drafted, not yet verified",
}

CSS = """
<style>
.sv-text {font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.95rem; line-height: 1.9;
  white-space: pre-wrap; word-break: break-word;}
.sv-tok {border-radius: 3px; padding: 1px 1px; margin: 0 0.5px; color: #fff;}
.sv-accepted {background: #1a9850;}
.sv-rejected {background: #d73027; text-decoration: line-through; text-decoration-thickness: 2px; opacity: 0.85;}
.sv-resampled {background: #f39c12; text-decoration: underline wavy #7a4a00; color: #1b1b1b;}
.sv-bonus {background: #4575b4;}
.sv-bonus::after {content: "+"; font-size: 0.7em; vertical-align: super;}
.sv-target {background: #e8e8e8; color: #222;}
.sv-drafted {background: #fff; color: #555; border: 1px dashed #8c8c8c;}
.sv-legend span.sv-tok {margin-right: 0.8rem;}
.sv-timeline {border-collapse: collapse; width: 100%;}
.sv-timeline td {border-bottom: 1px solid #eee; padding: 4px 6px; vertical-align: top;}
.sv-timeline td.sv-n {color: #888; width: 3.5rem; white-space: nowrap;}
.sv-why {color: #777; font-size: 0.75rem; margin-top: 2px;}
.sv-timeline td.sv-meta {color: #888; font-size: 0.8rem; width: 9rem; white-space: nowrap;}
</style>
"""


def _visible(text: str) -> str:
    """Whitespace made visible inside a coloured box (a newline keeps its line break)."""
    text = html.escape(text)
    return text.replace("\n", "↵\n") if text.strip() else text.replace(" ", "␣").replace("\n", "↵\n")


def token_span(text: str, status: str, hover: str) -> str:
    return (
        f'<span class="sv-tok sv-{status}" data-status="{status}" title="{html.escape(hover, quote=True)}">'
        f"{_visible(text)}</span>"
    )


def _hover(r: Round, i: int, status: str) -> str:
    """Hover text: the status with q (draft) and p (target) of the token."""
    if i < len(r.drafted):
        p = "not computed (after the first rejection)" if r.p[i] is None else f"{r.p[i]:.3f}"
        where = f"round {r.index + 1}, position {i + 1}"
        return f"{DESCRIPTIONS[status]} · {where} · q (draft) = {r.q[i]:.3f} · p (target) = {p}"
    return f"{DESCRIPTIONS[status]} · round {r.index + 1} · p (target) = {r.next_p:.3f}"


def round_spans(r: Round, upto_emitted: bool = True) -> list[str]:
    """Spans of one round: accepted drafts, rejected drafts (struck), then the next token.

    With upto_emitted, tokens cut by EOS or max-new-tokens are left out, as in the output.
    """
    spans = []
    budget = r.emitted if upto_emitted else len(r.drafted) + 1
    for i, (_, text, status) in enumerate(r.statuses()):
        if status != REJECTED:
            if budget <= 0:
                continue
            budget -= 1
        spans.append(token_span(text, status, _hover(r, i, status)))
    return spans


def output_html(run: Run, upto_round: int | None = None) -> str:
    """The output text with every token coloured by status, optionally only up to one round."""
    rounds = run.rounds if upto_round is None else run.rounds[: upto_round + 1]
    body = "".join("".join(round_spans(r)) for r in rounds)
    return f'{CSS}<div class="sv-text">{body}</div>'


def legend_html(statuses=(ACCEPTED, REJECTED, RESAMPLED, BONUS, TARGET)) -> str:
    items = "".join(token_span(DESCRIPTIONS[s], s, DESCRIPTIONS[s]) for s in statuses)
    return f'{CSS}<div class="sv-legend sv-text">{items}</div>'


def timeline_html(run: Run, upto_round: int | None = None) -> str:
    """One row per round: drafted tokens with their fate, then the resampled or bonus token."""
    rows = []
    rounds = run.rounds if upto_round is None else run.rounds[: upto_round + 1]
    for r in rounds:
        spans = "".join(round_spans(r, upto_emitted=False))
        meta = (
            f"γ={r.gamma} · {r.n_accepted}/{len(r.drafted)} kept · {1000 * (r.draft_seconds + r.verify_seconds):.0f} ms"
        )
        if r.source:  # a drafter that chooses among others (auto) says which one drafted
            meta = f"{html.escape(r.source)} · {meta}"
        if r.why:  # ... and drafters that set their own length (auto, suffix) say why
            spans += f'<div class="sv-why">{html.escape(r.why)}</div>'
        rows.append(
            f'<tr><td class="sv-n">#{r.index + 1}</td><td class="sv-text">{spans}</td><td '
            f'class="sv-meta">{meta}</td></tr>'
        )
    return f'{CSS}<table class="sv-timeline">{"".join(rows)}</table>'


def pending_round_html(r: Round) -> str:
    """A round before verification: the drafted tokens only (replay step 1)."""
    spans = "".join(
        token_span(r.drafted_text[i] if i < len(r.drafted_text) else "", DRAFTED, f"drafted · q (draft) = {r.q[i]:.3f}")
        for i in range(len(r.drafted))
    )
    return f'{CSS}<div class="sv-text">{spans or "(nothing drafted this round)"}</div>'
