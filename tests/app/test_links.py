"""Deep links: the codec of query parameters, and a page restoring and sharing them (AppTest)."""

import pytest
from streamlit.testing.v1 import AppTest

from specviz.app.links import Param, decode, encode


@pytest.mark.parametrize("param, value", [
    (Param("k", "prompt"), "Explain speculative decoding, please & thanks?"),
    (Param("k", "gamma", int), 7),
    (Param("k", "temperature", float), 0.85),
    (Param("k", "adaptive", bool), True),
    (Param("k", "adaptive", bool), False),
    (Param("k", "gammas", tuple, item=int), (2, 9)),
    (Param("k", "tau", tuple), (0.5, 2.5)),
    (Param("k", "drafts", list, item=str), ["ngram", "layerskip:8"]),
])
def test_values_survive_the_round_trip(param, value):
    assert decode(param, encode(value)) == value


@pytest.mark.parametrize("param, text", [
    (Param("k", "gamma", int), "four"),
    (Param("k", "temperature", float), "nan"),
    (Param("k", "adaptive", bool), "maybe"),
    (Param("k", "gammas", tuple, item=int), "9,2"),
    (Param("k", "gammas", tuple, item=int), "3"),
    (Param("k", "draft", choices=lambda: ["ngram", "layerskip:8"]), "/home/me/model"),
    (Param("k", "drafts", list, item=str, choices=lambda: ["ngram", "target"]), "ngram,/tmp/evil"),
    (Param("k", "gamma", int, limits=(1, 16)), "99"),
    (Param("k", "alpha", float, limits=(0, 0.99)), "-3"),
    (Param("k", "tau", tuple, limits=(0, 3)), "0,4"),
])
def test_values_a_page_would_not_accept_are_refused(param, text):
    with pytest.raises(ValueError):
        decode(param, text)


def test_theory_page_restores_a_link_and_writes_its_controls_back():
    at = AppTest.from_file("../../pages/5_Theory.py", default_timeout=60)
    at.query_params.update({"alpha": "0.55", "gamma": "9", "c": "0.2", "v": "1.5"})
    at.run()
    assert not at.exception
    assert at.slider(key="theory-alpha").value == pytest.approx(0.55)
    assert at.slider(key="theory-gamma").value == 9
    assert at.slider(key="theory-v").value == pytest.approx(1.5)
    at.slider(key="theory-gamma").set_value(3).run()  # the user moves on: the URL follows, the link is not re-applied
    assert at.slider(key="theory-gamma").value == 3
    assert at.query_params["gamma"] == "3" and at.query_params["alpha"] == "0.55"


def test_a_bad_value_in_a_link_is_named_and_the_default_kept():
    at = AppTest.from_file("../../pages/5_Theory.py", default_timeout=60)
    at.query_params.update({"alpha": "lots", "gamma": "6"})
    at.run()
    assert not at.exception
    assert any("alpha" in w.value for w in at.warning)
    assert at.slider(key="theory-alpha").value == pytest.approx(0.7) and at.slider(key="theory-gamma").value == 6


def test_a_number_outside_its_slider_is_named_not_a_traceback():
    at = AppTest.from_file("../../pages/5_Theory.py", default_timeout=60)
    at.query_params.update({"gamma": "99", "alpha": "-3", "c": "0.3"})
    at.run()
    assert not at.exception
    warning = " ".join(w.value for w in at.warning)
    assert "gamma: '99' is outside 1 to 16" in warning and "alpha: '-3' is outside 0 to 0.99" in warning
    assert at.slider(key="theory-gamma").value == 4 and at.slider(key="theory-c").value == pytest.approx(0.3)
