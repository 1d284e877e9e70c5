"""The acceptance rule on hand-built logits: certain outcomes, properties, and the lossless guarantee.

p = the target's distribution, q = the draft's, gamma = the number of drafted tokens.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from specviz.config import Sampling, Verification
from specviz.verify import distribution, residual, shape_logits, verify

from tiny import goodness_of_fit

pytestmark = pytest.mark.usefixtures("one_thread")

GREEDY = Sampling()
SAMPLE = Sampling(temperature=1.0)  # softmax(logits) untouched: logits = log p gives exactly p
EXACT = Verification()
NEG_INF = float("-inf")


def logits_from(*rows: list[float]) -> torch.Tensor:
    """Target logits whose softmax is exactly the given probability rows (log p, -inf for 0)."""
    return torch.tensor(rows, dtype=torch.float64).log().float()


def one_hot_rows(ids: list[int], vocab: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(ids), vocab).float()


# --- greedy: certain outcomes ----------------------------------------------------------------
# Target argmax per position: 2, 0, 3, 1 (the last row is the bonus position).
GREEDY_LOGITS = torch.tensor([
    [0.1, 0.5, 3.0, 0.2, 2.5],
    [4.0, 1.0, 0.0, 0.3, 0.2],
    [0.0, 0.1, 0.2, 5.0, 0.4],
    [0.3, 2.0, 0.1, 0.0, 1.9],
])


def test_greedy_accepts_every_argmax_draft_and_adds_the_bonus_token():
    v = verify(GREEDY_LOGITS, torch.tensor([2, 0, 3]), None, GREEDY, EXACT)
    assert (v.n_accepted, v.next_token, v.resampled) == (3, 1, False)


@pytest.mark.parametrize(
    "drafted, accepted, next_token",
    [
        ([1, 0, 3], 0, 2),  # first draft wrong: the target's own first token replaces it
        ([2, 4, 3], 1, 0),  # second draft wrong: the later correct draft is not kept either
        ([2, 0, 4], 2, 3),
    ],
)
def test_greedy_keeps_exactly_the_argmax_matching_prefix(drafted, accepted, next_token):
    v = verify(GREEDY_LOGITS, torch.tensor(drafted), None, GREEDY, EXACT)
    assert (v.n_accepted, v.next_token, v.resampled) == (accepted, next_token, True)


def test_greedy_ignores_the_draft_probabilities():
    """Greedy exact verification depends on the target alone: q cannot change the outcome."""
    drafted = torch.tensor([2, 4, 3])
    q = torch.full((3, 5), 0.2)
    with_q = verify(GREEDY_LOGITS, drafted, q, GREEDY, EXACT)
    without = verify(GREEDY_LOGITS, drafted, None, GREEDY, EXACT)
    assert (with_q.n_accepted, with_q.next_token) == (without.n_accepted, without.next_token) == (1, 0)


def test_verdict_p_is_the_targets_softmax_at_every_verified_position():
    v = verify(GREEDY_LOGITS, torch.tensor([2, 0, 3]), None, GREEDY, EXACT)
    assert v.p.shape == (4, 5)
    torch.testing.assert_close(v.p, GREEDY_LOGITS.softmax(-1))


def test_greedy_with_nothing_drafted_is_one_plain_target_step():
    v = verify(GREEDY_LOGITS[:1], torch.tensor([], dtype=torch.long), None, GREEDY, EXACT)
    assert (v.n_accepted, v.next_token, v.resampled) == (0, 2, False)


# --- relaxed greedy ----------------------------------------------------------------------------
# Position 0: token 2 is best (3.0), token 4 second (2.5, 0.5 nats behind), token 1 third (0.5).
def test_relaxed_greedy_accepts_a_close_second_that_exact_rejects():
    drafted = torch.tensor([4, 0, 3])
    exact = verify(GREEDY_LOGITS, drafted, None, GREEDY, EXACT)
    relaxed = verify(GREEDY_LOGITS, drafted, None, GREEDY, Verification("relaxed", tolerance=1.0, top_k=2))
    assert exact.n_accepted == 0 and exact.next_token == 2
    assert (relaxed.n_accepted, relaxed.next_token, relaxed.resampled) == (3, 1, False)


@pytest.mark.parametrize(
    "rule, why",
    [
        (Verification("relaxed", tolerance=0.4, top_k=2), "0.5 nats behind the best is outside τ = 0.4"),
        (Verification("relaxed", tolerance=1.0, top_k=1), "second place is outside the top-1"),
    ],
)
def test_relaxed_greedy_still_rejects_outside_its_tolerance_or_top_k(rule, why):
    v = verify(GREEDY_LOGITS, torch.tensor([4, 0, 3]), None, GREEDY, rule)
    assert v.n_accepted == 0, why
    assert v.next_token == 2


def test_relaxed_greedy_rejects_a_third_place_token_with_top_2():
    v = verify(GREEDY_LOGITS, torch.tensor([1]), None, GREEDY, Verification("relaxed", tolerance=50.0, top_k=2))
    assert (v.n_accepted, v.next_token) == (0, 2)


# --- sampling: certain outcomes ----------------------------------------------------------------
P_ROWS = [
    [0.5, 0.2, 0.2, 0.1, 0.0],
    [0.1, 0.0, 0.3, 0.4, 0.2],
    [0.25, 0.25, 0.25, 0.25, 0.0],
    [0.0, 0.0, 0.6, 0.0, 0.4],
]


@pytest.mark.parametrize("draft_as_probs", [True, False], ids=["q-given", "one-hot-q"])
def test_sampling_accepts_everything_when_q_equals_p(draft_as_probs):
    target = logits_from(*P_ROWS)
    drafted = torch.tensor([0, 3, 1])
    if draft_as_probs:
        q = target.softmax(-1)[:3]
    else:  # a certain proposal is accepted for sure only where p is certain too
        target = logits_from([0, 0, 0, 0, 1.0], [1.0, 0, 0, 0, 0], [0, 0, 1.0, 0, 0], P_ROWS[3])
        drafted, q = torch.tensor([4, 0, 2]), None
    gen = torch.Generator().manual_seed(0)
    bonus = set()
    for _ in range(300):
        v = verify(target, drafted, q, SAMPLE, EXACT, gen)
        assert (v.n_accepted, v.resampled) == (3, False)
        bonus.add(v.next_token)
    assert bonus == {2, 4}, "the bonus token is drawn from p at the last position (support {2, 4})"


def test_sampling_rejects_a_draft_the_target_gives_probability_zero():
    target = logits_from(*P_ROWS)
    q = torch.tensor([P_ROWS[0], [0.1, 0.6, 0.1, 0.1, 0.1], P_ROWS[2]])
    drafted = torch.tensor([0, 1, 2])  # p(1) = 0 at position 1; position 0 has q == p
    residual_support = {2, 3, 4}  # max(0, p - q) at position 1 is [0, 0, .2, .3, .1]
    gen = torch.Generator().manual_seed(1)
    seen = set()
    for _ in range(500):
        v = verify(target, drafted, q, SAMPLE, EXACT, gen)
        assert (v.n_accepted, v.resampled) == (1, True)
        seen.add(v.next_token)
    assert seen == residual_support


def test_one_hot_draft_rejected_token_is_never_resampled():
    """With a certain proposal (n-gram), the residual is p without the drafted token."""
    target = logits_from(P_ROWS[0], P_ROWS[1])
    gen = torch.Generator().manual_seed(2)
    outcomes = {"accepted": 0, "rejected": 0}
    for _ in range(2000):
        v = verify(target, torch.tensor([0]), None, SAMPLE, EXACT, gen)
        if v.n_accepted:
            outcomes["accepted"] += 1
        else:
            outcomes["rejected"] += 1
            assert v.next_token in {1, 2, 3}
    # accepted with probability p(0) = 0.5: within 5 standard deviations (σ ≈ 0.011)
    assert abs(outcomes["accepted"] / 2000 - 0.5) < 5 * math.sqrt(0.25 / 2000)


def test_relaxed_sampling_with_lenience_accepts_what_exact_rejects():
    """p(d) = 0.3, q(d) = 0.6: exact accepts half the time, lenience 0.5 always (0.3 / (0.5·0.6) = 1)."""
    target = logits_from([0.3, 0.3, 0.4], [0.2, 0.3, 0.5])
    q = torch.tensor([[0.6, 0.2, 0.2]])
    lenient = Verification("relaxed", lenience=0.5)
    rejected_by_exact = 0
    for seed in range(200):
        exact = verify(target, torch.tensor([0]), q, SAMPLE, EXACT, torch.Generator().manual_seed(seed))
        relaxed = verify(target, torch.tensor([0]), q, SAMPLE, lenient, torch.Generator().manual_seed(seed))
        assert relaxed.n_accepted == 1, f"seed {seed}: lenience 0.5 must accept p/(l·q) = 1"
        if exact.n_accepted == 0:
            rejected_by_exact += 1
            assert exact.next_token in {1, 2}
    assert 60 < rejected_by_exact < 140, "exact mode rejects this draft about half the time"


def test_relaxed_sampling_with_lenience_1_is_exact():
    target = logits_from(*P_ROWS)
    q = torch.tensor([[0.1, 0.4, 0.1, 0.1, 0.3], [0.2, 0.2, 0.2, 0.2, 0.2], P_ROWS[2]])
    drafted = torch.tensor([1, 3, 0])
    for seed in range(100):
        a = verify(target, drafted, q, SAMPLE, EXACT, torch.Generator().manual_seed(seed))
        lenient = Verification("relaxed", lenience=1.0)
        b = verify(target, drafted, q, SAMPLE, lenient, torch.Generator().manual_seed(seed))
        assert (a.n_accepted, a.next_token) == (b.n_accepted, b.next_token)


# --- shaping ---------------------------------------------------------------------------------
def test_top_k_and_top_p_shape_p_and_q_alike():
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0]])
    top2 = distribution(logits, Sampling(temperature=1.0, top_k=2))
    assert (top2[0, 2:] == 0).all() and torch.isclose(top2.sum(), torch.tensor(1.0))
    probs = logits.softmax(-1)[0]  # 0.53, 0.20, 0.12, 0.07, 0.03 (rounded)
    nucleus = distribution(logits, Sampling(temperature=1.0, top_p=0.7))
    kept = (nucleus[0] > 0).nonzero().flatten().tolist()
    assert kept == [0, 1], f"top-p 0.7 keeps the smallest prefix with mass >= 0.7 ({probs.tolist()})"
    cold = distribution(logits, Sampling(temperature=0.1))
    assert cold[0, 0] > 0.99
    assert torch.equal(shape_logits(logits, GREEDY), logits)


# --- the lossless guarantee, statistically ---------------------------------------------------
V = 5
START = V  # row of the tables used for the first position
# A Markov "target" and "draft": p(. | previous token) and q(. | previous token), rows 0..4 and START.
# Zeros on both sides, so drafts the target never makes and tokens the draft never proposes occur.
BASE_P = torch.tensor([0.4, 0.3, 0.2, 0.1, 0.0], dtype=torch.float64)
BASE_Q = torch.tensor([0.1, 0.2, 0.3, 0.1, 0.3], dtype=torch.float64)
P_TABLE = torch.stack([BASE_P.roll(x + 1) for x in range(V)] + [BASE_P])
Q_TABLE = torch.stack([BASE_Q.roll(2 * x) for x in range(V)] + [BASE_Q])
TRIALS = 4000
CHI2_LEVEL = 1e-3  # a correct rule fails one of these checks with probability about 0.6%; seeds are fixed


def speculative_rounds(gamma: int, trials: int, seed: int) -> list[list[int]]:
    """Tokens emitted by `trials` independent rounds of drafting from q and verifying against p."""
    draft_gen = torch.Generator().manual_seed(seed)
    prev = torch.full((trials,), START)
    drafts = []
    for _ in range(gamma):
        prev = torch.multinomial(Q_TABLE[prev], 1, generator=draft_gen).squeeze(1)
        drafts.append(prev)
    drafts = torch.stack(drafts, 1)
    contexts = torch.cat([torch.full((trials, 1), START), drafts], 1)
    target_logits = P_TABLE[contexts].log().float()  # [trials, gamma+1, V]
    draft_probs = Q_TABLE[contexts[:, :gamma]].float()
    verify_gen = torch.Generator().manual_seed(seed + 1)
    emitted = []
    for t in range(trials):
        v = verify(target_logits[t], drafts[t], draft_probs[t], SAMPLE, EXACT, verify_gen)
        emitted.append(drafts[t, : v.n_accepted].tolist() + [v.next_token])
    return emitted


@pytest.mark.parametrize("gamma", [1, 2, 3])
def test_exact_sampling_reproduces_the_target_distribution(gamma):
    rounds = speculative_rounds(gamma, TRIALS, seed=100 + gamma)
    p_first = BASE_P.tolist()

    # First emitted token: distributed as p(. | START), whatever the draft proposed.
    first = [sum(r[0] == x for r in rounds) for x in range(V)]
    fit = goodness_of_fit([(first, p_first)])
    assert fit.p_value > CHI2_LEVEL, f"first token counts {first} vs p {p_first}: chi2 {fit.statistic:.1f}, df {fit.df}"

    # Second token, when the round emitted one: distributed as p(. | first token), for each first token.
    groups = []
    for x in range(V):
        counts = [sum(len(r) > 1 and r[0] == x and r[1] == y for r in rounds) for y in range(V)]
        groups.append((counts, P_TABLE[x].tolist()))
    fit2 = goodness_of_fit(groups)
    assert fit2.df >= 8, "too few rounds emitted a second token for the check to mean anything"
    assert fit2.p_value > CHI2_LEVEL, f"second token | first: chi2 {fit2.statistic:.1f}, df {fit2.df}"

    # The first draft is accepted with probability sum_x min(p(x), q(x)) = 0.6 (the α of the theory).
    kept = sum(len(r) > 1 for r in rounds) / TRIALS
    alpha = float(torch.minimum(BASE_P, BASE_Q).sum())
    assert abs(kept - alpha) < 4.5 * math.sqrt(alpha * (1 - alpha) / TRIALS)

    # The test has power: resampling from p instead of norm(max(0, p - q)) would give
    # min(p, q) + (1 - α) p for the first token, which these counts would reject almost surely.
    wrong = torch.minimum(BASE_P, BASE_Q) + (1 - alpha) * BASE_P
    support = BASE_P > 0
    shift = TRIALS * float(((wrong - BASE_P)[support] ** 2 / BASE_P[support]).sum())
    assert shift > 100, "the statistical check is too weak to tell the right rule from a common bug"


# --- properties over random logits -----------------------------------------------------------
FINITE = st.floats(-8, 8, allow_nan=False, allow_infinity=False, width=32)


@st.composite
def greedy_cases(draw):
    gamma = draw(st.integers(1, 6))
    vocab = draw(st.integers(2, 8))
    logits = torch.tensor(
        draw(st.lists(st.lists(FINITE, min_size=vocab, max_size=vocab), min_size=gamma + 1, max_size=gamma + 1))
    )
    best = logits.argmax(-1)
    follow = draw(st.lists(st.booleans(), min_size=gamma, max_size=gamma))
    other = draw(st.lists(st.integers(0, vocab - 1), min_size=gamma, max_size=gamma))
    drafted = torch.tensor([int(best[i]) if f else o for i, (f, o) in enumerate(zip(follow, other))])
    return logits, drafted


@settings(max_examples=50, deadline=None)
@given(greedy_cases())
def test_exact_greedy_accepts_only_what_greedy_would_emit(case):
    logits, drafted = case
    gamma = drafted.shape[0]
    v = verify(logits, drafted, None, GREEDY, EXACT)
    best = logits.argmax(-1)
    assert 0 <= v.n_accepted <= gamma
    assert torch.equal(drafted[: v.n_accepted], best[: v.n_accepted])
    if v.n_accepted < gamma:
        assert drafted[v.n_accepted] != best[v.n_accepted]
    assert v.next_token == int(best[v.n_accepted])
    assert v.resampled == (v.n_accepted < gamma)


@settings(max_examples=50, deadline=None)
@given(greedy_cases(), st.floats(0, 5), st.integers(1, 4))
def test_relaxed_greedy_accepts_at_least_what_exact_accepts(case, tolerance, top_k):
    logits, drafted = case
    exact = verify(logits, drafted, None, GREEDY, EXACT)
    relaxed = verify(logits, drafted, None, GREEDY, Verification("relaxed", tolerance=tolerance, top_k=top_k))
    assert relaxed.n_accepted >= exact.n_accepted
    logp = logits.log_softmax(-1)
    for i in range(relaxed.n_accepted):
        d = int(drafted[i])
        assert int((logp[i] > logp[i, d]).sum()) < top_k
        assert logp[i, d] >= logp[i].max() - tolerance - 1e-6
    assert relaxed.next_token == int(logits[relaxed.n_accepted].argmax())


@st.composite
def sampling_cases(draw):
    """p and q at gamma positions (p with some zeros), drafts from q's support, and a seed."""
    gamma = draw(st.integers(1, 5))
    vocab = draw(st.integers(2, 6))

    def rows(n):
        return draw(st.lists(st.lists(FINITE, min_size=vocab, max_size=vocab), min_size=n, max_size=n))

    target = torch.tensor(rows(gamma + 1))
    zeros = torch.tensor(
        draw(st.lists(st.lists(st.booleans(), min_size=vocab, max_size=vocab), min_size=gamma + 1, max_size=gamma + 1))
    )
    zeros[:, 0] = False  # keep every row of p a distribution
    target = target.masked_fill(zeros, NEG_INF)
    q = torch.tensor(rows(gamma)).softmax(-1)
    drafted = torch.tensor(draw(st.lists(st.integers(0, vocab - 1), min_size=gamma, max_size=gamma)))
    seed = draw(st.integers(0, 2**32))
    return target, q, drafted, seed


