"""Tiny random-weight models and a word-level tokenizer, built in the test run (no downloads).

The target and every draft are LlamaForCausalLM models made from a LlamaConfig with fixed seeds,
fp32 and in eval mode, so a whole speculative run takes milliseconds on a CPU. The weights are
initialised with a wide spread (initializer_range) so the tiny models have peaked, confident
next-token distributions: greedy choices then never hinge on a float rounding difference between
a cached and an uncached forward.

Models reach specviz through `LoadedModel` and drafters through `build_drafter(spec, target,
load=load)`, where `load` looks names up in the `tiny_models` registry below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from specviz.config import Decoding
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.errors import ModelLoadError
from specviz.models import LoadedModel

VOCAB = 96  # tokens the shared tokenizer can produce
WORDS = ["<unk>", "</s>"] + [f"w{i}" for i in range(VOCAB - 2)]
FOREIGN_WORDS = ["<unk>", "</s>"] + [f"x{i}" for i in range(VOCAB - 2)]  # same size, other strings

# The models are tiny: threads only add overhead, and on a shared 2-core machine they spin-wait.
torch.set_num_threads(1)

PROMPTS = ("w1 w2 w3 w4 w5", "w40 w41 w7", "w90")  # the last one has a single token: no prefill


def make_tokenizer(words: list[str], eos: str = "</s>") -> PreTrainedTokenizerFast:
    """A real fast tokenizer over a fixed word list: one id per whitespace-separated word."""
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token=eos, unk_token="<unk>")


def tiny_llama(seed: int, vocab_size: int, hidden: int, layers: int, heads: int, kv_heads: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        initializer_range=0.5,
        # No special ids in the model config: EOS comes from the tokenizer, which each case chooses.
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.requires_grad_(False)
    return model


PADDED_ROWS = 128


def padded_copy(target: LlamaForCausalLM, layers: int, rows: int) -> LlamaForCausalLM:
    """A smaller draft made of the target's first layers, with embedding and lm_head padded to `rows`.

    Sharing the target's first layers makes it agree with the target often (so accepted drafts and
    rollbacks after partial acceptance occur). The padding rows of lm_head are scaled copies of real
    rows, so the padded ids often have the highest logits: a drafter that forgot to cut q down
    to the tokenizer's vocabulary would propose ids that do not exist.
    """
    c = target.config
    model = tiny_llama(seed=2, vocab_size=rows, hidden=c.hidden_size, layers=layers,
                       heads=c.num_attention_heads, kv_heads=c.num_key_value_heads)
    vocab = c.vocab_size
    with torch.no_grad():
        model.model.embed_tokens.weight[:vocab] = target.model.embed_tokens.weight
        for mine, theirs in zip(model.model.layers, target.model.layers):
            mine.load_state_dict(theirs.state_dict())
        model.model.norm.load_state_dict(target.model.norm.state_dict())
        model.lm_head.weight[:vocab] = target.lm_head.weight
        model.lm_head.weight[vocab:] = 3 * target.lm_head.weight[: rows - vocab]
    return model


def wrap(name: str, model: torch.nn.Module, tokenizer) -> LoadedModel:
    return LoadedModel(name=name, source="built in the test", model=model, tokenizer=tokenizer,
                       device=torch.device("cpu"), dtype=torch.float32)


@pytest.fixture(scope="session")
def tokenizer():
    return make_tokenizer(WORDS)


@pytest.fixture(scope="session")
def target_model():
    return tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=4, heads=4, kv_heads=2)


@pytest.fixture(scope="session")
def draft_model():
    return tiny_llama(seed=1, vocab_size=VOCAB, hidden=32, layers=2, heads=2, kv_heads=1)


@pytest.fixture(scope="session")
def target(target_model, tokenizer):
    return wrap("tiny-target", target_model, tokenizer)


@dataclass
class EosCase:
    """The target and draft with a tokenizer whose EOS is a token the target emits early."""

    target: LoadedModel
    draft: LoadedModel
    prompt: str
    eos_id: int
    eos_index: int  # index of the first EOS in the target's greedy output
    load: object

    def drafter(self, spec: str):
        return build_drafter(spec, self.target, load=self.load)


@pytest.fixture(scope="session")
def tiny_models(target, draft_model, tokenizer):
    """Name -> LoadedModel: what `load` can return to build_drafter."""
    return {
        "tiny-draft": wrap("tiny-draft", draft_model, tokenizer),
        # Embedding and lm_head padded to 128 rows for a 96-token vocabulary: must still work.
        "tiny-padded": wrap("tiny-padded", padded_copy(target.model, layers=2, rows=PADDED_ROWS), tokenizer),
        # Same sizes, different strings: must be refused.
        "tiny-foreign": wrap("tiny-foreign", draft_model, make_tokenizer(FOREIGN_WORDS)),
        # Same vocabulary, another EOS: must be refused too.
        "tiny-other-eos": wrap("tiny-other-eos", draft_model, make_tokenizer(WORDS, eos="w7")),
    }


@pytest.fixture(scope="session")
def load(tiny_models):
    def load_tiny(name: str) -> LoadedModel:
        if name not in tiny_models:
            raise ModelLoadError(f"no tiny model called {name!r}")
        return tiny_models[name]

    return load_tiny


@pytest.fixture(scope="session")
def make_drafter(target, load):
    """make_drafter(spec) -> a fresh drafter for the tiny target, as the app would build it."""

    def make(spec: str):
        return build_drafter(spec, target, load=load)

    return make


@pytest.fixture(scope="session")
def eos_case(target_model, draft_model):
    """Pick as EOS a token the target emits greedily, for the first time, a few tokens in.

    Random tiny models almost never emit a dedicated EOS token, so the stop would go untested.
    Running the target alone first and declaring one of its early tokens to be EOS makes the
    target stop there, inside a speculative round.
    """
    plain = make_tokenizer(WORDS)
    prompt = "w3 w14 w15 w9 w26"
    out = generate(wrap("probe", target_model, plain), None, prompt, Decoding(max_new_tokens=16)).output_ids
    index = next((i for i in range(3, len(out)) if out[i] not in out[:i]), None)
    assert index is not None, f"the tiny target repeats itself from the start ({out}); pick another prompt"
    eos_token = WORDS[out[index]]
    tok = make_tokenizer(WORDS, eos=eos_token)
    eos_target = wrap("tiny-target-eos", target_model, tok)
    eos_draft = wrap("tiny-draft-eos", draft_model, tok)

    def load_eos(name: str) -> LoadedModel:
        if name != "tiny-draft-eos":
            raise ModelLoadError(f"no tiny model called {name!r}")
        return eos_draft

    return EosCase(eos_target, eos_draft, prompt, out[index], index, load_eos)


# --- statistics ------------------------------------------------------------------------------
def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X ~ chi-square(df), exactly, by sf(x, k+2) = sf(x, k) + (x/2)^(k/2) e^(-x/2) / Γ(k/2+1)."""
    if x <= 0:
        return 1.0
    sf, k = (math.exp(-x / 2), 2) if df % 2 == 0 else (math.erfc(math.sqrt(x / 2)), 1)
    while k < df:
        sf += math.exp(k / 2 * math.log(x / 2) - x / 2 - math.lgamma(k / 2 + 1))
        k += 2
    return sf


@dataclass
class Fit:
    statistic: float
    df: int
    p_value: float


def goodness_of_fit(groups: list[tuple[list[int], list[float]]]) -> Fit:
    """Pearson's chi-square test of observed counts against probabilities, over independent groups.

    Each group is (counts, probs) over one set of categories; the statistics and degrees of
    freedom add up. A category with probability 0 must never be observed: that is asserted
    outright, since no amount of sampling noise explains it.
    """
    statistic, df = 0.0, 0
    for counts, probs in groups:
        n = sum(counts)
        if n == 0:
            continue
        for c, p in zip(counts, probs):
            if p == 0:
                assert c == 0, f"a category of probability 0 was observed {c} times (counts {counts}, probs {probs})"
        support = [(c, p) for c, p in zip(counts, probs) if p > 0]
        statistic += sum((c - n * p) ** 2 / (n * p) for c, p in support)
        df += len(support) - 1
    return Fit(statistic, df, chi2_sf(statistic, df) if df else 1.0)
