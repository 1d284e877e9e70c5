"""Step 3: one teacher-forced target forward over each text keeps the target's hidden state per position.

A draft head reads the target's final hidden state f_t (what the target's own output head turns
into p) and predicts the next one. Reading a text costs one batched forward, so a few hundred
thousand positions take minutes on a CPU. The target's p at every position is its head applied
to f, so no logits are stored: training recomputes p from f exactly.

Shards of texts are written one at a time (safetensors, fp16 features), named by their source, index
and a hash of their tokens, so an interrupted capture resumes at the first missing shard and a
changed text list never reuses a shard that holds other texts. A text that some earlier shard already
holds is copied from it rather than read again: a data set that grows (more written prompts put new
answers between old ones) pays only for its new texts.
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..decode import stack_layers
from ..models import LoadedModel
from . import store
from .answers import fast_autocast
from .texts import Text

SHARD_TEXTS = 64  # texts per shard: a few MB each, so an interruption loses little


@dataclass
class Features:
    """Every captured text: its tokens, the target's features at each position, where training starts."""

    tokens: list[torch.Tensor]  # [n_i] int64
    features: list[torch.Tensor]  # [n_i, H] fp16: the final hidden state (p comes from it)
    answer_from: list[int]
    sources: list[str]
    inputs: list[torch.Tensor] | None = None  # [n_i, len(layers) * H] fp16: the layers a head reads, if several

    @property
    def positions(self) -> int:
        return sum(len(t) for t in self.tokens)

    @property
    def trained_positions(self) -> int:
        return sum(max(0, len(t) - a) for t, a in zip(self.tokens, self.answer_from))


@torch.inference_mode()
def hidden_states(target: LoadedModel, texts: list[Text], fast: bool = False) -> list[torch.Tensor]:
    """The target's final hidden state at every position of each text (right-padded batch, causal)."""
    return layer_states(target, texts, fast)[0]


@torch.inference_mode()
def layer_states(target: LoadedModel, texts: list[Text], fast: bool = False, layers: tuple[int, ...] = ()
                 ) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """Per text, the target's final hidden state at every position [n, H] and, with `layers`, those hidden
    states side by side [n, len(layers) * H] (as `decode.target_forward` hands them to a drafter); fp16."""
    width = max(len(t.ids) for t in texts)
    pad = target.tokenizer.pad_token_id or 0
    ids = torch.tensor([t.ids + [pad] * (width - len(t.ids)) for t in texts], device=target.device)
    with fast_autocast(target.device, fast):
        out = target.model.base_model(ids, output_hidden_states=bool(layers))
    final = [out.last_hidden_state[i, : len(t.ids)].float().half().cpu() for i, t in enumerate(texts)]
    if not layers:
        return final, None
    read = stack_layers(out.hidden_states, layers)
    return final, [read[i, : len(t.ids)].float().half().cpu() for i, t in enumerate(texts)]


def layers_suffix(layers: tuple[int, ...]) -> str:
    """What a features folder's name adds for the layers it holds ("" for the final state alone)."""
    return "-layers-" + "-".join(str(i) for i in layers) if layers else ""


def shard_names(texts: list[Text]) -> list[str]:
    """One name per SHARD_TEXTS texts: source, index and a hash of the shard's tokens."""
    names = []
    for i in range(0, len(texts), SHARD_TEXTS):
        chunk = texts[i : i + SHARD_TEXTS]
        digest = hashlib.sha1(repr([t.ids for t in chunk]).encode()).hexdigest()[:10]
        names.append(f"{chunk[0].source}-{i // SHARD_TEXTS:05d}-{digest}.safetensors")
    return names


