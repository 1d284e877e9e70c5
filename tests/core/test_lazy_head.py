"""The target's head runs lazily in verification: same logits, same runs, fewer rows computed."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from specviz.config import Decoding, Sampling, Verification
from specviz.decode import generate, target_forward
from specviz.verify import LazyLogits, verify

from tiny import VOCAB

pytestmark = pytest.mark.usefixtures("one_thread")


def forward_input(target, prefix: list[int], drafts: list[int]):
    cache = DynamicCache(config=target.model.config)
    with torch.no_grad():
        target.model(torch.tensor([prefix[:-1]]), past_key_values=cache, use_cache=True)
    return torch.tensor([prefix[-1:] + drafts]), cache


def test_lazy_rows_equal_the_full_forward(target):
    ids, cache = forward_input(target, [3, 4, 5, 6], [7, 8, 9])
    with torch.no_grad():
        full = target.model(torch.tensor([[3, 4, 5, 6, 7, 8, 9]])).logits[0, 3:, :VOCAB]
        lazy = target_forward(target, ids, cache)[1]
        first = lazy.upto(1)
        assert lazy.computed.shape[0] == 1, "only the first row is computed until more are asked for"
        rows = lazy.upto(4)
    assert torch.allclose(first, full[:1], atol=1e-4)
    assert torch.allclose(rows, full, atol=1e-4)


def test_other_architectures_get_the_whole_forward(target, monkeypatch):
    monkeypatch.setattr(target.model.config, "model_type", "gemma2")  # soft-capped logits: no lazy head
    ids, cache = forward_input(target, [3, 4, 5, 6], [7, 8])
    with torch.no_grad():
        logits = target_forward(target, ids, cache)[1]
    assert logits.computed.shape[0] == 3


def test_a_first_position_rejection_computes_one_row():
    calls = []

    def rows(a, b):
        calls.append((a, b))
        return torch.tensor([[0.0, 5.0, 0.0]] * (b - a))  # the target wants token 1 everywhere

    verdict = verify(LazyLogits(4, rows), torch.tensor([2, 1, 1]), None, Sampling(), Verification())
    assert (verdict.n_accepted, verdict.next_token, calls) == (0, 1, [(0, 1)])
    calls.clear()
    verdict = verify(LazyLogits(4, rows), torch.tensor([1, 1, 2]), None, Sampling(), Verification())
    assert (verdict.n_accepted, verdict.next_token, calls) == (2, 1, [(0, 1), (1, 4)])


def test_sampled_runs_are_reproducible_with_the_lazy_head(target, make_drafter):
    settings = Decoding(gamma=3, max_new_tokens=16, sampling=Sampling(temperature=0.9), seed=5)
    a = generate(target, make_drafter("tiny-draft"), "w1 w2 w3", settings)
    b = generate(target, make_drafter("tiny-draft"), "w1 w2 w3", settings)
    assert a.output_ids == b.output_ids
    assert [(r.drafted, r.n_accepted, r.next_token) for r in a.rounds] == [(r.drafted, r.n_accepted, r.next_token)
                                                                           for r in b.rounds]


def test_a_small_forward_reads_the_heads_weights_once(target, monkeypatch):
    """Asking for rows one at a time (a tree's branch) or first one then the rest (a chain) costs one head pass."""
    import specviz.decode as decode

    head = target.model.get_output_embeddings()
    passes = []
    handle = head.register_forward_hook(lambda module, args, out: passes.append(args[0].shape[0]))
    try:
        ids, cache = forward_input(target, [3, 4, 5, 6], [7, 8, 9])
        passes.clear()  # the prefill's own head
        with torch.no_grad():
            logits = target_forward(target, ids, cache)[1]
            logits.upto(1)
            logits.rows([2])
            logits.upto(4)
        assert passes == [4] and logits.computed.shape[0] == 4
        monkeypatch.setattr(decode, "HEAD_ROWS_AT_ONCE", 2)  # a large tree: rows as they are asked for
        ids, cache = forward_input(target, [3, 4, 5, 6], [7, 8, 9])
        passes.clear()
        with torch.no_grad():
            logits = target_forward(target, ids, cache)[1]
            logits.upto(1)
            logits.upto(4)
        assert passes == [1, 3]
    finally:
        handle.remove()
