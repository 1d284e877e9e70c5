"""Bad settings are refused before any model runs, with a message that names the setting and the value."""

from __future__ import annotations

import math

import pytest

from specviz.config import MAX_GAMMA, MAX_NEW_TOKENS, Decoding, Sampling, Verification
from specviz.errors import ConfigError, SpecVizError


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: Decoding(gamma=0), ["gamma", "0"]),
        (lambda: Decoding(gamma=-3), ["gamma", "-3"]),
        (lambda: Decoding(gamma=MAX_GAMMA + 1), ["gamma", str(MAX_GAMMA + 1), str(MAX_GAMMA)]),
        (lambda: Decoding(gamma=10**6), ["gamma", "1000000"]),
        (lambda: Decoding(gamma=2.5), ["gamma", "whole number", "2.5"]),
        (lambda: Decoding(gamma="four"), ["gamma", "number", "four"]),
        (lambda: Decoding(max_new_tokens=0), ["max new tokens", "0"]),
        (lambda: Decoding(max_new_tokens=-5), ["max new tokens", "-5"]),
        (lambda: Decoding(max_new_tokens=MAX_NEW_TOKENS + 1), ["max new tokens", str(MAX_NEW_TOKENS + 1)]),
        (lambda: Decoding(seed=-1), ["seed", "-1"]),
        (lambda: Sampling(temperature=-0.5), ["temperature", "-0.5"]),
        (lambda: Sampling(temperature=math.nan), ["temperature", "finite"]),
        (lambda: Sampling(temperature=math.inf), ["temperature", "finite"]),
        (lambda: Sampling(top_p=0), ["top-p", "0"]),
        (lambda: Sampling(top_p=1.5), ["top-p", "1.5"]),
        (lambda: Sampling(top_p=-0.1), ["top-p", "-0.1"]),
        (lambda: Sampling(top_k=-1), ["top-k", "-1"]),
        (lambda: Verification(lenience=0), ["lenience", "0"]),
        (lambda: Verification(lenience=1.5), ["lenience", "1.5"]),
        (lambda: Verification(lenience=-1), ["lenience", "-1"]),
        (lambda: Verification(tolerance=-0.1), ["tolerance", "-0.1"]),
        (lambda: Verification(top_k=0), ["top-k", "0"]),
        (lambda: Verification(mode="fast"), ["mode", "fast", "exact", "relaxed"]),
    ],
)
def test_bad_setting_is_refused_with_a_clear_message(make, words):
    with pytest.raises(ConfigError) as info:
        make()
    message = str(info.value)
    for word in words:
        assert word in message, f"{message!r} should mention {word!r}"


def test_config_errors_are_user_facing_errors():
    """The CLI and the app catch SpecVizError and show its message; ConfigError must be one."""
    with pytest.raises(SpecVizError):
        Decoding(gamma=0)
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Decoding(gamma=1),
        lambda: Decoding(gamma=MAX_GAMMA),
        lambda: Decoding(max_new_tokens=1),
        lambda: Decoding(max_new_tokens=MAX_NEW_TOKENS),
        lambda: Sampling(temperature=0),
        lambda: Sampling(top_p=1.0),
        lambda: Sampling(top_p=0.01),
        lambda: Verification(lenience=1.0),
        lambda: Verification(mode="relaxed", lenience=0.01, tolerance=0.0, top_k=1),
    ],
)
def test_settings_at_the_edges_of_their_ranges_are_accepted(make):
    make()


def test_numbers_typed_as_text_are_read_as_numbers():
    """The app and CLI pass user input; '4' and '0.7' must mean 4 and 0.7, stored as numbers."""
    d = Decoding(gamma="4", max_new_tokens="32", sampling=Sampling(temperature="0.7", top_p="0.9"))
    assert (d.gamma, d.max_new_tokens) == (4, 32)
    assert (d.sampling.temperature, d.sampling.top_p) == (0.7, 0.9)
    assert not d.sampling.greedy


def test_defaults_are_greedy_and_exact():
    d = Decoding()
    assert d.sampling.greedy
    assert d.verification.mode == "exact" and d.verification.lossless


def test_relaxed_with_neutral_settings_counts_as_lossless_and_otherwise_not():
    assert Verification(mode="relaxed").lossless
    assert not Verification(mode="relaxed", tolerance=0.5, top_k=2).lossless
    assert not Verification(mode="relaxed", lenience=0.5).lossless


def test_decoding_round_trips_through_a_dict():
    d = Decoding(gamma=6, adaptive=True, max_new_tokens=40, seed=9,
                 sampling=Sampling(temperature=0.8, top_k=20, top_p=0.95),
                 verification=Verification(mode="relaxed", tolerance=0.5, top_k=3, lenience=0.9))
    assert Decoding.from_dict(d.to_dict()) == d


def test_a_bad_value_inside_a_saved_dict_is_refused_too():
    data = Decoding().to_dict()
    data["sampling"]["top_p"] = 0
    with pytest.raises(ConfigError, match="top-p"):
        Decoding.from_dict(data)
