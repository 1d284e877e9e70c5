"""Deep links: a page's controls live in the URL's query parameters, so a link reopens that view.

A page names its linked controls once as `Param`s (the widget's session-state key and the query
parameter's name), calls `restore(params)` before it draws its widgets and `share(params)` after.
`restore` copies the URL's values into session state (widgets then start from them); `share` writes
the widgets' current values back into the URL. A link is applied when it is new to the session (a
fresh browser, or a changed URL), never over the controls a user is moving. A value the page would
not accept (a model that a room does not offer, a number that does not parse) is left out with a
note, and the control keeps its default. The lesson's `step` is one more Param.

The codec (`encode`, `decode`) is plain Python; the rest reads and writes `st.query_params`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlencode

import streamlit as st

_SEEN = "_links-seen"  # session state: the linked values this session last read from or wrote to the URL
PRIVATE = ("presenter",)  # never part of a shared link


@dataclass(frozen=True)
class Param:
    """One control in the URL. `kind` is str, int, float, bool, tuple (a range slider: two numbers) or
    list (a multiselect: `item`s joined by commas)."""

    key: str  # the widget's session-state key
    name: str  # the query parameter
    kind: type = str
    choices: Callable[[], Iterable] | None = None  # when set, only these values are restored
    item: type = float  # the element type of a tuple
    limits: tuple[float, float] | None = None  # a number's (or a range's) lowest and highest value, as the widget's


def encode(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (tuple, list)):
        return ",".join(encode(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e15 else repr(value)
    return str(value)


def decode(param: Param, text: str):
    """The value of a query parameter as the widget holds it; ValueError if it is not one."""
    if param.kind is bool:
        if text not in ("0", "1", "true", "false"):
            raise ValueError(f"{text!r} is not 0 or 1")
        value = text in ("1", "true")
    elif param.kind is tuple:
        value = tuple(param.item(part) for part in text.split(","))
        if len(value) != 2 or value[0] > value[1]:
            raise ValueError(f"{text!r} is not a range low,high")
    elif param.kind is list:
        value = [param.item(part) for part in text.split(",") if part]
    else:
        value = param.kind(text)
        if isinstance(value, float) and value != value:
            raise ValueError("not a number")
    numbers = value if param.kind is tuple else [value] if param.kind in (int, float) else []
    if param.limits is not None and any(not param.limits[0] <= v <= param.limits[1] for v in numbers):
        raise ValueError(f"{text!r} is outside {encode(param.limits[0])} to {encode(param.limits[1])}")
    offered = None if param.choices is None else list(param.choices())
    if offered is not None and any(v not in offered for v in (value if param.kind is list else [value])):
        raise ValueError(f"{text!r} is not offered here")
    return value


def _seen() -> dict[str, str]:
    return st.session_state.setdefault(_SEEN, {})


def restore(params: list[Param]) -> dict:
    """Apply the URL's values to the widgets when this session has not seen them yet; returns the
    values applied by name (empty when the URL brought nothing new)."""
    query, seen = st.query_params, _seen()
    page = "links-opened:" + ",".join(p.name for p in params)
    if st.session_state.get(page):
        # Only the first run of a page in a session reads its link: later reruns may carry an address the
        # browser has not updated yet (fast slider keys), and re-applying it would snap a control back.
        return {}
    st.session_state[page] = True
    wanted = {p.name: query[p.name] for p in params if p.name in query}
    if all(seen.get(name) == text for name, text in wanted.items()):
        return {}  # the URL holds what this session wrote or applied: the widgets are the truth
    refused, applied = [], {}
    for param in params:
        if param.name not in wanted:
            continue
        seen[param.name] = wanted[param.name]
        try:
            st.session_state[param.key] = applied[param.name] = decode(param, wanted[param.name])
        except (ValueError, TypeError) as exc:
            refused.append(f"{param.name}: {exc}")
    if refused:
        st.warning("Part of this link was not applied (the defaults are used): " + "; ".join(refused), icon="🔗")
    return applied


def share(params: list[Param]) -> None:
    """Write the widgets' current values into the URL (a parameter whose widget is not shown is dropped)."""
    query, seen = st.query_params, _seen()
    for param in params:
        if param.key in st.session_state and st.session_state[param.key] is not None:
            text = encode(st.session_state[param.key])
            if query.get(param.name) != text:
                query[param.name] = text
            seen[param.name] = text
        elif param.name in query:
            del query[param.name]
            seen.pop(param.name, None)


def url() -> str:
    """This view's link: the page's address and its shareable query parameters."""
    base = str(st.context.url or "").split("?", 1)[0]
    shared = {k: v for k, v in st.query_params.to_dict().items() if k not in PRIVATE}
    return base + ("?" + urlencode(shared) if shared else "")


def link_box(where=None, restores: str = "the prompt, the models, the settings and the selected round") -> None:
    """A "Copy link" popover: the link in a code box (its copy button puts it on the clipboard)."""
    with (where or st).popover("🔗 Copy link", help="A link that opens this page with these settings"):
        st.code(url(), language=None, wrap_lines=True)
        st.caption(f"Opening it restores {restores}.")
