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


def measure_verify_cost(target, max_nodes: int = 32, contexts: tuple[int, ...] = (160,), repeats: int = 20) -> dict:
    """v(N) for N = 1 .. max_nodes after each committed context, and the plain step each is relative to.

    target: a LoadedModel. The first context's figures also sit at the top level (`context`,
    `step_seconds`, `steps`), where readers of one-context files look. The model stack is imported
    here, so pages that only show a shipped measurement stay light.
    """
    from .measure import machine

    by_context = [_measure_at(target, max_nodes, context, repeats) for context in contexts]
    return {
        "target": target.name,
        "machine": machine(target.device, target.model),
        "dtype": str(target.dtype).replace("torch.", ""),
        "repeats": repeats,
        "nodes": list(range(1, max_nodes + 1)),
        **by_context[0],
        "by_context": by_context,
    }


def _measure_at(target, max_nodes: int, context: int, repeats: int) -> dict:
    import torch

    from ..clock import Clock
    from ..decode import target_forward
    from ..fast_path import GrowingCache
    from ..trees import keep_branch, target_attention

    device, clock = target.device, Clock(target.device)
    generator = torch.Generator().manual_seed(0)
    low = min(100, target.vocab_size // 2)  # ordinary tokens, past the special ones
    shape = (1, context + max_nodes + 1)
    ids = torch.randint(low, min(target.vocab_size, 20000), shape, generator=generator).to(device)
    cache = GrowingCache(config=target.model.config)

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
        "context": context,
        "step_seconds": step,
        "seconds": [statistics.median(t) for t in node_times.values()],
        "steps": [statistics.median(t) / step for t in node_times.values()],
    }


def at_context(cost: dict, context: int) -> dict:
    """The measurement with v(N) of the measured context nearest to `context` (files of one context: as they are)."""
    measured = cost.get("by_context") or [cost]
    nearest = min(measured, key=lambda m: abs(m["context"] - context))
    return {**cost, **nearest}


def contexts(cost: dict) -> list[int]:
    return [m["context"] for m in cost.get("by_context") or [cost]]


def save_verify_cost(cost: dict, path: Path) -> None:
    made = {"made": date.today().isoformat(),
            "command": f"python -m specviz verify-cost --max-nodes {len(cost['nodes'])} "
                       f"--context {','.join(map(str, contexts(cost)))} "
                       f"--repeats {cost['repeats']} --out {path}"}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**made, **cost}, indent=1), encoding="utf-8")


def load_verify_cost(path: Path = VERIFY_COST_FILE) -> dict | None:
    """The shipped (or given) v(N) measurement; None when there is none."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def cost_curve(cost: dict, context: int = 128):
    """v as a function: v(0) = 1, v(N) measured for N = 1 .. max, and beyond it the last measured slope."""
    steps = at_context(cost, context)["steps"]
    slope = (steps[-1] - steps[0]) / max(len(steps) - 1, 1)

    def v(n: int) -> float:
        if n <= 0:
            return 1.0
        return steps[n - 1] if n <= len(steps) else steps[-1] + slope * (n - len(steps))

    return v
