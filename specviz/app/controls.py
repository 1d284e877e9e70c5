"""The Streamlit side of SpecViz: the pickers and sliders pages share, error boxes, exports, the demo run.

Pages call these helpers and render records. Measured runs go through `service` (the line and the
measurement worker, which owns every model); nothing here loads a model.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

import pandas as pd
import streamlit as st
import torch

from .. import drafters
from ..comparison import Comparison, load_comparisons, loads
from ..config import APP_MAX_GAMMA, APP_MAX_NEW_TOKENS, APP_MAX_TREE_BUDGET, Decoding, Sampling, TreeShape, Verification
from ..errors import OUT_OF_MEMORY, SpecVizError
from ..lab.measure import busy_warning, noise_warning
from ..models import DEFAULT_TARGET, pick_device
from ..prompts import CATEGORIES, load_prompt_set
from ..worker.process import Cancelled
from . import links, page_list, room
from .views import figures, tables
from .views.tokens import legend_html

ASSETS = Path(__file__).resolve().parents[2] / "assets"
DEMO_RUN = ASSETS / "demo" / "rounds.json"

_log = logging.getLogger("specviz")

# Labels of the sweep tables' shared columns (Draft length, Compare drafts).
SWEEP_COLUMNS = {
    "alpha": st.column_config.NumberColumn("α", format="%.2f", help="accepted ÷ drafted"),
    "alpha_theory": st.column_config.NumberColumn(
        "α per tested token",
        format="%.2f",
        help="the theory's α: the acceptance probability of a draft that is tested (drafts after a rejection never "
        "are), implied by the tokens per round",
    ),
    "mean_accepted": st.column_config.NumberColumn("tokens / round", format="%.2f"),
    "speedup": st.column_config.NumberColumn(
        "measured speedup", format="%.2f×", help="the median of the timed pairs' ratios (target alone ÷ speculative)"
    ),
    "speedup_low": st.column_config.NumberColumn(
        "lowest pair", format="%.2f×", help="the spread: the lowest pair's ratio"
    ),
    "speedup_high": st.column_config.NumberColumn("highest pair", format="%.2f×", help="the highest pair's ratio"),
    "speedup_interval_low": st.column_config.NumberColumn(
        "95% interval from", format="%.2f×",
        help="where the typical speedup lies, 95 times in 100, from how far the pairs scatter (Student's t over the "
        "logs of their ratios; Theory page); blank with one pair",
    ),
    "speedup_interval_high": st.column_config.NumberColumn("95% interval to", format="%.2f×"),
    "theoretical_speedup": st.column_config.NumberColumn("theory", format="%.2f×"),
    "c": st.column_config.NumberColumn("c", format="%.3f"),
    "draft_ms_per_token": st.column_config.NumberColumn("draft ms / token", format="%.2f"),
    "tokens_per_s": st.column_config.NumberColumn("tokens / s", format="%.1f"),
}


def sweep_columns(table) -> dict:
    """SWEEP_COLUMNS for this table: the 95% interval's columns are left out when no row has one (one pair each)."""
    interval = ("speedup_interval_low", "speedup_interval_high")
    if table[list(interval)].isna().all().all():
        return {**SWEEP_COLUMNS, **dict.fromkeys(interval)}  # None hides a column
    return SWEEP_COLUMNS


def draft_options() -> list[str]:
    """What the draft pickers offer out of the box: every drafter kind's offers, in the registry's order."""
    return drafters.offered()


def target_options() -> list[str]:
    return [DEFAULT_TARGET]


MODEL_HELP = (
    "Pick one, or type a Hugging Face model id or a local model folder (hub ids need internet). "
    "Drafts also take ngram, layerskip:K and target."
)
ROOM_HELP = "This room offers these models; the presenter can load others."


def target_picker(key: str) -> str:
    """The target: the embedded default, or any hub id / local folder typed in (not by a learner in a room)."""
    free = not room.locked()
    return st.selectbox(
        "Target", target_options(), key=key, accept_new_options=free, help=MODEL_HELP if free else ROOM_HELP
    )


