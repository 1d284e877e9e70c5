"""Feature-level draft heads (EAGLE-style): a small network over the target's own hidden state.

A standalone tiny draft must guess the next token from the tokens alone. A head reads what the
target already computed: its final hidden state f_t (the vector the target's output head turns
into p), and the embedding of the token x_{t+1} that followed. From the pair (f_t, e(x_{t+1})) it
predicts f_{t+1}, and the target's own output head applied to that prediction gives q for x_{t+2}.
To draft further it feeds its predicted feature back in with the token it drafted.

The network (EAGLE-1's shape): both inputs RMS-normalised, concatenated and projected to the
hidden size, one pre-norm decoder layer (grouped-query attention with RoPE and a SiLU-gated MLP,
the target's own layer shape), and a final norm. q is scored on a reduced draft vocabulary: the
rows of the target's tied embedding for the N tokens it writes most, mapped back to target ids, so
the head stores no embedding of its own and a draft step costs a small fraction of a target step.

A head is a folder: head.json (shape, draft vocabulary, the target it reads) and
head.safetensors (its weights). `load_head` attaches it to a loaded target.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .. import head_step
from ..attention import HEAD_SIZES, MAX_ROWS, visible_rows
from ..errors import ConfigError
from ..fast_path import activations, grouped_attention, prepare
from ..head_step import HeadKernel
from ..products import BF16_PANEL_ROWS

HEAD_CONFIG, HEAD_WEIGHTS = "head.json", "head.safetensors"


@dataclass(frozen=True)
class HeadShape:
    hidden: int  # the target's hidden size: features, embeddings and the head's residual stream
    heads: int  # attention heads (the target's count)
    kv_heads: int  # key/value heads (grouped-query attention, as the target)
    intermediate: int  # MLP width (the target's)
    rope_theta: float  # RoPE base (the target's)
    eps: float  # RMSNorm epsilon (the target's)
    # Which of the target's hidden states the head reads, as indices into its hidden-state list (0 = the
    # embeddings, i = the output of layer i, the last = the final, normed state). Empty: the final one only (v1-v3).
    # Several (EAGLE-3): each RMS-normalised, concatenated and fused to the hidden size by `fuse`.
    layers: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "layers", tuple(int(i) for i in self.layers))  # JSON gives a list

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @classmethod
    def of_target(cls, config) -> HeadShape:
        rope = getattr(config, "rope_parameters", None) or {}
        return cls(
            hidden=config.hidden_size,
            heads=config.num_attention_heads,
            kv_heads=getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
            intermediate=config.intermediate_size,
            rope_theta=float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))),
            eps=float(getattr(config, "rms_norm_eps", 1e-5)),
        )


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # normalised in fp32 whatever x's dtype, then scaled in x's (one fused kernel: a draft step runs five)
        return F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).to(x.dtype) * self.weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., L, D] rotated by the angles whose cos and sin [L, D] are given (Rotary.at)."""
    d = x.shape[-1]
    half = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], dim=-1)
    return x * cos + half * sin


