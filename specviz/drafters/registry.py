"""The registry: a drafter spec ('ngram', 'layerskip:8', 'target', a model or a head name) to a fresh drafter."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from ..errors import ConfigError
from ..models import LoadedModel, draft_folders, load_model, shared_vocab
from .base import Drafter
from .head import HeadDrafter, HybridDrafter
from .head_net import is_head, load_head
from .model import ModelDrafter, layer_skip_view
from .ngram import NgramDrafter

Loader = Callable[[str], LoadedModel]


def _model_drafter(arg: str, target: LoadedModel, load: Loader) -> Drafter:
    draft = load(arg)
    vocab = shared_vocab(target, draft)
    if draft.device != target.device:
        raise ConfigError(f"{draft.name} is on {draft.device} but the target is on {target.device}")
    return ModelDrafter(arg, draft.model, vocab)


def _ngram_drafter(arg: str, target, load) -> Drafter:
    n = 3 if not arg else _positive_int(arg, "ngram:N (longest n-gram matched)")
    return NgramDrafter("ngram" if not arg else f"ngram:{n}", max_ngram=n, min_ngram=min(2, n))


def _layerskip_drafter(arg: str, target: LoadedModel, load) -> Drafter:
    n_layers = _positive_int(arg or "", "layerskip:K (number of target layers to keep)")
    return ModelDrafter(f"layerskip:{n_layers}", layer_skip_view(target.model, n_layers), target.vocab_size)


def _head_drafter(arg: str, target: LoadedModel, load) -> Drafter:
    folder = head_folder(arg)
    if folder is None:
        raise ConfigError(f"no draft head named {arg!r}; `python -m specviz models` lists the heads here")
    head, info = load_head(folder, target.model, target.name)
    embedding = target.model.get_input_embeddings().weight
    vocab = torch.tensor(info.vocab, device=embedding.device)
    return HeadDrafter(folder.name, head, vocab, embedding, target.model.get_output_embeddings().weight,
                       target.vocab_size)


def _hybrid_drafter(arg: str, target: LoadedModel, load) -> Drafter:
    head = _head_drafter(arg, target, load)
    return HybridDrafter(f"ngram+{head.name}", _ngram_drafter("", target, load), head)


def head_folder(name: str):
    """The folder of a draft head called `name` (shipped or trained here), or a folder path that holds one."""
    for _, folder in draft_folders():
        if folder.name == name and is_head(folder):
            return folder
    path = Path(name).expanduser()
    return path if name and is_head(path) else None


def _target_drafter(arg: str, target: LoadedModel, load) -> Drafter:
    return ModelDrafter("target", target.model, target.vocab_size)


def _positive_int(text: str, what: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{what} must be a positive whole number, got {text!r}")
    return int(text)


DRAFTERS: dict[str, Callable[[str, LoadedModel, Loader], Drafter]] = {
    "model": _model_drafter,  # model:NAME, or just NAME: a compatible small causal LM
    "ngram": _ngram_drafter,  # prompt lookup, one-hot q
    "layerskip": _layerskip_drafter,  # layerskip:K, the target's first K layers
    "target": _target_drafter,  # the target drafting for itself: α = 1 at full cost
    "head": _head_drafter,  # head:NAME, or just NAME: a feature-level head over the target's hidden states
    "ngram+head": _hybrid_drafter,  # ngram+head:NAME (or ngram+NAME): n-gram when it matches, the head otherwise
}


def build_drafter(spec: str, target: LoadedModel, load: Loader = load_model) -> Drafter:
    """A fresh drafter for one run from a spec such as 'ngram', 'layerskip:8', 'target' or a model name."""
    spec = (spec or "").strip()
    if not spec:
        raise ConfigError("no drafter given; try ngram, layerskip:8, target or a model name")
    kind, _, arg = spec.partition(":")
    if kind in DRAFTERS and kind != "model":
        return DRAFTERS[kind](arg, target, load)
    if spec.startswith("ngram+") and head_folder(spec[len("ngram+"):]):
        return _hybrid_drafter(spec[len("ngram+"):], target, load)
    if head_folder(spec):
        return _head_drafter(spec, target, load)
    return _model_drafter(arg if kind == "model" else spec, target, load)
