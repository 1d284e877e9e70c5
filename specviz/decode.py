"""The speculative decoding loop (Algorithm 1 of Leviathan et al. / Chen et al.) and its baseline.

Each round: the drafter proposes γ tokens with q; the target scores the last committed token and
all drafts in one forward (p at γ+1 positions); `verify` keeps a prefix and picks the next token;
both KV caches drop what was rejected; a `Round` records it all. A drafter given a tree budget
proposes a token tree instead (specviz.trees): the same forward reads every node under a tree
mask, `verify_tree` keeps one branch, and the caches keep that branch. The target-alone baseline is
the same loop with a drafter that proposes nothing, so both are timed by the same code.
"""

from __future__ import annotations

from collections.abc import Generator

import torch
from transformers import DynamicCache

from .clock import Clock
from .config import Decoding
from .drafters import Drafter, NoDrafter, Proposal, Timing, Verified
from .fast_path import GrowingCache
from .models import LoadedModel
from .prompts import encode
from .recorder import bare_round, explain, full_round, label
from .records import Round, Run
from .trees import branch_rows, keep_branch, target_attention, verify_tree
from .verify import LazyLogits, Verdict, verify

# Architectures whose logits are the output embedding applied to the final hidden state, and nothing
# else (no soft-capping or scaling): for these the head can be applied to the verified positions lazily.
PLAIN_HEAD_MODELS = {"llama", "mistral", "qwen2", "qwen3"}
# A forward over at most this many tokens applies the head to all of them at the first request: one pass over
# the head's weights costs about the same for 1 to 8 rows and little more for 32 (2.1, 3.1 and 8.0 ms on an
# Intel Xeon, where a step is 40 ms), while asking row by row reads the weights again each time (a tree's
# branch is checked one node at a time). Records still show only the rows the acceptance rule asked for.
HEAD_ROWS_AT_ONCE = 33


def encode_prompt(target: LoadedModel, prompt: str, settings: Decoding) -> list[int]:
    """The prompt's token ids, refused (PromptError) when it leaves no room for the run in the context."""
    context_limit = getattr(target.model.config, "max_position_embeddings", None)
    room = context_limit - settings.max_new_tokens - settings.gamma - 1 if context_limit else None
    return encode(target.tokenizer, prompt, settings.chat, max_tokens=room)


def target_forward(target: LoadedModel, forward_input: torch.Tensor, cache: DynamicCache,
                   head: bool = True, tree: tuple[torch.Tensor, torch.Tensor] | None = None,
                   layers: tuple[int, ...] = ()) -> tuple[torch.Tensor, LazyLogits | None]:
    """One target forward extending the cache: its hidden states [n, H] and (lazily) its logits.

    The hidden states are what feature-level drafters (heads) read: the final ones, or with `layers` those
    hidden states (indices into the target's list: 0 the embeddings, i layer i's output), concatenated
    [n, len(layers) * H]. The output head runs when a row is first asked for (over every row at once for
    small forwards, see HEAD_ROWS_AT_ONCE), and not at all with head=False (the prefill, whose logits nobody
    reads). `tree` is the 4-D mask and position ids of a token tree (specviz.trees.target_attention); None
    reads the input as a line.
    """
    model, vocab = target.model, target.vocab_size
    shape = {} if tree is None else {"attention_mask": tree[0], "position_ids": tree[1]}
    if model.config.model_type in PLAIN_HEAD_MODELS:
        states = model.base_model(forward_input, past_key_values=cache, use_cache=True,
                                  output_hidden_states=bool(layers), **shape)
        hidden = states.last_hidden_state[0]
        read = stack_layers(states.hidden_states, layers)[0] if layers else hidden
        out, n = model.get_output_embeddings(), forward_input.shape[1]
        if not head:
            return read, None
        if n <= HEAD_ROWS_AT_ONCE:
            return read, LazyLogits(n, whole=lambda: out(hidden)[:, :vocab])
        return read, LazyLogits(n, lambda a, b: out(hidden[a:b])[:, :vocab])
    outputs = model(forward_input, past_key_values=cache, use_cache=True, output_hidden_states=True, **shape,
                    **({} if head else {"logits_to_keep": 1}))
    read = stack_layers(outputs.hidden_states, layers)[0] if layers else outputs.hidden_states[-1][0]
    return read, LazyLogits.ready(outputs.logits[0, :, :vocab]) if head else None


def stack_layers(states: tuple[torch.Tensor, ...], layers: tuple[int, ...]) -> torch.Tensor:
    """The hidden states `layers` of a forward's list (each [B, n, H]) side by side: [B, n, len(layers) * H]. The
    loop hands these to a drafter, and training captures them (`training.features.layer_states`) with this same
    function, so both read the layers in one order."""
    return torch.cat([states[i] for i in layers], dim=-1)


def generate(
    target: LoadedModel,
    drafter: Drafter | None,
    prompt: str,
    settings: Decoding,
    detail: bool = True,
) -> Run:
    """Generate from a prompt with speculative decoding (or with the target alone when drafter is None).

    detail=False keeps only each round's token ids and counts (no p, q or alternatives): the bare
    loop that `benchmarks/overhead.py` times against the full records.
    """
    return to_the_end(rounds(target, drafter, prompt, settings, Clock(target.device), detail))