def draft_picker(key: str) -> str:
    """A drafter from the registry, a shipped draft, or any compatible model typed in (not in a room)."""
    free = not room.locked()
    return st.selectbox(
        "Draft", draft_options(), key=key, accept_new_options=free, help=MODEL_HELP if free else ROOM_HELP
    )


def offered(options):
    """The choices a link may restore into a picker: any in the open lab, the offered ones in a room."""
    return (lambda: options()) if room.locked() else None


def pair_params(prefix: str) -> list[links.Param]:
    """The target and draft pickers of `pair_pickers(prefix, …)` in the URL."""
    return [
        links.Param(f"{prefix}-target", "target", choices=offered(target_options)),
        links.Param(f"{prefix}-draft", "draft", choices=offered(draft_options)),
    ]


def prompt_params(key: str) -> list[links.Param]:
    """The workload and the prompt text of `prompt_picker(key)` in the URL."""
    return [links.Param(f"{key}-cat", "workload", choices=lambda: CATEGORIES), links.Param(f"{key}-text", "prompt")]


def decoding_params(key: str, with_gamma: bool = True) -> list[links.Param]:
    """The controls of `decoding_controls(key, …)` in the URL (those not shown are left out of it)."""
    gamma = [
        links.Param(f"{key}-gamma", "gamma", int, limits=(1, APP_MAX_GAMMA)),
        links.Param(f"{key}-adaptive", "adaptive", bool),
        links.Param(f"{key}-tree", "tree", int, limits=(0, APP_MAX_TREE_BUDGET)),
        links.Param(f"{key}-branching", "branching", int, choices=lambda: (1, 2, 3, 4)),
        links.Param(f"{key}-treemode", "tree_shape", choices=lambda: ("dynamic", "static")),
    ]
    return (gamma if with_gamma else []) + [
        links.Param(f"{key}-temp", "temperature", float, limits=(0, 2)),
        links.Param(f"{key}-topp", "top_p", float, limits=(0.05, 1)),
        links.Param(f"{key}-mode", "verification", choices=lambda: ("exact", "relaxed")),
        links.Param(f"{key}-tol", "tolerance", float, limits=(0, 5)),
        links.Param(f"{key}-topk", "top_k", int, limits=(1, 20)),
        links.Param(f"{key}-len", "lenience", float, limits=(0.05, 1)),
        links.Param(f"{key}-maxnew", "max_new", int, limits=(8, APP_MAX_NEW_TOKENS)),
        links.Param(f"{key}-seed", "seed", int, limits=(0, 2**31 - 1)),
        links.Param(f"{key}-raw", "raw", bool),
    ]


@st.cache_data(show_spinner=False)
def presets() -> dict[str, list[dict]]:
    """Evaluation prompts by workload, for the preset pickers."""
    return {c: load_prompt_set(c, "eval") for c in CATEGORIES}


def page_intro(title: str, intro: str) -> None:
    """A page's title and one paragraph, with the device in the sidebar."""
    page_list.use_app_navigation()
    st.title(title)
    st.write(intro)
    sidebar_device()


def pair_pickers(prefix: str, heading: str) -> tuple[str, str]:
    """A settings heading with the target and draft pickers (keys prefix-target, prefix-draft)."""
    st.header(heading)
    return target_picker(f"{prefix}-target"), draft_picker(f"{prefix}-draft")


def sidebar_device() -> None:
    device = pick_device("auto")
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else device.type.upper()
    st.sidebar.caption(f"Device: **{name}** · torch {torch.__version__}")


@contextlib.contextmanager
def error_box(what: str = "run"):
    """Show a user error as one clear box; the rest of the page and earlier results stay usable."""
    try:
        yield
    except Cancelled:  # the visitor left, or pressed Stop: nobody waits for a message
        _log.info("a job was given up while trying to %s", what)
    except SpecVizError as exc:
        st.error(f"Could not {what}: {exc}", icon="⚠️")
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        st.error(f"Could not {what}: {OUT_OF_MEMORY}, or run SpecViz on a machine with more GPU memory.", icon="⚠️")
    except Exception as exc:  # noqa: BLE001 — never a traceback in front of a workshop
        _log.exception("unexpected error while trying to %s", what)  # ... but one in the server's log, to fix it
        st.error(
            f"Could not {what}: unexpected {exc.__class__.__name__}: {str(exc)[:200]} (details in the server log)",
            icon="⚠️",
        )