class Rotary:
    """RoPE's cos and sin by position, kept in a table that grows as positions do: a draft step looks its
    angles up once for queries and keys instead of computing them twice."""

    def __init__(self, dim: int, theta: float):
        self.dim, self.theta = dim, theta
        self.tables: dict = {}  # (device, dtype) -> (cos, sin) [positions, D]

    def at(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [L, D] at `positions` [L]."""
        cos, sin = self.table(int(positions.max()) + 1 if positions.numel() else 0, dtype, positions.device)
        return cos[positions], sin[positions]

    def table(self, end: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [≥ end, D] for positions 0, 1, ... (the table, grown to hold `end` positions)."""
        key = (device, dtype)
        cos, sin = self.tables.get(key, (None, None))
        if cos is None or end > cos.shape[0]:
            size = max(256, 1 << (end - 1).bit_length())
            inv = 1.0 / self.theta ** (torch.arange(0, self.dim, 2, device=device, dtype=torch.float32) / self.dim)
            angles = torch.arange(size, device=device, dtype=torch.float32)[:, None] * inv[None, :]
            cos, sin = angles.cos().repeat(1, 2).to(dtype), angles.sin().repeat(1, 2).to(dtype)
            self.tables[key] = cos, sin
        return cos, sin


class KVCache:
    """The head's keys and values for the pairs it has read, with a length that rolls back."""

    def __init__(self):
        self.k = self.v = None  # [kv_heads, capacity, head_dim]
        self.length = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = k.shape[1]
        self.room(n, k)
        self.k[:, self.length : self.length + n] = k
        self.v[:, self.length : self.length + n] = v
        self.length += n
        return self.k[:, : self.length], self.v[:, : self.length]

    def room(self, n: int, like: torch.Tensor) -> None:
        """Room for n more entries, grown (by doubling) where it runs out; `like`: keys of the cache's heads, dtype and
        device."""
        if self.k is None or self.length + n > self.k.shape[1]:
            capacity = max(256, 2 * (self.length + n))
            grown_k = like.new_empty(like.shape[0], capacity, like.shape[-1])
            grown_v = like.new_empty(like.shape[0], capacity, like.shape[-1])
            if self.k is not None:
                grown_k[:, : self.length] = self.k[:, : self.length]
                grown_v[:, : self.length] = self.v[:, : self.length]
            self.k, self.v = grown_k, grown_v

    def truncate(self, length: int) -> None:
        self.length = min(self.length, length)


class DraftHead(nn.Module):
    """fc([norm(e), norm(f)]) -> one decoder layer -> norm: the predicted next feature."""

    # The few-row attention kernel (specviz.attention) where the target it reads took it: the head's attention has
    # the target's shape, and with fp32 activations (fast_path.activations) a draft step's few rows take it too.
    few_rows = None
    # The whole step in one C call (specviz.head_step), bound at load where it applies (`bind_kernel`).
    kernel: HeadKernel | None = None

    def __init__(self, shape: HeadShape):
        super().__init__()
        h, d = shape.hidden, shape.head_dim
        self.shape = shape
        self.rotary = Rotary(d, shape.rope_theta)
        self.norm_embedding = RMSNorm(h, shape.eps)
        self.norm_feature = RMSNorm(h, shape.eps)
        self.fc = nn.Linear(2 * h, h, bias=True)
        self.attn_norm = RMSNorm(h, shape.eps)
        self.q = nn.Linear(h, shape.heads * d, bias=False)
        self.k = nn.Linear(h, shape.kv_heads * d, bias=False)
        self.v = nn.Linear(h, shape.kv_heads * d, bias=False)
        self.o = nn.Linear(shape.heads * d, h, bias=False)
        self.mlp_norm = RMSNorm(h, shape.eps)
        self.gate = nn.Linear(h, shape.intermediate, bias=False)
        self.up = nn.Linear(h, shape.intermediate, bias=False)
        self.down = nn.Linear(shape.intermediate, h, bias=False)
        self.out_norm = RMSNorm(h, shape.eps)
        if shape.layers:
            self.layer_norm = nn.Parameter(torch.ones(len(shape.layers), h))  # one RMSNorm weight per layer read
            self.fuse = nn.Linear(len(shape.layers) * h, h, bias=False)

    @property
    def input_width(self) -> int:
        """The width of the target's features this head reads: its hidden size times the layers it reads."""
        return self.shape.hidden * max(1, len(self.shape.layers))

    def lift(self, features: torch.Tensor) -> torch.Tensor:
        """The target's features [.., input_width] as the head's own [.., H]: several layers' states, each
        RMS-normalised, fused by one linear map; the final state alone passes as it is. The head's predicted
        features (later draft steps) are already [.., H] and are never lifted."""
        if not self.shape.layers:
            return features
        if self.kernel_takes(features, features, width=self.input_width):
            return self.kernel.lift(features)
        parts = features.unflatten(-1, (len(self.shape.layers), self.shape.hidden)).float()
        parts = parts * torch.rsqrt(parts.pow(2).mean(-1, keepdim=True) + self.shape.eps)
        return self.fuse((parts.to(features.dtype) * self.layer_norm).flatten(-2))

    # --- pieces shared by drafting and training ---------------------------------------------
    def inputs(self, embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.cat([self.norm_embedding(embeddings), self.norm_feature(features)], dim=-1))

    def qkv(self, x: torch.Tensor, positions: torch.Tensor):
        """Queries [.., heads, L, d], keys and values [.., kv_heads, L, d] of x [.., L, H], RoPE applied."""
        s, lead = self.shape, x.shape[:-2]
        length = x.shape[-2]
        y = self.attn_norm(x)
        q = self.q(y).view(*lead, length, s.heads, s.head_dim).transpose(-2, -3)
        k = self.k(y).view(*lead, length, s.kv_heads, s.head_dim).transpose(-2, -3)
        v = self.v(y).view(*lead, length, s.kv_heads, s.head_dim).transpose(-2, -3)
        cos, sin = self.rotary.at(positions, x.dtype)
        return rotate(q, cos, sin), rotate(k, cos, sin), v

    def finish(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """Residual after attention (attended: [.., heads, L, d]), then the MLP and the final norm."""
        lead, length = attended.shape[:-3], attended.shape[-2]
        x = x + self.o(attended.transpose(-2, -3).reshape(*lead, length, -1))
        y = self.mlp_norm(x)
        x = x + self.down(F.silu(self.gate(y)) * self.up(y))
        return self.out_norm(x)

    # --- drafting: one or more new pairs against a cache ------------------------------------
    def step(self, embeddings: torch.Tensor, features: torch.Tensor, cache: KVCache,
             positions: torch.Tensor | None = None, allowed: torch.Tensor | None = None) -> torch.Tensor:
        """Read n new pairs ([n, H] each) after the cached ones; the predicted next features [n, H].

        By default the pairs follow the cache in a line. A tree passes their positions and which cached or new
        entries each may read (allowed: bool [n, cache length + n]; specviz.trees.visibility).
        """
        n = embeddings.shape[0]
        if positions is None:
            positions = torch.arange(cache.length, cache.length + n, device=embeddings.device)
        if self.kernel_takes(embeddings, features):
            return self.kernel_step(embeddings, features, cache, positions, allowed)
        x = self.inputs(embeddings, features)
        q, k, v = self.qkv(x, positions)
        keys, values = cache.append(k, v)
        mask = allowed if allowed is not None else _causal_tail(n, keys.shape[1], q.device)
        mask = None if mask is None else mask[None, None]
        return self.finish(x, self.attend(q[None], keys[None], values[None], mask)[0])

    def kernel_takes(self, embeddings: torch.Tensor, features: torch.Tensor, width: int = 0) -> bool:
        """Whether this step (or lift: rows `width` wide) goes to the C step: bound, fp32 rows (a few), no gradients,
        and the packed weights it was bound to still the linears' own."""
        kernel, n = self.kernel, embeddings.shape[0]
        return (kernel is not None and embeddings.dtype == features.dtype == torch.float32
                and embeddings.device.type == "cpu" and n <= BF16_PANEL_ROWS and embeddings.dim() == 2
                and (not width or embeddings.shape[1] == width)
                and self.shape.heads // self.shape.kv_heads * n <= MAX_ROWS and not torch.is_grad_enabled()
                and all(packed is getattr(self, name).packed for name, packed in kernel.packed.items()))

    def kernel_step(self, embeddings: torch.Tensor, features: torch.Tensor, cache: KVCache, positions: torch.Tensor,
                    allowed: torch.Tensor | None) -> torch.Tensor:
        """`step` by the C step: the same arithmetic in one call (specviz.head_step)."""
        n, s = embeddings.shape[0], self.shape
        cos, sin = self.rotary.table(int(positions.max()) + 1, torch.float32, embeddings.device)
        cache.room(n, embeddings.new_empty(s.kv_heads, 0, s.head_dim))
        total = cache.length + n
        mask = allowed if allowed is not None else _causal_tail(n, total, embeddings.device)
        visible = None if mask is None else visible_rows(mask[None, None], n, total, s.heads // s.kv_heads)
        out = self.kernel.step(embeddings, features, positions, cos, sin, cache.k, cache.v, cache.length, visible)
        cache.length = total
        return out

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None
               ) -> torch.Tensor:
        """Grouped-query attention of q [1, heads, n, d] over the cache's keys and values [1, kv_heads, L, d] (mask
        [1, 1, n, L] or None): by the few-row kernel where it takes them, else by SDPA."""
        if self.few_rows is not None and self.few_rows.takes(q, keys, values):
            visible = visible_rows(mask, q.shape[2], keys.shape[2], q.shape[1] // keys.shape[1])
            if visible is not False:
                return self.few_rows.attend(q, keys, values, visible, q.shape[-1] ** -0.5)
        return grouped_attention(q, keys, values, mask)


def _causal_tail(n: int, total: int, device) -> torch.Tensor | None:
    """Mask for n new queries at the end of `total` keys: each sees the cache and the new ones up to itself."""
    if n == 1:
        return None
    rows = torch.arange(total - n, total, device=device)[:, None]
    return torch.arange(total, device=device)[None, :] <= rows


# --- a head on disk ---------------------------------------------------------------------------
@dataclass
class HeadInfo:
    """head.json: what a head is and which target it reads."""

    shape: HeadShape
    vocab: list[int]  # target token ids of the draft vocabulary, most frequent first
    target: str  # the target's name when it was trained
    target_layers: int  # the target's layer count and vocabulary: a head reads one target only
    target_vocab: int
    embedding_check: float  # sum of the target's embedding rows for the first 64 draft tokens
    trained: dict  # how it was made (for the model card and `specviz models`)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "shape": asdict(self.shape)}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> HeadInfo:
        raw = json.loads(text)
        return cls(**{**raw, "shape": HeadShape(**raw["shape"])})


def is_head(folder: Path) -> bool:
    return (Path(folder) / HEAD_CONFIG).is_file()


def embedding_check(embedding: torch.Tensor, vocab: list[int]) -> float:
    return float(embedding[torch.tensor(vocab[:64])].double().sum())


def save_head(head: DraftHead, info: HeadInfo, folder: Path) -> Path:
    """head.json and fp16 head.safetensors in `folder`."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in head.state_dict().items()}
    save_file(weights, str(folder / HEAD_WEIGHTS))
    (folder / HEAD_CONFIG).write_text(info.to_json(), encoding="utf-8")
    return folder


def read_info(folder: Path) -> HeadInfo:
    try:
        return HeadInfo.from_json((Path(folder) / HEAD_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"the head in {folder} has a damaged {HEAD_CONFIG} ({exc}); train or copy it again") from exc


def target_mismatch(info: HeadInfo, target_model: torch.nn.Module, target_name: str, name: str) -> str | None:
    """Why the head `name` (its head.json read as `info`) cannot read this target, or None if it was trained on it."""
    config = target_model.config
    embedding = target_model.get_input_embeddings().weight
    if any(not 0 <= i <= config.num_hidden_layers for i in info.shape.layers):
        return (f"the head {name} reads layers {list(info.shape.layers)}, but {target_name} has "
                f"{config.num_hidden_layers}: its {HEAD_CONFIG} is damaged or belongs to another target; train or copy "
                "it again")
    if (info.shape.hidden != config.hidden_size or info.target_layers != config.num_hidden_layers
            or info.target_vocab != embedding.shape[0]
            or abs(embedding_check(embedding.float(), info.vocab) - info.embedding_check)
            > 1e-2 * (1 + abs(info.embedding_check))):
        return (f"the head {name} was trained on {info.target} and reads only its hidden states; {target_name} is a "
                f"different model. Pick a head trained on {target_name}, or ngram / layerskip:K")
    return None


def load_head(folder: Path, target_model: torch.nn.Module, target_name: str, dtype: torch.dtype | None = None
              ) -> tuple[DraftHead, HeadInfo]:
    """The head in `folder`, on the target's device and in `dtype` (the target's by default), after checking it
    was trained on this target."""
    from safetensors.torch import load_file

    info = read_info(folder)
    problem = target_mismatch(info, target_model, target_name, Path(folder).name)
    if problem:
        raise ConfigError(problem)
    embedding = target_model.get_input_embeddings().weight
    head = DraftHead(info.shape)
    try:
        head.load_state_dict({k: v.float() for k, v in load_file(str(Path(folder) / HEAD_WEIGHTS)).items()})
    except Exception as exc:  # noqa: BLE001 — any unreadable file is one message
        raise ConfigError(
            f"the weights of the head {Path(folder).name} cannot be read ({exc}); train or copy it again"
        ) from exc
    head.to(device=embedding.device, dtype=dtype or embedding.dtype).eval().requires_grad_(False)
    head.few_rows = next((m.specviz_few_rows for m in target_model.modules() if hasattr(m, "specviz_few_rows")), None)
    head = prepare(head, embedding.device)
    head.kernel = bind_kernel(head)
    return head, info


def bind_kernel(head: DraftHead) -> HeadKernel | None:
    """The C step for a prepared head (specviz.head_step), where it applies: fp32 activations (fast_path.activations)
    over fp32 or bf16 weights all on the panels, the few-row attention kernel, a head size it takes; else None."""
    linears = {name: getattr(head, name) for name in head_step.LINEARS}
    dtype = head.fc.weight.dtype
    on_panels = all(getattr(m, "panels", None) is not None and getattr(m, "packed", None) is not None
                    and m.packed.dtype == m.weight.dtype == dtype for m in linears.values())
    if (not on_panels or head.few_rows is None or head.shape.head_dim not in HEAD_SIZES or head.fc.bias is None
            or activations(head) != torch.float32):
        return None
    library = head_step.available()
    if library is None:
        return None
    product = head.fc.panels._product_bf16 if dtype == torch.bfloat16 else head.fc.panels._product
    norms = {name: getattr(head, name).weight for name in head_step.NORMS}
    if head.shape.layers:  # several layers read: the lift too, where its fusion is on the same panels
        if not (head.fuse.panels is not None and head.fuse.packed is not None and head.fuse.packed.dtype == dtype):
            return None
        linears["fuse"], norms["layer_norm"] = head.fuse, head.layer_norm
    return HeadKernel(library, head.shape, {name: m.packed for name, m in linears.items()}, norms, head.fc.bias,
                      product, head.few_rows)
