"""The peer users would otherwise pick: transformers' own `generate`, configured fairly.

Assisted generation reads its draft settings from the assistant's `generation_config`, not from
`generate()` keyword arguments, and its default `assistant_confidence_threshold` of 0.4 stops
drafts early; both are set here for a fixed γ (or the same adaptive schedule as ours). The
assistant's config is replaced only for the call and restored after, because models are shared.
"""

from __future__ import annotations

import contextlib
import copy

import torch

from ..clock import Clock
from ..config import Decoding
from ..drafters import Drafter, ModelDrafter, NgramDrafter, NoDrafter
from ..models import LoadedModel
from ..prompts import encode


@contextlib.contextmanager
def _assistant_settings(model: torch.nn.Module, settings: Decoding):
    original = model.generation_config
    config = copy.deepcopy(original)
    config.num_assistant_tokens = settings.gamma
    config.num_assistant_tokens_schedule = "heuristic" if settings.adaptive else "constant"
    config.assistant_confidence_threshold = 0.0
    model.generation_config = config
    try:
        yield
    finally:
        model.generation_config = original


def _sampling_kwargs(settings: Decoding) -> dict:
    s = settings.sampling
    if s.greedy:
        return {"do_sample": False}
    return {"do_sample": True, "temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k or None}


def has_equivalent(drafter: Drafter | None) -> bool:
    """Whether transformers' generate can draft the same way (prompt lookup, assisted generation)."""
    return drafter is None or isinstance(drafter, (NgramDrafter, ModelDrafter, NoDrafter))


@torch.inference_mode()
def hf_generate(target: LoadedModel, drafter: Drafter | None, prompt: str, settings: Decoding):
    """(new token ids, seconds) from transformers' generate with the equivalent drafter."""
    ids = torch.tensor([encode(target.tokenizer, prompt, settings.chat)], device=target.device)
    kwargs = dict(max_new_tokens=settings.max_new_tokens, pad_token_id=target.tokenizer.pad_token_id,
                  **_sampling_kwargs(settings))
    assistant = contextlib.nullcontext()
    if isinstance(drafter, NgramDrafter):
        kwargs.update(prompt_lookup_num_tokens=settings.gamma, max_matching_ngram_size=drafter.max_ngram)
    elif isinstance(drafter, ModelDrafter):
        kwargs["assistant_model"] = drafter.model
        assistant = _assistant_settings(drafter.model, settings)
    elif not has_equivalent(drafter):
        raise ValueError(f"transformers has no equivalent of the {drafter.kind} drafter")
    torch.manual_seed(settings.seed)
    clock = Clock(target.device)
    with assistant:
        start = clock()
        out = target.model.generate(ids, **kwargs)
        seconds = clock() - start
    return out[0, ids.shape[1]:].tolist(), seconds
