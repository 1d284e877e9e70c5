"""The speculative loop on a CUDA GPU: lossless greedy output for chains and trees, sampled runs, a clock that waits.

p = the target's distribution, q = the draft's, gamma = the number of drafted tokens per round.

The tiny models of conftest.py are built again here, with the same seeds and sizes, and placed on the device
(the session's own models are on the CPU fast path, with packed weights, and other modules share them). Every
test runs on "cuda" where a CUDA GPU is present and is skipped elsewhere; SPECVIZ_LOOP_ON_CPU=1 adds the same tests
on "cpu", to check them on a machine without a GPU, or as the control beside a failing GPU run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
import torch

from specviz.clock import Clock
from specviz.config import Decoding, Sampling, TreeShape
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.errors import ModelLoadError
from specviz.fast_path import prepare
from specviz.models import LoadedModel
from specviz.records import Run

from tiny import PADDED_ROWS, VOCAB, padded_copy, tiny_llama

pytestmark = pytest.mark.usefixtures("one_thread")  # the host's side of each step: one thread, no spin-waiting

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")
DEVICES = [pytest.param("cuda", marks=CUDA)] + (["cpu"] if os.environ.get("SPECVIZ_LOOP_ON_CPU") == "1" else [])

# (prompt, max new tokens): the second prompt repeats itself, so copying drafters (suffix, blend) find matches.
CASES = [("w1 w2 w3 w4 w5", 17), ("w40 w41 w7 w40 w41 w7 w40 w41", 15), ("w90", 9)]
TREE = TreeShape(budget=8, branching=3)  # the shape the GPU bench drafts (--tree-budget 8 --tree-branching 3)
CHAINS = ["tiny-draft", "tiny-padded", "layerskip:2", "tiny-head"]
TREES = ["suffix", "recycle", "blend", "blend:tiny-head", "tiny-draft", "tiny-padded"]


@dataclass
class OnDevice:
    """The tiny target and its drafts on one device, and what builds a drafter for it as the app would."""

    target: LoadedModel
    drafts: dict[str, LoadedModel]
    head_dir: object  # the folder of the draft head trained for the tiny target (conftest's tiny_head_dir)

    def load(self, name: str) -> LoadedModel:
        if name not in self.drafts:
            raise ModelLoadError(f"no tiny model called {name!r}")
        return self.drafts[name]

    def drafter(self, spec: str):
        """A fresh drafter for one run, as the app builds it; "tiny-head" names the trained head's folder."""
        if "tiny-head" in spec:
            named = spec.startswith("blend:")  # blend:HEAD names the head's folder; a head alone takes head:FOLDER
            spec = spec.replace("tiny-head", str(self.head_dir) if named else f"head:{self.head_dir}")
        return build_drafter(spec, self.target, load=self.load)

    def run(self, spec: str | None, prompt: str, settings: Decoding) -> Run:
        return generate(self.target, self.drafter(spec) if spec else None, prompt, settings)


def placed(name: str, model: torch.nn.Module, tokenizer, device: str) -> LoadedModel:
    """A LoadedModel on `device`, on the path `load_model` puts it on there (the CPU's fast path; stock elsewhere)."""
    model.to(device)
    prepare(model, model.device)
    return LoadedModel(name=name, source="built in the test", model=model, tokenizer=tokenizer, device=model.device,
                       dtype=torch.float32)


@pytest.fixture(scope="module", params=DEVICES)
def on(request, tokenizer, tiny_head_dir):
    # The same seeds and sizes as conftest's target_model and draft_model: the same weights.
    target = tiny_llama(seed=0, vocab_size=VOCAB, hidden=64, layers=4, heads=4, kv_heads=2)
    draft = tiny_llama(seed=1, vocab_size=VOCAB, hidden=32, layers=2, heads=2, kv_heads=1)
    padded = padded_copy(target, layers=2, rows=PADDED_ROWS)  # read from the target before it is moved
    device = request.param
    return OnDevice(placed("tiny-target", target, tokenizer, device),
                    {"tiny-draft": placed("tiny-draft", draft, tokenizer, device),
                     "tiny-padded": placed("tiny-padded", padded, tokenizer, device)},
                    tiny_head_dir)


@pytest.fixture(scope="module")
def alone(on):
    """The target alone, greedy, on the device, for each case (computed once)."""
    return {(prompt, n): on.run(None, prompt, Decoding(max_new_tokens=n)) for prompt, n in CASES}


def replay(run: Run) -> list[int]:
    """The output rebuilt from the rounds alone: accepted drafts, then the next token, cut to `emitted`."""
    tokens = []
    for r in run.rounds:  # a tree's round records the branch the target walked as its chain
        tokens += (r.drafted[: r.n_accepted] + [r.next_token])[: r.emitted]
    return tokens


