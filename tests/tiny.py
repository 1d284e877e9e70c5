"""Tiny random-weight models, a word-level tokenizer and a goodness-of-fit test, shared by the tests.

Kept out of conftest.py so test modules can import them by a unique module name (two conftest.py
files in one run would shadow each other as `conftest`). See conftest.py for the fixtures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from specviz.fast_path import prepare
from specviz.models import LoadedModel

VOCAB = 96  # tokens the shared tokenizer can produce
WORDS = ["<unk>", "</s>"] + [f"w{i}" for i in range(VOCAB - 2)]
FOREIGN_WORDS = ["<unk>", "</s>"] + [f"x{i}" for i in range(VOCAB - 2)]  # same size, other strings

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
    """A LoadedModel on the CPU, put on the fast path as `load_model` does."""
    prepare(model, torch.device("cpu"))
    return LoadedModel(name=name, source="built in the test", model=model, tokenizer=tokenizer,
                       device=torch.device("cpu"), dtype=torch.float32)




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


def first_two_tokens(target: LoadedModel, prompt_ids: list[int], sampling, vocab: int
                     ) -> tuple[list[tuple[int, int]], list[float]]:
    """Every pair (x, y) the target can sample as its first two tokens after `prompt_ids`, and p(x) · p(y | x)."""
    from specviz.verify import distribution

    with torch.no_grad():
        p0 = distribution(target.model(torch.tensor([prompt_ids])).logits[0, -1, :vocab], sampling)
        p1 = {x: distribution(target.model(torch.tensor([prompt_ids + [x]])).logits[0, -1, :vocab], sampling)
              for x in p0.nonzero().flatten().tolist()}
    cells = [(x, y) for x in p1 for y in p1[x].nonzero().flatten().tolist()]
    return cells, [float(p0[x] * p1[x][y]) for x, y in cells]


def pooled_fit(counts: dict, cells: list, expected: list[float], trials: int
               ) -> tuple[Fit, list[int], list[float]]:
    """Pearson's test of `counts` per cell against `expected`, the cells expecting fewer than 5 draws pooled into
    one; the fit, and the observed counts and probabilities tested."""
    big = [i for i, e in enumerate(expected) if e * trials >= 5]
    rest = [i for i in range(len(cells)) if i not in big]
    observed = [counts[cells[i]] for i in big] + [sum(counts[cells[i]] for i in rest)]
    probs = [expected[i] for i in big] + [sum(expected[i] for i in rest)]
    return goodness_of_fit([(observed, probs)]), observed, probs
