"""One scored tree per round from every source: copied continuations and the target's recycled guesses.

Copying (the suffix drafter's two matches: the prompt and answer so far, the target's earlier answers) wins
where the text repeats what was written before: a summary, a retrieval answer, code. Recycling (the table of
the target's own earlier guesses, `recycle`) wins where there is little to copy: chat, open questions. This
drafter lets every round take both: after each node, each source offers its candidates with a chance of being
kept (the suffix drafter's fitted `acceptance` for copies, from how long the match is and how often its
continuation followed; the stored probability for recycled ones), the surer offer of a token counts, each
source's chances are scaled by how often its nodes were kept for what they promised (`scored.Calibration`),
nodes are ranked by the product of the chances along their path, and the tree is cut where expected tokens per
target step peak under the v(n) timed during the run (`scored`). Every node carries its source, which the
Rounds page draws. q stays one-hot, so verification stays exact.
"""

from __future__ import annotations

from .recycle import MIN_SCORE, RecycleDrafter, recycled_offers
from .recycle_table import RecycleStore
from .scored import Offer, ScoredTree, grow, merge
from .suffix import SuffixDrafter, acceptance, continuations
from .suffix_index import Match

Matches = tuple[Match | None, Match | None]  # the prompt-and-answer match and the earlier-answers match


class BlendDrafter(RecycleDrafter):
    kind = "blend"

    def __init__(self, name: str = "blend", suffix: SuffixDrafter | None = None, store: RecycleStore | None = None,
                 vocab: int = 0, **costs):
        super().__init__(name, store, vocab, never=suffix.never if suffix else frozenset(), **costs)
        self.suffix = suffix or SuffixDrafter(never=self.never)

    def start(self, prompt_ids, settings, hidden=None):
        super().start(prompt_ids, settings)
        self.suffix.start(prompt_ids, settings)

    def copied_offers(self, matches: Matches, width: int) -> list[Offer]:
        """Each match's likeliest continuations, as offers whose state is the matches they extend."""
        return [Offer(token, acceptance(source, depth, count, seen, other), source, matches)
                for source, depth, token, count, seen, other in continuations(matches, width, self.never)]

    def offers(self, matches: Matches, token: int, width: int) -> list[Offer]:
        """Every source's candidates after `token` (its matches `matches`), one per token, the best `width`."""
        return merge(self.copied_offers(matches, width)
                     + recycled_offers(self.table, token, width, self.never, matches), width)

    def root_offers(self, matches: Matches, token: int, width: int, context) -> list[Offer]:
        """The offers after the last committed token (`context` [1, L], the committed text, for a source that
        reads it)."""
        return self.offers(matches, token, width)

    def expand(self, offer: Offer, width: int, score: float = 1.0) -> list[Offer]:
        return self.offers(follow(offer.state, offer.token), offer.token, width)

    def draft(self, context, k, sampling, generator):
        local_index = self.suffix.local
        local_index.extend(context[0, len(local_index.tokens):].tolist())
        budget, width = self.shape(k)
        tree = ScoredTree()
        if k > 0:
            text = local_index.tokens
            corpus = self.suffix.corpus
            found = corpus.longest_match(text, exclude=self.suffix.key) if corpus is not None else None
            root = self.root_offers((local_index.longest_match(text), found), text[-1], width, context)
            tree = grow(root, lambda offer, score: self.expand(offer, width, score), budget, k, MIN_SCORE,
                        self.calibration)
        return self.proposal(tree, context.device)

    def finish(self, output_ids: list[int]) -> None:
        super().finish(output_ids)
        self.suffix.finish(output_ids)


def follow(matches: Matches, token: int) -> Matches:
    """Both matches one token further (None where a match has no such continuation)."""
    local, found = matches
    return local.follow(token) if local else None, found.follow(token) if found else None
