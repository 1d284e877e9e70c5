"""The transformers peer on the tiny pair: its generate, drafting the same way, gives the target's own tokens.

The CLI's bench sets our loop beside transformers' `generate` (prompt lookup for the n-gram drafter,
assisted generation for a model draft); greedy, both must give what the target alone gives.
"""

from __future__ import annotations

import pytest

from specviz.config import Decoding
from specviz.decode import generate
from specviz.drafters import Drafter
from specviz.lab.peer import has_equivalent, hf_generate

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPT = "w1 w2 w3 w4 w5"
SETTINGS = Decoding(gamma=3, max_new_tokens=12, chat=False)


@pytest.mark.parametrize("spec", [None, "ngram", "tiny-draft"])
def test_peer_gives_the_target_alone_output(target, make_drafter, spec):
    alone = generate(target, None, PROMPT, SETTINGS).output_ids
    drafter = make_drafter(spec) if spec else None
    assert has_equivalent(drafter)
    tokens, seconds = hf_generate(target, drafter, PROMPT, SETTINGS)
    assert tokens == alone
    assert seconds > 0


def test_peer_restores_the_shared_drafts_settings(target, make_drafter):
    drafter = make_drafter("tiny-draft")
    config = drafter.model.generation_config
    hf_generate(target, drafter, PROMPT, SETTINGS)
    assert drafter.model.generation_config is config
    assert getattr(config, "assistant_confidence_threshold", None) != 0.0  # the call's own setting did not leak


def test_peer_refuses_a_drafter_it_has_no_equivalent_for(target):
    class Unmatched(Drafter):
        kind = "unmatched"

    drafter = Unmatched("unmatched")
    assert not has_equivalent(drafter)
    with pytest.raises(ValueError, match="no equivalent of the unmatched drafter"):
        hf_generate(target, drafter, PROMPT, SETTINGS)
