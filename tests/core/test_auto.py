"""The auto drafter: its running estimates, the choice they make, what a round records, and that it is lossless."""

from __future__ import annotations

import pytest
import torch

from specviz.config import Decoding, Sampling, TreeShape
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.drafters.auto import Acceptance, AutoDrafter, Choice, Weighed
from specviz.drafters.costs import DECAY, Costs
from specviz.drafters.suffix import CORPUS, Cut, SuffixDrafter
from specviz.drafters.suffix_index import SuffixCorpus
from specviz.errors import ConfigError

from tiny import PROMPTS

pytestmark = pytest.mark.usefixtures("one_thread")


def test_acceptance_starts_at_a_half_and_follows_what_was_kept():
    a = Acceptance()
    assert a.alpha(0) == 0.5 and a.expected(2) == pytest.approx(0.5 + 0.25)
    a.observe(depth=3, accepted=1)  # kept the first draft, refused the second; the third was never judged
    assert a.tried == [1.0, 1.0, 0.0] and a.kept == [1.0, 0.0, 0.0]
    assert a.alpha(0) == pytest.approx(1.5 / 2) and a.alpha(1) == pytest.approx(0.5 / 2) and a.alpha(2) == 0.5
    for _ in range(200):  # the first position always kept: its α tends to 1 (the old counts fade)
        a.observe(depth=1, accepted=1)
    assert a.alpha(0) > 0.95
    assert a.tried[0] == pytest.approx(1 / (1 - DECAY), rel=1e-3)  # decayed counts: about the last 20 rounds


def test_costs_measure_v_and_c_against_the_plain_step():
    costs = Costs()
    assert costs.v(4) == 1.0 and costs.c("head") == 0.0  # nothing measured: verification costs a step, drafting nothing
    costs.observe_forward(2, 0.024)  # only a 2-draft forward seen: a flat line through it
    assert costs.v(0) == 1.0 and costs.v(5) == 1.0
    costs.observe_forward(0, 0.020)
    costs.observe_draft("head", 0.004, 2)
    assert costs.v(2) == pytest.approx(1.2) and costs.c("head") == pytest.approx(0.1)
    costs.observe_forward(4, 0.028)  # sizes never seen are read off the least-squares line: 0.020 + 0.002 n
    assert costs.v(3) == pytest.approx(0.026 / 0.020)
    costs.observe_forward(0, 1.0)  # a stalled step counts twice the usual at most (the second of its size: half)
    assert costs.forward[0] == pytest.approx(0.5 * 0.020 + 0.5 * 0.040)
    for _ in range(100):
        costs.observe_forward(0, 0.020)
    costs.observe_forward(0, 0.030)  # once a size is well known, a new forward moves it by a twentieth
    assert costs.forward[0] == pytest.approx(DECAY * 0.020 + (1 - DECAY) * 0.030, rel=1e-3)


def test_one_slow_first_forward_does_not_stop_drafting():
    """Seen live on Rounds: a 4-draft forward ran 148 ms against 46 for one draft (its shape's first run), the line
    through the two then put v(1) at 4.4 steps, and a 95% sure draft was not worth drafting."""
    costs = Costs(prior_slope=0.04)
    costs.observe_forward(1, 0.046)
    costs.observe_forward(4, 0.148)  # counted as at most twice what the line said for it
    assert costs.forward[4] == pytest.approx(0.092)
    assert costs.v(1) == pytest.approx(1.04)  # the smallest size never costs more than the prior says
    for _ in range(3):
        costs.observe_forward(4, 0.050)  # the usual cost outvotes the slow start within a few rounds
    assert costs.v(4) < 1.4


def test_a_steep_line_never_records_a_negative_time():
    """Seen in CI: a fast 4-draft forward then a slow 8-draft one put the line under zero at n = 0; a step then capped
    at twice the line's figure was recorded as negative seconds, and the head's tokens per step went negative."""
    costs = Costs()
    costs.observe_forward(4, 0.010)
    for _ in range(3):
        costs.observe_forward(8, 0.100)  # stalls, each counted as at most twice the usual: 0.02, 0.03, 0.04
    a, b = costs._line()
    assert a < 0  # precondition: the line crosses zero before n = 0
    costs.observe_forward(0, 0.030)
    assert costs.forward[0] == pytest.approx(0.020)  # capped at twice the cheapest forward seen
    assert costs.step() > 0 and costs.v(8) > 1


@pytest.fixture(scope="module")
def baseline(target):
    """The target alone, greedy (computed once per prompt and length)."""
    runs = {}

    def get(prompt: str, max_new: int):
        if (prompt, max_new) not in runs:
            runs[prompt, max_new] = generate(target, None, prompt, Decoding(max_new_tokens=max_new))
        return runs[prompt, max_new]

    return get


def auto(head=None, corpus=None):
    return AutoDrafter("auto", SuffixDrafter(corpus=corpus or SuffixCorpus()), head)


def test_the_choice_weighs_expected_tokens_against_cost():
    drafter = auto()
    drafter.acceptance = {"suffix": Acceptance(), "head": Acceptance()}
    drafter.costs.observe_forward(0, 0.020)
    drafter.costs.observe_forward(3, 0.030)  # v(3) = 1.5
    drafter.costs.observe_draft("head", 0.002, 1)  # c = 0.1
    # Head at α = 1/2: 3 drafts promise (1 + 0.875) / (1.5 + 0.3) = 1.04 tokens per step, more than the 1.0 of none.
    assert drafter._option("head", 3, 3).gain == pytest.approx(1.875 / 1.8)
    assert drafter._option("none", 0, 0).gain == pytest.approx(1.0)
    for _ in range(30):  # the head keeps missing its first guess: drafting with it stops paying
        drafter.acceptance["head"].observe(depth=3, accepted=0)
    best = max((drafter._option("head", n, n) for n in (1, 2, 3)), key=lambda o: o.gain)
    assert best.gain < drafter._option("none", 0, 0).gain


