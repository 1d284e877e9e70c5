"""Records from the loop's tensors: a `Round` from one iteration's proposal and verdict, and token text.

The loop (specviz.decode) hands each iteration's proposal and verdict here once it is over; this
moves what the pages show to the host (p and q at the drafted ids, the target's top alternatives, a
tree's every node with its status) and, after the timed loop, decodes token strings and words each
round's reason (a drafter records only numbers while the clock runs).
Notation as everywhere: p = the target's distribution, q = the draft's.
"""

from __future__ import annotations

import torch

from .records import ACCEPTED, BONUS, DRAFTED, REJECTED, RESAMPLED, TARGET, Alternative, Round, Run, TreeRecord
from .trees import TreeVerdict, children
from .verify import Verdict

ALTERNATIVES = 5  # target's top tokens recorded at each verified position


def full_round(index, gamma, proposal, verdict: Verdict, emitted, draft_seconds, verify_seconds) -> Round:
    """A Round from one iteration's proposal (ids, probs, parents) and verdict, moved to the host once, here.

    A tree's round shows the branch the target walked as its chain and keeps every node in `tree`.
    """
    if proposal.parents is None:
        round_ = _chain_round(index, gamma, proposal.ids, proposal.probs, verdict, emitted, draft_seconds,
                              verify_seconds)
    else:
        ids, probs = walked_branch(proposal.ids, proposal.probs, proposal.parents, verdict)
        round_ = _chain_round(index, gamma, ids, probs, verdict, emitted, draft_seconds, verify_seconds)
        round_.tree = TreeRecord(**node_record(proposal.ids, proposal.probs, proposal.parents, verdict),
                                 source=list(proposal.sources or []))
    round_.source = proposal.source or kept_source(proposal.sources, verdict.kept)
    return round_


def kept_source(sources: list[str] | None, kept: list[int]) -> str:
    """Where the kept branch came from, in path order ('earlier answers + recycled'); '' when nothing was kept
    or the drafter names no sources."""
    if not sources or not kept:
        return ""
    return " + ".join(dict.fromkeys(sources[i] for i in kept))


def _chain_round(index, gamma, ids: torch.Tensor, probs: torch.Tensor | None, verdict: Verdict, emitted,
                 draft_seconds, verify_seconds) -> Round:
    drafted = ids.tolist()
    k = len(drafted)
    scored = min(k, verdict.p.shape[0])  # the target's p exists up to the first rejection (lazy head)
    positions = torch.arange(k, device=verdict.p.device)
    p_drafted = verdict.p[positions[:scored], ids[:scored]].tolist() + [None] * (k - scored)
    if probs is None:
        q_full = torch.zeros(k, verdict.p.shape[1], device=verdict.p.device)
        q_full[positions, ids] = 1.0
    else:
        q_full = probs
    top_p, top_ids = verdict.p.topk(ALTERNATIVES, dim=-1)
    top_q = q_full.gather(-1, top_ids[:scored]).tolist()
    alternatives = []
    for j, (ids_j, ps_j) in enumerate(zip(top_ids.tolist(), top_p.tolist())):
        qs_j = top_q[j] if j < k else [0.0] * len(ids_j)
        alternatives.append([Alternative(t, p, q) for t, p, q in zip(ids_j, ps_j, qs_j)])
        shown = {a.token for a in alternatives[-1]}
        if j < k and drafted[j] not in shown:  # show the drafted token beside the target's favourites
            alternatives[-1].append(Alternative(drafted[j], p_drafted[j], float(q_full[j, drafted[j]])))
        if j == verdict.n_accepted and verdict.next_token not in shown | {drafted[j] if j < k else -1}:
            q_next = float(q_full[j, verdict.next_token]) if j < k else 0.0  # ... and where the next token came from
            alternatives[-1].append(Alternative(verdict.next_token, float(verdict.p[j, verdict.next_token]), q_next))
    kind = RESAMPLED if verdict.resampled else (BONUS if k else TARGET)
    return Round(
        index=index,
        gamma=gamma,
        drafted=drafted,
        q=q_full[positions, ids].tolist(),
        p=p_drafted,
        n_accepted=verdict.n_accepted,
        next_token=verdict.next_token,
        next_kind=kind,
        next_p=float(verdict.p[verdict.n_accepted, verdict.next_token]),
        emitted=emitted,
        alternatives=alternatives,
        draft_seconds=draft_seconds,
        verify_seconds=verify_seconds,
    )


def bare_round(index, gamma, proposal, verdict: Verdict, emitted, draft_seconds, verify_seconds) -> Round:
    """A Round with the counts only: what any loop must keep to report α and tokens per round."""
    ids = proposal.ids
    if proposal.parents is not None:
        ids, _ = walked_branch(proposal.ids, proposal.probs, proposal.parents, verdict)
    k = ids.shape[0]
    kind = RESAMPLED if verdict.resampled else (BONUS if k else TARGET)
    return Round(index=index, gamma=gamma, drafted=ids.tolist(), q=[0.0] * k, p=[0.0] * k,
                 n_accepted=verdict.n_accepted, next_token=verdict.next_token, next_kind=kind, next_p=0.0,
                 emitted=emitted, alternatives=[], draft_seconds=draft_seconds, verify_seconds=verify_seconds,
                 source=proposal.source or kept_source(proposal.sources, verdict.kept))


def label(run: Run, tokenizer) -> None:
    """Fill in token strings after the timed loop (decoding text is not part of generation)."""
    pieces: dict[int, str] = {}

    def piece(token: int) -> str:
        if token not in pieces:
            pieces[token] = tokenizer.decode([token])
        return pieces[token]

    for r in run.rounds:
        r.drafted_text = [piece(t) for t in r.drafted]
        r.next_text = piece(r.next_token)
        for position in r.alternatives:
            for alt in position:
                alt.text = piece(alt.token)
        if r.tree is not None:
            r.tree.text = [piece(t) for t in r.tree.tokens]


def explain(rounds: list[Round], reasons: list) -> None:
    """Each round's why line, worded after the timed loop from the facts its drafter gave (`Proposal.reason`)."""
    for r, reason in zip(rounds, reasons):
        r.why = reason.text() if reason is not None else ""


def walked_branch(tokens: torch.Tensor, rows: torch.Tensor | None, parents: list[int],
                  verdict: TreeVerdict) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The chain the target walked through a tree: the kept nodes, then the first child it refused after them."""
    last = verdict.path[-1] if verdict.path else -1
    refused = [c for c in children(parents, last) if c in set(verdict.checked)]
    walk = verdict.path + refused[:1]
    index = torch.tensor(walk, dtype=torch.long, device=tokens.device)
    return tokens[index], None if rows is None else rows[index]


def node_record(tokens: torch.Tensor, rows: torch.Tensor | None, parents: list[int], verdict: TreeVerdict) -> dict:
    """Every node's token, parent, q, p (where the target computed its parent's row) and status."""
    token_list = tokens.tolist()
    row_of = {-1: 0, **{node: j + 1 for j, node in enumerate(verdict.path)}}
    on_path, refused = set(verdict.path), set(verdict.checked)
    q = [1.0] * len(token_list) if rows is None else rows[torch.arange(len(token_list)), tokens].tolist()
    p = [float(verdict.p[row_of[parent], t]) if parent in row_of else None for t, parent in zip(token_list, parents)]
    status = [ACCEPTED if i in on_path else REJECTED if i in refused else DRAFTED for i in range(len(token_list))]
    return {"tokens": token_list, "parents": list(parents), "q": q, "p": p, "status": status}
