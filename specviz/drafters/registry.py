"""The registry: one entry per drafter kind, and a spec ('ngram', 'layerskip:8', a model or head name) to a drafter.

An entry (`Kind`) says everything the rest of SpecViz needs of a kind: how to build one, what the pickers
offer, whether it learns across runs (shared measurements then key on what it learned), whether
transformers' `generate` has an equivalent (`bench --compare-hf`), and one line for `models`. A new kind is
one module in this package and one `register` call (or one line in `DRAFTERS`): pickers, `models`, `bench`
and the tests' lossless matrix read the registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from ..errors import ConfigError
from ..fast_path import draft_dtype
from ..models import LoadedModel, draft_folders, load_model, shared_vocab
from .auto import AutoDrafter
from .base import Drafter
from .blend import BlendDrafter
from .blend_head import HeadBlendDrafter
from .head import HeadDrafter, HybridDrafter
from .head_net import is_head, load_head, read_info, target_mismatch
from .model import ModelDrafter, layer_skip_view
from .ngram import NgramDrafter
from .recycle import RecycleDrafter
from .recycle_table import shared_store
from .suffix import SuffixDrafter, corpus_for, template_tokens, tokenizer_fingerprint

# The shipped head `auto` adds to the blended tree where it reads the target: on the 84 evaluation prompts (AMD EPYC,
# tree of 8) blend:smol-head-v5 made 1.87x against blend's 1.82x and suffix's 1.84x in one run (docs/performance.md).
AUTO_HEAD = "smol-head-v5"

Loader = Callable[[str], LoadedModel]


@dataclass(frozen=True)
class Spec:
    """A drafter spec, parsed once: its kind (a key of DRAFTERS), its argument, and a head's folder when it names
    one."""

    kind: str
    arg: str
    folder: Path | None = None


def parse_spec(spec: str) -> Spec:
    """'ngram', 'ngram:4', 'layerskip:8', 'target', 'head:NAME', 'ngram+head:NAME', 'model:NAME', or a bare name:
    a head's (shipped, trained here, or a folder path), with 'ngram+' before it the hybrid, else a model's."""
    spec = (spec or "").strip()
    if not spec:
        raise ConfigError("no drafter given; try ngram, layerskip:8, target or a model name")
    kind, _, arg = spec.partition(":")
    if kind in ("head", "ngram+head"):
        return Spec(kind, arg, head_folder(arg))
    if kind in DRAFTERS and kind != "model":
        return Spec(kind, arg)
    if spec.startswith("ngram+") and (folder := head_folder(spec[len("ngram+") :])):
        return Spec("ngram+head", spec[len("ngram+") :], folder)
    if folder := head_folder(spec):
        return Spec("head", spec, folder)
    return Spec("model", arg if kind == "model" else spec)


def build_drafter(spec: str, target: LoadedModel, load: Loader = load_model) -> Drafter:
    """A fresh drafter for one run from a spec such as 'ngram', 'layerskip:8', 'target' or a model name."""
    parsed = parse_spec(spec)
    return DRAFTERS[parsed.kind].build(parsed, target, load)


def _model_drafter(spec: Spec, target: LoadedModel, load: Loader) -> Drafter:
    draft = load(spec.arg)
    vocab = shared_vocab(target, draft)
    if draft.device != target.device:
        raise ConfigError(f"{draft.name} is on {draft.device} but the target is on {target.device}")
    return ModelDrafter(spec.arg, draft.model, vocab)


def _ngram_drafter(spec: Spec, target, load) -> Drafter:
    n = 3 if not spec.arg else _positive_int(spec.arg, "ngram:N (longest n-gram matched)")
    return NgramDrafter("ngram" if not spec.arg else f"ngram:{n}", max_ngram=n, min_ngram=min(2, n))


def _suffix_drafter(spec: Spec, target: LoadedModel, load) -> Drafter:
    if spec.arg:
        raise ConfigError(f"suffix takes no argument, got suffix:{spec.arg}")
    return SuffixDrafter("suffix", corpus_for(target.tokenizer), never=template_tokens(target.tokenizer))


def _recycle_drafter(spec: Spec, target: LoadedModel, load) -> Drafter:
    if spec.arg:
        raise ConfigError(f"recycle takes no argument, got recycle:{spec.arg}")
    return RecycleDrafter("recycle", _store(target), never=template_tokens(target.tokenizer))


def _blend_drafter(spec: Spec, target: LoadedModel, load) -> Drafter:
    """Suffix matches and the target's recycled guesses in one scored tree; `blend:HEAD`: that head's guesses too."""
    suffix = _suffix_drafter(Spec("suffix", ""), target, load)
    if not spec.arg:
        return BlendDrafter("blend", suffix, _store(target))
    folder = head_folder(spec.arg)
    if folder is None:
        raise ConfigError(f"no draft head named {spec.arg!r} for blend; `python -m specviz models` lists the heads "
                          "here")
    head = _head_drafter(Spec("head", spec.arg, folder), target, load)
    return HeadBlendDrafter(f"blend:{spec.arg}", head, suffix=suffix, store=_store(target))


def _store(target: LoadedModel):
    """The process's recycle table for this target's tokenizer (warm-started from the shipped file)."""
    return shared_store(tokenizer_fingerprint(target.tokenizer), target.vocab_size)


def _auto_drafter(spec: Spec, target: LoadedModel, load) -> Drafter:
    """`auto`: the blended tree (suffix matches and recycled guesses, sized by the measured v(n)), with the shipped
    draft head's guesses where it reads this target (`blend:AUTO_HEAD`); `auto:HEAD`: each round suffix drafting,
    that head over this target's features or none, whichever promises most."""
    if not spec.arg:
        suffix = _suffix_drafter(Spec("suffix", ""), target, load)
        folder = head_folder(AUTO_HEAD)  # checked against the target before anything is loaded; a damaged head.json
        if folder is not None and target_mismatch(read_info(folder), target.model, target.name, AUTO_HEAD) is None:
            head = _head_drafter(Spec("head", AUTO_HEAD, folder), target, load)  # still says so
            return HeadBlendDrafter("auto", head, suffix=suffix, store=_store(target))
        return BlendDrafter("auto", suffix, _store(target))
    suffix = _suffix_drafter(Spec("suffix", ""), target, load)
    folder = head_folder(spec.arg)
    if folder is None:
        raise ConfigError(f"no draft head named {spec.arg!r} for auto; `python -m specviz models` lists the heads here")
    head = _head_drafter(Spec("head", spec.arg, folder), target, load)
    return AutoDrafter(f"auto:{spec.arg}", suffix, head)