@settings(max_examples=50, deadline=None)
@given(sampling_cases())
def test_sampling_accepts_each_draft_when_the_uniform_draw_is_below_p_over_q(case):
    """Controlled uniform draws: the rule is 'accept d_i iff r_i < min(1, p(d_i)/q(d_i))', prefix-wise.

    verify draws its γ uniforms first from the generator it is given, so a twin generator with the
    same seed tells what they were.
    """
    target, q, drafted, seed = case
    gamma = drafted.shape[0]
    r = torch.rand(gamma, generator=torch.Generator().manual_seed(seed))
    p = target.softmax(-1)
    ratio = [min(1.0, float(p[i, drafted[i]] / q[i, drafted[i]])) for i in range(gamma)]
    assume(all(abs(float(r[i]) - ratio[i]) > 1e-5 for i in range(gamma)))  # no float ties at the boundary
    expected = next((i for i in range(gamma) if not float(r[i]) < ratio[i]), gamma)

    v = verify(target, drafted, q, SAMPLE, EXACT, torch.Generator().manual_seed(seed))
    assert v.n_accepted == expected
    assert v.resampled == (expected < gamma)
    if expected < gamma:  # the replacement comes from the residual's support, never from outside it
        support = residual(p[expected], q[expected]) > 0
        assert support[v.next_token], f"resampled {v.next_token} outside max(0, p - q) > 0"
    else:
        assert p[gamma, v.next_token] > 0


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.8])
def test_acceptance_frequency_is_p_over_q(ratio):
    """The same rule seen statistically: a draft with p(d)/q(d) = ratio is kept that often."""
    q_d = 0.8
    target = logits_from([ratio * q_d, 1 - ratio * q_d], [0.5, 0.5])  # the second row is the bonus position
    q = torch.tensor([[q_d, 1 - q_d]])
    gen = torch.Generator().manual_seed(7)
    n = 3000
    kept = sum(verify(target, torch.tensor([0]), q, SAMPLE, EXACT, gen).n_accepted for _ in range(n))
    assert abs(kept / n - ratio) < 4.5 * math.sqrt(ratio * (1 - ratio) / n)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(2, 10).flatmap(
        lambda v: st.tuples(
            st.lists(st.floats(0, 1), min_size=v, max_size=v),
            st.lists(st.floats(0, 1), min_size=v, max_size=v),
        )
    ),
    st.floats(0.01, 1.0),
)
def test_residual_is_a_distribution_over_where_p_exceeds_q(pq, lenience):
    p_raw, q_raw = (torch.tensor(x, dtype=torch.float32) for x in pq)
    assume(p_raw.sum() > 1e-3 and q_raw.sum() > 1e-3)
    p, q = p_raw / p_raw.sum(), q_raw / q_raw.sum()
    r = residual(p, q, lenience)
    assert (r >= 0).all()
    assert torch.isclose(r.sum(), torch.tensor(1.0), atol=1e-5)
    excess = (p - lenience * q).clamp_min(0)
    if excess.sum() > 1e-6:
        assert (r[excess == 0] == 0).all(), "no mass where the draft already over-proposed"
        torch.testing.assert_close(r, excess / excess.sum(), atol=1e-5, rtol=1e-4)


def test_residual_of_identical_distributions_is_still_a_distribution():
    p = torch.tensor([0.2, 0.3, 0.5])
    r = residual(p, p.clone())
    assert (r >= 0).all() and torch.isclose(r.sum(), torch.tensor(1.0))


@pytest.mark.parametrize("width", [49152, 1000, 151936])
def test_greatest_and_top_k_read_blocks_yet_answer_as_argmax_and_topk(width):
    from specviz.verify import greatest, top_k

    torch.manual_seed(width)
    logits = torch.randn(9, width) * 4
    logits[0, [700, width - 5]] = 50.0  # a tie far apart: the first index, as argmax
    logits[1, :] = 0.0  # every entry equal
    assert torch.equal(greatest(logits), logits.argmax(-1))
    assert all(int(greatest(row)) == int(row.argmax()) for row in logits)
    values, ids = top_k(logits[2:], 8)
    expected_values, expected_ids = logits[2:].topk(8, dim=-1)
    assert torch.equal(values, expected_values) and torch.equal(ids, expected_ids)