def to_the_end(steps: Generator[int, None, Run]) -> Run:
    """Run the loop's rounds one after the other; the Run it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as end:
            return end.value


@torch.inference_mode()
def rounds(
    target: LoadedModel,
    drafter: Drafter | None,
    prompt: str,
    settings: Decoding,
    clock: Clock,
    detail: bool = True,
) -> Generator[int, None, Run]:
    """The loop of `generate`, a round at a time: it yields the count of new tokens after the prefill and after each
    round, and returns the Run. Between two rounds another run's round may go (`lab.measure.side_by_side`), with
    this run's clock paused, so each run counts only its own work."""
    drafter = drafter or NoDrafter("none")
    prompt_ids = encode_prompt(target, prompt, settings)
    device = target.device
    ids = torch.tensor([prompt_ids], device=device)
    eos = target.eos_ids
    generator = torch.Generator(device=device).manual_seed(settings.seed)

    start = clock()
    # Prefill. Invariant: the target cache holds every committed token but the last, which each
    # round feeds again in front of the drafts (its logits predict the first draft).
    cache = GrowingCache(config=target.model.config)
    layers = drafter.reads_layers  # the target's hidden states the drafter reads (its final one when empty)
    hidden = ids.new_empty(0, target.model.config.hidden_size * max(1, len(layers)), dtype=target.dtype)
    if len(prompt_ids) > 1:
        hidden, _ = target_forward(target, ids[:, :-1], cache, head=False, layers=layers)
    drafter.start(ids, settings, hidden)
    prefill_seconds = clock() - start
    yield 0

    done: list[Round] = []
    reasons = []  # per round, the drafter's reason in numbers (Proposal.reason), worded after the clock stops
    new: list[int] = []
    arrivals: list[float] = []  # per new token: seconds since start when its round's verification ended
    stopped_at_eos = False
    while len(new) < settings.max_new_tokens and not stopped_at_eos:
        # 1. Draft up to γ tokens, none past max-new-tokens (verification always adds one more).
        t0 = clock()
        k = min(drafter.gamma, settings.max_new_tokens - len(new) - 1)
        proposal = drafter.propose(ids, k, settings.sampling, generator)
        t1 = clock()
        # 2. Verify: one target forward over [last committed token, d_1 .. d_k] gives p at k+1 positions
        #    (a tree's nodes each read their ancestors only, at positions by depth).
        forward_input = torch.cat([ids[:, -1:], proposal.ids.view(1, -1)], dim=1)
        tree = None if proposal.parents is None else target_attention(
            proposal.parents, ids.shape[1] - 1, target.dtype, device)
        hidden, logits = target_forward(target, forward_input, cache, tree=tree, layers=layers)
        verdict = check(logits, proposal, settings, generator)
        # 3. Roll back. The cache held every committed token but the last and was fed k+1 more: it now
        #    holds all committed tokens and the k drafts. Keep the drafts that were kept (a chain's
        #    accepted prefix, a tree's accepted branch) and drop the other k - n_accepted. The drafter
        #    gets the forward's hidden states of the last committed token and the kept drafts, the round's
        #    times (drafters that weigh cost learn them here, and keep no clock of their own), and what the
        #    forward read with the logits its head computed (a drafter that recycles them reads their top-k).
        kept = verdict.kept
        keep_branch(cache, ids.shape[1], proposal.ids.shape[0], kept)
        t2 = clock()
        drafter.feedback(kept, branch_rows(hidden, kept), Timing(t1 - t0, t2 - t1, proposal.ids.shape[0]),
                         Verified(forward_input[0], proposal.parents, logits))
        t3 = clock()
        # 4. Commit the accepted drafts and the next token, stopping at EOS and max-new-tokens.
        emitted = proposal.ids[kept].tolist() + [verdict.next_token]
        emitted = emitted[: settings.max_new_tokens - len(new)]
        for i, token in enumerate(emitted):
            if token in eos:
                emitted, stopped_at_eos = emitted[: i + 1], True
                break
        new += emitted
        arrivals += [t2 - start] * len(emitted)  # a round's tokens arrive together
        ids = torch.cat([ids, torch.tensor([emitted], device=device)], dim=1)
        record = full_round if detail else bare_round
        done.append(record(len(done), k, proposal, verdict, len(emitted), t1 - t0 + t3 - t2, t2 - t1))
        reasons.append(proposal.reason)
        yield len(new)
    seconds = clock() - start
    drafter.finish(new)  # after the clock: what a drafter learns from this answer is for later runs

    run = Run(
        target=target.name,
        draft=None if isinstance(drafter, NoDrafter) else drafter.name,
        prompt=prompt,
        prompt_ids=prompt_ids,
        settings=settings.to_dict(),
        device=str(device),
        dtype=str(target.dtype).replace("torch.", ""),
        rounds=done,
        output_ids=new,
        text=target.tokenizer.decode(new, skip_special_tokens=True),
        prefill_seconds=prefill_seconds,
        seconds=seconds,
        stopped_at_eos=stopped_at_eos,
        arrival_seconds=arrivals,
    )
    label(run, target.tokenizer)
    explain(run.rounds, reasons)
    return run


def check(logits: LazyLogits, proposal: Proposal, settings: Decoding, generator) -> Verdict:
    """The acceptance rule for what was proposed: `verify` for a chain, `verify_tree` for a tree."""
    if proposal.parents is None:
        return verify(logits, proposal.ids, proposal.probs, settings.sampling, settings.verification, generator)
    return verify_tree(logits, proposal.ids, proposal.parents, proposal.probs, settings.sampling,
                       settings.verification, generator)