def prompts_picker(key: str, runs_on: str) -> list[str]:
    """Several evaluation presets and/or a prompt of one's own, for sweeps."""
    rows = {row["id"]: row for rows in presets().values() for row in rows}
    picked = st.multiselect(
        f"Prompts (evaluation presets; {runs_on})",
        list(rows),
        default=list(rows)[:1],
        key=f"{key}-prompts",
        format_func=lambda i: f"{rows[i]['category']} · {rows[i]['prompt'][:90]}",
    )
    own = st.text_area("…and/or a prompt of your own", key=f"{key}-own", height=70)
    return [rows[i]["prompt"] for i in picked] + ([own] if own.strip() else [])


def prompt_picker(key: str, default_category: str = "chat") -> str:
    """Preset prompts by workload, or free text (a new preset replaces the text; a link restores it)."""
    sets = presets()
    category = st.selectbox("Workload", CATEGORIES, index=CATEGORIES.index(default_category), key=f"{key}-cat")
    choices = [row["prompt"] for row in sets[category]]
    preset = st.selectbox(
        "Preset prompt",
        choices,
        key=f"{key}-preset-{category}",
        format_func=lambda s: s[:80] + ("…" if len(s) > 80 else ""),
    )
    state, text_key, shown = st.session_state, f"{key}-text", f"{key}-text-of"
    if text_key not in state or (shown in state and state[shown] != preset):  # the first time, keep a linked text
        state[text_key] = preset
    else:
        # The box is told its text on every run, not only when it changes. A browser that draws the box afresh
        # without it (after a run cut short by a quick click) would start from the widget's own default, an empty
        # text, and send that back on the next run: a prompt lost without anyone clearing it (seen once in CI).
        state[text_key] = state[text_key]
    state[shown] = preset
    return st.text_area("Prompt (edit freely)", key=text_key, height=110)


def decoding_controls(key: str, with_gamma: bool = True, with_verification: bool = True) -> Decoding:
    """Sliders for γ, verification, sampling, length and seed; raises SpecVizError if out of range."""
    gamma = st.slider("Draft length γ", 1, APP_MAX_GAMMA, 4, key=f"{key}-gamma") if with_gamma else 4
    adaptive = (
        st.checkbox("Adaptive γ (+2 after a full accept, −1 otherwise)", key=f"{key}-adaptive") if with_gamma else False
    )
    tree = tree_controls(key) if with_gamma else TreeShape()
    temperature = st.slider("Temperature (0 = greedy)", 0.0, 2.0, 0.0, 0.05, key=f"{key}-temp")
    top_p = st.slider("Top-p", 0.05, 1.0, 1.0, 0.05, key=f"{key}-topp", disabled=temperature == 0)
    verification = Verification()
    if with_verification:
        mode = st.radio(
            "Verification",
            ["exact", "relaxed"],
            horizontal=True,
            key=f"{key}-mode",
            help="exact is lossless; relaxed accepts near-misses and drifts from the target",
        )
        if mode == "relaxed" and temperature == 0:
            tol = st.slider("Tolerance τ (nats below the best token)", 0.0, 5.0, 1.0, 0.1, key=f"{key}-tol")
            top_k = st.slider("Accept drafts within the target's top-k", 1, 20, 3, key=f"{key}-topk")
            verification = Verification("relaxed", tolerance=tol, top_k=top_k)
        elif mode == "relaxed":
            lenience = st.slider("Lenience l (1 = exact)", 0.05, 1.0, 0.5, 0.05, key=f"{key}-len")
            verification = Verification("relaxed", lenience=lenience)
    max_new = st.slider("Max new tokens", 8, APP_MAX_NEW_TOKENS, 64, 8, key=f"{key}-maxnew")
    seed = st.number_input("Seed", 0, 2**31 - 1, 0, key=f"{key}-seed")
    chat = not st.checkbox(
        "Raw prompt (no chat template)",
        key=f"{key}-raw",
        help="By default the prompt is a user message in the target's chat template",
    )
    return Decoding(
        gamma=gamma,
        adaptive=adaptive,
        max_new_tokens=max_new,
        seed=int(seed),
        chat=chat,
        sampling=Sampling(temperature=temperature, top_p=top_p),
        verification=verification,
        tree=tree,
    )