def _layerskip_drafter(spec: Spec, target: LoadedModel, load) -> Drafter:
    n_layers = _positive_int(spec.arg or "", "layerskip:K (number of target layers to keep)")
    return ModelDrafter(f"layerskip:{n_layers}", layer_skip_view(target.model, n_layers), target.vocab_size)


def _head_drafter(spec: Spec, target: LoadedModel, load) -> Drafter:
    if spec.folder is None:
        raise ConfigError(f"no draft head named {spec.arg!r}; `python -m specviz models` lists the heads here")
    embedding = target.model.get_input_embeddings().weight
    head, info = load_head(spec.folder, target.model, target.name, draft_dtype(embedding.device, embedding.dtype))
    vocab = torch.tensor(info.vocab, device=embedding.device)
    return HeadDrafter(
        spec.folder.name, head, vocab, embedding, target.model.get_output_embeddings().weight, target.vocab_size
    )


def _hybrid_drafter(spec: Spec, target: LoadedModel, load) -> Drafter:
    head = _head_drafter(spec, target, load)
    return HybridDrafter(f"ngram+{head.name}", _ngram_drafter(Spec("ngram", ""), target, load), head)


def head_folder(name: str):
    """The folder of a draft head called `name` (shipped or trained here), or a folder path that holds one."""
    for _, folder in draft_folders():
        if folder.name == name and is_head(folder):
            return folder
    path = Path(name).expanduser()
    return path if name and is_head(path) else None


def _target_drafter(spec: Spec, target: LoadedModel, load) -> Drafter:
    return ModelDrafter("target", target.model, target.vocab_size)