def capture(target: LoadedModel, texts: list[Text], folder: Path, batch: int = 16, fast: bool = False,
            progress: bool = True, say=lambda m: print(m, file=sys.stderr), layers: tuple[int, ...] = ()) -> dict:
    """Capture features for `texts` into `folder` (resuming), and return the manifest. With `layers`, each shard
    also holds those hidden states side by side ("inputs"): a folder holds one choice of layers only."""
    from tqdm import tqdm

    folder.mkdir(parents=True, exist_ok=True)
    manifest = store.load_json(folder / "manifest.json", {"shards": {}, "seconds": 0.0})
    shards = [texts[i : i + SHARD_TEXTS] for i in range(0, len(texts), SHARD_TEXTS)]
    names = shard_names(texts)
    todo = [(n, c) for n, c in zip(names, shards) if n not in manifest["shards"] or not (folder / n).is_file()]
    positions = sum(len(t.ids) for _, chunk in todo for t in chunk)
    hidden = target.model.config.hidden_size
    say(f"features: {len(todo)} of {len(shards)} shards to capture, {positions:,} positions, "
        f"about {positions * (2 * hidden * (1 + len(layers)) + 8) / 1e6:.0f} MB on disk")
    known = _captured_texts(folder, manifest) if todo else {}
    reused = sum(len(t.ids) for _, chunk in todo for t in chunk if _key(t.ids) in known)
    if reused:
        say(f"features: {reused:,} of those positions are copied from shards already captured")
    bar = tqdm(total=positions - reused, desc="target features", unit="pos", file=sys.stderr, disable=not progress)
    estimated = False
    for name, chunk in todo:
        t0 = time.perf_counter()
        chunk = sorted(chunk, key=lambda t: len(t.ids))  # similar lengths share a batch: less padding
        new = [t for t in chunk if _key(t.ids) not in known]
        read = {}  # this shard's new texts only: what earlier shards hold stays in `known`
        for start in range(0, len(new), batch):
            t1 = time.perf_counter()
            part = new[start : start + batch]
            final, inputs = layer_states(target, part, fast, layers)
            for i, text in enumerate(part):
                read[_key(text.ids)] = final[i] if inputs is None else (final[i], inputs[i])
            done = sum(len(t.ids) for t in part)
            bar.update(done)
            if not estimated:  # the time estimate, from the first batch's measured rate
                rate = done / max(time.perf_counter() - t1, 1e-9)
                say(f"features: about {(positions - reused) / rate / 60:.1f} min at {rate:,.0f} positions/s "
                    "(first batch)")
                estimated = True
        feats = [known[k] if k in known else read[k] for k in (_key(t.ids) for t in chunk)]
        seconds = time.perf_counter() - t0
        tokens, offsets = store.pack([torch.tensor(t.ids, dtype=torch.int32) for t in chunk])
        tensors = {"tokens": tokens, "offsets": offsets, "answer_from": torch.tensor([t.answer_from for t in chunk])}
        if layers:
            tensors["features"], _ = store.pack([f for f, _ in feats])
            tensors["inputs"], _ = store.pack([i for _, i in feats])
        else:
            tensors["features"], _ = store.pack(feats)
        store.save(folder / name, tensors, {"source": chunk[0].source, "layers": list(layers)})
        manifest["shards"][name] = {"source": chunk[0].source, "texts": len(chunk), "seconds": round(seconds, 2),
                                    "copied": sum(len(t.ids) for t in chunk) - sum(len(t.ids) for t in new),
                                    "positions": sum(len(t.ids) for t in chunk)}
        manifest["seconds"] = round(sum(s["seconds"] for s in manifest["shards"].values()), 2)
        store.save_json(folder / "manifest.json", manifest)
    bar.close()
    return manifest


def _key(ids) -> str:
    return hashlib.sha1(repr(list(ids)).encode()).hexdigest()


def _captured_texts(folder: Path, manifest: dict) -> dict[str, torch.Tensor]:
    """Features of every text in the folder's captured shards, by a hash of its tokens."""
    known = {}
    for name in manifest["shards"]:
        if (folder / name).is_file():
            tensors, _ = store.load(folder / name)
            tokens = store.unpack(tensors["tokens"], tensors["offsets"])
            feats = store.unpack(tensors["features"], tensors["offsets"])
            if "inputs" in tensors:
                feats = list(zip(feats, store.unpack(tensors["inputs"], tensors["offsets"])))
            for ids, feat in zip(tokens, feats):
                known[_key(ids.tolist())] = feat
    return known


def load_features(folder: Path, names: list[str] | None = None) -> Features:
    """The shards listed in the manifest (or the named ones), in one object."""
    manifest = store.load_json(Path(folder) / "manifest.json", {"shards": {}})
    out = Features([], [], [], [])
    for name in names or sorted(manifest["shards"]):
        tensors, meta = store.load(Path(folder) / name)
        out.tokens += [t.long() for t in store.unpack(tensors["tokens"], tensors["offsets"])]
        out.features += store.unpack(tensors["features"], tensors["offsets"])
        out.answer_from += tensors["answer_from"].tolist()
        out.sources += [meta.get("source", "")] * len(tensors["answer_from"])
        if "inputs" in tensors:
            out.inputs = (out.inputs or []) + store.unpack(tensors["inputs"], tensors["offsets"])
    return out


def on_device(features: Features, device: torch.device) -> Features:
    """The same texts with their tokens and features moved to `device` (fp16 features stay fp16)."""
    def move(rows):
        return None if rows is None else [r.to(device) for r in rows]

    return Features(move(features.tokens), move(features.features), features.answer_from, features.sources,
                    move(features.inputs))


def subset(features: Features, positions: int, seed: int) -> Features:
    """Texts drawn at random (seeded) until they hold `positions` trained positions: a smaller set from the same
    data."""
    order = torch.randperm(len(features.tokens), generator=torch.Generator().manual_seed(seed)).tolist()
    keep, total = [], 0
    for i in order:
        if total >= positions:
            break
        keep.append(i)
        total += max(0, len(features.tokens[i]) - features.answer_from[i])
    keep.sort()
    return Features(
        [features.tokens[i] for i in keep],
        [features.features[i] for i in keep],
        [features.answer_from[i] for i in keep],
        [features.sources[i] for i in keep],
        None if features.inputs is None else [features.inputs[i] for i in keep],
    )