def check_run(on: OnDevice, run: Run, max_new: int) -> None:
    """What every run on the device must satisfy, greedy or sampled."""
    assert run.device == str(on.target.device) and run.device.startswith(on.target.device.type)
    assert all(0 <= t < VOCAB for t in run.output_ids), f"a token outside the vocabulary: {run.output_ids}"
    assert len(run.output_ids) == max_new or run.stopped_at_eos
    assert replay(run) == run.output_ids, "the rounds do not add up to the output"
    drafted = [t for r in run.rounds for t in (r.tree.tokens if r.tree else r.drafted)]
    assert all(0 <= t < VOCAB for t in drafted), "a draft outside the tokenizer's vocabulary"
    assert run.seconds > 0 and all(r.verify_seconds > 0 for r in run.rounds)


# --- lossless greedy output ------------------------------------------------------------------
@pytest.mark.parametrize("spec", CHAINS)
def test_greedy_chain_output_is_the_targets_own(on, alone, spec):
    kept = 0
    for prompt, max_new in CASES:
        run = on.run(spec, prompt, Decoding(gamma=4, max_new_tokens=max_new))
        assert run.output_ids == alone[prompt, max_new].output_ids, f"{spec}, {prompt!r}: not the target's output"
        check_run(on, run, max_new)
        kept += sum(r.n_accepted for r in run.rounds)
    assert kept > 0, f"{spec}: no draft was ever kept, so no rollback after a kept draft was tested"


@pytest.mark.parametrize("spec", TREES)
def test_greedy_tree_output_is_the_targets_own(on, alone, spec):
    """Each prompt twice: the second time the recycle table and the suffix corpus hold what the first runs taught."""
    trees = kept = 0
    for prompt, max_new in CASES * 2:
        run = on.run(spec, prompt, Decoding(gamma=4, max_new_tokens=max_new, tree=TREE))
        assert run.output_ids == alone[prompt, max_new].output_ids, f"{spec}, {prompt!r}: not the target's output"
        check_run(on, run, max_new)
        trees += sum(1 for r in run.rounds if r.tree and r.tree.size > 1)
        kept += sum(r.n_accepted for r in run.rounds)
    assert trees > 0 and kept > 0, f"{spec}: no tree was drafted or no draft kept, so nothing was verified as a tree"


def test_the_device_speaks_as_the_cpu_does(on, alone, target):
    """fp32 greedy on the device gives the CPU target's own tokens (the tiny models' choices win by clear margins)."""
    for prompt, max_new in CASES:
        assert alone[prompt, max_new].output_ids == generate(target, None, prompt, Decoding(max_new_tokens=max_new)
                                                             ).output_ids, f"{prompt!r}: the device and the CPU differ"


# --- sampling -------------------------------------------------------------------------------------
# The blended tree learns from every run (the process's recycle table), so its next run with the same seed may draft
# other tokens and draw other ones: only a drafter that keeps nothing across runs must repeat itself exactly.
@pytest.mark.parametrize("spec, tree, repeats", [("tiny-padded", TreeShape(), True), ("tiny-padded", TREE, True),
                                                 ("blend:tiny-head", TREE, False)],
                         ids=["chain", "tree", "blend-head-tree"])
def test_sampled_runs_finish_with_valid_tokens(on, spec, tree, repeats):
    sampling = Sampling(temperature=1.0, top_p=0.95)
    kept = 0
    for seed in range(2):
        for prompt, max_new in CASES:
            settings = Decoding(gamma=4, max_new_tokens=max_new, seed=seed, sampling=sampling, tree=tree)
            run = on.run(spec, prompt, settings)
            check_run(on, run, max_new)
            for r in run.rounds:
                assert all(0.0 <= q <= 1.0 for q in r.q) and all(p is None or 0.0 <= p <= 1.0 for p in r.p)
            kept += sum(r.n_accepted for r in run.rounds)
            if repeats and seed == 0:  # the same seed on the same device draws the same tokens
                assert on.run(spec, prompt, settings).output_ids == run.output_ids, f"{prompt!r}: seed 0 drew anew"
    assert kept > 0, f"{spec}: no sampled draft was ever kept"


# --- the clock --------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=CUDA)])
def test_the_clock_waits_for_the_device_to_finish(device):
    """A clock read after queued work has that work done: the loop charges each kernel to the step that queued it."""
    clock = Clock(torch.device(device))
    stream = torch.cuda.current_stream()
    start = clock()
    torch.cuda._sleep(200_000_000)  # about 0.1 s of spinning on the GPU, queued and not yet done
    assert not stream.query(), "precondition: the queued work is still running"
    elapsed = clock() - start
    assert stream.query(), "the clock was read before the device had finished"
    assert elapsed > 0.01
    clock.pause()
    assert stream.query()
    clock.resume()
