"""Few-row attention: SpecViz's own fp32 attention for the few query rows of a step or a verification
(`attention.c`), built on the machine that runs it, as the panel product is (`panels`).

Why: after the products, attention is what a verification adds most to a step. torch's SDPA kernel spends on a
step's one query row and a tree's nine what it spends on hundreds: on an AMD EPYC (2 cores) at a context of 512,
over SmolLM2-135M's 30 layers, 6.6 ms of a verification of 8 nodes against 2.6 ms of a step (docs/performance.md).
The kernel shares each key and value load among the rows of a key/value head and splits the keys between the cores:
for 9 query tokens over 520 keys 105 µs a layer against SDPA's 142, for one 27 against 52
(benchmarks/few_row_attention.py). It computes the same attention in another order (within about 2e-7 of SDPA), and
a row gets the same bits alone as among others.

Which one a model's attention takes is measured at its first load, like the products (`choose`), and kept in
fast-path.json; models too small to time (the tests' tiny ones) take the kernel where it builds, so the tests run
it. SPECVIZ_FEW_ROWS=0 turns it off, =1 takes it without measuring. Where no C compiler is found or the build fails,
attention stays torch's and the log says why once.

The same library, with its e^x, also gives the recycle table its round's top-k (`top_rows`): each row of a
verification's logits read for its largest, its log-sum-exp and its k largest, instead of a top-k and a softmax written
over all 49,152 entries (benchmarks/top_rows.py).
"""

from __future__ import annotations

import ctypes
import functools
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from . import panels, products

SOURCE = Path(__file__).with_name("attention.c")
SWITCH_ENV = "SPECVIZ_FEW_ROWS"
HEAD_SIZES = (16, 32, 64, 128)  # head sizes the kernel takes
MAX_ROWS = 64  # query rows per key/value head (query heads per key/value head × query tokens), at most
SDPA, FEW_ROWS = "sdpa", "few-rows"
NAMES = {SDPA: "torch's SDPA", FEW_ROWS: "few-row kernel"}
TIMED_CONTEXT = 512  # the choice is timed on a step and a tree of 8 over this many keys


class FewRows:
    """The built kernel."""

    def __init__(self, library: ctypes.CDLL, path: Path):
        self.path = path
        self._attend = library.specviz_few_row_attention
        self._attend.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long] * 2 + [ctypes.c_void_p] * 3 + \
            [ctypes.c_long] * 4 + [ctypes.c_float]
        self._attend.restype = ctypes.c_int
        self._work = library.specviz_attention_work
        self._work.argtypes = [ctypes.c_long] * 4
        self._work.restype = ctypes.c_long
        self._top = library.specviz_top_rows
        self._top.argtypes = [ctypes.c_void_p] + [ctypes.c_long] * 3 + [ctypes.c_void_p] * 3
        self._top.restype = None

    def __deepcopy__(self, memo) -> FewRows:
        return self

    def __reduce__(self):
        return _load, (str(self.path),)

    @staticmethod
    def takes(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> bool:
        """Whether the kernel takes these: fp32 on the CPU, one sequence, a head size it knows, at most MAX_ROWS rows
        per key/value head, and keys and values whose rows lie D floats apart within a head (a cache's views do)."""
        batch, heads, q, dim = query.shape
        return (query.device.type == "cpu" and query.dtype == key.dtype == value.dtype == torch.float32
                and batch == 1 and key.shape[0] == 1 and dim in HEAD_SIZES and key.shape[-1] == dim
                and heads % key.shape[1] == 0 and heads // key.shape[1] * q <= MAX_ROWS and key.shape[2] > 0
                and all(t.stride(-1) == 1 and t.stride(-2) == dim for t in (key, value)))

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, visible: torch.Tensor | None,
               scale: float) -> torch.Tensor:
        """Attention of query [1, H, q, D] over key and value [1, KV, L, D] (`takes` them), H = KV·g, with
        `visible` the bool or uint8 [g·q, L] of which keys each row of a key/value head reads (its g heads' rows
        one head after the other), or None (every key): [1, H, q, D]."""
        _, heads, q, dim = query.shape
        kv, length = key.shape[1], key.shape[2]
        rows = heads // kv * q
        grouped = query.reshape(kv, rows, dim).contiguous()
        out = torch.empty(1, heads, q, dim)
        work = torch.empty(self._work(kv, rows, length, dim))
        mask = None if visible is None else visible.to(torch.uint8).contiguous()
        if mask is not None and tuple(mask.shape) != (rows, length):
            raise ValueError(f"the visibility is {tuple(mask.shape)}, not ({rows}, {length})")
        if self._attend(grouped.data_ptr(), key.data_ptr(), value.data_ptr(), key.stride(1), value.stride(1),
                        0 if mask is None else mask.data_ptr(), out.data_ptr(), work.data_ptr(), kv, rows, length,
                        dim, scale):
            raise ValueError(f"the few-row kernel does not take {rows} rows of {dim} over {length} keys")
        return out


