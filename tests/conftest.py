"""Tiny random-weight models and a word-level tokenizer, built in the test run (no downloads).

The target and every draft are LlamaForCausalLM models made from a LlamaConfig with fixed seeds,
fp32 and in eval mode, so a whole speculative run takes milliseconds on a CPU. The weights are
initialised with a wide spread (initializer_range) so the tiny models have peaked, confident
next-token distributions: greedy choices are then decided by clear margins, not by the float
rounding differences between a cached and an uncached forward.

Models reach specviz through `LoadedModel` and drafters through `build_drafter(spec, target,
load=load)`, where `load` looks names up in the `tiny_models` registry below.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from specviz.config import Decoding
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.errors import ModelLoadError
from specviz.models import LoadedModel

import apptest_waits
from tiny import FOREIGN_WORDS, PADDED_ROWS, PROMPTS, VOCAB, WORDS, make_tokenizer, padded_copy, tiny_llama, wrap  # noqa: F401

BROWSER_TESTS = Path(__file__).resolve().parent / "browser"


def pytest_addoption(parser):
    parser.addoption("--reverse", action="store_true",
                     help="run the test modules in reverse order (each module's own tests keep theirs): "
                          "checks that no module relies on what an earlier one left behind")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    # scripts/test.sh runs the suite in two pytest-xdist workers (--dist loadgroup), a group whole in one of them:
    # every browser test in one group, one after another as in a single process (they share a server and Chromium),
    # and each other module as a group of its own, so that its fixtures (a model, a server) are made once.
    # The groups are handed out in the order of the items (the test command passes --no-loadscope-reorder): the
    # browser tests first (the longest group), then the modules that run the embedded model (the longest of the
    # rest), then the others: the run ends on short modules in both workers, not on a long one begun late.
    modules = {}  # module path -> its items, in collection order
    for item in items:
        browser = BROWSER_TESTS in item.path.parents
        item.add_marker(pytest.mark.xdist_group("browser" if browser else item.nodeid.split("::")[0]))
        modules.setdefault(item.path, []).append(item)

    def rank(module: list) -> int:
        if BROWSER_TESTS in module[0].path.parents:
            return 0
        return 1 if any(item.get_closest_marker("slow") for item in module) else 2

    ordered = sorted(modules.values(), key=rank)  # stable: collection order within each rank
    if config.getoption("--reverse"):
        ordered.reverse()
    items[:] = [item for module in ordered for item in module]


# --- tiers: a test that loads the embedded SmolLM2 target must be marked slow ------------------------
# The fast tier (`-m "not slow and not browser"`) promises no real model. Every load of an embedded
# model goes through specviz.models.embedded_folder, so the guard counts those calls per test.
real_loads: list[str] = []


def pytest_configure(config):
    import specviz.models

    convert_or_find = specviz.models.embedded_folder

    def counted(key, *args, **kwargs):
        real_loads.append(key)
        return convert_or_find(key, *args, **kwargs)

    specviz.models.embedded_folder = counted
    apptest_waits.install()


def pytest_runtest_setup(item):
    real_loads.clear()  # module and session fixtures set up for this test count as its own loads


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    tiered = item.get_closest_marker("slow") or item.get_closest_marker("browser")
    if call.when == "call" and real_loads and not tiered and report.passed:
        report.outcome = "failed"
        report.longrepr = (f"this test loaded the embedded model ({', '.join(sorted(set(real_loads)))}) "
                           "but is not marked slow: mark it `@pytest.mark.slow` so the fast tier stays fast")
    return report


@pytest.fixture()
def one_pair(monkeypatch):
    """The app times each measured run in one pair with the target alone (SPECVIZ_PAIRS=1): for page tests about
    what a run shows, not about the pairing (tests/app/test_page_rounds.py checks the default of 3)."""
    monkeypatch.setenv("SPECVIZ_PAIRS", "1")


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a module: the models are tiny, so extra threads only add overhead, and
    on a busy 2-core machine they spin-wait (a verify call went from 0.1 ms to several ms).
    Opt in with `pytestmark = pytest.mark.usefixtures("one_thread")`; the setting is restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


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
def make_drafter(target, load, request):
    """make_drafter(spec) -> a fresh drafter for the tiny target, as the app would build it.

    "tiny-head" names the draft head trained for the tiny target (built on first use)."""

    def make(spec: str):
        if "tiny-head" in spec:
            folder = request.getfixturevalue("tiny_head_dir")
            # blend:HEAD and auto:HEAD name the head's folder; a head alone or the hybrid takes head:FOLDER
            named = spec.startswith(("blend:", "auto:"))
            spec = spec.replace("tiny-head", str(folder) if named else f"head:{folder}")
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


@pytest.fixture(scope="session")
def tiny_head_dir(target, tmp_path_factory):
    """A draft head for the tiny target, trained here in seconds on the target's own greedy text."""
    from collections import Counter

    from specviz.drafters.head_net import save_head
    from specviz.training.features import Features, hidden_states
    from specviz.training.texts import Text
    from specviz.training.train_head import HeadConfig, HeadData, draft_vocabulary, info_for, train

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    texts = []
    for _ in range(48):
        prompt = torch.randint(2, VOCAB, (3,), generator=generator).tolist()
        run = generate(target, None, " ".join(WORDS[i] for i in prompt), Decoding(max_new_tokens=24))
        texts.append(Text("tiny", run.prompt_ids + run.output_ids, len(run.prompt_ids)))
    feats = hidden_states(target, texts)
    data = HeadData(Features([torch.tensor(t.ids) for t in texts], feats, [t.answer_from for t in texts],
                             ["tiny"] * len(texts)), Counter(), {"trained_positions": sum(len(t.ids) for t in texts)})
    work = tmp_path_factory.mktemp("head")
    cfg = HeadConfig(name="tiny-head", steps=150, batch_size=8, seq_len=64, lr=3e-3, warmup=10, work=str(work),
                     out=str(work / "tiny-head"))
    vocab = draft_vocabulary(target, data, 64)
    training = train(cfg, target, data, vocab, progress=False)
    save_head(training.model, info_for(cfg, target, vocab, data, training), cfg.out_dir)
    torch.set_num_threads(before)
    return cfg.out_dir


@pytest.fixture
def no_model(monkeypatch):
    """The page may not start the measurement worker or run a job in it: it must draw from recordings alone.
    (Home starts the worker as its last line; that call is kept here as a no-op.)"""
    from specviz.app import service
    from specviz.worker.process import Worker

    def refuse(*args, **kwargs):
        raise AssertionError("the page asked the measurement worker for a model")

    monkeypatch.setattr(service, "start_worker", lambda: None)
    monkeypatch.setattr(Worker, "_start", refuse)
    monkeypatch.setattr(Worker, "run", refuse)