def _positive_int(text: str, what: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{what} must be a positive whole number, got {text!r}")
    return int(text)


@dataclass(frozen=True)
class Kind:
    """One drafter kind, as the app, the CLI and the tests see it."""

    build: Callable[[Spec, LoadedModel, Loader], Drafter]  # a fresh drafter for one run
    about: str  # one line for `models` and the pickers' help
    usage: str  # how a spec names it: "ngram", "layerskip:K", "NAME"
    offered: Callable[[], list[str]] = field(default=lambda: [])  # specs the pickers offer out of the box, in order
    learns: bool = False  # keeps what runs taught it for later runs (the suffix drafter's corpus)
    peer: str = ""  # transformers' equivalent for `bench --compare-hf` ("" when it has none)


def _heads() -> list[str]:
    return [folder.name for _, folder in draft_folders() if is_head(folder)]


def _models() -> list[str]:
    return [folder.name for _, folder in draft_folders() if not is_head(folder)]


# The pickers list the kinds in this order: the copying drafters first (they pay off most on a CPU), then the
# heads, the distilled drafts (still slower than the target alone on a CPU), the self-drafts and the control.
DRAFTERS: dict[str, Kind] = {
    "ngram": Kind(
        _ngram_drafter,
        "prompt lookup: continues the latest earlier match of the last 3 or 2 tokens; no model",
        "ngram or ngram:N",
        lambda: ["ngram"],
        peer="prompt lookup",
    ),
    "suffix": Kind(
        _suffix_drafter,
        "the longest earlier match in the prompt, the answer and the target's earlier answers, "
        "as a chain or a tree cut where it stops paying; no model",
        "suffix",
        lambda: ["suffix"],
        learns=True,
    ),
    "recycle": Kind(
        _recycle_drafter,
        "Token Recycling: the target's own top guesses after each token, kept from "
        "every verification in a table, as a tree cut where it stops paying; no model",
        "recycle",
        lambda: ["recycle"],
        learns=True,
    ),
    "blend": Kind(
        _blend_drafter,
        "suffix matches and the target's recycled guesses in one tree scored by their "
        "chances, cut where it stops paying; no model. blend:HEAD: that head's guesses too, where they pay",
        "blend or blend:HEAD",
        lambda: ["blend"],  # blend:HEAD is named, not offered (one entry per head); `auto` is blend:AUTO_HEAD
        learns=True,
    ),
    "auto": Kind(
        _auto_drafter,
        f"the blended tree (blend), with {AUTO_HEAD}'s guesses where it reads the target (blend:{AUTO_HEAD}); "
        "auto:HEAD: each round the suffix drafter, that head or no draft, whichever promises the most tokens per "
        "target step",
        "auto or auto:HEAD",
        lambda: ["auto"],
        learns=True,
    ),
    "ngram+head": Kind(
        _hybrid_drafter,
        "n-gram lookup when the context has a match, the draft head otherwise",
        "ngram+HEAD",
        lambda: [f"ngram+{h}" for h in _heads()],
    ),
    "head": Kind(
        _head_drafter,
        "a feature-level draft head (EAGLE-style) over the target's hidden states (its last, or several fused)",
        "HEAD or head:HEAD",
        _heads,
    ),
    "model": Kind(
        _model_drafter,
        "a small causal LM with the target's tokenizer, with its own KV cache",
        "a model name, folder or hub id",
        _models,
        peer="assisted generation",
    ),
    "layerskip": Kind(
        _layerskip_drafter,
        "the target's first K layers as a self-draft; no extra weights",
        "layerskip:K",
        lambda: ["layerskip:4", "layerskip:8", "layerskip:15"],
        peer="assisted generation",
    ),
    "target": Kind(
        _target_drafter,
        "the target drafting for itself: every draft kept, at full cost (the control)",
        "target",
        lambda: ["target"],
        peer="assisted generation",
    ),
}


def register(name: str, kind: Kind) -> None:
    """Add a drafter kind (a plug-in, or a test's toy drafter): `build_drafter`, pickers and `models` see it at once."""
    if not name or ":" in name or "+" in name:
        raise ConfigError(f"a drafter kind's name is one word without ':' or '+', got {name!r}")
    DRAFTERS[name] = kind


def offered() -> list[str]:
    """What the draft pickers offer out of the box, every kind's in registry order."""
    return [spec for kind in DRAFTERS.values() for spec in kind.offered()]


def kind_of(spec: str) -> Kind:
    """The entry of the kind a spec names."""
    return DRAFTERS[parse_spec(spec).kind]


def learns_across_runs(spec: str) -> bool:
    """Whether runs of this drafter change what later runs draft (False for a spec that names no kind)."""
    try:
        return kind_of(spec).learns
    except ConfigError:
        return False
