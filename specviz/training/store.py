"""Cached arrays on disk: safetensors files written atomically, ragged rows packed flat with offsets.

safetensors holds only tensors and string metadata, so nothing read back can run code (unlike a
pickle). A file is written to a scratch name and renamed, so an interrupted run leaves either the
old file or the new one, never half of one: every stage resumes from what is complete.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, safe_open, save_file


def save(path: Path, tensors: dict[str, torch.Tensor], meta: dict | None = None) -> None:
    """Write tensors (and JSON-able metadata) to `path` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(path.suffix + ".tmp")
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    save_file(tensors, str(scratch), metadata={"json": json.dumps(meta or {})})
    scratch.replace(path)


def load(path: Path) -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors and metadata that `save` wrote."""
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads((f.metadata() or {}).get("json", "{}"))
    return load_file(str(path)), meta


def pack(rows: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged rows (each [n_i, ...]) as one flat tensor and offsets [len(rows) + 1]."""
    lengths = torch.tensor([0] + [len(r) for r in rows], dtype=torch.int64)
    return torch.cat(rows) if rows else torch.empty(0), lengths.cumsum(0)


def unpack(flat: torch.Tensor, offsets: torch.Tensor) -> list[torch.Tensor]:
    bounds = offsets.tolist()
    return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def save_json(path: Path, obj) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(path.suffix + ".tmp")
    scratch.write_text(json.dumps(obj, indent=1), encoding="utf-8")
    scratch.replace(path)


def load_json(path: Path, default=None):
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else default
