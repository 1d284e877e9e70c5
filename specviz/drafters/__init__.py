"""Drafters: everything that can propose tokens for the target to verify, behind one interface.

A drafter is made fresh for each run and owns its per-run state (a KV cache, an n-gram index,
the adaptive γ), so the models it reads from can be shared by every session and never change.

    drafter.start(prompt_ids, settings, hidden)    once, before the first round
    drafter.propose(context, k, sampling, generator)  up to k token ids and q at each (None = one-hot)
    drafter.feedback(kept, hidden, timing, verified)  roll own state back to what was kept, adapt γ
    drafter.finish(output_ids)                      once, after the last round (a suffix drafter learns the answer)

A new kind subclasses `Drafter` (base.py), implements `draft` (what `propose` returns), overrides
`start` and `feedback` where it keeps state, and registers an entry in `registry.DRAFTERS` (`registry.Kind`).

With a tree budget in the settings (specviz.trees) a drafter that can branches: its proposal then
carries `parents`, and `kept` names the accepted branch's nodes.

`hidden` is what the target's forward computed: its final hidden state at every position it just
read (the prompt but its last token at the start; after a verification, the last committed token
and the kept drafts), or, for a drafter whose `reads_layers` names several, those layers' states side by side.
Most drafters ignore it; a feature-level head (specviz.drafters.head_net) drafts from it.

`timing` (`base.Timing`) is what the loop measured that round: the seconds of the drafter's `propose`, of the
verification forward, and how many drafts that forward read. Drafters that weigh cost (suffix, auto) learn from
it; none keeps a clock (None in a replay, where nothing is timed).

`verified` (`base.Verified`) is what the verification forward read (the last committed token and every drafted
node, refused ones too) and, through `top(k)`, the target's top-k at each row its head computed anyway: a drafter
that recycles the target's own guesses (recycle, blend) learns from them without one more row of the head.
"""

from .auto import AutoDrafter
from .base import Drafter, NoDrafter, Proposal, Reason, Timing, Verified, drop_last
from .head import HeadDrafter, HybridDrafter
from .model import ModelDrafter, layer_skip_view
from .ngram import NgramDrafter
from .registry import (
                       DRAFTERS,
                       Kind,
                       Loader,
                       Spec,
                       build_drafter,
                       head_folder,
                       kind_of,
                       learns_across_runs,
                       offered,
                       parse_spec,
                       register,
)
from .suffix import SuffixDrafter

__all__ = ["AutoDrafter", "DRAFTERS", "Drafter", "HeadDrafter", "HybridDrafter", "Kind", "Loader", "ModelDrafter",
           "NgramDrafter", "NoDrafter", "Proposal", "Reason", "Spec", "SuffixDrafter", "Timing", "Verified",
           "build_drafter", "drop_last", "head_folder", "kind_of", "layer_skip_view", "learns_across_runs", "offered",
           "parse_spec", "register"]
