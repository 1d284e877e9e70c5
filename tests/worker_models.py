"""Tiny models for a measurement worker started by a test: the worker imports `load` by name ("worker_models:load").

The worker is another process, so the session fixtures of conftest.py do not reach it; these are built the same
way (same seeds and sizes) from scratch. Each `slow-` before a name waits SLOW_S seconds first: a worker that is
slow to start, or a job long enough to be killed in the middle (a name the worker has not loaded yet).
"""

from __future__ import annotations

import time

from specviz.errors import ModelLoadError

from tiny import VOCAB, WORDS, make_tokenizer, padded_copy, tiny_llama, wrap

SLOW_S = 2.0
_built: dict = {}


def load(name: str):
    while name.startswith("slow-"):
        time.sleep(SLOW_S)
        name = name[len("slow-"):]
    if name not in ("tiny-target", "tiny-padded"):
        raise ModelLoadError(f"no tiny model called {name!r}")
    if "tiny-target" not in _built:
        _built["tiny-target"] = wrap("tiny-target", tiny_llama(0, VOCAB, 64, 4, 4, 2), make_tokenizer(WORDS))
    if name == "tiny-padded" and name not in _built:
        _built[name] = wrap(name, padded_copy(_built["tiny-target"].model, layers=2, rows=128), make_tokenizer(WORDS))
    return _built[name]


OOM_FLAG = "SPECVIZ_TEST_OOM_FLAG"  # a file path: while that file exists, every target forward runs out of memory


def load_folder(name: str):
    """Models from folders (or any name) through SpecViz's own loader, as the app's worker loads them; with the
    environment variable OOM_FLAG set, a forward raises torch.OutOfMemoryError while its file exists."""
    _patch_out_of_memory()
    from specviz.models import load_model

    return load_model(name)


def _patch_out_of_memory() -> None:
    import os

    import torch
    from transformers import LlamaModel

    flag = os.environ.get(OOM_FLAG)
    if not flag or getattr(LlamaModel.forward, "oom_flag", None):
        return
    forward = LlamaModel.forward

    def full(self, *args, **kwargs):
        if os.path.exists(flag):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return forward(self, *args, **kwargs)

    full.oom_flag = flag
    LlamaModel.forward = full
