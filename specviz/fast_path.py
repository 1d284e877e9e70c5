"""The target's forward on the fastest exact path this machine has, for a step and a verification alike.

Speculative decoding pays only when one forward over γ+1 tokens costs about one forward over one.
On a CPU the model is memory-bound (every forward streams all its weights), so that should hold, but
the stock path breaks it three ways (measured in benchmarks/profile_verify.py):

- matrix products: on this project's AMD EPYC, the BLAS that torch's CPU build calls for `linear` reads
  the weights about half as fast as oneDNN does, and slower still for 2–8 rows than for one;
  `PackedLinear` multiplies by a weight packed once at load, for oneDNN or for SpecViz's own panel
  product (`panels`, built here from C), whichever is clearly faster for a verification's rows on the
  machine (`products.choose_packs`): on an Intel Xeon the panels took 24 ms for 4 rows and 27 ms for 9
  against oneDNN's 33 and 38, and 21 ms for one row, as the BLAS does. Forwards of few rows (a plain step, a small
  verification) take the BLAS instead where it is clearly faster still (`products.choose_blas_rows`).
  Both choices are measured at the first load and kept;
- attention: for more than one query the stock function copies the keys and values of the whole
  context to give each query head its own (`repeat_kv`); `grouped_sdpa` instead lets each key/value
  head serve its group of query heads as extra query rows, which is the same arithmetic. Where it
  builds and was measured faster (`attention.choose`), a step's and a verification's attention take
  SpecViz's own few-row kernel instead (`few_row_sdpa`, `attention`): on an AMD EPYC at a context of
  512 it cut a verification of 8 nodes from 34.7 to 32.6 ms and a step from 29.5 to 28.9 ms;
- the KV cache: `DynamicCache` appends by concatenation, so every forward copies the whole cache;
  `GrowingCache` writes into spare room and hands out views.

Grouped attention and the cache change no arithmetic (bit-identical logits); the few-row kernel
sums in another order than SDPA (within about 2e-7) and the products round differently from the
BLAS, by about 1e-6, as a row computed alone already does against the same row among others with
the libraries (the panels and the kernel give a row the same bits either way). The
speculative run and the target alone both take this path, and greedy fp32 output stays
token-for-token the target's (tests/core/test_fast_path.py, test_panels.py, the identity tests). Off the
CPU, or where torch has no oneDNN, the stock path is kept.

On a CUDA GPU one thing is changed: SDPA's cuDNN backend is turned off (`no_cudnn_attention`). In bf16
and fp16 PyTorch picks it for every forward, and it builds a plan for each new shape, and the loop
makes a new shape every round (the context grows). On an H100, over a SmolLM2-135M-shaped model at a
growing context, a plain bf16 step took 96 ms with it and 21 ms without it, and single forwards up to
1.3 s (benchmarks/verify_gpu.py and docs/performance.md). fp32 never takes it; the other backends
compute the same attention.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface, DynamicCache
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from . import attention
from .panels import Panels
from .products import BF16_PANEL_ROWS, PACK_ROWS, SMALL_MODEL_BYTES, bf16_panels, choose_blas_rows, choose_packs, cpu

GROUPED_SDPA = "specviz_grouped_sdpa"
FEW_ROW_SDPA = "specviz_few_row_sdpa"


def prepare(model: nn.Module, device: torch.device, remember: Path | None = None) -> nn.Module:
    """Put a loaded model on the fast path for its device (in place); returns it. `remember`: the file that keeps the
    measured choice of products (`products.choose_blas_rows`).

    SPECVIZ_FAST_PATH=0 keeps the stock path (to compare the two, or to rule the fast path out).
    """
    if device.type == "cuda" and os.environ.get("SPECVIZ_FAST_PATH") != "0":
        no_cudnn_attention()
    if device.type != "cpu" or os.environ.get("SPECVIZ_FAST_PATH") == "0" or not isinstance(model, nn.Module):
        return model
    if getattr(getattr(model, "config", None), "_attn_implementation", None) == "sdpa":
        model.set_attn_implementation(GROUPED_SDPA)
        few_rows = attention.choose(model.config, _bytes(model) >= SMALL_MODEL_BYTES, remember)
        if few_rows is not None:
            model.set_attn_implementation(FEW_ROW_SDPA)
            for module in model.modules():
                if hasattr(module, "scaling") and hasattr(module, "layer_idx"):  # the attention layers
                    module.specviz_few_rows = few_rows
    if onednn_available():
        packed = []
        for name, module in list(model.named_modules()):
            if type(module) is nn.Linear:
                packed.append(PackedLinear(module, pack=False))  # packed once the library is chosen
                model.set_submodule(name, packed[-1])
        model.specviz_packs = choose_packs(packed, remember)
        model.specviz_blas_rows = choose_blas_rows(packed, remember)
    return model


def _bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def no_cudnn_attention() -> None:
    """Turn SDPA's cuDNN backend off for this process: it plans anew for every new shape of query and context, which a
    decoding loop makes every round (flash, memory-efficient and math attention remain, and give the same result)."""
    torch.backends.cuda.enable_cudnn_sdp(False)


def product(weight: torch.Tensor) -> nn.Linear:
    """x ↦ x @ weight.T as a module, on the fast path where there is one (for a head's output rows; in bf16 by the
    panels where they are built, `products.bf16_panels`)."""
    linear = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device="meta")
    linear.weight = nn.Parameter(weight, requires_grad=False)
    fast = weight.device.type == "cpu" and os.environ.get("SPECVIZ_FAST_PATH") != "0" and onednn_available()
    if not fast:
        return linear
    packed = PackedLinear(linear, pack=weight.dtype != torch.bfloat16)
    if weight.dtype == torch.bfloat16:
        packed.use_panels(bf16_panels())
    return packed


def activations(module: nn.Module) -> torch.dtype:
    """The dtype a small network's activations take: its weights' own, except where every product of a bf16 network is
    on the bf16 panels (a draft head beside an fp32 target on a CPU): those take fp32 rows, so its norms, rotations and
    attention run in fp32 without a conversion around each product."""
    dtype = next(module.parameters()).dtype
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    if dtype == torch.bfloat16 and linears and all(
            isinstance(m, PackedLinear) and m.panels is not None and m.panels_dtype == torch.bfloat16 for m in linears):
        return torch.float32
    return dtype


def onednn_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def bf16_ok(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return (bool(getattr(torch.backends.cpu, "get_cpu_capability", lambda: "")() in ("AVX512", "AMX"))
                and _cpu_has_bf16() and _cpu_bf16_faster())
    return False


@functools.lru_cache(maxsize=1)
def _cpu_bf16_faster() -> bool:
    """Whether bf16 products beat fp32 here, measured once on a target-sized product (about 0.1 s).

    A CPU that has AVX-512 bf16 instructions is not always faster with them: on this project's AMD
    EPYC bf16 wrote answers 1.6x faster than fp32, on an Intel Xeon without AMX it wrote them at
    0.7x the fp32 speed, and captured features at 0.6x.
    """

    def seconds(dtype) -> float:
        x, w = torch.randn(48, 576, dtype=dtype), torch.randn(1536, 576, dtype=dtype)
        torch.nn.functional.linear(x, w)  # warm-up
        t0 = time.perf_counter()
        for _ in range(20):
            torch.nn.functional.linear(x, w)
        return time.perf_counter() - t0

    return min(seconds(torch.bfloat16) for _ in range(3)) < 0.8 * min(seconds(torch.float32) for _ in range(3))


def draft_dtype(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    """The dtype a small draft network (a head) runs in beside a target of `dtype` on `device`.

    A head drafts one row at a time, so each draft streams all its weights: bf16 weights halve that,
    and a head of 8k output rows then fits in this AMD EPYC's cache. Where the CPU's one-row bf16
    products are faster than fp32 ones (measured here once), an fp32 target's head runs in bf16. Its q
    is still computed in fp32 from its logits, and verification stays the target's own, so the output
    is unchanged: only which tokens are drafted may differ. Elsewhere (a GPU, a CPU without fast bf16,
    SPECVIZ_FAST_PATH=0) the head keeps the target's dtype.
    """
    if (device.type != "cpu" or dtype != torch.float32 or os.environ.get("SPECVIZ_FAST_PATH") == "0"
            or not onednn_available() or not _cpu_has_bf16()):
        return dtype
    return torch.bfloat16 if _cpu_bf16_rows_faster() else dtype


@functools.lru_cache(maxsize=1)
def _cpu_bf16_rows_faster() -> bool:
    """Whether a packed one-row product over a head-sized weight (8,192 x 576) is clearly faster in bf16: the
    best of five tries each, taken in turn on one thread (a busy core slows both alike; about 0.2 s)."""
    linears = {dtype: product(torch.randn(8192, 576, dtype=dtype) / 24) for dtype in (torch.float32, torch.bfloat16)}
    best = dict.fromkeys(linears, float("inf"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _time_rows(linears, best)
    finally:
        torch.set_num_threads(threads)
    return best[torch.bfloat16] < 0.8 * best[torch.float32]


def _time_rows(linears: dict, best: dict) -> None:
    with torch.inference_mode():
        for _ in range(5):
            for dtype, linear in linears.items():
                x = torch.randn(1, 576, dtype=dtype)
                linear(x)
                t0 = time.perf_counter()
                for _ in range(5):
                    linear(x)
                best[dtype] = min(best[dtype], time.perf_counter() - t0)


def _cpu_has_bf16() -> bool:
    flags = cpu()[1].split()
    return "avx512_bf16" in flags or "amx_bf16" in flags


class PackedLinear(nn.Linear):
    """An nn.Linear (same weight and bias parameters) whose inference forward multiplies by a packed copy of its weight:
    oneDNN's, or the panel product's where the model's products take it (`products.choose_packs`).

    The packed copy is made again if the weight changes in place; training (gradients on), autocast
    and other dtypes take the plain `F.linear`.
    """

    def __init__(self, linear: nn.Linear, pack: bool = True):
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias  # shared: tied embeddings stay tied
        self.packed: torch.Tensor | None = None
        self.packed_version = -1
        self.panels: Panels | None = None  # the panel product, where it was chosen (`use_panels`); None: oneDNN
        self.panels_dtype = self.weight.dtype  # the weight's dtype when the panels were chosen
        self.blas_rows = 0  # inputs of up to this many rows take F.linear (`choose_blas_rows`)
        if pack and self.weight.dtype in (torch.float32, torch.bfloat16):
            self._pack()  # now, at load, rather than inside the first timed forward

    def use_panels(self, panels: Panels | None, packed: torch.Tensor | None = None) -> None:
        """Multiply by the panel product from now on (None: by oneDNN), packed for it now; `packed`: the weight already
        packed for it (by the timing that chose it). fp32 and bf16 weights; a weight later converted to another
        dtype (a bf16 twin for batched training answers) goes back to oneDNN."""
        panels = panels if self.weight.dtype in (torch.float32, torch.bfloat16) else None
        self.panels_dtype = self.weight.dtype
        if packed is not None:
            self.panels, self.packed, self.packed_version = panels, packed, self._weight_version()
        elif panels is not self.panels or self.packed is None:
            self.panels = panels
            if self.weight.dtype in (torch.float32, torch.bfloat16):  # as at load: only these are packed
                self._pack()

    def _pack(self) -> None:
        if self.weight.dtype != self.panels_dtype:  # a converted copy (a bf16 twin) takes oneDNN
            self.panels = None
        weight = self.weight.detach()
        self.packed = (self.panels.pack(weight) if self.panels is not None
                       else torch.ops.mkldnn._reorder_linear_weight(weight, PACK_ROWS))
        self.packed_version = self._weight_version()

    def _weight_version(self) -> int:
        # An inference tensor (made under torch.inference_mode) keeps no version counter: it is packed once.
        return -2 if self.weight.is_inference() else self.weight._version

    def __getstate__(self):  # copies and pickles leave the packed weight behind (oneDNN's layout has no storage)
        return {**self.__dict__, "packed": None, "packed_version": -1}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.reads_fp32(x):  # fp32 rows by a bf16 weight on the panels (a draft head's: `activations`)
            if x.numel() > BF16_PANEL_ROWS * self.in_features:
                return F.linear(x.to(self.weight.dtype), self.weight, self.bias).to(x.dtype)
            return self.packed_product(x)
        if (x.device.type != "cpu" or x.dtype != self.weight.dtype or torch.is_autocast_enabled("cpu")
                or (torch.is_grad_enabled() and self.weight.requires_grad)):
            return F.linear(x, self.weight, self.bias)
        if x.numel() <= self.blas_rows * self.in_features and x.dtype == torch.float32:
            return F.linear(x, self.weight, self.bias)
        if self.panels is not None and x.dtype == torch.bfloat16 and x.numel() > BF16_PANEL_ROWS * self.in_features:
            return F.linear(x, self.weight, self.bias)  # a head reading a whole prompt: a bf16 matrix product
        return self.packed_product(x)

    def reads_fp32(self, x: torch.Tensor) -> bool:
        """Whether fp32 rows go to this bf16 weight's panels (given back in fp32), as a head's activations do."""
        on_panels = self.panels is not None and self.panels_dtype == torch.bfloat16 == self.weight.dtype
        training = torch.is_grad_enabled() and self.weight.requires_grad
        return (on_panels and x.dtype == torch.float32 and x.device.type == "cpu"
                and not torch.is_autocast_enabled("cpu") and not training)

    def packed_product(self, x: torch.Tensor) -> torch.Tensor:
        """x @ weight.T (+ bias) by the packed weight, whatever the rows (`products` times it against the BLAS)."""
        if (self.packed is None or self.packed_version != self._weight_version()
                or self.packed.dtype != self.weight.dtype):
            self._pack()
        if self.panels is not None:
            return self.panels.product(x, self.packed, self.out_features, self.bias)
        if x.dim() == 1:  # a single vector: oneDNN wants rows
            return torch.ops.mkldnn._linear_pointwise(x[None], self.packed, self.bias, "none", [], "")[0]
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


def grouped_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """The target's SDPA for grouped-query attention over several queries without copying keys and values
    (`grouped_attention`). One query and mask-free (causal) forwards keep the stock function, which has no copy there
    either."""
    groups = query.shape[1] // key.shape[1]
    if groups == 1 or query.shape[2] == 1 or attention_mask is None or attention_mask.shape[1] != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs)
    out = grouped_attention(query, key, value, attention_mask, dropout, scaling)
    return out.transpose(1, 2).contiguous(), None  # (B, q, H, D)


def few_row_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """The target's attention by the few-row kernel (`attention`), where its layer was given it and it takes the
    shapes and the mask (a step, a verification); else `grouped_sdpa` (a long prefill, a mask it cannot read)."""
    built = getattr(module, "specviz_few_rows", None)
    visible = False
    if (built is not None and not (dropout and module.training) and not kwargs.get("sliding_window")
            and not kwargs.get("softcap") and built.takes(query, key, value)):
        visible = attention.visible_rows(attention_mask, query.shape[2], key.shape[2], query.shape[1] // key.shape[1])
    if visible is False:
        return grouped_sdpa(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs)
    out = built.attend(query, key, value, visible, scaling if scaling is not None else query.shape[-1] ** -0.5)
    return out.transpose(1, 2).contiguous(), None  # (B, q, H, D)


def grouped_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
                      dropout: float = 0.0, scale: float | None = None) -> torch.Tensor:
    """Grouped-query attention of query [B, H, q, D] over key and value [B, KV, L, D] (H = KV·g), mask [B, 1, q, L]
    or None: query as [B, KV, g·q, D], so each key/value head attends for its g query heads at once and the mask is
    repeated over those g row blocks. The same numbers as repeating keys and values, without copying them, and on a
    CPU faster than SDPA's own enable_gqa (226 µs against 40 µs for a draft head's one bf16 query). [B, H, q, D]."""
    batch, heads, q, dim = query.shape
    groups = heads // key.shape[1]
    if mask is not None:
        mask = repeated_mask(mask, batch, groups)
    out = F.scaled_dot_product_attention(query.reshape(batch, key.shape[1], groups * q, dim), key, value,
                                         attn_mask=mask, dropout_p=dropout, scale=scale)
    return out.reshape(batch, heads, q, dim)


def repeated_mask(mask: torch.Tensor, batch: int, groups: int) -> torch.Tensor:
    """`mask` [B, 1, q, L] repeated over `groups` row blocks, [B, 1, g·q, L]. Every layer of a forward gets the same
    mask object, so the copy is made once a forward and kept on the mask itself (it goes when the mask goes)."""
    kept = getattr(mask, "_specviz_repeated", None)
    if kept is not None and kept[0] == (batch, groups):
        return kept[1]
    repeated = mask.expand(batch, 1, mask.shape[2], -1).repeat(1, 1, groups, 1)
    if not mask.requires_grad:  # a mask that carries gradients is left as it is
        mask._specviz_repeated = ((batch, groups), repeated)
    return repeated


AttentionInterface.register(GROUPED_SDPA, grouped_sdpa)
AttentionMaskInterface.register(GROUPED_SDPA, sdpa_mask)  # the same masks as sdpa, built once per forward
AttentionInterface.register(FEW_ROW_SDPA, few_row_sdpa)
AttentionMaskInterface.register(FEW_ROW_SDPA, sdpa_mask)


class GrowingLayer(DynamicLayer):
    """A DynamicLayer that keeps spare room and writes new keys and values into it.

    `keys` and `values` are views of the first `length` positions of the room; a crop only shortens
    them, and room doubles when it runs out, so a forward copies its new tokens and nothing else.
    """

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self.key_room = self.value_room = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.get_seq_length()
        end = start + key_states.shape[-2]
        if self.key_room is None or end > self.key_room.shape[-2]:
            self.key_room, self.value_room = (self._room(kept, new, end) for kept, new in
                                              ((self.keys, key_states), (self.values, value_states)))
        self.key_room[..., start:end, :] = key_states
        self.value_room[..., start:end, :] = value_states
        self.keys, self.values = self.key_room[..., :end, :], self.value_room[..., :end, :]
        return self.keys, self.values

    def _room(self, kept: torch.Tensor, new: torch.Tensor, needed: int) -> torch.Tensor:
        room = new.new_empty((*new.shape[:-2], max(2 * needed, 256), new.shape[-1]))
        if kept.numel():
            room[..., : kept.shape[-2], :] = kept
        return room

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        self.key_room = self.value_room = None  # the views were replaced: grow afresh from them

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)
        self.key_room = self.value_room = None


class GrowingCache(DynamicCache):
    """DynamicCache whose full-attention layers grow in place (GrowingLayer); other layer kinds as they were."""

    def __init__(self, config=None):
        super().__init__(config=config)
        self.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in self.layers]
        if self.layer_class_to_replicate is DynamicLayer:
            self.layer_class_to_replicate = GrowingLayer