def visible_rows(mask: torch.Tensor | None, q: int, length: int, groups: int) -> torch.Tensor | None | bool:
    """Which keys each row of a key/value head reads, as the kernel takes it: uint8 [g·q, L] (the mask's rows repeated
    for each of the g query heads), None for every key (one query and no mask), False where the mask is not a plain
    one (a bool [1, 1, q, L], or an additive one of 0 and the dtype's minimum). Made once a forward: every layer gets
    the same mask object, and the result is kept on it."""
    if mask is None:
        return None if q == 1 else torch.ones(q, length, dtype=torch.bool).tril(length - q).repeat(groups, 1)
    if mask.dim() != 4 or mask.shape[0] != 1 or mask.shape[1] != 1 or tuple(mask.shape[2:]) != (q, length):
        return False
    kept = getattr(mask, "_specviz_visible", None)
    if kept is not None and kept[0] == groups:
        return kept[1]
    rows = mask[0, 0]
    if rows.dtype != torch.bool:
        lowest = torch.finfo(rows.dtype).min
        if not bool(((rows == 0) | (rows == lowest)).all()):
            return False
        rows = rows == 0
    visible = rows.repeat(groups, 1).to(torch.uint8)
    if not mask.requires_grad:
        mask._specviz_visible = (groups, visible)
    return visible


def top_rows(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(ids [R, k], probabilities [R, k]): each row's k likeliest entries of fp32 CPU logits [R, V] at temperature 1,
    likeliest first, by the kernel's passes over each row for the largest, the normaliser and the k largest (no
    softmax written over every entry; `Verified.top`, once a round); None where the kernel is not built here or off
    (SPECVIZ_FEW_ROWS=0)."""
    built = available()
    if built is None or logits.dim() != 2 or logits.device.type != "cpu" or not 0 < k <= logits.shape[1]:
        return None
    rows = logits.float().contiguous()
    values, ids = torch.empty(rows.shape[0], k), torch.empty(rows.shape[0], k, dtype=torch.long)
    normaliser = torch.empty(rows.shape[0])
    built._top(rows.data_ptr(), rows.shape[0], rows.shape[1], k, values.data_ptr(), ids.data_ptr(),
               normaliser.data_ptr())
    return ids, (values - normaliser[:, None]).exp_()


def _load(path: str) -> FewRows:
    return FewRows(ctypes.CDLL(path), Path(path))


def available(directory: Path | None = None) -> FewRows | None:
    """The kernel on this machine, built into `directory` (the SpecViz cache) if it is not there yet; None where it
    is switched off (SPECVIZ_FEW_ROWS=0) or cannot be built here (the reason is logged once)."""
    return panels.switched_build(SWITCH_ENV, directory, _built)


@functools.cache
def _built(directory: Path) -> FewRows | None:
    path = panels.build_or_say_why(directory, "attention", SOURCE, ("-lm",), "the few-row attention",
                                   "attention stays torch's")
    return _load(str(path)) if path else None


def choose(config, timed: bool, remember: Path | None = None) -> FewRows | None:
    """The kernel where a model with this config should take it, else None: off with SPECVIZ_FEW_ROWS=0, taken
    unmeasured with =1 or for models too small to time (`timed` False), else where it was clearly faster than SDPA
    (under 0.9 of its time for a step and a tree of 8 at TIMED_CONTEXT keys, the best of three passes, in turn),
    measured at the first load and kept like the products' choice (`products.measured_choice`)."""
    built = available(remember.parent if remember else None)
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    if built is None or dim not in HEAD_SIZES:
        return None
    if os.environ.get(SWITCH_ENV, "").strip() == "1" or not timed:
        return built
    key = f"attention | {products.choice_key(f'{heads}x{kv}x{dim}')} | {built.path.stem}"
    choice = products.measured_choice(key, remember, (SDPA, FEW_ROWS), lambda: _faster(built, heads, kv, dim),
                                lambda chosen: f"attention {NAMES[chosen]}")
    return built if choice == FEW_ROWS else None


def _faster(built: FewRows, heads: int, kv: int, dim: int, passes: int = 3, calls: int = 20) -> str:
    generator = torch.Generator().manual_seed(0)
    key = torch.randn(1, kv, TIMED_CONTEXT, dim, generator=generator)
    value = torch.randn(1, kv, TIMED_CONTEXT, dim, generator=generator)
    best = {SDPA: float("inf"), FEW_ROWS: float("inf")}
    cases = []
    for tokens in (1, 9):
        query = torch.randn(1, heads, tokens, dim, generator=generator)
        visible = torch.ones(tokens, TIMED_CONTEXT, dtype=torch.bool)
        visible[:, -tokens:] = torch.ones(tokens, tokens, dtype=torch.bool).tril()
        additive = torch.zeros(1, 1, tokens, TIMED_CONTEXT).masked_fill_(~visible, torch.finfo(torch.float32).min)
        grouped_rows = visible.repeat(heads // kv, 1)
        cases.append((query, additive if tokens > 1 else None, grouped_rows if tokens > 1 else None))
    def sdpa(q, additive, rows):  # as fast_path.grouped_sdpa lays them out: a key/value head's g heads' rows together
        mask = None if additive is None else additive.repeat(1, 1, heads // kv, 1)
        return F.scaled_dot_product_attention(q.reshape(1, kv, -1, dim), key, value, attn_mask=mask)

    kinds = {
        SDPA: sdpa,
        FEW_ROWS: lambda q, additive, rows: built.attend(q, key, value, rows, dim ** -0.5),
    }
    with torch.inference_mode():
        for _ in range(passes):
            for kind, attend in kinds.items():
                start = time.perf_counter()
                for _ in range(calls):
                    for case in cases:
                        attend(*case)
                best[kind] = min(best[kind], time.perf_counter() - start)
    return FEW_ROWS if best[FEW_ROWS] < 0.9 * best[SDPA] else SDPA
