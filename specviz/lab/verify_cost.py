"""v(N): what one target forward over a token tree of N drafted nodes costs, in plain decoding steps.

A chain of γ drafts and a tree of N nodes are both verified by one forward; on a GPU that forward
costs about one step for any small N, on a CPU it grows with N. Trees pay only where the tokens a
tree gains per round outgrow that cost, so the theory beside every tree figure uses v(N) measured
here: the forward over the root and N nodes under a tree mask (a binary tree, breadth first) with
the output head applied to one row, against a one-token forward with its head, both after the same
committed context, each the median of repeated timings.
"""

from __future__ import annotations

import json
import statistics
from datetime import date
from pathlib import Path

VERIFY_COST_FILE = Path(__file__).resolve().parents[2] / "assets" / "trees" / "verify_cost.json"


def binary_tree(n: int) -> list[int]:
    """Parents of an n-node tree where every node has two children, filled breadth first."""
    return [-1 if i < 2 else (i - 2) // 2 for i in range(n)]


def measure_verify_cost(target, max_nodes: int = 32, context: int = 160, repeats: int = 20) -> dict:
    """v(N) for N = 1 .. max_nodes, and the plain step time it is relative to (target: a LoadedModel).

    The model stack is imported here, so pages that only show a shipped measurement stay light.
    """
    import torch
    from transformers import DynamicCache

    from ..decode import Clock, target_forward
    from .measure import machine
    from ..trees import keep_branch, target_attention

    device, clock = target.device, Clock(target.device)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(100, min(target.vocab_size, 20000), (1, context + max_nodes + 1), generator=generator).to(device)
    cache = DynamicCache(config=target.model.config)

    def forward(n: int) -> float:
        """One forward over the root and n tree nodes (n = 0: a plain step), its head on one row; cache restored."""
        tree = target_attention(binary_tree(n), context - 1, target.dtype, device) if n else None
        start = clock()
        _, logits = target_forward(target, ids[:, context - 1 : context + n], cache, tree=tree)
        logits.rows([0])
        seconds = clock() - start
        keep_branch(cache, context - 1, n + 1, [])
        return seconds

    with torch.inference_mode():
        target_forward(target, ids[:, : context - 1], cache, head=False)
        for n in (0, max_nodes, 0):  # warm-up
            forward(n)
        step_times, node_times = [], {n: [] for n in range(1, max_nodes + 1)}
        for _ in range(repeats):  # interleaved, so a slow moment touches every N alike
            step_times.append(forward(0))
            for n in node_times:
                node_times[n].append(forward(n))
    step = statistics.median(step_times)
    return {
        "target": target.name,
        "machine": machine(device),
        "dtype": str(target.dtype).replace("torch.", ""),
        "context": context,
        "repeats": repeats,
        "step_seconds": step,
        "nodes": list(node_times),
        "seconds": [statistics.median(t) for t in node_times.values()],
        "steps": [statistics.median(t) / step for t in node_times.values()],
    }


def save_verify_cost(cost: dict, path: Path) -> None:
    made = {"made": date.today().isoformat(),
            "command": f"python -m specviz verify-cost --max-nodes {len(cost['nodes'])} --context {cost['context']} "
                       f"--repeats {cost['repeats']} --out {path}"}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**made, **cost}, indent=1), encoding="utf-8")


def load_verify_cost(path: Path = VERIFY_COST_FILE) -> dict | None:
    """The shipped (or given) v(N) measurement; None when there is none."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