def test_the_choice_reads_as_the_rounds_timeline_shows_it():
    cut = Cut(True, (0.7, 0.6, 0.5, 0.3), 4, CORPUS, 2, 4, 1.13)
    options = (Choice("none", 0, 1.0), Choice("suffix", 2, 1.5, cut), Choice("suffix", 4, 1.9, cut),
               Choice("smol-head-8k", 1, 1.1), Choice("smol-head-8k", 2, 1.24))
    assert Weighed(options[2], options).text() == ("suffix ×4: 1.90 tokens per step (earlier answers: last 2 tokens "
                                                   "seen 4×; 4 drafted, 2.1 expected kept, v(4) = 1.13 steps); "
                                                   "against none 1.00, smol-head-8k ×2 1.24")
    assert Weighed(options[0], options[:1]).text() == "none: 1.00 tokens per step"


def test_rounds_record_which_drafter_drafted_and_why(target, make_drafter):
    from specviz.app.views.tokens import timeline_html

    corpus = SuffixCorpus()
    settings = Decoding(gamma=4, max_new_tokens=24)
    for prompt in PROMPTS:
        generate(target, SuffixDrafter(corpus=corpus), prompt, settings)  # earlier answers to draft from
    run = generate(target, auto(corpus=corpus), PROMPTS[0], settings)
    sources = {r.source for r in run.rounds}
    assert sources <= {"suffix", "none"} and "suffix" in sources
    assert all("tokens per step" in r.why for r in run.rounds)
    copied = next(r for r in run.rounds if r.source == "suffix")
    assert "earlier answers" in copied.why or "prompt and answer" in copied.why
    html = timeline_html(run)
    assert "suffix ·" in html and copied.why.split(";")[0] in html


def test_the_suffix_drafter_cuts_by_the_costs_auto_weighs(target):
    """Both learn v(n) from the loop's times of the same forwards, so the suffix drafter's cut and auto's choice
    price a draft alike; auto's drafting seconds come from the loop too."""
    corpus = SuffixCorpus()
    for prompt in PROMPTS:
        generate(target, SuffixDrafter(corpus=corpus), prompt, Decoding(gamma=4, max_new_tokens=24))
    drafter = auto(corpus=corpus)
    run = generate(target, drafter, PROMPTS[0], Decoding(gamma=4, max_new_tokens=24))
    assert len(drafter.costs.forward) >= 2 and drafter.costs.forward == drafter.suffix.costs.forward
    assert all(drafter.costs.v(n) == drafter.suffix.v(n) for n in range(6))
    assert "suffix" in {r.source for r in run.rounds} and drafter.costs.draft["suffix"] > 0


@pytest.mark.parametrize("tree", [TreeShape(), TreeShape(budget=6, branching=2)])
@pytest.mark.parametrize("gamma", [1, 4])
def test_greedy_output_is_the_targets_own_with_and_without_a_head(target, baseline, load, tiny_head_dir, tree, gamma):
    corpus = SuffixCorpus()
    head = build_drafter(f"head:{tiny_head_dir}", target, load=load)
    used = set()
    for prompt in PROMPTS * 2:
        alone = baseline(prompt, 24)
        for drafter in (auto(corpus=corpus), auto(head, corpus)):
            run = generate(target, drafter, prompt, Decoding(gamma=gamma, max_new_tokens=24, tree=tree))
            assert run.output_ids == alone.output_ids
            used |= {r.source for r in run.rounds}
    assert {"suffix", head.name} <= used  # both sources drafted somewhere


def test_sampled_output_follows_the_target_whatever_drafts(target, load, tiny_head_dir):
    """At temperature 1 the first token after a prompt is distributed as the target's p, with auto drafting."""
    from specviz.verify import distribution

    head = build_drafter(f"head:{tiny_head_dir}", target, load=load)
    prompt = PROMPTS[0]
    sampling = Sampling(temperature=1.0)
    ids = torch.tensor([generate(target, None, prompt, Decoding(max_new_tokens=1)).prompt_ids])
    with torch.inference_mode():
        p = distribution(target.model(ids).logits[0, -1, : target.vocab_size], sampling)
    counts = torch.zeros_like(p)
    n = 600
    for seed in range(n):
        run = generate(target, auto(head), prompt, Decoding(gamma=3, max_new_tokens=2, seed=seed, sampling=sampling))
        counts[run.output_ids[0]] += 1
    top = p.topk(5).indices
    assert torch.allclose(counts[top] / n, p[top], atol=4 * (0.25 / n) ** 0.5)  # within 4 standard errors


def test_auto_is_in_the_registry_and_says_what_is_wrong(target, load, tiny_head_dir):
    from specviz.drafters.blend import BlendDrafter

    drafter = build_drafter("auto", target, load=load)
    assert isinstance(drafter, BlendDrafter) and drafter.name == "auto"  # auto is the blended tree
    chooser = build_drafter(f"auto:{tiny_head_dir}", target, load=load)
    assert isinstance(chooser, AutoDrafter) and chooser.head is not None  # auto:HEAD weighs suffix, that head, none
    with pytest.raises(ConfigError, match="no draft head named 'nope'"):
        build_drafter("auto:nope", target, load=load)