def tree_controls(key: str) -> TreeShape:
    """The tree budget beside γ: 0 drafts a chain; N drafts a tree of N nodes, γ deep, verified in one forward."""
    budget = st.slider(
        "Token tree: nodes per round (0 = a chain of γ)",
        0,
        APP_MAX_TREE_BUDGET,
        0,
        key=f"{key}-tree",
        help="A tree drafts several candidates per position and the target verifies all N nodes in one "
        "forward (a chain of γ=N verifies as many). γ is then the tree's depth.",
    )
    if not budget:
        return TreeShape()
    branching = st.select_slider("Children per node", [1, 2, 3, 4], 2, key=f"{key}-branching")
    mode = st.radio(
        "Tree shape",
        ["dynamic", "static"],
        horizontal=True,
        key=f"{key}-treemode",
        help="dynamic: keep the nodes with the highest cumulative draft probability (EAGLE-2); "
        "static: the same shape every round",
    )
    return TreeShape(budget=budget, branching=branching, mode=mode)


@st.cache_resource(show_spinner=False)
def load_demo() -> Comparison | None:
    """The run recorded by the project and shipped in assets/: shown at once, before models load (one shared,
    read-only copy, so a page can tell it is still showing the same run)."""
    if DEMO_RUN.is_file():
        return loads(DEMO_RUN.read_text(encoding="utf-8"))
    return None


def headline(c: Comparison) -> None:
    """The run's figures as cards, the speedup's spread in words, and a warning instead of trust when it is noise."""
    for column, (label, value, help_text) in zip(st.columns(7), figures.headline(c)):
        column.metric(label, value, help=help_text)
    st.caption(figures.spread_caption(c))
    if warning := noise_warning(c):
        st.warning(warning, icon="📏")
    if warning := busy_warning(c):
        st.warning(warning, icon="🧮")


@st.cache_resource(show_spinner=False)
def demo_info() -> dict:
    """How the shipped run was made (command, machine, date, the race lane it comes from); {} for an older file."""
    if not DEMO_RUN.is_file():
        return {}
    return json.loads(DEMO_RUN.read_text(encoding="utf-8")).get("info", {})


def legend() -> None:
    st.html(legend_html())


def export_buttons(comparisons: dict[str, Comparison], key: str) -> None:
    """CSV of runs and rounds, and JSON that can be loaded back and replayed without models."""
    if not comparisons:
        return
    c1, c2, c3 = st.columns(3)
    c1.download_button(
        "Runs (CSV)",
        tables.summary_frame(comparisons).to_csv(index=False),
        f"{key}-runs.csv",
        "text/csv",
        key=f"{key}-csv-runs",
    )
    rounds = [tables.rounds_frame(c.spec).assign(run=name) for name, c in comparisons.items()]
    c2.download_button(
        "Rounds (CSV)", pd.concat(rounds).to_csv(index=False), f"{key}-rounds.csv", "text/csv", key=f"{key}-csv-rounds"
    )
    c3.download_button(
        "Runs (JSON, replayable)",
        tables.to_json(comparisons),
        f"{key}-runs.json",
        "application/json",
        key=f"{key}-json",
    )


def load_export(uploaded) -> dict[str, Comparison]:
    """Runs from an uploaded JSON export (one comparison, or several by name); SpecVizError if damaged."""
    return load_comparisons(uploaded.getvalue())
