"""Keep only the top-1 columns of a cached answers file (specviz.training.answers), to carry it in less space.

A draft head recomputes the target's p from the captured features and reads no top-k, so a file carried to a
GPU machine for head training (scripts/device_head.sh) can drop the other columns: 16 ids and log p per token
are most of its size. The tokens, prompts and rows stay as they are, and the file loads as before.

    python scripts/slim_answers.py IN.safetensors OUT.safetensors
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.training.answers import load_dataset, save_dataset  # noqa: E402


def main(source: str, destination: str) -> None:
    data = load_dataset(Path(source))
    if data is None:
        sys.exit(f"{source}: no answers file of the current format")
    for s in data.sequences:
        s.topk_ids, s.topk_logp = s.topk_ids[:, :1].contiguous(), s.topk_logp[:, :1].contiguous()
    save_dataset(data.sequences, data.seconds, Path(destination))
    print(f"{destination}: {len(data.sequences)} answers, {data.answer_tokens:,} tokens, "
          f"{Path(destination).stat().st_size / 1e6:.1f} MB (was {Path(source).stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python scripts/slim_answers.py IN.safetensors OUT.safetensors")
    main(sys.argv[1], sys.argv[2])
